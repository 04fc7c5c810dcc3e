// SPDX-License-Identifier: GPL-2.0
/*
 * Test only: gives an existing netdev without DCB (a veth, say) IEEE DCB
 * operations that store what they are given, so `dcb pfc`, `dcb ets`,
 * `dcb app` and `dcb apptrust` work on it as on a NIC with DCB and rroce's
 * following of them can be tested in a VM.
 *
 *   insmod rroce_dcb_sim.ko ifname=<netdev>   (any network namespace)
 *
 * The operations leave the netdev at unload, or when it is unregistered.
 */
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <net/dcbnl.h>
#include <net/net_namespace.h>

static char *ifname;
module_param(ifname, charp, 0444);
MODULE_PARM_DESC(ifname, "netdev to give DCB operations");

/* All below under RTNL, as dcbnl calls the operations. */
static struct net_device *sim_dev;
static struct ieee_pfc sim_pfc;
static struct ieee_ets sim_ets;
static u8 sim_trust[IEEE_8021QAZ_APP_SEL_MAX + 1];
static int sim_trust_count = -1;	/* no trust order set */

static int sim_ieee_getets(struct net_device *dev, struct ieee_ets *ets)
{
	*ets = sim_ets;
	ets->ets_cap = IEEE_8021QAZ_MAX_TCS;
	return 0;
}

static int sim_ieee_setets(struct net_device *dev, struct ieee_ets *ets)
{
	int i;

	for (i = 0; i < IEEE_8021QAZ_MAX_TCS; i++)
		if (ets->prio_tc[i] >= IEEE_8021QAZ_MAX_TCS)
			return -EINVAL;
	sim_ets = *ets;
	return 0;
}

static int sim_ieee_getpfc(struct net_device *dev, struct ieee_pfc *pfc)
{
	*pfc = sim_pfc;
	pfc->pfc_cap = IEEE_8021QAZ_MAX_TCS;
	return 0;
}

static int sim_ieee_setpfc(struct net_device *dev, struct ieee_pfc *pfc)
{
	sim_pfc.pfc_en = pfc->pfc_en;
	sim_pfc.mbc = pfc->mbc;
	sim_pfc.delay = pfc->delay;
	return 0;
}

static u8 sim_getdcbx(struct net_device *dev)
{
	return DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE;
}

static u8 sim_setdcbx(struct net_device *dev, u8 mode)
{
	return mode == (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE) ? 0 : 1;
}

static int sim_setapptrust(struct net_device *dev, u8 *selectors, int nselectors)
{
	if (nselectors < 0 || nselectors > ARRAY_SIZE(sim_trust))
		return -EINVAL;
	memcpy(sim_trust, selectors, nselectors);
	sim_trust_count = nselectors;
	return 0;
}

static int sim_getapptrust(struct net_device *dev, u8 *selectors, int *nselectors)
{
	if (sim_trust_count < 0)
		return -ENODATA;
	memcpy(selectors, sim_trust, sim_trust_count);
	*nselectors = sim_trust_count;
	return 0;
}

static const struct dcbnl_rtnl_ops sim_ops = {
	.ieee_getets = sim_ieee_getets,
	.ieee_setets = sim_ieee_setets,
	.ieee_getpfc = sim_ieee_getpfc,
	.ieee_setpfc = sim_ieee_setpfc,
	.getdcbx = sim_getdcbx,
	.setdcbx = sim_setdcbx,
	.dcbnl_setapptrust = sim_setapptrust,
	.dcbnl_getapptrust = sim_getapptrust,
};

static void sim_detach(void)
{
	if (sim_dev && sim_dev->dcbnl_ops == &sim_ops)
		sim_dev->dcbnl_ops = NULL;
	sim_dev = NULL;
}

static int sim_netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);

	/* A move to another namespace unregisters too, but the device stays. */
	if (event == NETDEV_UNREGISTER && dev == sim_dev && dev->reg_state == NETREG_UNREGISTERING)
		sim_detach();
	return NOTIFY_DONE;
}

static struct notifier_block sim_nb = { .notifier_call = sim_netdev_event };

static int __init sim_init(void)
{
	struct net_device *dev = NULL;
	struct net *net;
	int err;

	if (!ifname)
		return -EINVAL;
	err = register_netdevice_notifier(&sim_nb);
	if (err)
		return err;
	rtnl_lock();
	down_read(&net_rwsem);
	for_each_net(net) {
		dev = __dev_get_by_name(net, ifname);
		if (dev)
			break;
	}
	up_read(&net_rwsem);
	if (!dev)
		err = -ENODEV;
	else if (dev->dcbnl_ops)
		err = -EBUSY;
	else {
		sim_dev = dev;
		dev->dcbnl_ops = &sim_ops;
	}
	rtnl_unlock();
	if (err)
		unregister_netdevice_notifier(&sim_nb);
	return err;
}

static void __exit sim_exit(void)
{
	rtnl_lock();
	sim_detach();
	rtnl_unlock();
	unregister_netdevice_notifier(&sim_nb);
}

module_init(sim_init);
module_exit(sim_exit);
MODULE_DESCRIPTION("rroce test helper: DCB operations for a netdev without them");
MODULE_LICENSE("GPL");
