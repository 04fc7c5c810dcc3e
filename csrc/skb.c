// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for socket buffers: transmit allocation, received packets,
 * release callbacks (declared in rroce_helpers.h).
 */

#include <linux/skbuff.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/dst.h>
#include "rroce_helpers.h"

/* A linear skb for a RoCEv2 packet of len bytes (IP header included), with
 * link-layer headroom for ndev; *data points at its first byte. Atomic: the
 * data path runs in softirq. Without a warning: a failure is counted and the
 * packet sent again, and a peer's load can make it frequent.
 */
struct sk_buff *rroce_tx_alloc(struct net_device *ndev, unsigned int len, bool ipv6, u8 **data)
{
	unsigned int head = LL_RESERVED_SPACE(ndev);
	struct sk_buff *skb = alloc_skb(head + len + ndev->needed_tailroom, GFP_ATOMIC | __GFP_NOWARN);

	if (!skb)
		return NULL;
	skb_reserve(skb, head);
	*data = skb_put(skb, len);
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	skb->protocol = htons(ipv6 ? ETH_P_IPV6 : ETH_P_IP);
	return skb;
}

void rroce_skb_set_dev(struct sk_buff *skb, struct net_device *ndev)
{
	skb->dev = ndev;
}

void rroce_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void rroce_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

/* A second owner of a received packet's data (a multicast datagram for a QP
 * that processes it later): the data is shared and read only. */
struct sk_buff *rroce_skb_clone(struct sk_buff *skb)
{
	return skb_clone(skb, GFP_ATOMIC | __GFP_NOWARN);
}

int rroce_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

/* The IP packet of a received skb: from its network header to its end. */
const u8 *rroce_skb_network(const struct sk_buff *skb, unsigned int *len)
{
	const u8 *nh = skb_network_header(skb);

	*len = skb_tail_pointer(skb) - nh;
	return nh;
}

struct net_device *rroce_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

/* A received packet kept past its arrival (queued for a QP, which may run
 * much later): it drops the device, on which it holds no reference, and the
 * route, which the receive path may have set without one (valid only for
 * that RCU reader), as a socket's receive queue does. rroce uses neither.
 */
void rroce_skb_leave_arrival(struct sk_buff *skb)
{
	skb->dev = NULL;
	skb_dst_drop(skb);
}

/* Calls fn(skb) when the skb is freed or orphaned (the lower device sent
 * it, or the peer's IP layer took it), with arg in the shared info's
 * destructor argument. Its other users (zero-copy, XDP frags, xsk, sctp)
 * do not see these skbs: linear, built here, no zero-copy flag; a path that
 * needs the field copies the skb first, and copies carry no destructor.
 */
void rroce_skb_set_destructor(struct sk_buff *skb, void (*fn)(struct sk_buff *skb), void *arg)
{
	skb_shinfo(skb)->destructor_arg = arg;
	skb->destructor = fn;
}

void *rroce_skb_destructor_arg(struct sk_buff *skb)
{
	return skb_shinfo(skb)->destructor_arg;
}
