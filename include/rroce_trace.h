/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rroce's trace events (`rroce:*` in tracefs, perf, trace-cmd, bpftrace),
 * defined in csrc/trace.c and fired through its rroce_trace_*() wrappers,
 * which the Rust driver calls where it counts the same things. A QP number
 * of -1 is a packet dropped before its QP was known.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rroce

#if !defined(RROCE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define RROCE_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_verbs.h>

#define rroce_show_qp_state(s) __print_symbolic(s,			\
	{ IB_QPS_RESET, "RESET" }, { IB_QPS_INIT, "INIT" },		\
	{ IB_QPS_RTR, "RTR" }, { IB_QPS_RTS, "RTS" },			\
	{ IB_QPS_SQD, "SQD" }, { IB_QPS_SQE, "SQE" },			\
	{ IB_QPS_ERR, "ERR" })

TRACE_EVENT(qp_state,
	TP_PROTO(const struct ib_device *dev, u32 qpn, u8 from, u8 to),
	TP_ARGS(dev, qpn, from, to),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u8, from)
		__field(u8, to)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->from = from;
		__entry->to = to;
	),
	TP_printk("dev=%s qpn=%u %s -> %s", __get_str(dev), __entry->qpn,
		  rroce_show_qp_state(__entry->from), rroce_show_qp_state(__entry->to))
);

TRACE_EVENT(cqe_error,
	TP_PROTO(const struct ib_device *dev, u32 qpn, u8 status, const char *reason),
	TP_ARGS(dev, qpn, status, reason),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u8, status)
		__string(status_name, ib_wc_status_msg(status))
		__string(reason, reason)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->status = status;
		__assign_str(status_name);
		__assign_str(reason);
	),
	TP_printk("dev=%s qpn=%u status=%u (%s) reason=%s", __get_str(dev), __entry->qpn,
		  __entry->status, __get_str(status_name), __get_str(reason))
);

TRACE_EVENT(packet_drop,
	TP_PROTO(const struct ib_device *dev, u32 qpn, const char *reason),
	TP_ARGS(dev, qpn, reason),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(s32, qpn)
		__string(reason, reason)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn > IB_QPN_MASK ? -1 : (s32)qpn;
		__assign_str(reason);
	),
	TP_printk("dev=%s qpn=%d reason=%s", __get_str(dev), __entry->qpn, __get_str(reason))
);

TRACE_EVENT(retransmit,
	TP_PROTO(const struct ib_device *dev, u32 qpn, u32 psn, const char *reason),
	TP_ARGS(dev, qpn, psn, reason),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u32, psn)
		__string(reason, reason)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->psn = psn;
		__assign_str(reason);
	),
	TP_printk("dev=%s qpn=%u psn=%#x reason=%s", __get_str(dev), __entry->qpn, __entry->psn,
		  __get_str(reason))
);

TRACE_EVENT(cnp,
	TP_PROTO(const struct ib_device *dev, u32 qpn, bool sent, const char *outcome),
	TP_ARGS(dev, qpn, sent, outcome),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(bool, sent)
		__string(outcome, outcome)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->sent = sent;
		__assign_str(outcome);
	),
	TP_printk("dev=%s qpn=%u %s %s", __get_str(dev), __entry->qpn,
		  __entry->sent ? "sent" : "received", __get_str(outcome))
);

TRACE_EVENT(rate,
	TP_PROTO(const struct ib_device *dev, u32 qpn, u64 from_kbps, u64 to_kbps),
	TP_ARGS(dev, qpn, from_kbps, to_kbps),
	TP_STRUCT__entry(
		__string(dev, dev_name(&dev->dev))
		__field(u32, qpn)
		__field(u64, from_kbps)
		__field(u64, to_kbps)
	),
	TP_fast_assign(
		__assign_str(dev);
		__entry->qpn = qpn;
		__entry->from_kbps = from_kbps;
		__entry->to_kbps = to_kbps;
	),
	/* 0: not limited (the port's speed). */
	TP_printk("dev=%s qpn=%u kbps=%llu -> %llu", __get_str(dev), __entry->qpn,
		  __entry->from_kbps, __entry->to_kbps)
);

#endif /* RROCE_TRACE_H */

/* This header is not under include/trace/events/: define_trace.h finds it
 * through the module's include path (ccflags-y in Kbuild). */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rroce_trace
#include <trace/define_trace.h>
