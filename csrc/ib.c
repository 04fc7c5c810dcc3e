// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for the RDMA core: devices, udata, GIDs, sysfs, mmap, module
 * parameters (declared in rroce_helpers.h).
 */

#include <linux/kmod.h>
#include <linux/module.h>
#include <linux/vmalloc.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_netlink.h>
#include <net/netlink.h>
#include <rdma/uverbs_ioctl.h>
#include "rroce_helpers.h"

void *rroce_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

/* The user context a verb's driver udata belongs to (NULL for kernel callers). */
struct ib_ucontext *rroce_udata_ucontext(struct ib_udata *udata)
{
	return udata ? container_of(udata, struct uverbs_attr_bundle, driver_udata)->context : NULL;
}

/*
 * The netdev of a port, read under RCU as the core publishes it (the caller
 * holds rcu_read_lock). ib_device_get_netdev takes the port's netdev_lock
 * with a plain spin_lock, which process context holds with softirqs on: the
 * data path runs in softirq, and kernel consumers may create address handles
 * in atomic context, so neither may take it. The core clears the pointer
 * before its own reference goes, and the netdev is freed only after an RCU
 * grace period.
 */
static struct net_device *port_netdev_rcu(struct ib_device *dev, u32 port)
{
	if (!rdma_is_port_valid(dev, port) || !dev->port_data)
		return NULL;
	return rcu_dereference(dev->port_data[port].netdev);
}

/* The netdev of a port, with a reference. */
struct net_device *rroce_ib_port_netdev_hold(struct ib_device *dev, u32 port)
{
	struct net_device *ndev;

	rcu_read_lock();
	ndev = port_netdev_rcu(dev, port);
	dev_hold(ndev);
	rcu_read_unlock();
	return ndev;
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

bool rroce_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
}

/* A copy of the device's name: none before ib_register_device names it, and
 * a rename may replace it at any time. */
void rroce_ib_device_name_copy(const struct ib_device *ibdev, char *buf, size_t size)
{
	const char *name = dev_name(&ibdev->dev);

	strscpy(buf, name ? name : "", size);
}

unsigned long rroce_vma_pgoff(const struct vm_area_struct *vma)
{
	return vma->vm_pgoff;
}

unsigned long rroce_vma_len(const struct vm_area_struct *vma)
{
	return vma->vm_end - vma->vm_start;
}

/* A user can overrun its own CQ at will: the warning must not flood the log. */
void rroce_warn_cq_overrun(u32 qpn)
{
	pr_warn_ratelimited("rroce: CQ overrun: completion of QP %#x lost\n", qpn);
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
 * means nothing outside its own). Any context: create_ah reads it, which
 * kernel consumers may call in atomic context. Both netdevs and their
 * namespaces are freed only after an RCU grace period.
 */
int rroce_gid_attr_ifindex(const struct ib_gid_attr *attr)
{
	struct net_device *ndev, *port;
	int ifindex = 0;

	rcu_read_lock();
	port = port_netdev_rcu(attr->device, attr->port_num);
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (port && !IS_ERR(ndev) && net_eq(dev_net(ndev), dev_net(port)))
		ifindex = ndev->ifindex;
	rcu_read_unlock();
	return ifindex;
}

void rroce_sysfs_attr_init(struct attribute *attr)
{
	sysfs_attr_init(attr);
}

struct ib_device *rroce_device_to_ibdev(struct device *dev)
{
	return rdma_device_to_ibdev(dev);
}

/*
 * The driver's own attributes of an object in `rdma res show ... -dd`: a
 * nest the rdma_nl_put_driver_*() entries go into. NULL when the message is
 * full (the core then sends the object in the next one).
 */
struct nlattr *rroce_res_driver_begin(struct sk_buff *msg)
{
	return nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
}

/* Closes the nest, or takes it out again when filling it failed. */
void rroce_res_driver_end(struct sk_buff *msg, struct nlattr *nest, bool keep)
{
	if (keep)
		nla_nest_end(msg, nest);
	else
		nla_nest_cancel(msg, nest);
}
