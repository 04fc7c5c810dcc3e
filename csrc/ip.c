// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for routing and sending finished IP packets, local addresses,
 * IP multicast groups (declared in rroce_helpers.h).
 */

#include <linux/if_vlan.h>
#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/rtnetlink.h>
#include <linux/udp.h>
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
	struct net_device *dev;

	skb->priority = priority;
	if (!tag_ifindex)
		return;
	/* The route's device, read under RCU as the IP output path reads it:
	 * an unregistration swaps it for the blackhole device and drops its
	 * reference (skb->dev was copied from it without one of its own).
	 */
	rcu_read_lock();
	dev = skb_dst_dev_rcu(skb);
	if (dev->ifindex == tag_ifindex && dev->type == ARPHRD_ETHER && !is_vlan_dev(dev))
		__vlan_hwaccel_put_tag(skb, htons(ETH_P_8021Q), (priority & 7) << VLAN_PRIO_SHIFT);
	rcu_read_unlock();
}

/*
 * A connected QP's route to its peer, kept per CPU (the kernel's dst_cache,
 * as UDP tunnels keep theirs): a packet skips the route lookup while the
 * routing tables have not changed since. Its owner resets it whenever the
 * addresses or the interface it sends with change.
 *
 * Beside it, that the peer's address was found not to be a local one, and
 * at which generation of the namespace's addresses and routes: while
 * neither has changed, a packet skips the local-address lookup too (for a
 * peer, a hash miss and a walk of the local routing table every packet). A
 * local destination is not remembered: it is looked up every time.
 */
struct rroce_route_cache {
	struct dst_cache dst;
	/* rroce_remote_mark() of the generation at which the destination was
	 * last found remote, or 0 for not known.
	 */
	u64 remote_at;
};

/* What routing a finished packet found (rroce_tx_route4/6 return it, or a
 * negative errno).
 */
enum {
	/* A route for the wire, attached to the skb. */
	RROCE_ROUTE_OUT = 0,
	/* A local address: nothing attached; the caller delivers the packet
	 * itself, as the IP stack would loop it back.
	 */
	RROCE_ROUTE_LOCAL = 1,
};

static u64 rroce_remote_mark(u32 generation)
{
	return ((u64)generation << 1) | 1;
}

/* The generation of net's IPv4 addresses and routes: moves with either. */
static u32 rroce_generation4(struct net *net)
{
	return (u32)rt_genid_ipv4(net) + (u32)atomic_read(&net->ipv4.dev_addr_genid);
}

/* As rroce_generation4, for IPv6. */
static u32 rroce_generation6(struct net *net)
{
	return (u32)rt_genid_ipv6(net) + (u32)atomic_read(&net->ipv6.dev_addr_genid);
}

struct rroce_route_cache *rroce_route_cache_new(void)
{
	struct rroce_route_cache *cache = kzalloc(sizeof(*cache), GFP_KERNEL_ACCOUNT);

	if (cache && dst_cache_init(&cache->dst, GFP_KERNEL_ACCOUNT)) {
		kfree(cache);
		cache = NULL;
	}
	return cache;
}

void rroce_route_cache_free(struct rroce_route_cache *cache)
{
	dst_cache_destroy(&cache->dst);
	kfree(cache);
}

/* Any context; the entries go on their next lookup. */
void rroce_route_cache_reset(struct rroce_route_cache *cache)
{
	WRITE_ONCE(cache->remote_at, 0);
	dst_cache_reset(&cache->dst);
}

/* Whether cache (which may be NULL) knows the destination to be remote at
 * generation.
 */
static bool rroce_known_remote(struct rroce_route_cache *cache, u32 generation)
{
	return cache && READ_ONCE(cache->remote_at) == rroce_remote_mark(generation);
}

/* Remembers that the destination was found remote at generation. */
static void rroce_note_remote(struct rroce_route_cache *cache, u32 generation)
{
	if (cache)
		WRITE_ONCE(cache->remote_at, rroce_remote_mark(generation));
}

static bool rroce_local6(struct net *net, const struct in6_addr *daddr)
{
	bool local;

	rcu_read_lock();
	local = ipv6_dev_find(net, daddr, NULL);
	rcu_read_unlock();
	return local;
}

/* Routes a finished IPv6 packet from saddr to daddr out of interface oif,
 * with cache's route if it has one (cache may be NULL). Leaves the skb to
 * the caller in every case. net must stay alive through the call.
 */
int rroce_tx_route6(struct net *net, struct rroce_route_cache *cache, struct sk_buff *skb,
		    const u8 *saddr, const u8 *daddr, int oif)
{
	struct flowi6 fl = {
		.flowi6_proto = IPPROTO_UDP,
		.flowi6_oif = oif,
	};
	struct dst_entry *dst = NULL;
	struct in6_addr cached_saddr;
	/* Read before the lookup: a change during it moves the generation. */
	u32 generation = rroce_generation6(net);

	memcpy(&fl.saddr, saddr, sizeof(fl.saddr));
	memcpy(&fl.daddr, daddr, sizeof(fl.daddr));
	if (!rroce_known_remote(cache, generation)) {
		if (rroce_local6(net, &fl.daddr))
			return RROCE_ROUTE_LOCAL;
		rroce_note_remote(cache, generation);
	}
	/* The cache is per CPU: this CPU's entry, with softirqs off. */
	local_bh_disable();
	if (cache) {
		dst = dst_cache_get_ip6(&cache->dst, &cached_saddr);
		if (dst && !ipv6_addr_equal(&cached_saddr, &fl.saddr)) {
			dst_release(dst);
			dst = NULL;
		}
	}
	if (!dst) {
		dst = ip6_dst_lookup_flow(net, NULL, &fl, NULL);
		if (!IS_ERR(dst) && cache)
			dst_cache_set_ip6(&cache->dst, dst, &fl.saddr);
	}
	local_bh_enable();
	if (IS_ERR(dst))
		return PTR_ERR(dst);
	skb_dst_set(skb, dst);
	skb->dev = dst->dev;
	return RROCE_ROUTE_OUT;
}

/* Sends an IPv6 packet rroce_tx_route6 routed, with its priority (see
 * rroce_tx_classify); consumes the skb. Returns a NET_XMIT_* code or a
 * negative errno.
 */
int rroce_tx_out6(struct net *net, struct sk_buff *skb, u32 priority, int tag_ifindex)
{
	/* The IP output path trusts the header it is given: a fixed IPv6 one. */
	if (skb->len < sizeof(struct ipv6hdr) + sizeof(struct udphdr) || ipv6_hdr(skb)->version != 6) {
		kfree_skb(skb);
		return -EINVAL;
	}
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

/* As rroce_tx_route6, for IPv4 (addresses in network order). */
int rroce_tx_route4(struct net *net, struct rroce_route_cache *cache, struct sk_buff *skb,
		    __be32 saddr, __be32 daddr, int oif)
{
	struct flowi4 fl = {
		.daddr = daddr,
		.saddr = saddr,
		.flowi4_proto = IPPROTO_UDP,
		.flowi4_oif = oif,
	};
	struct rtable *rt = NULL;
	__be32 cached_saddr;
	u32 generation = rroce_generation4(net);

	if (!rroce_known_remote(cache, generation)) {
		if (__ip_dev_find(net, daddr, false))
			return RROCE_ROUTE_LOCAL;
		rroce_note_remote(cache, generation);
	}
	local_bh_disable();
	if (cache) {
		rt = dst_cache_get_ip4(&cache->dst, &cached_saddr);
		if (rt && cached_saddr != saddr) {
			ip_rt_put(rt);
			rt = NULL;
		}
	}
	if (!rt) {
		rt = ip_route_output_key(net, &fl);
		if (!IS_ERR(rt) && cache)
			dst_cache_set_ip4(&cache->dst, &rt->dst, saddr);
	}
	local_bh_enable();
	if (IS_ERR(rt))
		return PTR_ERR(rt);
	skb_dst_set(skb, &rt->dst);
	skb->dev = rt->dst.dev;
	return RROCE_ROUTE_OUT;
}

/* As rroce_tx_out6, for IPv4. */
int rroce_tx_out4(struct net *net, struct sk_buff *skb, u32 priority, int tag_ifindex)
{
	/* The IP output path reads ihl*4 header bytes and writes the length
	 * and checksum: a 20-byte header, no options, as rroce writes it.
	 */
	if (skb->len < sizeof(struct iphdr) + sizeof(struct udphdr) || ip_hdr(skb)->version != 4 ||
	    ip_hdr(skb)->ihl != 5) {
		kfree_skb(skb);
		return -EINVAL;
	}
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
