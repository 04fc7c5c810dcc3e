// SPDX-License-Identifier: GPL-2.0
/* Forwarders for static inline functions and macros; see rroce_helpers.h. */

#include <linux/module.h>
#include <linux/kmod.h>
#include <linux/if_vlan.h>
#include <linux/cpumask.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <linux/uaccess.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <linux/hmm.h>
#include <linux/highmem.h>
#include <net/udp_tunnel.h>
#include <net/route.h>
#include <net/ip.h>
#include <linux/inetdevice.h>
#include <net/ipv6.h>
#include <net/addrconf.h>
#include <net/ip6_route.h>
#include <linux/workqueue.h>
#include <linux/random.h>
#include <linux/delay.h>
#include <linux/rtnetlink.h>
#include <net/dcbnl.h>
#include <linux/igmp.h>
#include <linux/crc32.h>
#include <linux/sched/signal.h>
#include "rroce_helpers.h"

struct net *rroce_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
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

const char *rroce_netdev_name(const struct net_device *ndev)
{
	return ndev->name;
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

void *rroce_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

/* The user context a verb's driver udata belongs to (NULL for kernel callers). */
struct ib_ucontext *rroce_udata_ucontext(struct ib_udata *udata)
{
	return udata ? container_of(udata, struct uverbs_attr_bundle, driver_udata)->context : NULL;
}

struct ib_umem *rroce_umem_get(struct ib_device *dev, unsigned long addr, size_t size, int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}

/* Fills pages[] with the pinned pages of a umem in order; returns how many. */
size_t rroce_umem_pages(struct ib_umem *umem, struct page **pages, size_t max)
{
	struct sg_page_iter iter;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&iter);
	}
	return n;
}

unsigned int rroce_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/* Copies len bytes between buf and page at offset (offset + len <= PAGE_SIZE). */
void rroce_page_copy(struct page *page, unsigned int offset, void *buf, unsigned int len, bool to_page)
{
	void *va = kmap_local_page(page);

	if (to_page)
		memcpy(va + offset, buf, len);
	else
		memcpy(buf, va + offset, len);
	kunmap_local(va);
}

/*
 * An RC atomic on the 8 bytes at offset (8-byte aligned) of a page: compare
 * and swap, or fetch and add. Locked CPU instructions make it atomic against
 * every other QP and against the page's owner using it meanwhile. Returns
 * the value found.
 */
static u64 rroce_atomic_on(u64 *p, enum rroce_atomic_op op, u64 compare, u64 operand)
{
	switch (op) {
	case RROCE_ATOMIC_COMPARE_SWAP:
		return cmpxchg64(p, compare, operand);
	case RROCE_ATOMIC_STORE:
		return xchg(p, operand);
	case RROCE_ATOMIC_FETCH_ADD:
	default:
		return (u64)atomic64_fetch_add((s64)operand, (atomic64_t *)p);
	}
}

u64 rroce_page_atomic(struct page *page, unsigned int offset, enum rroce_atomic_op op, u64 compare, u64 operand)
{
	void *va = kmap_local_page(page);
	u64 old = rroce_atomic_on(va + offset, op, compare, operand);

	kunmap_local(va);
	return old;
}

/* The RoCEv2 UDP socket of one address family in one namespace. */
struct socket *rroce_udp_tunnel_open(struct net *net, bool ipv6,
				     int (*rcv)(struct sock *sk, struct sk_buff *skb), void *user_data)
{
	struct udp_tunnel_sock_cfg tcfg = {};
	struct udp_port_cfg cfg = {};
	struct socket *sock;
	int err;

	cfg.family = ipv6 ? AF_INET6 : AF_INET;
	cfg.ipv6_v6only = ipv6;
	cfg.local_udp_port = htons(ROCE_V2_UDP_DPORT);
	err = udp_sock_create(net, &cfg, &sock);
	if (err < 0)
		return ERR_PTR(err);
	tcfg.encap_type = 1;
	tcfg.encap_rcv = rcv;
	tcfg.sk_user_data = user_data;
	setup_udp_tunnel_sock(net, sock->sk, &tcfg);
	return sock;
}

void rroce_udp_tunnel_close(struct socket *sock)
{
	udp_tunnel_sock_release(sock->sk);
}

void *rroce_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

/* A linear skb for a RoCEv2 packet of len bytes (IP header included), with
 * link-layer headroom for ndev; *data points at its first byte.
 */
struct sk_buff *rroce_tx_alloc(struct net_device *ndev, unsigned int len, bool ipv6, u8 **data)
{
	unsigned int head = LL_RESERVED_SPACE(ndev);
	struct sk_buff *skb = alloc_skb(head + len + ndev->needed_tailroom, GFP_KERNEL);

	if (!skb)
		return NULL;
	skb_reserve(skb, head);
	*data = skb_put(skb, len);
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	skb->protocol = htons(ipv6 ? ETH_P_IPV6 : ETH_P_IP);
	return skb;
}

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

/* Routes and sends a finished IPv6 packet; consumes the skb. */
int rroce_tx_send6(struct net *net, struct sk_buff *skb, const u8 *saddr, const u8 *daddr,
		   int oif, u32 priority, int tag_ifindex)
{
	struct flowi6 fl = {
		.flowi6_proto = IPPROTO_UDP,
		.flowi6_oif = oif,
	};
	struct dst_entry *dst;

	memcpy(&fl.saddr, saddr, sizeof(fl.saddr));
	memcpy(&fl.daddr, daddr, sizeof(fl.daddr));
	dst = ip6_dst_lookup_flow(net, NULL, &fl, NULL);
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

/* Routes and sends a finished IPv4 packet (headers and ICRC written);
 * consumes the skb. Returns a NET_XMIT_* code or a negative errno.
 */
int rroce_tx_send4(struct net *net, struct sk_buff *skb, __be32 saddr, __be32 daddr,
		   int oif, u32 priority, int tag_ifindex)
{
	struct flowi4 fl = {
		.daddr = daddr,
		.saddr = saddr,
		.flowi4_proto = IPPROTO_UDP,
		.flowi4_oif = oif,
	};
	struct rtable *rt = ip_route_output_key(net, &fl);

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

void rroce_skb_set_dev(struct sk_buff *skb, struct net_device *ndev)
{
	skb->dev = ndev;
}

struct workqueue_struct *rroce_alloc_workqueue(const char *name)
{
	/* Per-CPU and high priority: a receive lane runs on the CPU whose softirq
	 * queued it, right after it, as close as a work item gets to processing
	 * in the softirq itself (measured: 2-byte latency 15-30 % lower than on
	 * an unbound queue). */
	return alloc_workqueue("%s", WQ_PERCPU | WQ_HIGHPRI | WQ_MEM_RECLAIM, 0, name);
}

/* For work that may sleep a long time (device unregistration): unbound,
 * so it ties up no per-CPU worker. */
struct workqueue_struct *rroce_alloc_unbound_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_UNBOUND, 0, name);
}

/* The same, running at most `max_active` of its items at once. */
struct workqueue_struct *rroce_alloc_unbound_workqueue_max(const char *name, int max_active)
{
	return alloc_workqueue("%s", WQ_UNBOUND, max_active, name);
}

void rroce_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

/* A second owner of a received packet's data (a multicast datagram for a QP
 * that processes it later): the data is shared and read only. */
struct sk_buff *rroce_skb_clone(struct sk_buff *skb)
{
	return skb_clone(skb, GFP_ATOMIC);
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

bool rroce_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

/* Keeps the memory of a device alive (not its registration): the reference
 * ib_unregister_device_queued takes, for a driver's own deferred unregistration. */
void rroce_ib_device_hold_memory(struct ib_device *dev)
{
	get_device(&dev->dev);
}

void rroce_ib_device_release_memory(struct ib_device *dev)
{
	put_device(&dev->dev);
}

/* Whether the netdev is registered and not yet unregistering. The state
 * changes under RTNL before NETDEV_UNREGISTER is sent. */
bool rroce_netdev_is_registered(const struct net_device *ndev)
{
	return READ_ONCE(ndev->reg_state) == NETREG_REGISTERED;
}

bool rroce_is_err(const void *ptr)
{
	return IS_ERR(ptr);
}

long rroce_ptr_err(const void *ptr)
{
	return PTR_ERR(ptr);
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

void rroce_ib_mark_name_assigned_by_user(struct ib_device *ibdev)
{
	ib_mark_name_assigned_by_user(ibdev);
}

int rroce_ib_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int rroce_ib_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

long rroce_copy_from_kernel(void *dst, u64 src, size_t len)
{
	return copy_from_kernel_nofault(dst, (const void *)(uintptr_t)src, len);
}

/* Virtual DMA addresses are linear-map addresses: refuse anything else. */
long rroce_copy_to_kernel(u64 dst, const void *src, size_t len)
{
	void *d = (void *)(uintptr_t)dst;

	if (len == 0)
		return 0;
	if (dst + len < dst || !virt_addr_valid(d) || !virt_addr_valid(d + len - 1))
		return -EFAULT;
	memcpy(d, src, len);
	return 0;
}

/* An atomic on 8 aligned bytes at a linear-map address a kernel consumer
 * registered; anything else is refused. */
int rroce_kernel_atomic(u64 addr, enum rroce_atomic_op op, u64 compare, u64 operand, u64 *old)
{
	void *p = (void *)(uintptr_t)addr;

	if (addr & 7 || !virt_addr_valid(p))
		return -EFAULT;
	*old = rroce_atomic_on(p, op, compare, operand);
	return 0;
}

/* ib_sg_to_pages() into a plain array: the core walks the DMA-mapped list
 * and calls back per page; the callback only sees an ib_mr, so the walk
 * runs on one embedded in this context, and the consumer's MR gets the
 * iova and length the core computed, as ib_map_mr_sg() promises. */
struct rroce_sg_pages {
	struct ib_mr mr;
	u64 *pages;
	u32 max;
	u32 count;
};

static int rroce_sg_set_page(struct ib_mr *mr, u64 addr)
{
	struct rroce_sg_pages *p = container_of(mr, struct rroce_sg_pages, mr);

	if (p->count >= p->max)
		return -ENOMEM;
	p->pages[p->count++] = addr;
	return 0;
}

int rroce_sg_to_pages(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents, unsigned int *sg_offset,
		      u64 *pages, u32 max, u32 *count)
{
	struct rroce_sg_pages p = { .pages = pages, .max = max };
	int n;

	p.mr.page_size = ibmr->page_size;
	n = ib_sg_to_pages(&p.mr, sg, sg_nents, sg_offset, rroce_sg_set_page);
	/* A list refused outright leaves the consumer's MR as it was. */
	if (n > 0) {
		ibmr->iova = p.mr.iova;
		ibmr->length = p.mr.length;
	}
	*count = p.count;
	return n;
}

struct workqueue_struct *rroce_system_percpu_wq(void)
{
	return system_percpu_wq;
}

struct workqueue_struct *rroce_system_dfl_wq(void)
{
	return system_dfl_wq;
}

unsigned long rroce_copy_to_user(u64 dst, const void *src, size_t len)
{
	return copy_to_user(u64_to_user_ptr(dst), src, len);
}

bool rroce_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
}

unsigned int rroce_num_possible_cpus(void)
{
	return num_possible_cpus();
}

const char *rroce_ib_device_name(const struct ib_device *ibdev)
{
	return dev_name(&ibdev->dev);
}

struct module *rroce_this_module(void)
{
	return THIS_MODULE;
}

unsigned long rroce_vma_pgoff(const struct vm_area_struct *vma)
{
	return vma->vm_pgoff;
}

unsigned long rroce_vma_len(const struct vm_area_struct *vma)
{
	return vma->vm_end - vma->vm_start;
}

bool rroce_umem_writable(const struct ib_umem *umem)
{
	return umem->writable;
}

#ifdef CONFIG_INFINIBAND_ON_DEMAND_PAGING
/*
 * The MMU notifier's callback: pages of the range leave the process (munmap,
 * MADV_DONTNEED, reclaim, migration). Copies hold umem_mutex while they use
 * a page, so once this returns none uses the old pages, and the next access
 * faults them in again.
 */
static bool rroce_odp_invalidate(struct mmu_interval_notifier *mni,
				 const struct mmu_notifier_range *range, unsigned long cur_seq)
{
	struct ib_umem_odp *odp = container_of(mni, struct ib_umem_odp, notifier);

	if (!mmu_notifier_range_blockable(range))
		return false;
	mutex_lock(&odp->umem_mutex);
	mmu_interval_set_seq(mni, cur_seq);
	ib_umem_odp_unmap_dma_pages(odp, max_t(u64, ib_umem_start(odp), range->start),
				    min_t(u64, ib_umem_end(odp), range->end));
	mutex_unlock(&odp->umem_mutex);
	return true;
}

static const struct mmu_interval_notifier_ops rroce_odp_ops = {
	.invalidate = rroce_odp_invalidate,
};

bool rroce_odp_enabled(void)
{
	return true;
}

struct ib_umem_odp *rroce_odp_get(struct ib_device *dev, unsigned long addr, size_t size, int access)
{
	return ib_umem_odp_get(dev, addr, size, access, &rroce_odp_ops);
}

void rroce_odp_release(struct ib_umem_odp *odp)
{
	ib_umem_odp_release(odp);
}

/* Returns the pages mapped, with umem_mutex held; an error without it. */
int rroce_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault)
{
	return ib_umem_odp_map_dma_and_lock(odp, va, len, write ? HMM_PFN_WRITE : 0, fault);
}

void rroce_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

void rroce_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

/* Whether the page holding va (inside the umem) is present, and writable if
 * asked; umem_mutex held. */
bool rroce_odp_page_mapped(struct ib_umem_odp *odp, u64 va, bool write)
{
	unsigned long want = HMM_PFN_VALID | (write ? HMM_PFN_WRITE : 0);

	lockdep_assert_held(&odp->umem_mutex);
	return (odp->map.pfn_list[(va - ib_umem_start(odp)) >> odp->page_shift] & want) == want;
}

/* Forgets what a walk that failed wrote for [va, va + len): its entries may
 * name pages invalidated while it ran; umem_mutex held. */
void rroce_odp_forget(struct ib_umem_odp *odp, u64 va, u64 len)
{
	u64 page = BIT_ULL(odp->page_shift);

	lockdep_assert_held(&odp->umem_mutex);
	/* The walk covered whole pages: so must this. */
	ib_umem_odp_unmap_dma_pages(odp, ALIGN_DOWN(va, page), ALIGN(va + len, page));
}

/*
 * Marks a page written through the kernel mapping dirty: nothing else does
 * (the user's page table entry is not written, and the core dirties pages on
 * invalidation only when they were DMA-mapped, which virtual DMA never is),
 * and reclaim would drop a clean page with the data. umem_mutex held, which
 * keeps the page in the mapping as on the core's own path; va was found
 * present under it.
 */
void rroce_odp_page_dirty(struct ib_umem_odp *odp, u64 va)
{
	set_page_dirty(compound_head(rroce_odp_page(odp, va)));
}

/* The page holding va, which rroce_odp_page_mapped() found present; umem_mutex held. */
struct page *rroce_odp_page(struct ib_umem_odp *odp, u64 va)
{
	lockdep_assert_held(&odp->umem_mutex);
	return hmm_pfn_to_page(odp->map.pfn_list[(va - ib_umem_start(odp)) >> odp->page_shift]);
}

bool rroce_odp_writable(const struct ib_umem_odp *odp)
{
	return odp->umem.writable;
}
#else
bool rroce_odp_enabled(void)
{
	return false;
}

struct ib_umem_odp *rroce_odp_get(struct ib_device *dev, unsigned long addr, size_t size, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

/* Never called: no ODP umem exists without the kernel's ODP. */
void rroce_odp_release(struct ib_umem_odp *odp) {}
int rroce_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault) { return -EOPNOTSUPP; }
void rroce_odp_lock(struct ib_umem_odp *odp) {}
void rroce_odp_forget(struct ib_umem_odp *odp, u64 va, u64 len) {}
void rroce_odp_page_dirty(struct ib_umem_odp *odp, u64 va) {}
void rroce_odp_unlock(struct ib_umem_odp *odp) {}
bool rroce_odp_page_mapped(struct ib_umem_odp *odp, u64 va, bool write) { return false; }
struct page *rroce_odp_page(struct ib_umem_odp *odp, u64 va) { return NULL; }
bool rroce_odp_writable(const struct ib_umem_odp *odp) { return false; }
#endif

/* A long walk a user started stops when the user is being killed. */
bool rroce_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

void rroce_cond_resched(void)
{
	cond_resched();
}

/* A user can overrun its own CQ at will: the warning must not flood the log. */
void rroce_warn_cq_overrun(u32 qpn)
{
	pr_warn_ratelimited("rroce: CQ overrun: completion of QP %#x lost\n", qpn);
}

bool rroce_flush_work(struct work_struct *work)
{
	return flush_work(work);
}

unsigned long rroce_totalram_pages(void)
{
	return totalram_pages();
}

void rroce_flush_workqueue(struct workqueue_struct *wq)
{
	flush_workqueue(wq);
}

u8 rroce_random_u8(void)
{
	return get_random_u8();
}

/*
 * Test knob: the next protection domain allocated (on any device) skips
 * this many identities, as if that many PDs had come and gone; the value is
 * consumed by that allocation. Lets a test reach identities a real workload
 * needs billions of allocations for. Root only.
 */
static unsigned long pd_id_skip;
module_param(pd_id_skip, ulong, 0600);
MODULE_PARM_DESC(pd_id_skip, "test only: PD identities skip this many values once");

u64 rroce_take_pd_id_skip(void)
{
	return xchg(&pd_id_skip, 0);
}

bool rroce_cancel_delayed_work(struct delayed_work *dwork)
{
	return cancel_delayed_work(dwork);
}

/*
 * The core removes its clients in the reverse order they registered. With
 * ib_uverbs registered before rdma_cm, rdma_cm tells its users
 * DEVICE_REMOVAL before ib_uverbs disassociates the contexts librdmacm
 * opened, so rdma_cm applications see the removal as such rather than as
 * failing verbs. Loading ib_uverbs when rroce loads gives that order
 * whenever rdma_cm comes later, as it does when librdmacm loads it on first
 * use. (A soft dependency would do the same, but `modprobe -r rroce` would
 * then also try to remove ib_uverbs and fail while rdma_ucm uses it.)
 */
void rroce_request_uverbs(void)
{
	if (IS_MODULE(CONFIG_INFINIBAND_USER_ACCESS))
		request_module("ib_uverbs");
}

/* The ifindex of a GID entry's netdev (a VLAN device for a VLAN's GID), or
 * 0 if it has none any more or lives in another namespace than the port's
 * netdev (the core lists GIDs of upper devices in every namespace; an index
 * means nothing outside its own).
 */
int rroce_gid_attr_ifindex(const struct ib_gid_attr *attr)
{
	struct net_device *ndev, *port;
	int ifindex = 0;

	port = ib_device_get_netdev(attr->device, attr->port_num);
	if (!port)
		return 0;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (!IS_ERR(ndev) && net_eq(dev_net(ndev), dev_net(port)))
		ifindex = ndev->ifindex;
	rcu_read_unlock();
	dev_put(port);
	return ifindex;
}

/* The device a VLAN device sends through, or ndev itself. */
struct net_device *rroce_vlan_real_dev(struct net_device *ndev)
{
	return is_vlan_dev(ndev) ? vlan_dev_real_dev(ndev) : ndev;
}

/* The monotonic clock, for congestion control. */
u64 rroce_ktime_ns(void)
{
	return ktime_get_ns();
}

void rroce_sysfs_attr_init(struct attribute *attr)
{
	sysfs_attr_init(attr);
}

struct ib_device *rroce_device_to_ibdev(struct device *dev)
{
	return rdma_device_to_ibdev(dev);
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

void rroce_msleep(unsigned int ms)
{
	msleep(ms);
}

bool rroce_rtnl_trylock(void)
{
	return rtnl_trylock();
}

void rroce_rtnl_unlock(void)
{
	rtnl_unlock();
}

/* The caller holds RTNL, as dcbnl does around the driver's DCB ops. */
void rroce_dcb_read(struct net_device *ndev, struct rroce_dcb *out)
{
	const struct dcbnl_rtnl_ops *ops = NULL;
	int i, n = 0;

	ASSERT_RTNL();
	memset(out, 0, sizeof(*out));
	out->trust_count = -1;
	/* A device on its way out may have torn down what its ops use. */
	if (ndev->reg_state != NETREG_REGISTERED)
		return;
#ifdef CONFIG_DCB
	ops = ndev->dcbnl_ops;
	if (ops) {
		struct dcb_ieee_app_dscp_map map = {};
		struct ieee_pfc pfc = {};
		struct ieee_ets ets = {};

		out->has_dcbnl = 1;
		if (ops->ieee_getpfc && !ops->ieee_getpfc(ndev, &pfc)) {
			out->pfc_valid = 1;
			out->pfc_en = pfc.pfc_en;
		}
		if (ops->ieee_getets && !ops->ieee_getets(ndev, &ets)) {
			out->tc_valid = 1;
			memcpy(out->prio_tc, ets.prio_tc, sizeof(out->prio_tc));
		}
		dcb_ieee_getapp_dscp_prio_mask_map(ndev, &map);
		memcpy(out->dscp_prio_mask, map.map, sizeof(out->dscp_prio_mask));
		out->default_prio_mask = dcb_ieee_getapp_default_prio_mask(ndev);
		if (ops->dcbnl_getapptrust && !ops->dcbnl_getapptrust(ndev, out->trust, &n) &&
		    n >= 0 && n <= ARRAY_SIZE(out->trust))
			out->trust_count = n;
	}
#endif
	if (!out->tc_valid && netdev_get_num_tc(ndev)) {
		out->tc_valid = 1;
		for (i = 0; i < ARRAY_SIZE(out->prio_tc); i++)
			out->prio_tc[i] = netdev_get_prio_tc_map(ndev, i);
	}
}

/* The kernel's CRC-32 (carry-less multiply where the CPU has it), for the ICRC. */
u32 rroce_crc32_le(u32 crc, const void *p, size_t len)
{
	return crc32_le(crc, p, len);
}

/* What a module notifier event says about the module named @name. */
enum rroce_module_event rroce_module_event(unsigned long action, const void *data, const char *name)
{
	const struct module *mod = data;

	if (strcmp(mod->name, name))
		return RROCE_MODULE_UNRELATED;
	if (action == MODULE_STATE_COMING)
		return RROCE_MODULE_COMING;
	if (action == MODULE_STATE_GOING)
		return RROCE_MODULE_GOING;
	return RROCE_MODULE_UNRELATED;
}

int rroce_notifier_from_errno(int err)
{
	return notifier_from_errno(err);
}
