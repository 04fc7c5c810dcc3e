// SPDX-License-Identifier: GPL-2.0
//! A device's priority and congestion control settings (sysfs `qos/`), kept
//! in step with its netdev's DCB settings. A netdev's DCB operations may
//! sleep, need RTNL and announce no change to the kernel (an LLDP agent or
//! the NIC's firmware may change PFC at any time), so a work item reads them
//! once a second; packets read only the settings' copy.

use crate::net::{self, NetDevRef, Rtnl};
use crate::proto::dcqcn::Params;
use crate::proto::qos::{Settings, TxClass};
use crate::proto::qos_latch::QosLatch;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use crate::net::{new_spinlock_bh, SpinLockBh, SpinLockBhGuard};
use kernel::sync::Arc;
use kernel::workqueue::{impl_has_delayed_work, new_delayed_work, DelayedWork, WorkItem};

/// How often the netdev's DCB settings are read.
const DCB_POLL_MS: u32 = 1000;
/// How soon to try again when RTNL was taken.
const RTNL_BUSY_RETRY_MS: u32 = 100;

/// A device's settings; the DCB poll stops when it is dropped.
pub(crate) struct PortQos(Arc<QosState>);

impl core::ops::Deref for PortQos {
    type Target = QosState;
    fn deref(&self) -> &QosState {
        &self.0
    }
}

impl Drop for PortQos {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl PortQos {
    /// The netdev is being unregistered: its DCB operations must not be
    /// called again, though the device may stay until its users close it.
    pub(crate) fn port_going(&self) {
        self.0.stop();
    }
}

#[pin_data]
pub(crate) struct QosState {
    #[pin]
    /// Written by sysfs and the DCB poll; read where a packet needs the
    /// congestion control parameters (a CE mark, a CNP, a paced QP).
    settings: SpinLockBh<Settings>,
    /// What every transmitted packet reads, without a lock: the effective
    /// priority settings, published under `settings`' lock when they change.
    published: QosLatch,
    /// The port's netdev, whose DCB settings are followed.
    port: NetDevRef,
    /// The device is going: the work must not queue itself again.
    stopping: AtomicBool,
    #[pin]
    poll: DelayedWork<QosState>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for QosState { self.poll }
}

impl PortQos {
    /// Default settings for the device on `port`; starts following its DCB.
    pub(crate) fn new(port: NetDevRef) -> Result<Self> {
        let this = Arc::pin_init(
            pin_init!(QosState {
                settings <- new_spinlock_bh!(Settings::default(), "rroce_qos"),
                published: QosLatch::default(),
                port,
                stopping: AtomicBool::new(false),
                poll <- new_delayed_work!("rroce_dcb_poll"),
            }),
            GFP_KERNEL,
        )?;
        this.poll_in(0);
        Ok(Self(this))
    }
}

impl QosState {
    /// A copy of the settings.
    pub(crate) fn settings(&self) -> Settings {
        *self.settings.lock()
    }

    /// Changes the settings with `f`, and publishes what packets read.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut Settings) -> R) -> R {
        let mut settings: SpinLockBhGuard<'_, Settings> = self.settings.lock();
        let r = f(&mut settings);
        self.published.publish(settings.qos());
        r
    }

    /// The congestion control parameters, and whether ECN is on.
    pub(crate) fn congestion(&self) -> (bool, Params) {
        let s = self.settings.lock();
        (s.qos().ecn, s.cc)
    }

    /// How a data, ACK or response packet of a QP with `traffic_class` and
    /// `sl` leaves. No lock: every packet asks.
    pub(crate) fn data_class(&self, traffic_class: u8, sl: u8) -> TxClass {
        self.published.data_class(traffic_class, sl)
    }

    /// How a CNP leaves.
    pub(crate) fn cnp_class(&self) -> TxClass {
        self.published.cnp_class()
    }

    fn poll_in(self: &Arc<Self>, jiffies: kernel::time::Jiffies) {
        // An `Err` gives back the reference of an item that is already
        // queued: that one will poll.
        if let Err(already_queued) = crate::net::dfl_queue().enqueue_delayed(self.clone(), jiffies) {
            drop(already_queued);
        }
    }

    /// Stops following DCB and waits for a running poll.
    fn stop(self: &Arc<Self>) {
        self.stopping.store(true, Ordering::Release);
        net::cancel_delayed_work::<_, 0>(self);
    }
}

impl WorkItem for QosState {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        if this.stopping.load(Ordering::Acquire) {
            return;
        }
        // Whoever holds RTNL may be cancelling this work: never wait for it,
        // try again shortly.
        let next_ms = match Rtnl::try_lock() {
            Some(rtnl) => {
                let (dcb, prio_tc) = this.port.dcb_state(&rtnl);
                drop(rtnl);
                let changed = this.update(|settings| settings.set_port(dcb, prio_tc).then(|| settings.set_by_dcb()));
                if let Some(now) = changed {
                    if now {
                        pr_info!("{}: following its DCB settings (qos/dcb 0 to ignore them)\n", this.port.name().as_str());
                    } else {
                        pr_info!("{}: DCB settings no longer followed: rroce's own apply\n", this.port.name().as_str());
                    }
                }
                DCB_POLL_MS
            }
            None => RTNL_BUSY_RETRY_MS,
        };
        if !this.stopping.load(Ordering::Acquire) {
            this.poll_in(kernel::time::msecs_to_jiffies(next_ms));
        }
    }
}
