// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for routing and sending finished IP packets, local addresses,
 * IP multicast groups (declared in rroce_helpers.h).
 */

#include <linux/if_vlan.h>
#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <net/dst_cache.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include "rroce_helpers.h"

/* The packet's priority (queue, traffic class, a VLAN device's PCP) and,
 * for a PFC priority leaving through the port's own Ethernet device (not a
 * VLAN, macvlan or other upper device, which tag or encapsulate on their
 * own), an 802.1Q priority tag (VLAN 0) carrying it as PCP. tag_ifindex is
 * that device's index, or 0 for no tag.
 */
static void rroce_tx_classify(struct sk_buff *skb, u32 priority, int tag_ifindex)
{
	skb->priority = priority;
	if (tag_ifindex && skb->dev->ifindex == tag_ifindex && skb->dev->type == ARPHRD_ETHER &&
	    !is_vlan_dev(skb->dev))
		__vlan_hwaccel_put_tag(skb, htons(ETH_P_8021Q), (priority & 7) << VLAN_PRIO_SHIFT);
}

/*
 * A connected QP's route to its peer, kept per CPU (the kernel's dst_cache,
 * as UDP tunnels keep theirs): a packet skips the route lookup while the
 * routing tables have not changed since. Its owner resets it whenever the
 * addresses or the interface it sends with change.
 */
struct dst_cache *rroce_route_cache_new(void)
{
	struct dst_cache *cache = kzalloc(sizeof(*cache), GFP_KERNEL_ACCOUNT);

	if (cache && dst_cache_init(cache, GFP_KERNEL_ACCOUNT)) {
		kfree(cache);
		cache = NULL;
	}
	return cache;
}

void rroce_route_cache_free(struct dst_cache *cache)
{
	dst_cache_destroy(cache);
	kfree(cache);
}

/* Any context; the entries go on their next lookup. */
void rroce_route_cache_reset(struct dst_cache *cache)
{
	dst_cache_reset(cache);
}

/* Routes and sends a finished IPv6 packet, with cache's route if it has
 * one (cache may be NULL); consumes the skb.
 */
int rroce_tx_send6(struct net *net, struct dst_cache *cache, struct sk_buff *skb, const u8 *saddr,
		   const u8 *daddr, int oif, u32 priority, int tag_ifindex)
{
	struct flowi6 fl = {
		.flowi6_proto = IPPROTO_UDP,
		.flowi6_oif = oif,
	};
	struct dst_entry *dst;
	struct in6_addr cached_saddr;

	memcpy(&fl.saddr, saddr, sizeof(fl.saddr));
	memcpy(&fl.daddr, daddr, sizeof(fl.daddr));
	if (cache) {
		/* The cache is per CPU: this CPU's entry, with softirqs off. */
		local_bh_disable();
		dst = dst_cache_get_ip6(cache, &cached_saddr);
		if (dst && !ipv6_addr_equal(&cached_saddr, &fl.saddr)) {
			dst_release(dst);
			dst = NULL;
		}
		if (!dst) {
			dst = ip6_dst_lookup_flow(net, NULL, &fl, NULL);
			if (!IS_ERR(dst))
				dst_cache_set_ip6(cache, dst, &fl.saddr);
		}
		local_bh_enable();
	} else {
		dst = ip6_dst_lookup_flow(net, NULL, &fl, NULL);
	}
	if (IS_ERR(dst)) {
		kfree_skb(skb);
		return PTR_ERR(dst);
	}
	skb_dst_set(skb, dst);
	skb->dev = dst->dev;
	rroce_tx_classify(skb, priority, tag_ifindex);
	memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
	return ip6_local_out(net, NULL, skb);
}

/* The netdev holding local IPv6 address addr, with a reference, or NULL. */
struct net_device *rroce_ipv6_dev_find(struct net *net, const u8 *addr)
{
	struct net_device *dev;

	rcu_read_lock();
	dev = ipv6_dev_find(net, (const struct in6_addr *)addr, NULL);
	if (dev)
		dev_hold(dev);
	rcu_read_unlock();
	return dev;
}

/* Routes and sends a finished IPv4 packet (headers and ICRC written),
 * with cache's route if it has one (cache may be NULL); consumes the skb.
 * Returns a NET_XMIT_* code or a negative errno.
 */
int rroce_tx_send4(struct net *net, struct dst_cache *cache, struct sk_buff *skb, __be32 saddr,
		   __be32 daddr, int oif, u32 priority, int tag_ifindex)
{
	struct flowi4 fl = {
		.daddr = daddr,
		.saddr = saddr,
		.flowi4_proto = IPPROTO_UDP,
		.flowi4_oif = oif,
	};
	struct rtable *rt;
	__be32 cached_saddr;

	if (cache) {
		/* The cache is per CPU: this CPU's entry, with softirqs off. */
		local_bh_disable();
		rt = dst_cache_get_ip4(cache, &cached_saddr);
		if (rt && cached_saddr != saddr) {
			ip_rt_put(rt);
			rt = NULL;
		}
		if (!rt) {
			rt = ip_route_output_key(net, &fl);
			if (!IS_ERR(rt))
				dst_cache_set_ip4(cache, &rt->dst, saddr);
		}
		local_bh_enable();
	} else {
		rt = ip_route_output_key(net, &fl);
	}
	if (IS_ERR(rt)) {
		kfree_skb(skb);
		return PTR_ERR(rt);
	}
	skb_dst_set(skb, &rt->dst);
	skb->dev = rt->dst.dev;
	rroce_tx_classify(skb, priority, tag_ifindex);
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	return ip_local_out(net, NULL, skb);
}

/* The netdev holding local address addr, with a reference, or NULL. */
struct net_device *rroce_ip_dev_find(struct net *net, __be32 addr)
{
	return __ip_dev_find(net, addr, true);
}

/*
 * Joins (join) or leaves, on ndev, the IP multicast group of the RoCEv2
 * multicast GID gid: IGMP for an IPv4-mapped GID (under RTNL, as rdma_cm's
 * own join), MLD for an IPv6 one. Refcounted by the IP stack, so rdma_cm
 * joining the same group too is fine. Process context.
 */
int rroce_mc_group(struct net_device *ndev, const u8 *gid, bool join)
{
	const struct in6_addr *addr = (const struct in6_addr *)gid;
	struct in_device *in_dev;
	__be32 v4;

	if (!ipv6_addr_v4mapped(addr))
		return join ? ipv6_dev_mc_inc(ndev, addr) : ipv6_dev_mc_dec(ndev, addr);
	v4 = addr->s6_addr32[3];
	rtnl_lock();
	in_dev = __in_dev_get_rtnl(ndev);
	if (in_dev) {
		if (join)
			ip_mc_inc_group(in_dev, v4);
		else
			ip_mc_dec_group(in_dev, v4);
	}
	rtnl_unlock();
	return in_dev ? 0 : -ENODEV;
}
