// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for on-demand paging regions (ib_umem_odp) and their MMU
 * notifier (declared in rroce_helpers.h).
 */

#include <linux/hmm.h>
#include <linux/mm.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include "rroce_helpers.h"

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

/* A fault sleeps, and only a context rroce_may_sleep() vouches for may
 * take one; without a preemption count it vouches for none, so every
 * access to an on-demand region would fail: such a kernel gets no ODP. */
bool rroce_odp_enabled(void)
{
	return IS_ENABLED(CONFIG_PREEMPT_COUNT);
}

/* Holds the device's memory until released, as rroce_umem_get() does:
 * ib_umem_odp_release() reads umem.ibdev. */
/*
 * Regions of base pages only: the helpers below index the page list by
 * odp->page_shift, which the core's fault path fills per PAGE_SHIFT; with
 * IB_ACCESS_HUGETLB the two differ, and an invalidation would clear another
 * page's entry than the one it unmaps. Refused here, whoever asks.
 */
struct ib_umem_odp *rroce_odp_get(struct ib_device *dev, unsigned long addr, size_t size, int access)
{
	struct ib_umem_odp *odp;

	if (access & IB_ACCESS_HUGETLB)
		return ERR_PTR(-EOPNOTSUPP);
	odp = ib_umem_odp_get(dev, addr, size, access, &rroce_odp_ops);
	if (IS_ERR(odp))
		return odp;
	if (odp->page_shift != PAGE_SHIFT) {
		ib_umem_odp_release(odp);
		return ERR_PTR(-EOPNOTSUPP);
	}
	get_device(&dev->dev);
	return odp;
}

void rroce_odp_release(struct ib_umem_odp *odp)
{
	struct ib_device *dev = odp->umem.ibdev;

	ib_umem_odp_release(odp);
	put_device(&dev->dev);
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

/*
 * Pages of the umem present now, for `rdma res`, which any user may dump:
 * read without umem_mutex (a count of the moment, the pfn list lives with
 * the umem), so a dump never holds up the owner's faults and invalidations;
 * a huge region's walk gives the CPU up. Process context.
 */
unsigned long rroce_odp_pages_mapped(struct ib_umem_odp *odp)
{
	size_t i, n = ib_umem_odp_num_pages(odp);
	unsigned long mapped = 0;

	for (i = 0; i < n; i++) {
		mapped += !!(READ_ONCE(odp->map.pfn_list[i]) & HMM_PFN_VALID);
		if ((i & 4095) == 4095)
			cond_resched();
	}
	return mapped;
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
unsigned long rroce_odp_pages_mapped(struct ib_umem_odp *odp) { return 0; }
#endif
