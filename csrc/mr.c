// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for pinned user memory (umem) and fast-registration page
 * lists (declared in rroce_helpers.h).
 */

#include <rdma/ib_umem.h>
#include "rroce_helpers.h"

/*
 * A umem holds the memory of its device until rroce_umem_release():
 * ib_umem_release() reads umem->ibdev, and a release the data path let go
 * of may run from a work item after the device was unregistered.
 */
struct ib_umem *rroce_umem_get(struct ib_device *dev, unsigned long addr, size_t size, int access)
{
	struct ib_umem *umem = ib_umem_get_va(dev, addr, size, access);

	if (!IS_ERR(umem))
		get_device(&dev->dev);
	return umem;
}

void rroce_umem_release(struct ib_umem *umem)
{
	struct ib_device *dev = umem->ibdev;

	ib_umem_release(umem);
	put_device(&dev->dev);
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

bool rroce_umem_writable(const struct ib_umem *umem)
{
	return umem->writable;
}
