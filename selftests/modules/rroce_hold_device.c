// SPDX-License-Identifier: GPL-2.0
/*
 * Test only: holds a reference on the RDMA device of a netdev, as a slow
 * user of the core's lookups would, until that netdev is unregistered (the
 * reference goes first thing in the NETDEV_UNREGISTER chain) or this module
 * is unloaded. A namespace move of the device (`rdma dev set DEV netns NS`)
 * waits for the reference; deleting the netdev then ends the wait at the
 * moment other NETDEV_UNREGISTER handlers run, with the device's reference
 * count at zero and the move not yet done: the window a provider's own
 * handler must cope with.
 *
 *   insmod rroce_hold_device.ko ifname=<netdev in the initial namespace>
 */
#include <linux/module.h>
#include <linux/netdevice.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>

static char *ifname;
module_param(ifname, charp, 0444);
MODULE_PARM_DESC(ifname, "netdev whose RDMA device to hold");

static struct ib_device *held;
static int held_ifindex;

static void release_held(void)
{
	struct ib_device *dev = xchg(&held, NULL);

	if (dev)
		ib_device_put(dev);
}

static int hold_netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);

	if (event == NETDEV_UNREGISTER && net_eq(dev_net(ndev), &init_net) &&
	    ndev->ifindex == held_ifindex)
		release_held();
	return NOTIFY_DONE;
}

/* Ahead of every handler of the default priority (providers' among them). */
static struct notifier_block hold_notifier = {
	.notifier_call = hold_netdev_event,
	.priority = 1,
};

static int __init hold_init(void)
{
	struct net_device *ndev;
	int ret;

	if (!ifname)
		return -EINVAL;
	ndev = dev_get_by_name(&init_net, ifname);
	if (!ndev)
		return -ENODEV;
	held_ifindex = ndev->ifindex;
	held = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	dev_put(ndev);
	if (!held)
		return -ENODEV;
	ret = register_netdevice_notifier(&hold_notifier);
	if (ret)
		release_held();
	return ret;
}

static void __exit hold_exit(void)
{
	unregister_netdevice_notifier(&hold_notifier);
	release_held();
}

module_init(hold_init);
module_exit(hold_exit);
MODULE_DESCRIPTION("rroce test helper: hold a reference on an RDMA device");
MODULE_LICENSE("GPL");
