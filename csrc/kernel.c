// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for kernel services: errors, CPUs, memory size, clock,
 * randomness, signals, CRC-32, module events (declared in rroce_helpers.h).
 */

#include <linux/cpumask.h>
#include <linux/crc32.h>
#include <linux/delay.h>
#include <linux/bottom_half.h>
#include <linux/err.h>
#include <linux/idr.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/sched/signal.h>
#include <linux/cred.h>
#include <linux/user_namespace.h>
#include <linux/timekeeping.h>
#include <linux/llist.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include "rroce_helpers.h"

bool rroce_is_err(const void *ptr)
{
	return IS_ERR(ptr);
}

long rroce_ptr_err(const void *ptr)
{
	return PTR_ERR(ptr);
}

unsigned int rroce_num_possible_cpus(void)
{
	return num_possible_cpus();
}

struct module *rroce_this_module(void)
{
	return THIS_MODULE;
}


/* A long walk a user started stops when the user is being killed. */
bool rroce_fatal_signal_pending(void)
{
	return fatal_signal_pending(current);
}

void rroce_cond_resched(void)
{
	cond_resched();
}

unsigned long rroce_totalram_pages(void)
{
	return totalram_pages();
}

u8 rroce_random_u8(void)
{
	return get_random_u8();
}

/* The monotonic clock, for congestion control. */
u64 rroce_ktime_ns(void)
{
	return ktime_get_ns();
}

void rroce_msleep(unsigned int ms)
{
	msleep(ms);
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

/* Softirqs off on this CPU (nests); for locks that softirq also takes. */
void rroce_local_bh_disable(void)
{
	local_bh_disable();
}

void rroce_local_bh_enable(void)
{
#ifndef CONFIG_PREEMPT_RT
	/*
	 * Dropped with interrupts off (a section that turned them off, taken
	 * inside, still held): softirqs raised meanwhile stay pending for the
	 * next interrupt exit instead of running here with interrupts off.
	 */
	if (irqs_disabled()) {
		_local_bh_enable();
		return;
	}
#endif
	local_bh_enable();
}

bool rroce_irqs_disabled(void)
{
	return irqs_disabled();
}

/* Whether the caller may sleep: a task, softirqs and interrupts on, no
 * spinlock held, outside an RCU read-side section (a preemptible RCU reader
 * counts no preemption, and must not block). Without a preemption count
 * neither a spinlock nor a non-preemptible RCU reader can be seen: false
 * there, always (callers defer the work, or fail it). */
bool rroce_may_sleep(void)
{
	if (!IS_ENABLED(CONFIG_PREEMPT_COUNT))
		return false;
	if (in_interrupt() || irqs_disabled() || rcu_preempt_depth())
		return false;
	return preemptible();
}

/* Whether the caller is a task outside any section the kernel can see
 * (interrupt, softirq, bh-off, irq-off; with a preemption count also
 * spinlocks and RCU readers). Unlike rroce_may_sleep, true on a kernel
 * without the count: for work that must still run there (RTNL from a work
 * item), not for page faults under locks it cannot see.
 */
bool rroce_may_block(void)
{
	if (in_interrupt() || irqs_disabled())
		return false;
	if (IS_ENABLED(CONFIG_PREEMPT_COUNT))
		return preemptible() && !rcu_preempt_depth();
	return true;
}

/* Softirq takes these locks too, so everyone else holds them with
 * softirqs off; with interrupts off no softirq runs here anyway, and
 * local_bh_enable() would be wrong. Returns whether softirqs went off. */
bool rroce_spin_lock_bh_unless_irqs_off(spinlock_t *lock)
{
	if (irqs_disabled()) {
		spin_lock(lock);
		return false;
	}
	spin_lock_bh(lock);
	return true;
}

bool rroce_spin_trylock_bh_unless_irqs_off(spinlock_t *lock, bool *bh)
{
	if (irqs_disabled()) {
		*bh = false;
		return spin_trylock(lock);
	}
	*bh = true;
	return spin_trylock_bh(lock);
}

void rroce_spin_unlock_bh_if(spinlock_t *lock, bool bh)
{
	if (!bh) {
		spin_unlock(lock);
		return;
	}
#ifndef CONFIG_PREEMPT_RT
	/* Dropped while a later irq-off lock is still held (guards may drop in
	 * any order): spin_unlock_bh would run pending softirqs, and on lockdep
	 * kernels turn interrupts on, inside that section. As
	 * rroce_local_bh_enable, leave them pending instead.
	 */
	if (irqs_disabled()) {
		spin_unlock(lock);
		_local_bh_enable();
		return;
	}
#endif
	spin_unlock_bh(lock);
}

void rroce_spin_assert_held(spinlock_t *lock)
{
	lockdep_assert_held(lock);
}

/* Objects whose release sleeps (pinned and on-demand user memory), let go
 * of where nothing may sleep (the data path in softirq): released by a
 * work item instead. The node belongs to its release callback. */
static LLIST_HEAD(rroce_released_later);

static void rroce_release_later_work_fn(struct work_struct *work)
{
	struct llist_node *all = llist_del_all(&rroce_released_later);
	struct rroce_release_later *later, *next;

	llist_for_each_entry_safe(later, next, all, node) {
		later->release(later);
		cond_resched();
	}
}

static DECLARE_WORK(rroce_release_later_work, rroce_release_later_work_fn);

void rroce_release_later(struct rroce_release_later *later)
{
	if (llist_add(&later->node, &rroce_released_later))
		queue_work(system_dfl_wq, &rroce_release_later_work);
}

/* Waits until everything handed to rroce_release_later() before the call
 * is released (device removal, module unload). */
void rroce_release_later_flush(void)
{
	flush_work(&rroce_release_later_work);
}

/*
 * Index allocation for the object tables: an IDA finds a free index in
 * O(log n) by its free marks, where a scan of the table would take as long
 * as one user has filled it (with its lock held, which the data path takes).
 * The IDA has its own lock, safe in any context.
 */
struct rroce_index_set {
	struct ida ida;
};

struct rroce_index_set *rroce_index_set_new(void)
{
	struct rroce_index_set *set = kzalloc(sizeof(*set), GFP_KERNEL);

	if (set)
		ida_init(&set->ida);
	return set;
}

void rroce_index_set_free(struct rroce_index_set *set)
{
	ida_destroy(&set->ida);
	kfree(set);
}

/*
 * The first free index from *cursor to max, else from min: numbers are
 * reused as late as possible, so a stale packet or key rarely meets a new
 * object under an old number. *cursor is a hint, read and written racily.
 */
int rroce_index_set_take_next(struct rroce_index_set *set, unsigned int min, unsigned int max, unsigned int *cursor)
{
	unsigned int from = clamp(READ_ONCE(*cursor), min, max);
	int id = ida_alloc_range(&set->ida, from, max, GFP_ATOMIC);

	if (id == -ENOSPC && from > min)
		id = ida_alloc_range(&set->ida, min, from - 1, GFP_ATOMIC);
	if (id >= 0)
		WRITE_ONCE(*cursor, (unsigned int)id == max ? min : (unsigned int)id + 1);
	return id;
}

/* Takes one given index: -ENOSPC if it is taken. */
int rroce_index_set_take(struct rroce_index_set *set, unsigned int index)
{
	return ida_alloc_range(&set->ida, index, index, GFP_ATOMIC);
}

void rroce_index_set_give_back(struct rroce_index_set *set, unsigned int index)
{
	ida_free(&set->ida, index);
}

/*
 * The host uid a namespace root owns is charged as: the one its uid 0 maps
 * to, else the one its first mapped range starts at (0, root, until a map
 * is written). A container runtime gives each container a range of its
 * own; a setuid helper that creates the namespace for a caller (bwrap)
 * maps the caller's own uid, so the caller gets no share of its own.
 */
static u32 rroce_root_owned_ns_uid(struct user_namespace *ns)
{
	const struct uid_gid_map *map = &ns->uid_map;
	kuid_t root = make_kuid(ns, 0);
	unsigned int extents;

	if (uid_valid(root))
		return from_kuid(&init_user_ns, root);
	/* Written once, published after its extents (map_write). */
	extents = READ_ONCE(map->nr_extents);
	smp_rmb();
	if (!extents)
		return 0;
	if (extents <= UID_GID_MAP_MAX_BASE_EXTENTS)
		return map->extent[0].lower_first;
	return map->forward[0].lower_first;
}

/*
 * The user a caller's use of shared bounds is charged to: its effective
 * uid in the initial namespace, or, inside a user namespace, the user that
 * owns the outermost namespace below the initial one. The uids of a
 * namespace (a user's subordinate ids included) are all one user's.
 *
 * An outermost namespace root owns (a container runtime's, one per
 * container) is charged as the host uid its ids map to: charging all of
 * them to root would let one container take every other container's
 * share, and charging each namespace as a user would let anyone who can
 * have a setuid helper create namespaces take a share per namespace.
 */
u32 rroce_charged_uid(void)
{
	struct user_namespace *ns = current_user_ns();

	if (ns == &init_user_ns)
		return from_kuid(&init_user_ns, current_euid());
	while (ns->parent && ns->parent != &init_user_ns)
		ns = ns->parent;
	if (uid_eq(ns->owner, GLOBAL_ROOT_UID))
		return rroce_root_owned_ns_uid(ns);
	return from_kuid(&init_user_ns, ns->owner);
}
