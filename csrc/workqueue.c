// SPDX-License-Identifier: GPL-2.0
/* C forwarders for workqueues (declared in rroce_helpers.h). */

#include <linux/cpumask.h>
#include <linux/rcupdate.h>
#include <linux/sched/isolation.h>
#include <linux/smp.h>
#include <linux/workqueue.h>
#include "rroce_helpers.h"

struct workqueue_struct *rroce_alloc_workqueue(const char *name)
{
	/* Per-CPU and high priority: a receive lane runs on the CPU whose softirq
	 * queued it, right after it, as close as a work item gets to processing
	 * in the softirq itself (measured: 2-byte latency 15-30 % lower than on
	 * an unbound queue). */
	return alloc_workqueue("%s", WQ_PERCPU | WQ_HIGHPRI | WQ_MEM_RECLAIM, 0, name);
}

/* Runs its work in softirq on the CPU that queued it, right after the
 * softirq or system call that did (which queues with softirqs off, so the
 * work runs when they go back on): no thread wakes up, nothing sleeps. */
struct workqueue_struct *rroce_alloc_bh_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_BH | WQ_HIGHPRI | WQ_PERCPU, 0, name);
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

/* Queues work on CPU cpu (a BH queue's work then runs in that CPU's
 * softirq), or on this CPU if cpu is not online. */
bool rroce_queue_work_on(unsigned int cpu, struct workqueue_struct *wq, struct work_struct *work)
{
	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return queue_work(wq, work);
	return queue_work_on(cpu, wq, work);
}

/* The CPU the caller runs on; stable only where it cannot migrate
 * (softirq, softirqs or preemption off). */
unsigned int rroce_this_cpu(void)
{
	return raw_smp_processor_id();
}

/* Whether work spread over the CPUs may go to cpu: online, and neither
 * isolated (isolcpus=, cpuset isolated partitions) nor kept free of kernel
 * noise (nohz_full=), as unbound workqueues place theirs. The masks are
 * read under RCU (cpuset partitions change them). */
static bool rroce_cpu_for_work(unsigned int cpu)
{
	return cpu_online(cpu) &&
	       cpumask_test_cpu(cpu, housekeeping_cpumask(HK_TYPE_DOMAIN)) &&
	       cpumask_test_cpu(cpu, housekeeping_cpumask(HK_TYPE_KERNEL_NOISE));
}

/* How many CPUs work may be spread over: the online ones that are not
 * isolated; all online ones if every one is. */
unsigned int rroce_online_cpus(void)
{
	unsigned int cpu, n = 0;

	rcu_read_lock();
	for_each_online_cpu(cpu)
		n += rroce_cpu_for_work(cpu);
	rcu_read_unlock();
	return n ? n : num_online_cpus();
}

/* The i-th CPU of those rroce_online_cpus() counts, counting round. */
unsigned int rroce_spread_cpu(unsigned int i)
{
	unsigned int cpu, n = 0, k;

	rcu_read_lock();
	for_each_online_cpu(cpu)
		n += rroce_cpu_for_work(cpu);
	if (n) {
		k = i % n;
		for_each_online_cpu(cpu) {
			if (rroce_cpu_for_work(cpu) && k-- == 0) {
				rcu_read_unlock();
				return cpu;
			}
		}
	}
	rcu_read_unlock();
	/* Every CPU isolated, or the masks changed meanwhile. */
	return cpumask_local_spread(i % num_online_cpus(), NUMA_NO_NODE);
}

struct workqueue_struct *rroce_system_dfl_wq(void)
{
	return system_dfl_wq;
}

bool rroce_flush_work(struct work_struct *work)
{
	return flush_work(work);
}

/* Whether work is pending: queued, or a delayed item's timer running. */
bool rroce_work_pending(const struct work_struct *work)
{
	return work_pending(work);
}

void rroce_flush_workqueue(struct workqueue_struct *wq)
{
	flush_workqueue(wq);
}

bool rroce_cancel_delayed_work(struct delayed_work *dwork)
{
	return cancel_delayed_work(dwork);
}
