// SPDX-License-Identifier: GPL-2.0
//! Per-QP counters, shown by `rdma statistic qp show` once a QP is bound to
//! a counter object (`rdma statistic qp bind`, or every new QP in auto
//! mode). Each QP counts the port counters of [`PER_QP`] in a block of its
//! own as well as the port does, so the data path touches no cache line
//! that other QPs count in; a counter object sums its QPs' blocks when the
//! core asks (`proto::qp_stats` has the accounting).

use crate::counters::{Counter, Counters, PER_QP, PER_QP_COUNT};
use crate::proto::qp_stats::{self, Binding};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::alloc::KVec;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

type Values = [u64; PER_QP_COUNT];

/// One QP's counters.
pub(crate) struct QpCounters([AtomicU64; PER_QP_COUNT]);

impl QpCounters {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(Self([const { AtomicU64::new(0) }; PER_QP_COUNT]), GFP_KERNEL_ACCOUNT)?)
    }

    /// Counts `c` if QPs count it (the port counts it on its own).
    pub(crate) fn inc(&self, c: Counter) {
        if let Some(v) = c.qp_slot().and_then(|i| self.0.get(i)) {
            v.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn values(&self) -> Values {
        core::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

/// A counter object's own data: what QPs counted while bound to it and
/// then left it. Needs no dropping (see `ib::IbDriver::CounterData`).
pub(crate) struct CounterData([AtomicU64; PER_QP_COUNT]);

impl CounterData {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; PER_QP_COUNT])
    }

    fn kept(&self) -> Values {
        core::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }

    fn keep(&self, v: &Values) {
        for (k, v) in self.0.iter().zip(v) {
            k.fetch_add(*v, Ordering::Relaxed);
        }
    }
}

struct Bound {
    qp: Arc<QpCounters>,
    binding: Binding<PER_QP_COUNT>,
}

struct BindState {
    bound: KVec<Bound>,
    /// Everything QPs counted while bound and then took along out of their
    /// counter: counter objects show it (or, once gone, the core keeps it as
    /// their history), so the port's own value leaves it out.
    moved: Values,
}

/// A device's QPs bound to counter objects.
#[pin_data]
pub(crate) struct Bindings {
    #[pin]
    state: Mutex<BindState>,
    /// The next counter object's number; 0 means none yet to the core.
    next_id: AtomicU32,
}

impl Bindings {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- new_mutex!(BindState { bound: KVec::new(), moved: [0; PER_QP_COUNT] }, "rroce_qp_bindings"),
            next_id: AtomicU32::new(1),
        })
    }

    /// A number for a new counter object; numbers are not reused.
    pub(crate) fn new_id(&self) -> Result<u32> {
        self.next_id.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1)).map_err(|_| ENOSPC)
    }

    /// Binds a QP to counter object `counter`.
    pub(crate) fn bind(&self, counter: u32, qp: &Arc<QpCounters>) -> Result {
        let mut st = self.state.lock();
        if st.bound.iter().any(|b| Arc::ptr_eq(&b.qp, qp)) {
            return Err(EBUSY);
        }
        let binding = Binding::new(counter, &qp.values());
        st.bound.push(Bound { qp: qp.clone(), binding }, GFP_KERNEL)?;
        Ok(())
    }

    /// Takes a QP out of its counter object, which keeps what the QP counted
    /// while bound.
    pub(crate) fn unbind(&self, counter: &CounterData, qp: &Arc<QpCounters>) {
        let mut st = self.state.lock();
        let Some(i) = st.bound.iter().position(|b| Arc::ptr_eq(&b.qp, qp)) else { return };
        let Ok(b) = st.bound.remove(i) else { return };
        let kept = b.binding.close(&b.qp.values());
        counter.keep(&kept);
        qp_stats::add(&mut st.moved, &kept);
    }

    /// The values counter object `id` shows, into `out` (indexed as the
    /// port counters; those QPs do not count stay 0).
    pub(crate) fn read_counter(&self, id: u32, data: &CounterData, out: &mut [u64]) {
        let mut v = data.kept();
        {
            let st = self.state.lock();
            for b in st.bound.iter().filter(|b| b.binding.counter == id) {
                qp_stats::add(&mut v, &b.binding.since(&b.qp.values()));
            }
        }
        out.fill(0);
        for (c, v) in PER_QP.iter().zip(v) {
            if let Some(o) = out.get_mut(*c as usize) {
                *o = v;
            }
        }
    }

    /// The port counters into `out`, less what the counter objects show
    /// (the core adds that back).
    pub(crate) fn read_port(&self, port: &Counters, out: &mut [u64]) {
        let st = self.state.lock();
        let mut attributed = st.moved;
        for b in st.bound.iter() {
            qp_stats::add(&mut attributed, &b.binding.since(&b.qp.values()));
        }
        // Read after the QPs' values: an event a QP counted is in the
        // port's value too by now.
        port.read(out);
        drop(st);
        for (c, a) in PER_QP.iter().zip(attributed) {
            if let Some(o) = out.get_mut(*c as usize) {
                *o = qp_stats::port_value(*o, a);
            }
        }
    }
}
