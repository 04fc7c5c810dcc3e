// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel consumers' verbs on one RDMA device, as ULPs use them: which QP
 * states take posts, fast registration with its error cases, and shared
 * receive queues (posting, the limit event, resizing, the last-WQE event a
 * drain waits for), over RC QPs connected to each other through the
 * device's own IPv4 GID; address handles created and destroyed in atomic
 * context, as rdma_create_ah without RDMA_CREATE_AH_SLEEPABLE allows.
 * Loading the module runs the checks and logs one KTAP-like line per check
 * ("rroce_kverbs_test: ok N what" or "not ok N what: got X") and a
 * summary; test_kverbs.sh reads them. The module stays loaded until removed
 * and holds nothing by then.
 */
#include <linux/module.h>
#include <linux/completion.h>
#include <linux/debug_locks.h>
#include <linux/delay.h>
#include <linux/scatterlist.h>
#include <linux/gfp.h>
#include <linux/netdevice.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/etherdevice.h>
#include <net/net_namespace.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>

static char *netdev = "eth0";
module_param(netdev, charp, 0444);
MODULE_PARM_DESC(netdev, "network interface whose RDMA device to test");
static char *other = "";
module_param(other, charp, 0444);
MODULE_PARM_DESC(other, "network interface of a second RDMA device, whose address handles the first must refuse");

#define PAGES 4
#define BUF_BYTES (PAGES * PAGE_SIZE)

static int checks, failures;

static void report(bool ok, const char *what, long detail)
{
	checks++;
	if (ok) {
		pr_info("rroce_kverbs_test: ok %d %s\n", checks, what);
	} else {
		failures++;
		pr_info("rroce_kverbs_test: not ok %d %s: got %ld\n", checks, what, detail);
	}
}

struct end {
	struct ib_qp *qp;
	struct ib_cq *cq;
};

struct ctx {
	struct ib_device *dev;
	struct ib_pd *pd;
	int gid_index;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
	struct end a, b;
	/* Pages the fast-registration MR maps, and a local buffer for the peer. */
	struct page *pages;
	void *local;
	u64 local_dma;
};

static int find_ipv4_gid(struct ctx *c)
{
	const struct ib_gid_attr *attr;
	int i;

	for (i = 0; i < c->dev->port_data[1].immutable.gid_tbl_len; i++) {
		attr = rdma_get_gid_attr(c->dev, 1, i);
		if (IS_ERR(attr))
			continue;
		if (attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		    ipv6_addr_v4mapped((struct in6_addr *)attr->gid.raw)) {
			c->gid_index = i;
			c->gid = attr->gid;
			if (attr->ndev)
				ether_addr_copy(c->mac, attr->ndev->dev_addr);
			rdma_put_gid_attr(attr);
			return 0;
		}
		rdma_put_gid_attr(attr);
	}
	return -ENOENT;
}

static void end_destroy(struct end *e)
{
	if (e->qp)
		ib_destroy_qp(e->qp);
	if (e->cq)
		ib_free_cq(e->cq);
	e->qp = NULL;
	e->cq = NULL;
}

static atomic_t srq_limit_events, last_wqe_events;

static void srq_event(struct ib_event *ev, void *context)
{
	if (ev->event == IB_EVENT_SRQ_LIMIT_REACHED)
		atomic_inc(&srq_limit_events);
}

static void qp_event(struct ib_event *ev, void *context)
{
	if (ev->event == IB_EVENT_QP_LAST_WQE_REACHED)
		atomic_inc(&last_wqe_events);
}

/* An RC QP with its own CQ, receiving from its own queue or from `srq`. */
static int end_create_on(struct ctx *c, struct end *e, struct ib_srq *srq)
{
	struct ib_qp_init_attr init = {
		.qp_type = IB_QPT_RC,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 16, .max_recv_wr = srq ? 0 : 16, .max_send_sge = 2, .max_recv_sge = srq ? 0 : 2 },
		.srq = srq,
		.event_handler = qp_event,
	};

	e->cq = ib_alloc_cq(c->dev, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(e->cq)) {
		int err = PTR_ERR(e->cq);

		e->cq = NULL;
		return err;
	}
	init.send_cq = e->cq;
	init.recv_cq = e->cq;
	e->qp = ib_create_qp(c->pd, &init);
	if (IS_ERR(e->qp)) {
		int err = PTR_ERR(e->qp);

		e->qp = NULL;
		return err;
	}
	return 0;
}

static int end_create(struct ctx *c, struct end *e)
{
	return end_create_on(c, e, NULL);
}

static int connect_to(struct ctx *c, struct ib_qp *qp, u32 dest)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC,
	};
	int err;

	err = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = dest;
	attr.max_dest_rd_atomic = 4;
	attr.min_rnr_timer = 12;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.ah_flags = IB_AH_GRH;
	attr.ah_attr.grh.dgid = c->gid;
	attr.ah_attr.grh.sgid_index = c->gid_index;
	attr.ah_attr.grh.hop_limit = 64;
	ether_addr_copy(attr.ah_attr.roce.dmac, c->mac);
	err = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN |
			   IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 4;
	return ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			    IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC);
}

/* A fresh pair of connected QPs: a (owns the MR) and b (its peer, receiving from srq if given). */
static int pair_up_on(struct ctx *c, struct ib_srq *srq)
{
	int err;

	end_destroy(&c->a);
	end_destroy(&c->b);
	err = end_create(c, &c->a);
	if (!err)
		err = end_create_on(c, &c->b, srq);
	if (!err)
		err = connect_to(c, c->a.qp, c->b.qp->qp_num);
	if (!err)
		err = connect_to(c, c->b.qp, c->a.qp->qp_num);
	return err;
}

static int pair_up(struct ctx *c)
{
	return pair_up_on(c, NULL);
}

/* pair_up, reported as a failed check if it fails. */
static bool fresh_pair(struct ctx *c)
{
	int err = pair_up(c);

	if (err)
		report(false, "two connected RC QPs", err);
	return !err;
}

/* Polls for one completion (5 s at most); status -1 on a timeout. */
static struct ib_wc poll_one(struct end *e)
{
	struct ib_wc wc = { .status = -1 };
	int i;

	for (i = 0; i < 5000; i++) {
		if (ib_poll_cq(e->cq, 1, &wc) == 1)
			return wc;
		msleep(1);
	}
	wc.status = -1;
	return wc;
}

static int post_reg(struct end *e, struct ib_mr *mr, u32 key, int access)
{
	struct ib_reg_wr wr = {
		.wr = { .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED, .wr_id = 1 },
		.mr = mr,
		.key = key,
		.access = access,
	};

	return ib_post_send(e->qp, &wr.wr, NULL);
}

static int post_inv(struct end *e, u32 key)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV, .send_flags = IB_SEND_SIGNALED, .wr_id = 2,
		.ex.invalidate_rkey = key,
	};

	return ib_post_send(e->qp, &wr, NULL);
}

static int post_rdma(struct ctx *c, struct end *e, enum ib_wr_opcode op, u64 addr, u32 rkey, u32 len)
{
	struct ib_sge sge = { .addr = c->local_dma, .length = len, .lkey = c->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .opcode = op, .send_flags = IB_SEND_SIGNALED, .wr_id = 3, .sg_list = &sge, .num_sge = 1 },
		.remote_addr = addr,
		.rkey = rkey,
	};

	return ib_post_send(e->qp, &wr.wr, NULL);
}

static int post_send_inv(struct ctx *c, struct end *e, u32 inv)
{
	struct ib_sge sge = { .addr = c->local_dma, .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr wr = {
		.opcode = IB_WR_SEND_WITH_INV, .send_flags = IB_SEND_SIGNALED, .wr_id = 4,
		.sg_list = &sge, .num_sge = 1, .ex.invalidate_rkey = inv,
	};

	return ib_post_send(e->qp, &wr, NULL);
}

/* A FETCH_ADD of 1 at addr, the value found into the local buffer. */
static int post_fetch_add(struct ctx *c, struct end *e, u64 addr, u32 rkey)
{
	struct ib_sge sge = { .addr = c->local_dma, .length = 8, .lkey = c->pd->local_dma_lkey };
	struct ib_atomic_wr wr = {
		.wr = { .opcode = IB_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IB_SEND_SIGNALED, .wr_id = 7,
			.sg_list = &sge, .num_sge = 1 },
		.remote_addr = addr,
		.compare_add = 1,
		.rkey = rkey,
	};

	return ib_post_send(e->qp, &wr.wr, NULL);
}

/* A receive into the second half of the local buffer. */
static int post_recv(struct ctx *c, struct end *e)
{
	struct ib_sge sge = { .addr = c->local_dma + PAGE_SIZE, .length = 256, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(e->qp, &wr, NULL);
}

/* A SEND of 64 bytes of `fill` from the start of the local buffer. */
static int post_send(struct ctx *c, struct end *e, u8 fill)
{
	struct ib_sge sge = { .addr = c->local_dma, .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr wr = { .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED, .wr_id = 6,
				 .sg_list = &sge, .num_sge = 1 };

	memset(c->local, fill, 64);
	return ib_post_send(e->qp, &wr, NULL);
}

/* Receive `slot` of an SRQ: 256 bytes at PAGE_SIZE + 256 * (slot % 8) of the local buffer. */
static int post_srq_slot(struct ctx *c, struct ib_srq *srq, int slot)
{
	struct ib_sge sge = { .addr = c->local_dma + PAGE_SIZE + 256 * (slot % 8), .length = 256,
			      .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr wr = { .wr_id = 100 + slot, .sg_list = &sge, .num_sge = 1 };

	return ib_post_srq_recv(srq, &wr, NULL);
}

/* b (on `srq`) receives a SEND of `fill` from a: its receive completion. */
static struct ib_wc srq_round(struct ctx *c, u8 fill)
{
	struct ib_wc wc;

	post_send(c, &c->a, fill);
	wc = poll_one(&c->b);
	poll_one(&c->a);
	return wc;
}

static void run_srq(struct ctx *c)
{
	struct ib_srq_init_attr init = {
		.event_handler = srq_event,
		.attr = { .max_wr = 8, .max_sge = 1 },
		.srq_type = IB_SRQT_BASIC,
	};
	struct ib_srq_attr attr = {};
	struct ib_sge sges[2] = {};
	struct ib_recv_wr two = { .wr_id = 1, .sg_list = sges, .num_sge = 2 };
	u8 *rx = (u8 *)c->local + PAGE_SIZE;
	struct ib_srq *srq;
	struct ib_wc wc;
	int i, n, ok;

	srq = ib_create_srq(c->pd, &init);
	report(!IS_ERR(srq), "a kernel consumer creates an SRQ", IS_ERR(srq) ? PTR_ERR(srq) : 0);
	if (IS_ERR(srq))
		return;
	n = pair_up_on(c, srq);
	report(!n, "an RC QP receiving from the SRQ, connected", n);
	if (n)
		goto out;
	/* Posting may come from atomic context (completion handlers). */
	local_bh_disable();
	for (i = 0, n = 0; i < 4 && !n; i++)
		n = post_srq_slot(c, srq, i);
	local_bh_enable();
	report(!n, "post_srq_recv takes 4 receives, with bottom halves off", n);
	n = ib_post_srq_recv(srq, &two, NULL);
	report(n == -EINVAL, "a receive with more SGEs than the SRQ's max_sge is refused", n);
	for (i = 0, ok = 1; i < 3; i++) {
		memset(rx, 0, 8 * 256);
		wc = srq_round(c, 0x10 + i);
		ok &= wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RECV && wc.wr_id == 100 + i &&
		      wc.byte_len == 64 && wc.qp == c->b.qp && rx[256 * i] == 0x10 + i && rx[256 * i + 63] == 0x10 + i;
	}
	report(ok, "three SENDs land in the SRQ's receives in order, with their wr_id, length and QP", wc.status);

	/* The limit event: armed at 2, it fires when a receive leaves fewer. */
	post_srq_slot(c, srq, 4);
	post_srq_slot(c, srq, 5);
	attr.srq_limit = 2;
	n = ib_modify_srq(srq, &attr, IB_SRQ_LIMIT);
	atomic_set(&srq_limit_events, 0);
	wc = srq_round(c, 0x20);
	report(!n && wc.wr_id == 103 && atomic_read(&srq_limit_events) == 0,
	       "with the limit armed at 2, a receive leaving 2 posted raises no event", atomic_read(&srq_limit_events));
	wc = srq_round(c, 0x21);
	report(wc.wr_id == 104 && atomic_read(&srq_limit_events) == 1,
	       "the receive leaving 1 posted raises IB_EVENT_SRQ_LIMIT_REACHED once", atomic_read(&srq_limit_events));

	/* Resizing keeps the posted receive and makes room for more. */
	memset(&attr, 0, sizeof(attr));
	attr.max_wr = 32;
	n = ib_modify_srq(srq, &attr, IB_SRQ_MAX_WR);
	memset(&attr, 0, sizeof(attr));
	ib_query_srq(srq, &attr);
	report(!n && attr.max_wr >= 32, "an SRQ resized from 8 to 32 receives", n ? n : attr.max_wr);
	for (i = 6, n = 0; i < 26 && !n; i++)
		n = post_srq_slot(c, srq, i);
	report(!n, "the resized SRQ takes 20 more receives than the 1 still posted", n);
	wc = srq_round(c, 0x30);
	report(wc.status == IB_WC_SUCCESS && wc.wr_id == 105,
	       "the receive posted before the resize is used first", wc.status == IB_WC_SUCCESS ? wc.wr_id : wc.status);

	/* The error state: the QP reports its last WQE; the SRQ keeps its receives. */
	atomic_set(&last_wqe_events, 0);
	{
		struct ib_qp_attr err = { .qp_state = IB_QPS_ERR };

		n = ib_modify_qp(c->b.qp, &err, IB_QP_STATE);
	}
	report(!n && atomic_read(&last_wqe_events) == 1,
	       "a QP on an SRQ moved to ERR raises IB_EVENT_QP_LAST_WQE_REACHED once", atomic_read(&last_wqe_events));
	n = pair_up_on(c, srq);
	wc = srq_round(c, 0x40);
	report(!n && wc.status == IB_WC_SUCCESS && wc.wr_id == 106,
	       "a new QP on the SRQ receives into the next receive posted (none was flushed)",
	       n ? n : (wc.status == IB_WC_SUCCESS ? wc.wr_id : wc.status));
out:
	end_destroy(&c->a);
	end_destroy(&c->b);
	ib_destroy_srq(srq);
}

/* Maps the MR's pages with sg_nents entries of one page each, in order or reversed. */
static int map_pages(struct ctx *c, struct ib_mr *mr, struct scatterlist *sg, int nents, bool reverse)
{
	int i, n;

	sg_init_table(sg, nents);
	for (i = 0; i < nents; i++)
		sg_set_page(&sg[i], c->pages + (reverse ? PAGES - 1 - i % PAGES : i % PAGES), PAGE_SIZE, 0);
	n = ib_dma_map_sg(c->dev, sg, nents, DMA_BIDIRECTIONAL);
	if (n != nents)
		return -EIO;
	n = ib_map_mr_sg(mr, sg, nents, NULL, PAGE_SIZE);
	ib_dma_unmap_sg(c->dev, sg, nents, DMA_BIDIRECTIONAL);
	return n;
}

/*
 * An address handle to the device's own GID, created and destroyed without
 * RDMA_CREATE_AH_SLEEPABLE, as a kernel consumer may in atomic context.
 */
static int ah_round_trip(struct ctx *c)
{
	struct rdma_ah_attr attr = { .type = RDMA_AH_ATTR_TYPE_ROCE };
	struct ib_ah *ah;

	rdma_ah_set_port_num(&attr, 1);
	rdma_ah_set_grh(&attr, &c->gid, 0, c->gid_index, 64, 0);
	memcpy(attr.roce.dmac, c->mac, ETH_ALEN);
	ah = rdma_create_ah(c->pd, &attr, 0);
	if (IS_ERR(ah))
		return PTR_ERR(ah);
	rdma_destroy_ah(ah, 0);
	return 0;
}

struct ah_timer {
	struct timer_list timer;
	struct ctx *c;
	int err;
	struct completion done;
};

static void ah_timer_fn(struct timer_list *t)
{
	struct ah_timer *at = timer_container_of(at, t, timer);

	at->err = ah_round_trip(at->c);
	complete(&at->done);
}

/* Address handles in softirq (a timer) and with interrupts off; lockdep,
 * where the kernel has it, must find nothing to report about either. */
static void run_ah_atomic(struct ctx *c)
{
	static DEFINE_SPINLOCK(consumer_lock);
	struct ah_timer at = { .c = c, .err = -EINPROGRESS };
	bool locks_ok = debug_locks;
	unsigned long flags;
	int err;

	init_completion(&at.done);
	timer_setup_on_stack(&at.timer, ah_timer_fn, 0);
	mod_timer(&at.timer, jiffies + 1);
	wait_for_completion(&at.done);
	timer_delete_sync(&at.timer);
	timer_destroy_on_stack(&at.timer);
	report(at.err == 0, "an address handle is created and destroyed in softirq", at.err);

	spin_lock_irqsave(&consumer_lock, flags);
	err = ah_round_trip(c);
	spin_unlock_irqrestore(&consumer_lock, flags);
	report(err == 0, "an address handle is created and destroyed with interrupts off", err);

	report(!locks_ok || debug_locks, "lockdep reports nothing about them", debug_locks);
}

/* The device behind interface `name`, with a reference; NULL if none. */
static struct ib_device *device_of(const char *name)
{
	struct net_device *ndev = dev_get_by_name(&init_net, name);
	struct ib_device *dev;

	if (!ndev)
		return NULL;
	dev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	dev_put(ndev);
	return dev;
}

/* An AH from c's device to its own IPv4 GID. */
static struct ib_ah *ah_to_self(struct ctx *c)
{
	struct rdma_ah_attr attr = { .type = RDMA_AH_ATTR_TYPE_ROCE };

	rdma_ah_set_port_num(&attr, 1);
	rdma_ah_set_grh(&attr, &c->gid, 0, c->gid_index, 64, 0);
	memcpy(attr.roce.dmac, c->mac, ETH_ALEN);
	return rdma_create_ah(c->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

/* A UD QP of c's device in RTS, sending and receiving through cq. */
static struct ib_qp *ud_qp(struct ctx *c, struct ib_cq *cq)
{
	struct ib_qp_init_attr init = {
		.qp_type = IB_QPT_UD,
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.send_cq = cq,
		.recv_cq = cq,
	};
	struct ib_qp_attr attr = { .qp_state = IB_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
	struct ib_qp *qp = ib_create_qp(c->pd, &init);
	int err;

	if (IS_ERR(qp))
		return qp;
	err = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	attr.qp_state = IB_QPS_RTR;
	if (!err)
		err = ib_modify_qp(qp, &attr, IB_QP_STATE);
	attr.qp_state = IB_QPS_RTS;
	if (!err)
		err = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN);
	if (err) {
		ib_destroy_qp(qp);
		return ERR_PTR(err);
	}
	return qp;
}

static int post_ud(struct ctx *c, struct ib_qp *qp, struct ib_ah *ah)
{
	struct ib_sge sge = { .addr = c->local_dma, .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_ud_wr wr = {
		.wr = { .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED, .wr_id = 8,
			.sg_list = &sge, .num_sge = 1 },
		.ah = ah,
		.remote_qpn = qp->qp_num,
		.remote_qkey = 0x11111111,
	};

	return ib_post_send(qp, &wr.wr, NULL);
}

/*
 * Objects of another device, which a kernel consumer may hand in (the core
 * does not check): a QP whose CQ is another device's is refused; a UD work
 * request whose AH is another device's is refused when posted, one whose AH
 * is the QP's own device's is taken.
 */
static void run_foreign_objects(struct ctx *c)
{
	struct ctx o = {};
	struct ib_ah *own = NULL, *foreign = NULL;
	struct ib_qp *qp = NULL, *mixed;
	struct ib_cq *cq, *ocq;
	struct ib_wc wc = { .status = -1 };
	int err, i;

	o.dev = device_of(other);
	if (!o.dev || o.dev == c->dev) {
		report(false, "a second RDMA device on the other interface", -ENODEV);
		goto put;
	}
	o.pd = ib_alloc_pd(o.dev, 0);
	if (IS_ERR(o.pd)) {
		report(false, "a PD of the second device", PTR_ERR(o.pd));
		o.pd = NULL;
		goto put;
	}
	err = find_ipv4_gid(&o);
	foreign = err ? ERR_PTR(err) : ah_to_self(&o);
	own = ah_to_self(c);
	cq = ib_alloc_cq(c->dev, NULL, 8, 0, IB_POLL_DIRECT);
	if (IS_ERR(foreign) || IS_ERR(own) || IS_ERR(cq)) {
		report(false, "an AH on each device and a CQ", IS_ERR(foreign) ? PTR_ERR(foreign) :
		       IS_ERR(own) ? PTR_ERR(own) : PTR_ERR(cq));
		goto free;
	}
	ocq = ib_alloc_cq(o.dev, NULL, 8, 0, IB_POLL_DIRECT);
	if (!IS_ERR(ocq)) {
		struct ib_qp_init_attr init = {
			.qp_type = IB_QPT_UD,
			.sq_sig_type = IB_SIGNAL_ALL_WR,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
			.send_cq = cq,
			.recv_cq = ocq,
		};

		mixed = ib_create_qp(c->pd, &init);
		report(IS_ERR(mixed) && PTR_ERR(mixed) == -EINVAL,
		       "a QP whose receive CQ is another RDMA device's is refused", IS_ERR(mixed) ? PTR_ERR(mixed) : 0);
		if (!IS_ERR(mixed))
			ib_destroy_qp(mixed);
		ib_free_cq(ocq);
	} else {
		report(false, "a CQ of the second device", PTR_ERR(ocq));
	}
	qp = ud_qp(c, cq);
	if (IS_ERR(qp)) {
		report(false, "a UD QP in RTS", PTR_ERR(qp));
		qp = NULL;
		goto free;
	}
	err = post_ud(c, qp, foreign);
	report(err == -EINVAL, "a UD send with an AH of another RDMA device is refused at post time", err);
	err = post_ud(c, qp, own);
	for (i = 0; !err && i < 5000 && ib_poll_cq(cq, 1, &wc) != 1; i++)
		msleep(1);
	report(!err && wc.status == IB_WC_SUCCESS && wc.wr_id == 8,
	       "a UD send with an AH of the QP's own device is taken and completes", err ? err : wc.status);
free:
	if (qp)
		ib_destroy_qp(qp);
	if (!IS_ERR_OR_NULL(cq))
		ib_free_cq(cq);
	if (!IS_ERR_OR_NULL(own))
		rdma_destroy_ah(own, RDMA_DESTROY_AH_SLEEPABLE);
	if (!IS_ERR_OR_NULL(foreign))
		rdma_destroy_ah(foreign, RDMA_DESTROY_AH_SLEEPABLE);
	ib_dealloc_pd(o.pd);
put:
	if (o.dev)
		ib_device_put(o.dev);
}

static void run(struct ctx *c)
{
	const int rights = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	struct ib_qp_attr to_err = { .qp_state = IB_QPS_ERR };
	u32 max = c->dev->attrs.max_fast_reg_page_list_len;
	struct scatterlist sg[PAGES * 2];
	u8 *mem = page_address(c->pages);
	struct ib_mr *mr, *big, *other;
	struct ib_wc wc, wc2;
	u64 iova;
	u32 old;
	int n;

	/* Posting rules: sends from RTS on, receives from INIT on. */
	end_destroy(&c->a);
	if (end_create(c, &c->a) == 0) {
		struct ib_qp_attr init = { .qp_state = IB_QPS_INIT, .port_num = 1 };

		n = post_recv(c, &c->a);
		report(n == -EINVAL, "a receive posted in RESET is refused", n);
		n = post_rdma(c, &c->a, IB_WR_RDMA_WRITE, 0, 0, 8);
		report(n == -EINVAL, "a send posted in RESET is refused", n);
		n = ib_modify_qp(c->a.qp, &init, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS);
		report(n == 0 && post_recv(c, &c->a) == 0, "a receive posted in INIT is taken", n);
		n = post_rdma(c, &c->a, IB_WR_RDMA_WRITE, 0, 0, 8);
		report(n == -EINVAL, "a send posted in INIT is refused, not held", n);
	}
	end_destroy(&c->a);

	report(c->dev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS,
	       "the device advertises memory management extensions", c->dev->attrs.device_cap_flags);
	big = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, max + 1);
	report(IS_ERR(big), "alloc_mr with a page list longer than max_fast_reg_page_list_len fails",
	       IS_ERR(big) ? PTR_ERR(big) : 0);
	if (!IS_ERR(big))
		ib_dereg_mr(big);

	mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, PAGES);
	report(!IS_ERR(mr), "alloc_mr for 4 pages", IS_ERR(mr) ? PTR_ERR(mr) : 0);
	if (IS_ERR(mr))
		return;
	n = map_pages(c, mr, sg, PAGES * 2, false);
	report(n == PAGES, "map_mr_sg of 8 pages into a 4-page MR maps the first 4", n);
	n = map_pages(c, mr, sg, PAGES, false);
	report(n == PAGES && mr->length == BUF_BYTES, "map_mr_sg of 4 pages maps all 16 KiB", n);

	if (!fresh_pair(c))
		goto out;
	/* Registration, then WRITE and READ through the key from the peer. */
	old = mr->rkey;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	report(post_reg(&c->a, mr, mr->rkey, rights) == 0, "REG_MR is posted", 0);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_REG_MR, "REG_MR completes with IB_WC_REG_MR",
	       wc.status == IB_WC_SUCCESS ? wc.opcode : wc.status);
	/* The registration keeps the iova of its time; a later map changes mr->iova. */
	iova = mr->iova;
	memset(mem, 0, BUF_BYTES);
	memset(c->local, 0x5a, 8000);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, iova + 100, mr->rkey, 8000);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_SUCCESS && mem[100] == 0x5a && mem[8099] == 0x5a && mem[8100] == 0 &&
	       mem[99] == 0, "an RDMA WRITE through the new key lands across the mapped pages", wc.status);
	/* A map while the MR is valid takes effect at the next REG_MR only. */
	n = map_pages(c, mr, sg, PAGES, true);
	memset(mem, 0, BUF_BYTES);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, iova, mr->rkey, 8);
	wc = poll_one(&c->b);
	report(n == PAGES && wc.status == IB_WC_SUCCESS && mem[0] == 0x5a && mem[3 * PAGE_SIZE] == 0,
	       "a new map_mr_sg leaves the valid registration's pages in place", wc.status);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, iova + 100, old, 8);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_REM_ACCESS_ERR, "the key from before the registration is refused", wc.status);

	if (!fresh_pair(c))
		goto out;
	memset(c->local, 0, 8000);
	mem[BUF_BYTES - 1] = 0x77;
	post_rdma(c, &c->b, IB_WR_RDMA_READ, iova + BUF_BYTES - 4000, mr->rkey, 4000);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_SUCCESS && ((u8 *)c->local)[3999] == 0x77,
	       "an RDMA READ through the key returns the pages' bytes", wc.status);
	post_rdma(c, &c->b, IB_WR_RDMA_READ, iova + BUF_BYTES - 4000, mr->rkey, 4001);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_REM_ACCESS_ERR, "a READ one byte past the registered length is refused",
	       wc.status);

	/* REG_MR of a valid MR, LOCAL_INV, and a key after invalidation. */
	if (!fresh_pair(c))
		goto out;
	post_reg(&c->a, mr, mr->rkey, rights);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_LOC_QP_OP_ERR, "REG_MR of an MR that is still valid fails (LOC_QP_OP_ERR)",
	       wc.status);
	if (!fresh_pair(c))
		goto out;
	post_inv(&c->a, mr->rkey);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_LOCAL_INV, "LOCAL_INV completes with IB_WC_LOCAL_INV",
	       wc.status == IB_WC_SUCCESS ? wc.opcode : wc.status);
	memset(mem, 0, BUF_BYTES);
	memset(c->local, 0x5a, 8);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_REM_ACCESS_ERR && !memchr_inv(mem, 0, BUF_BYTES),
	       "an RDMA WRITE through an invalidated key is refused and leaves the pages alone", wc.status);
	if (!fresh_pair(c))
		goto out;
	post_inv(&c->a, mr->rkey ^ 0x80);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_LOC_QP_OP_ERR, "LOCAL_INV of a key the MR does not have fails", wc.status);

	/* SEND with Invalidate: the receiver learns the key, which stops working. */
	if (!fresh_pair(c))
		goto out;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	post_reg(&c->a, mr, mr->rkey, rights);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_SUCCESS, "REG_MR of the invalidated MR under a new key", wc.status);
	memset(mem, 0, BUF_BYTES);
	memset(c->local, 0x5a, 8);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_SUCCESS && mem[3 * PAGE_SIZE] == 0x5a && mem[0] == 0,
	       "the registration uses the pages mapped last (reversed)", wc.status);
	post_recv(c, &c->a);
	post_send_inv(c, &c->b, mr->rkey);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_RECV && (wc.wc_flags & IB_WC_WITH_INVALIDATE) &&
	       wc.ex.invalidate_rkey == mr->rkey,
	       "the receive of a SEND with Invalidate carries IB_WC_WITH_INVALIDATE and the key", wc.status);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_SEND, "the SEND with Invalidate completes",
	       wc.status);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_REM_ACCESS_ERR, "the key a SEND with Invalidate named is refused afterwards",
	       wc.status);

	/*
	 * A REG_MR flushed in the error state registers nothing, and the MR's
	 * next REG_MR, of a new map, registers that map: the flushed one's
	 * number, never used, neither registers later nor holds up the ones
	 * after it.
	 */
	if (!fresh_pair(c))
		goto out;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	n = ib_modify_qp(c->a.qp, &to_err, IB_QP_STATE);
	if (!n)
		n = post_reg(&c->a, mr, mr->rkey, rights);
	wc = poll_one(&c->a);
	report(n == 0 && wc.status == IB_WC_WR_FLUSH_ERR, "a REG_MR posted in the error state is flushed",
	       n ? n : wc.status);
	if (!fresh_pair(c))
		goto out;
	memset(mem, 0, BUF_BYTES);
	memset(c->local, 0x5a, 8);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_REM_ACCESS_ERR && !memchr_inv(mem, 0, BUF_BYTES),
	       "the key of the flushed REG_MR is refused", wc.status);
	n = map_pages(c, mr, sg, PAGES, false);
	if (!fresh_pair(c))
		goto out;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	post_reg(&c->a, mr, mr->rkey, rights);
	wc = poll_one(&c->a);
	post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
	wc2 = poll_one(&c->b);
	report(n == PAGES && wc.status == IB_WC_SUCCESS && wc2.status == IB_WC_SUCCESS && mem[0] == 0x5a &&
	       mem[3 * PAGE_SIZE] == 0, "the REG_MR after a flushed one registers the pages mapped since",
	       wc.status != IB_WC_SUCCESS ? wc.status : wc2.status);

	/* REG_MRs of one MR queued together each register, in order. */
	if (!fresh_pair(c))
		goto out;
	{
		u32 k0 = mr->rkey, k1 = ib_inc_rkey(k0), k2 = ib_inc_rkey(k1);
		struct ib_send_wr inv0 = { .opcode = IB_WR_LOCAL_INV, .wr_id = 2, .ex.invalidate_rkey = k0 };
		struct ib_send_wr inv1 = { .opcode = IB_WR_LOCAL_INV, .wr_id = 2, .ex.invalidate_rkey = k1 };
		struct ib_reg_wr reg1 = { .wr = { .opcode = IB_WR_REG_MR, .wr_id = 1, .next = &inv1 },
					  .mr = mr, .key = k1, .access = rights };
		struct ib_reg_wr reg2 = { .wr = { .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED,
						  .wr_id = 1 }, .mr = mr, .key = k2, .access = rights };

		inv0.next = &reg1.wr;
		inv1.next = &reg2.wr;
		ib_update_fast_reg_key(mr, k2);
		n = ib_post_send(c->a.qp, &inv0, NULL);
		wc = poll_one(&c->a);
		memset(mem, 0, BUF_BYTES);
		post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, k2, 8);
		wc2 = poll_one(&c->b);
		report(n == 0 && wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_REG_MR &&
		       wc2.status == IB_WC_SUCCESS && mem[0] == 0x5a,
		       "LOCAL_INV, REG_MR, LOCAL_INV, REG_MR of one MR in one post: the last key works",
		       n ? n : wc.status != IB_WC_SUCCESS ? wc.status : wc2.status);
		post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, k1, 8);
		wc2 = poll_one(&c->b);
		report(wc2.status == IB_WC_REM_ACCESS_ERR, "and the key between them is refused", wc2.status);
	}

	/* A SEND with Invalidate naming a key that cannot be invalidated. */
	if (!fresh_pair(c))
		goto out;
	post_recv(c, &c->a);
	post_send_inv(c, &c->b, c->pd->local_dma_lkey);
	wc = poll_one(&c->a);
	report(wc.status == IB_WC_REM_INV_REQ_ERR, "the receive of a SEND invalidating a DMA MR's key fails",
	       wc.status);
	wc = poll_one(&c->b);
	report(wc.status == IB_WC_REM_INV_REQ_ERR, "and its sender gets REM_INV_REQ_ERR", wc.status);

	/* REG_MR naming another MR's key index is refused when posted. */
	other = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, PAGES);
	if (!IS_ERR(other)) {
		if (pair_up(c) == 0)
			report(post_reg(&c->a, mr, other->rkey, rights) == -EINVAL,
			       "REG_MR with a key of another MR is refused at post time", 0);
		/*
		 * A never-registered MR invalidates under the key alloc_mr gave
		 * it (as in rdma_rxe), and only that MR: the registered one's
		 * key still works, and a peer's invalidation of that key then
		 * reports that key, which stops working.
		 */
		if (fresh_pair(c)) {
			post_inv(&c->a, other->rkey);
			wc = poll_one(&c->a);
			memset(mem, 0, BUF_BYTES);
			memset(c->local, 0x5a, 8);
			post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
			wc2 = poll_one(&c->b);
			report(wc.status == IB_WC_SUCCESS && wc.opcode == IB_WC_LOCAL_INV && wc.wr_id == 2 &&
			       wc2.status == IB_WC_SUCCESS && mem[0] == 0x5a,
			       "LOCAL_INV of a never-registered MR succeeds and leaves another MR's key working",
			       wc.status != IB_WC_SUCCESS ? wc.status : wc2.status);
			post_recv(c, &c->a);
			post_send_inv(c, &c->b, mr->rkey);
			wc = poll_one(&c->a);
			wc2 = poll_one(&c->b);
			report(wc.status == IB_WC_SUCCESS && (wc.wc_flags & IB_WC_WITH_INVALIDATE) &&
			       wc.ex.invalidate_rkey == mr->rkey && wc.ex.invalidate_rkey != other->rkey &&
			       wc2.status == IB_WC_SUCCESS,
			       "then a SEND with Invalidate of the registered MR's key reports that key",
			       wc.status);
			memset(mem, 0, BUF_BYTES);
			post_rdma(c, &c->b, IB_WR_RDMA_WRITE, mr->iova, mr->rkey, 8);
			wc2 = poll_one(&c->b);
			report(wc2.status == IB_WC_REM_ACCESS_ERR && !memchr_inv(mem, 0, BUF_BYTES),
			       "and that key is refused afterwards", wc2.status);
		}
		ib_dereg_mr(other);
	}

	/*
	 * An atomic that passes every check and fails in memory: registered
	 * at an 8-byte aligned iova, the region starts 4 bytes into its page.
	 * The responder took a resource for it before it failed; only the NAK
	 * may answer it, not an acknowledgement as if it had been done.
	 */
	other = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, 1);
	if (!IS_ERR(other)) {
		if (fresh_pair(c)) {
			sg_init_table(sg, 1);
			sg_set_page(&sg[0], c->pages, 64, 4);
			n = ib_dma_map_sg(c->dev, sg, 1, DMA_BIDIRECTIONAL) == 1 ? 0 : -EIO;
			if (!n) {
				n = ib_map_mr_sg(other, sg, 1, NULL, PAGE_SIZE);
				ib_dma_unmap_sg(c->dev, sg, 1, DMA_BIDIRECTIONAL);
			}
			other->iova = 0x10000;
			ib_update_fast_reg_key(other, ib_inc_rkey(other->rkey));
			post_reg(&c->a, other, other->rkey, rights | IB_ACCESS_REMOTE_ATOMIC);
			wc = poll_one(&c->a);
			memset(mem, 0, 16);
			post_fetch_add(c, &c->b, 0x10000, other->rkey);
			wc2 = poll_one(&c->b);
			report(n == 1 && wc.status == IB_WC_SUCCESS && wc2.status == IB_WC_REM_INV_REQ_ERR &&
			       !memchr_inv(mem, 0, 16),
			       "a FETCH_ADD to memory not 8-byte aligned behind an aligned iova fails, not done", wc2.status);
		}
		ib_dereg_mr(other);
	}

	/*
	 * dereg_mr gives the pages back: a peer's WRITE through the key the
	 * MR was registered under is refused and leaves them untouched.
	 */
	other = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, PAGES);
	if (!IS_ERR(other)) {
		if (fresh_pair(c)) {
			u32 key;

			n = map_pages(c, other, sg, PAGES, false);
			ib_update_fast_reg_key(other, ib_inc_rkey(other->rkey));
			post_reg(&c->a, other, other->rkey, rights);
			wc = poll_one(&c->a);
			key = other->rkey;
			iova = other->iova;
			ib_dereg_mr(other);
			memset(mem, 0, BUF_BYTES);
			memset(c->local, 0x5a, 8);
			post_rdma(c, &c->b, IB_WR_RDMA_WRITE, iova, key, 8);
			wc2 = poll_one(&c->b);
			report(n == PAGES && wc.status == IB_WC_SUCCESS && wc2.status == IB_WC_REM_ACCESS_ERR &&
			       !memchr_inv(mem, 0, BUF_BYTES),
			       "a WRITE through a deregistered MR's key is refused and leaves its pages alone",
			       wc.status != IB_WC_SUCCESS ? wc.status : wc2.status);
		} else {
			ib_dereg_mr(other);
		}
	}
out:
	end_destroy(&c->a);
	end_destroy(&c->b);
	ib_dereg_mr(mr);
}

static int __init kverbs_test_init(void)
{
	struct ctx c = {};
	struct net_device *ndev;
	int err;

	ndev = dev_get_by_name(&init_net, netdev);
	if (!ndev)
		return -ENODEV;
	c.dev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	dev_put(ndev);
	if (!c.dev)
		return -ENODEV;
	err = find_ipv4_gid(&c);
	if (err)
		goto put_dev;
	c.pages = alloc_pages(GFP_KERNEL, get_order(BUF_BYTES));
	c.local = kzalloc(2 * PAGE_SIZE + 8192, GFP_KERNEL);
	if (!c.pages || !c.local) {
		err = -ENOMEM;
		goto free;
	}
	c.local_dma = ib_dma_map_single(c.dev, c.local, 2 * PAGE_SIZE + 8192, DMA_BIDIRECTIONAL);
	c.pd = ib_alloc_pd(c.dev, 0);
	if (IS_ERR(c.pd)) {
		err = PTR_ERR(c.pd);
		goto unmap;
	}
	run(&c);
	run_srq(&c);
	run_ah_atomic(&c);
	if (*other)
		run_foreign_objects(&c);
	pr_info("rroce_kverbs_test: done %d checks, %d failed\n", checks, failures);
	ib_dealloc_pd(c.pd);
unmap:
	ib_dma_unmap_single(c.dev, c.local_dma, 2 * PAGE_SIZE + 8192, DMA_BIDIRECTIONAL);
free:
	kfree(c.local);
	if (c.pages)
		__free_pages(c.pages, get_order(BUF_BYTES));
put_dev:
	ib_device_put(c.dev);
	return err;
}

static void __exit kverbs_test_exit(void)
{
}

module_init(kverbs_test_init);
module_exit(kverbs_test_exit);
MODULE_DESCRIPTION("rroce selftest: kernel consumers' verbs");
MODULE_LICENSE("GPL");
