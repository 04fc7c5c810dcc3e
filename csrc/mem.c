// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for copies and atomics on pinned pages and kernel consumers'
 * memory (declared in rroce_helpers.h).
 */

#include <linux/atomic.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/uaccess.h>
#include "rroce_helpers.h"

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

/* Any kernel address (an inline send's bytes, which the consumer may keep
 * on its stack); the nofault copy makes a bad one an error, not a fault. */
long rroce_copy_from_kernel(void *dst, u64 src, size_t len)
{
	return copy_from_kernel_nofault(dst, (const void *)(uintptr_t)src, len);
}

/* Virtual DMA addresses are linear-map addresses: refuse anything else, as
 * for writes. */
long rroce_copy_from_linear(void *dst, u64 src, size_t len)
{
	const void *s = (const void *)(uintptr_t)src;

	if (len == 0)
		return 0;
	if (src + len < src || !virt_addr_valid(s) || !virt_addr_valid(s + len - 1))
		return -EFAULT;
	return copy_from_kernel_nofault(dst, s, len);
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

unsigned long rroce_copy_to_user(u64 dst, const void *src, size_t len)
{
	return copy_to_user(u64_to_user_ptr(dst), src, len);
}
