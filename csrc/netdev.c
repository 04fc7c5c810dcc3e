// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for netdevs: fields the bindings cannot read, references,
 * namespaces, RTNL (declared in rroce_helpers.h).
 */

#include <linux/netdevice.h>
#include <linux/if_vlan.h>
#include <linux/rtnetlink.h>
#include <net/net_namespace.h>
#include "rroce_helpers.h"

/* The netdev's namespace, for an RCU reader: valid until it unlocks, even if
 * the netdev moves to another namespace and the old one is destroyed. The
 * caller holds the RCU read lock (the lockdep check of dev_net_rcu).
 */
struct net *rroce_dev_net_rcu(const struct net_device *ndev)
{
	return dev_net_rcu(ndev);
}

/*
 * A counted reference to the netdev's namespace, or NULL if that namespace
 * is being destroyed. Under RCU, a namespace is not freed before a grace
 * period after it became unreachable, so the read and the get are safe even
 * if the netdev moves.
 */
struct net *rroce_dev_get_net(const struct net_device *ndev)
{
	struct net *net;

	rcu_read_lock();
	net = maybe_get_net(dev_net_rcu(ndev));
	rcu_read_unlock();
	return net;
}

void rroce_put_net(struct net *net)
{
	put_net(net);
}

/* A copy of the interface name into buf (IFNAMSIZ bytes, NUL-terminated).
 * A rename may rewrite the name meanwhile (under RTNL, which callers need
 * not hold): the copy may then mix the two names, which is harmless in a
 * message, but the caller never borrows the live array.
 */
void rroce_netdev_copy_name(const struct net_device *ndev, char *buf)
{
	unsigned int i;

	for (i = 0; i < IFNAMSIZ - 1; i++) {
		char c = READ_ONCE(ndev->name[i]);

		buf[i] = c;
		if (!c)
			return;
	}
	buf[i] = '\0';
}

int rroce_netdev_ifindex(const struct net_device *ndev)
{
	return ndev->ifindex;
}

unsigned int rroce_netdev_mtu(const struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

unsigned short rroce_netdev_type(const struct net_device *ndev)
{
	return ndev->type;
}

/* Copies the hardware address into out[len]; returns its length. */
unsigned int rroce_netdev_addr(const struct net_device *ndev, u8 *out, unsigned int len)
{
	unsigned int n = min_t(unsigned int, ndev->addr_len, len);

	if (ndev->dev_addr)
		memcpy(out, ndev->dev_addr, n);
	return ndev->addr_len;
}

/* Whether the netdev is registered and not yet unregistering. The state
 * changes under RTNL before NETDEV_UNREGISTER is sent. */
bool rroce_netdev_is_registered(const struct net_device *ndev)
{
	return READ_ONCE(ndev->reg_state) == NETREG_REGISTERED;
}

void rroce_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

void rroce_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

bool rroce_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool rroce_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

bool rroce_is_vlan_dev(const struct net_device *ndev)
{
	return is_vlan_dev(ndev);
}

struct net_device *rroce_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

/* The device a VLAN device sends through, or ndev itself. */
struct net_device *rroce_vlan_real_dev(struct net_device *ndev)
{
	return is_vlan_dev(ndev) ? vlan_dev_real_dev(ndev) : ndev;
}

bool rroce_rtnl_trylock(void)
{
	return rtnl_trylock();
}

void rroce_rtnl_unlock(void)
{
	rtnl_unlock();
}
