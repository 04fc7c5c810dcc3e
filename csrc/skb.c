// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for socket buffers: transmit allocation, received packets,
 * release callbacks (declared in rroce_helpers.h).
 */

#include <linux/skbuff.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/dst.h>
#include <net/sock.h>
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

/*
 * Owners of transmitted packets. A packet given an owner calls it when it
 * is freed or orphaned (the lower device sent it, or the peer's IP layer
 * took it), from rroce_tx_released: this module's code, run by whatever
 * frees the packet, in any context but hard interrupt. Unload must wait
 * until every such call has returned into the core, not only until a count
 * its last statement moves: a task preempted between that statement and its
 * return would resume in freed module text, and no RCU grace period covers
 * a preemptible task outside a read-side section. As a work item's flush
 * waits for the function's return, not for its last statement, the count
 * here is moved by the core after this module's code has left the stack:
 * each owned packet holds a reference on a kernel socket (rroce_tx_sk), and
 * the destructor ends in a guaranteed tail call to the core's sock_efree,
 * which drops it. Unload waits for the socket's count to come back to its
 * own reference.
 *
 * The owner's pointer is in the shared info's destructor argument. Its other
 * users (zero-copy, XDP frags, xsk, sctp) do not see these skbs: linear,
 * built here, no zero-copy flag; a path that needs the field copies the skb
 * first, and copies carry no destructor.
 */
#if !__has_attribute(__musttail__)
#error "rroce_tx_released needs a guaranteed tail call (clang, GCC 15)"
#endif

/* The socket whose count the owned packets hold, from rroce_tx_owners_open
 * until rroce_tx_owners_release; rroce_skb_set_owner takes a reference only
 * while rroce_tx_open, read under RCU.
 */
static struct socket *rroce_tx_sock;
static void (*rroce_tx_released_fn)(void *owner);
static bool rroce_tx_open;
/* Serialises opening and releasing. */
static DEFINE_MUTEX(rroce_tx_owners_lock);

static void rroce_tx_released(struct sk_buff *skb)
{
	rroce_tx_released_fn(skb_shinfo(skb)->destructor_arg);
	/* sock_efree puts skb->sk: the reference rroce_skb_set_owner took.
	 * The field is free to use here: the skb had no socket (it was ours),
	 * and both callers of a destructor (skb_orphan, skb_release_head_state)
	 * clear it right after the call.
	 */
	skb->sk = rroce_tx_sock->sk;
	__attribute__((__musttail__)) return sock_efree(skb);
}

/* Starts taking owners; released(owner) is called once per owned packet. */
int rroce_tx_owners_open(void (*released)(void *owner))
{
	int err = -EBUSY;

	mutex_lock(&rroce_tx_owners_lock);
	if (rroce_tx_sock)
		goto out;
	err = sock_create_kern(&init_net, PF_INET, SOCK_DGRAM, IPPROTO_UDP, &rroce_tx_sock);
	if (err) {
		rroce_tx_sock = NULL;
		goto out;
	}
	rroce_tx_released_fn = released;
	/* Release: rroce_skb_set_owner sees the socket and function. */
	smp_store_release(&rroce_tx_open, true);
out:
	mutex_unlock(&rroce_tx_owners_lock);
	return err;
}

/* Takes no new owners: once this returns, rroce_tx_owners_pending counts
 * every owned packet there will be.
 */
void rroce_tx_owners_close(void)
{
	WRITE_ONCE(rroce_tx_open, false);
	synchronize_rcu();
}

/* Owned packets whose destructor has not yet returned into the core. */
unsigned int rroce_tx_owners_pending(void)
{
	if (!rroce_tx_sock)
		return 0;
	/* Acquire: what the destructors did before their sock_efree is seen. */
	return atomic_read_acquire(&rroce_tx_sock->sk->sk_refcnt.refs) - 1;
}

/* After close, once nothing is pending: frees the socket. */
void rroce_tx_owners_release(void)
{
	mutex_lock(&rroce_tx_owners_lock);
	if (rroce_tx_sock && !WARN_ON_ONCE(READ_ONCE(rroce_tx_open) || rroce_tx_owners_pending())) {
		sock_release(rroce_tx_sock);
		rroce_tx_sock = NULL;
	}
	mutex_unlock(&rroce_tx_owners_lock);
}

/* Makes owner the skb's, told by released(owner) when it is freed or
 * orphaned; -EBUSY if the skb has a destructor already (its owner's would be
 * lost), -ENODEV if owners are not taken now.
 */
int rroce_skb_set_owner(struct sk_buff *skb, void *owner)
{
	if (skb->destructor || skb->sk)
		return -EBUSY;
	rcu_read_lock();
	if (!smp_load_acquire(&rroce_tx_open)) {
		rcu_read_unlock();
		return -ENODEV;
	}
	sock_hold(rroce_tx_sock->sk);
	rcu_read_unlock();
	skb_shinfo(skb)->destructor_arg = owner;
	skb->destructor = rroce_tx_released;
	return 0;
}
