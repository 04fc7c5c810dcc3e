/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C wrappers for static inline functions and macros that Rust cannot call
 * directly, defined in csrc/ in a file per kernel subsystem. Each is a
 * one-line forward; all logic lives in Rust, except the ODP invalidation
 * callback, which must be a C ops table.
 */
#ifndef RROCE_HELPERS_H
#define RROCE_HELPERS_H

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

struct net *rroce_dev_net_rcu(const struct net_device *ndev);
struct net *rroce_dev_get_net(const struct net_device *ndev);
void rroce_put_net(struct net *net);
/* struct net_device is opaque to the kernel crate's bindings: field readers. */
void rroce_netdev_copy_name(const struct net_device *ndev, char *buf);
int rroce_netdev_ifindex(const struct net_device *ndev);
unsigned int rroce_netdev_mtu(const struct net_device *ndev);
unsigned short rroce_netdev_type(const struct net_device *ndev);
unsigned int rroce_netdev_addr(const struct net_device *ndev, u8 *out, unsigned int len);
void *rroce_vmalloc_user(unsigned long size);
struct ib_ucontext *rroce_udata_ucontext(struct ib_udata *udata);
struct ib_umem;
struct ib_umem *rroce_umem_get(struct ib_device *dev, unsigned long addr, size_t size, int access);
void rroce_umem_release(struct ib_umem *umem);
size_t rroce_umem_pages(struct ib_umem *umem, struct page **pages, size_t max);
unsigned int rroce_umem_offset(struct ib_umem *umem);
void rroce_page_copy(struct page *page, unsigned int offset, void *buf, unsigned int len, bool to_page);
/* What rroce_page_atomic() and rroce_kernel_atomic() do to the 8 bytes. */
enum rroce_atomic_op {
	RROCE_ATOMIC_FETCH_ADD,
	RROCE_ATOMIC_COMPARE_SWAP,
	/* ATOMIC WRITE: a fully ordered exchange, the old value discarded. */
	RROCE_ATOMIC_STORE,
};
u64 rroce_page_atomic(struct page *page, unsigned int offset, enum rroce_atomic_op op, u64 compare, u64 operand);
int rroce_kernel_atomic(u64 addr, enum rroce_atomic_op op, u64 compare, u64 operand, u64 *old);
struct scatterlist;
int rroce_sg_to_pages(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents, unsigned int *sg_offset,
		      u64 *pages, u32 max, u32 *count);
bool rroce_is_err(const void *ptr);
struct net_device *rroce_ib_port_netdev_hold(struct ib_device *dev, u32 port);
bool rroce_ib_device_try_get(struct ib_device *dev);
void rroce_ib_device_hold_memory(struct ib_device *dev);
void rroce_ib_device_release_memory(struct ib_device *dev);
bool rroce_netdev_is_registered(const struct net_device *ndev);
u32 rroce_crc32_le(u32 crc, const void *p, size_t len);
enum rroce_module_event {
	/* Another module, or a state change that does not matter. */
	RROCE_MODULE_UNRELATED,
	/* Being loaded: its init has not run, the notifier may still refuse it. */
	RROCE_MODULE_COMING,
	/* Going: unloaded, or its load failed. */
	RROCE_MODULE_GOING,
};
enum rroce_module_event rroce_module_event(unsigned long action, const void *data, const char *name);
int rroce_notifier_from_errno(int err);
struct socket;
struct sock;
struct socket *rroce_udp_tunnel_open(struct net *net, bool ipv6,
				     int (*rcv)(struct sock *sk, struct sk_buff *skb), void *user_data);
void *rroce_sk_user_data(struct sock *sk);
struct sk_buff *rroce_tx_alloc(struct net_device *ndev, unsigned int len, bool ipv6, u8 **data);
struct rroce_route_cache;
struct rroce_route_cache *rroce_route_cache_new(void);
void rroce_route_cache_free(struct rroce_route_cache *cache);
void rroce_route_cache_reset(struct rroce_route_cache *cache);
int rroce_tx_route6(struct net *net, struct rroce_route_cache *cache, struct sk_buff *skb,
		    const u8 *saddr, const u8 *daddr, int oif);
int rroce_tx_out6(struct net *net, struct sk_buff *skb, u32 priority, int tag_ifindex);
struct net_device *rroce_ipv6_dev_find(struct net *net, const u8 *addr);
int rroce_tx_route4(struct net *net, struct rroce_route_cache *cache, struct sk_buff *skb,
		    __be32 saddr, __be32 daddr, int oif);
int rroce_tx_out4(struct net *net, struct sk_buff *skb, u32 priority, int tag_ifindex);
struct workqueue_struct *rroce_alloc_workqueue(const char *name);
struct workqueue_struct *rroce_alloc_bh_workqueue(const char *name);
struct workqueue_struct *rroce_alloc_unbound_workqueue(const char *name);
struct workqueue_struct *rroce_alloc_unbound_workqueue_max(const char *name, int max_active);
struct net_device *rroce_ip_dev_find(struct net *net, __be32 addr);
int rroce_mc_group(struct net_device *ndev, const u8 *gid, bool join);
void rroce_skb_set_dev(struct sk_buff *skb, struct net_device *ndev);
void rroce_udp_tunnel_close(struct socket *sock);
void rroce_kfree_skb(struct sk_buff *skb);
void rroce_consume_skb(struct sk_buff *skb);
struct sk_buff *rroce_skb_clone(struct sk_buff *skb);
int rroce_skb_linearize(struct sk_buff *skb);
const u8 *rroce_skb_network(const struct sk_buff *skb, unsigned int *len);
struct net_device *rroce_skb_dev(const struct sk_buff *skb);
void rroce_skb_leave_arrival(struct sk_buff *skb);
long rroce_ptr_err(const void *ptr);
void rroce_dev_hold(struct net_device *ndev);
void rroce_dev_put(struct net_device *ndev);
bool rroce_netif_running(const struct net_device *ndev);
bool rroce_netif_carrier_ok(const struct net_device *ndev);
bool rroce_is_vlan_dev(const struct net_device *ndev);
struct net_device *rroce_netdev_notifier_info_to_dev(void *info);
void rroce_ib_mark_name_assigned_by_user(struct ib_device *ibdev);
int rroce_ib_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
int rroce_ib_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
long rroce_copy_from_kernel(void *dst, u64 src, size_t len);
long rroce_copy_from_linear(void *dst, u64 src, size_t len);
long rroce_copy_to_kernel(u64 dst, const void *src, size_t len);
struct workqueue_struct *rroce_system_dfl_wq(void);
bool rroce_queue_work_on(unsigned int cpu, struct workqueue_struct *wq, struct work_struct *work);
unsigned int rroce_this_cpu(void);
unsigned int rroce_spread_cpu(unsigned int i);
unsigned int rroce_online_cpus(void);
unsigned long rroce_copy_to_user(u64 dst, const void *src, size_t len);
bool rroce_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len);
unsigned int rroce_num_possible_cpus(void);
void rroce_ib_device_name_copy(const struct ib_device *ibdev, char *buf, size_t size);
struct module *rroce_this_module(void);
unsigned long rroce_vma_pgoff(const struct vm_area_struct *vma);
unsigned long rroce_vma_len(const struct vm_area_struct *vma);
bool rroce_umem_writable(const struct ib_umem *umem);
/* On-demand paging (an opaque umem to Rust; -EOPNOTSUPP without the kernel's ODP). */
struct ib_umem_odp;
bool rroce_odp_enabled(void);
struct ib_umem_odp *rroce_odp_get(struct ib_device *dev, unsigned long addr, size_t size, int access);
void rroce_odp_release(struct ib_umem_odp *odp);
int rroce_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault);
void rroce_odp_lock(struct ib_umem_odp *odp);
void rroce_odp_unlock(struct ib_umem_odp *odp);
bool rroce_odp_page_mapped(struct ib_umem_odp *odp, u64 va, bool write);
void rroce_odp_forget(struct ib_umem_odp *odp, u64 va, u64 len);
void rroce_odp_page_dirty(struct ib_umem_odp *odp, u64 va);
struct page *rroce_odp_page(struct ib_umem_odp *odp, u64 va);
bool rroce_odp_writable(const struct ib_umem_odp *odp);
unsigned long rroce_odp_pages_mapped(struct ib_umem_odp *odp);
bool rroce_fatal_signal_pending(void);
void rroce_cond_resched(void);
void rroce_warn_cq_overrun(u32 qpn);
struct work_struct;
bool rroce_flush_work(struct work_struct *work);
bool rroce_work_pending(const struct work_struct *work);
void rroce_flush_workqueue(struct workqueue_struct *wq);
unsigned long rroce_totalram_pages(void);
u8 rroce_random_u8(void);
u64 rroce_take_pd_id_skip(void);
void rroce_request_uverbs(void);
struct delayed_work;
bool rroce_cancel_delayed_work(struct delayed_work *dwork);
int rroce_gid_attr_ifindex(const struct ib_gid_attr *attr);
struct net_device *rroce_vlan_real_dev(struct net_device *ndev);
u64 rroce_ktime_ns(void);
void rroce_local_bh_disable(void);
void rroce_local_bh_enable(void);
bool rroce_irqs_disabled(void);
bool rroce_may_sleep(void);
bool rroce_may_block(void);
u32 rroce_charged_uid(void);
bool rroce_spin_lock_bh_unless_irqs_off(spinlock_t *lock);
bool rroce_spin_trylock_bh_unless_irqs_off(spinlock_t *lock, bool *bh);
void rroce_spin_unlock_bh_if(spinlock_t *lock, bool bh);
void rroce_spin_assert_held(spinlock_t *lock);
/* A release handed to a work item; `release` owns `later` from then on. */
struct rroce_release_later {
	struct llist_node node;
	void (*release)(struct rroce_release_later *later);
};
void rroce_release_later(struct rroce_release_later *later);
void rroce_release_later_flush(void);
/* Trace events (csrc/trace.c, include/rroce_trace.h). */
void rroce_trace_qp_state(const struct ib_device *dev, u32 qpn, u8 from, u8 to);
void rroce_trace_cqe_error(const struct ib_device *dev, u32 qpn, u8 status, const char *reason);
void rroce_trace_packet_drop(const struct ib_device *dev, u32 qpn, const char *reason);
void rroce_trace_retransmit(const struct ib_device *dev, u32 qpn, u32 psn, const char *reason);
void rroce_trace_cnp(const struct ib_device *dev, u32 qpn, bool sent, const char *outcome);
void rroce_trace_rate(const struct ib_device *dev, u32 qpn, u64 from_kbps, u64 to_kbps);
struct nlattr;
struct nlattr *rroce_res_driver_begin(struct sk_buff *msg);
void rroce_res_driver_end(struct sk_buff *msg, struct nlattr *nest, bool keep);
struct attribute;
void rroce_sysfs_attr_init(struct attribute *attr);
struct device;
struct ib_device *rroce_device_to_ibdev(struct device *dev);
/* Owners of transmitted packets (csrc/skb.c). */
int rroce_tx_owners_open(void (*released)(void *owner));
void rroce_tx_owners_close(void);
unsigned int rroce_tx_owners_pending(void);
void rroce_tx_owners_release(void);
int rroce_skb_set_owner(struct sk_buff *skb, void *owner);
void rroce_msleep(unsigned int ms);
/* A set of taken indices in min..max (an IDA); opaque to Rust. */
struct rroce_index_set;
struct rroce_index_set *rroce_index_set_new(void);
void rroce_index_set_free(struct rroce_index_set *set);
int rroce_index_set_take_next(struct rroce_index_set *set, unsigned int min, unsigned int max, unsigned int *cursor);
int rroce_index_set_take(struct rroce_index_set *set, unsigned int index);
void rroce_index_set_give_back(struct rroce_index_set *set, unsigned int index);

/*
 * A port's Data Center Bridging state as rroce uses it, read by
 * rroce_dcb_read() (the one helper here with logic: it gathers what several
 * dcbnl calls return, under RTNL). Arrays are indexed by priority or DSCP.
 */
struct rroce_dcb {
	u8 has_dcbnl;		/* the netdev has DCB ops (fields below from them) */
	u8 pfc_valid;
	u8 pfc_en;		/* bit N: PFC on for priority N */
	u8 tc_valid;		/* prio_tc from ETS, else from the netdev's tc map */
	u8 prio_tc[8];
	u8 dscp_prio_mask[64];	/* APP table: priorities each DSCP maps to */
	u8 default_prio_mask;	/* APP table: default priority entries */
	s16 trust_count;	/* APP trust order length; -1 if the device has none */
	u8 trust[256];		/* APP trust order, selectors most trusted first */
};
bool rroce_rtnl_trylock(void);
void rroce_rtnl_unlock(void);
void rroce_dcb_read(struct net_device *ndev, struct rroce_dcb *out);

#endif
