// SPDX-License-Identifier: GPL-2.0
//! Asynchronous events (`struct ib_event`) to a consumer's handler: one
//! path for the QP, SRQ and CQ events this layer raises.

use crate::sys;

/// The core object an event is about.
pub(super) enum EventSource {
    Qp(*mut sys::ib_qp),
    Srq(*mut sys::ib_srq),
    Cq(*mut sys::ib_cq),
}

/// Hands `event` about `source` to the handler its consumer set, if any,
/// with the consumer's context.
///
/// # Safety
///
/// `source` is a live core object of this device for the call (its handler
/// and context are set before creation and not changed after); handlers may
/// be called in the caller's context.
pub(super) unsafe fn raise(source: EventSource, event: sys::ib_event_type) {
    let mut ev: sys::ib_event = pin_init::zeroed();
    ev.event = event;
    // SAFETY: the object is live (the contract); the union member written is the one
    // `ev.element` names for its kind, as the core reads it.
    let (handler, context) = unsafe {
        match source {
            EventSource::Qp(ib) => {
                ev.device = (*ib).device;
                *ev.element.qp.as_mut() = ib;
                ((*ib).event_handler, (*ib).qp_context)
            }
            EventSource::Srq(ib) => {
                ev.device = (*ib).device;
                *ev.element.srq.as_mut() = ib;
                ((*ib).event_handler, (*ib).srq_context)
            }
            EventSource::Cq(ib) => {
                ev.device = (*ib).device;
                *ev.element.cq.as_mut() = ib;
                ((*ib).event_handler, (*ib).cq_context)
            }
        }
    };
    if let Some(h) = handler {
        // SAFETY: the consumer's handler for this object, with its context; the event
        // lives on the stack for the call.
        unsafe { h(&mut ev, context) };
    }
}
