// SPDX-License-Identifier: GPL-2.0
/*
 * The trace events of include/rroce_trace.h and the wrappers the Rust driver
 * fires them through (declared in rroce_helpers.h). Each event tests its
 * static key first: off, a wrapper costs its call and that test.
 */

#define CREATE_TRACE_POINTS
#include "rroce_trace.h"
#include "rroce_helpers.h"

void rroce_trace_qp_state(const struct ib_device *dev, u32 qpn, u8 from, u8 to)
{
	trace_qp_state(dev, qpn, from, to);
}

void rroce_trace_cqe_error(const struct ib_device *dev, u32 qpn, u8 status, const char *reason)
{
	trace_cqe_error(dev, qpn, status, reason);
}

void rroce_trace_packet_drop(const struct ib_device *dev, u32 qpn, const char *reason)
{
	trace_packet_drop(dev, qpn, reason);
}

void rroce_trace_retransmit(const struct ib_device *dev, u32 qpn, u32 psn, const char *reason)
{
	trace_retransmit(dev, qpn, psn, reason);
}

void rroce_trace_cnp(const struct ib_device *dev, u32 qpn, bool sent, const char *outcome)
{
	trace_cnp(dev, qpn, sent, outcome);
}

void rroce_trace_rate(const struct ib_device *dev, u32 qpn, u64 from_kbps, u64 to_kbps)
{
	trace_rate(dev, qpn, from_kbps, to_kbps);
}
