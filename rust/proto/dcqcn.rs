// SPDX-License-Identifier: GPL-2.0
//! DCQCN (Zhu et al., SIGCOMM 2015) as RoCE NICs run it: the reaction point
//! of a sending QP (rate cut on each CNP, alpha decay, fast recovery,
//! additive and hyper increase by timer and byte counter), the notification
//! point's CNP rate limit, and the pacer that holds a QP to its rate.
//!
//! Time is a caller's clock in nanoseconds, so tests drive it by hand and
//! the kernel passes its monotonic clock; timers are lazy: the state
//! advances by the periods that passed whenever the QP sends or a CNP
//! arrives. Alpha is fixed-point with 1024 = 1.0, as in firmware. Rates are
//! kbit/s. Parameters carry mlx5's names and defaults.

use core::num::NonZeroU64;

/// Fixed-point 1.0 of alpha and of `dce_tcp_g`.
pub const ALPHA_ONE: u32 = 1024;
/// Lazy timers catch up at most this many periods at once: a QP idle for
/// longer is recovered by then (rates saturate, alpha reaches 0).
const MAX_CATCH_UP: u64 = 4096;

/// Reaction and notification point parameters (mlx5's `cc_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Period of the rate-increase timer, us.
    pub rp_time_reset: u32,
    /// Bytes sent per byte-counter increase event.
    pub rp_byte_reset: u32,
    /// Increase events before leaving fast recovery (F).
    pub rp_threshold: u32,
    /// Additive and hyper increase steps, Mbit/s.
    pub rp_ai_rate: u32,
    pub rp_hai_rate: u32,
    /// Floor of the rate, Mbit/s.
    pub rp_min_rate: u32,
    /// Ceiling of the rate, Mbit/s; 0 = the port's speed.
    pub rp_max_rate: u32,
    /// A cut takes rate * alpha / 2^gd off (gd 11 with alpha 1024 = 1.0: alpha/2).
    pub rp_gd: u32,
    /// A cut leaves at least this percentage of the rate.
    pub rp_min_dec_fac: u32,
    /// Alpha's gain g as (1024 - g) / 1024: 1019 gives g of about 1/205.
    pub rp_dce_tcp_g: u32,
    /// Period of alpha's decay without CNPs, us.
    pub rp_dce_tcp_rtt: u32,
    pub rp_initial_alpha_value: u32,
    /// Rate on the first CNP, Mbit/s; 0 = cut from the current rate.
    pub rp_rate_to_set_on_first_cnp: u32,
    /// Target rate follows the current rate on every CNP (1), or only on the
    /// first CNP after an increase (0).
    pub rp_clamp_tgt_rate: u32,
    /// Also clamp after a timer-driven increase (when `rp_clamp_tgt_rate` is 0).
    pub rp_clamp_tgt_rate_ati: u32,
    /// At most one cut per this many us; CNPs in between are ignored.
    pub rp_rate_reduce_monitor_period: u32,
    /// At most one CNP per QP per this many us.
    pub np_min_time_between_cnps: u32,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            rp_time_reset: 300,
            rp_byte_reset: 32767,
            rp_threshold: 1,
            rp_ai_rate: 5,
            rp_hai_rate: 50,
            rp_min_rate: 1,
            rp_max_rate: 0,
            rp_gd: 11,
            rp_min_dec_fac: 50,
            rp_dce_tcp_g: 1019,
            rp_dce_tcp_rtt: 1,
            rp_initial_alpha_value: 1023,
            rp_rate_to_set_on_first_cnp: 0,
            rp_clamp_tgt_rate: 0,
            rp_clamp_tgt_rate_ati: 1,
            rp_rate_reduce_monitor_period: 4,
            np_min_time_between_cnps: 4,
        }
    }
}

/// A parameter by name, with its bounds, for the sysfs attributes.
pub struct ParamDesc {
    pub name: &'static core::ffi::CStr,
    pub max: u32,
    pub get: fn(&Params) -> u32,
    pub set: fn(&mut Params, u32),
}

macro_rules! param_descs {
    ($($name:ident: $max:expr),* $(,)?) => {
        /// Every parameter, in the order sysfs lists them.
        pub const PARAMS: &[ParamDesc] = &[$(ParamDesc {
            name: match core::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("parameter name"),
            },
            max: $max,
            get: |p| p.$name,
            set: |p, v| p.$name = v,
        }),*];
    };
}

param_descs! {
    rp_time_reset: 1_000_000,
    rp_byte_reset: 1 << 30,
    rp_threshold: 31,
    rp_ai_rate: 400_000,
    rp_hai_rate: 400_000,
    rp_min_rate: 400_000,
    rp_max_rate: 400_000,
    rp_gd: 15,
    rp_min_dec_fac: 100,
    rp_dce_tcp_g: ALPHA_ONE,
    rp_dce_tcp_rtt: 1_000_000,
    rp_initial_alpha_value: ALPHA_ONE,
    rp_rate_to_set_on_first_cnp: 400_000,
    rp_clamp_tgt_rate: 1,
    rp_clamp_tgt_rate_ati: 1,
    rp_rate_reduce_monitor_period: 1_000_000,
    np_min_time_between_cnps: 1_000_000,
}

const NS_PER_US: u64 = 1000;

/// `n` as a divisor that cannot be zero (1 if it is).
fn nonzero(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap_or(NonZeroU64::MIN)
}
const KBPS_PER_MBPS: u64 = 1000;

/// What the reaction point did with a CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnpOutcome {
    /// The rate was cut.
    Handled,
    /// Within the monitor period of the last cut: no change.
    Ignored,
}

/// Reaction point of one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReactionPoint {
    /// Limited since a CNP; unlimited again once back at the ceiling.
    active: bool,
    /// Current and target rate, kbit/s.
    rc: u64,
    rt: u64,
    alpha: u32,
    /// Increase events of the timer and the byte counter since the last cut.
    t_count: u32,
    bc_count: u32,
    /// Bytes sent since the last byte-counter event.
    bytes: u64,
    /// An increase happened since the last cut (for target clamping).
    increased: bool,
    last_cut_ns: u64,
    alpha_ns: u64,
    timer_ns: u64,
}

impl ReactionPoint {
    /// The rate the QP is held to, kbit/s; `None` while unlimited.
    pub fn rate_kbps(&self) -> Option<u64> {
        self.active.then_some(self.rc)
    }

    pub fn alpha(&self) -> u32 {
        self.alpha
    }

    pub fn target_kbps(&self) -> u64 {
        self.rt
    }

    /// Which of DCQCN's stages the next increase takes (as `increase`
    /// decides it).
    pub fn stage(&self, p: &Params) -> Stage {
        let (t, bc, f) = (self.t_count, self.bc_count, p.rp_threshold);
        if !self.active {
            Stage::Unlimited
        } else if t.max(bc) < f {
            Stage::FastRecovery
        } else if t.min(bc) > f {
            Stage::HyperIncrease
        } else {
            Stage::AdditiveIncrease
        }
    }

    /// A CNP for this QP arrived. `line_kbps`: the port's speed.
    pub fn on_cnp(&mut self, now: u64, p: &Params, line_kbps: u64) -> CnpOutcome {
        let max = ceiling(p, line_kbps);
        if !self.active {
            let first = u64::from(p.rp_rate_to_set_on_first_cnp) * KBPS_PER_MBPS;
            *self = Self {
                active: true,
                rc: if first != 0 { first.min(max) } else { max },
                rt: max,
                alpha: p.rp_initial_alpha_value.min(ALPHA_ONE),
                last_cut_ns: 0,
                alpha_ns: now,
                timer_ns: now,
                ..Self::default()
            };
            if first != 0 {
                self.rt = self.rc;
                self.last_cut_ns = now;
                self.increased = false;
                return CnpOutcome::Handled;
            }
        } else {
            self.advance(now, 0, p, line_kbps);
            let period = u64::from(p.rp_rate_reduce_monitor_period) * NS_PER_US;
            if now.saturating_sub(self.last_cut_ns) < period {
                return CnpOutcome::Ignored;
            }
        }
        if p.rp_clamp_tgt_rate != 0 || self.increased || self.rt >= max {
            self.rt = self.rc;
        }
        let floor = (u64::from(p.rp_min_rate) * KBPS_PER_MBPS).max(1);
        let cut = self.rc.saturating_mul(u64::from(self.alpha)) >> p.rp_gd.min(63);
        let least = self.rc.saturating_mul(u64::from(p.rp_min_dec_fac.min(100))) / 100;
        self.rc = self.rc.saturating_sub(cut).max(least).max(floor);
        let g = u64::from(p.rp_dce_tcp_g.min(ALPHA_ONE));
        let one = u64::from(ALPHA_ONE);
        self.alpha = ((g * u64::from(self.alpha) + (one - g) * one) / one).min(one) as u32;
        self.t_count = 0;
        self.bc_count = 0;
        self.bytes = 0;
        self.increased = false;
        self.last_cut_ns = now;
        self.alpha_ns = now;
        self.timer_ns = now;
        CnpOutcome::Handled
    }

    /// Time passed to `now` and `sent` more bytes went out: alpha decays,
    /// the timer and the byte counter raise the rate.
    pub fn advance(&mut self, now: u64, sent: u64, p: &Params, line_kbps: u64) {
        if !self.active {
            return;
        }
        let max = ceiling(p, line_kbps);
        // Non-zero by type (and at least 1 us): the divisions below have no
        // panic path.
        let rtt = nonzero(u64::from(p.rp_dce_tcp_rtt.max(1)) * NS_PER_US);
        let decays = (now.saturating_sub(self.alpha_ns) / rtt).min(MAX_CATCH_UP);
        let rtt = rtt.get();
        let g = u64::from(p.rp_dce_tcp_g.min(ALPHA_ONE));
        for _ in 0..decays {
            if self.alpha == 0 {
                break;
            }
            self.alpha = (u64::from(self.alpha) * g / u64::from(ALPHA_ONE)) as u32;
        }
        self.alpha_ns = self.alpha_ns.saturating_add(decays * rtt).max(now.saturating_sub(rtt));
        let period = nonzero(u64::from(p.rp_time_reset.max(1)) * NS_PER_US);
        let ticks = (now.saturating_sub(self.timer_ns) / period).min(MAX_CATCH_UP);
        let period = period.get();
        self.timer_ns = self.timer_ns.saturating_add(ticks * period).max(now.saturating_sub(period));
        for _ in 0..ticks {
            self.increase(Event::Timer, p, max);
            if !self.active {
                return;
            }
        }
        let reset = u64::from(p.rp_byte_reset.max(1));
        self.bytes = self.bytes.saturating_add(sent);
        let mut events = 0;
        while self.bytes >= reset && events < MAX_CATCH_UP {
            self.bytes -= reset;
            events += 1;
            self.increase(Event::Bytes, p, max);
            if !self.active {
                return;
            }
        }
        if events == MAX_CATCH_UP {
            self.bytes = 0;
        }
    }

    fn increase(&mut self, ev: Event, p: &Params, max: u64) {
        let f = p.rp_threshold;
        let (t, bc) = (self.t_count, self.bc_count);
        let ai = u64::from(p.rp_ai_rate) * KBPS_PER_MBPS;
        let hai = u64::from(p.rp_hai_rate) * KBPS_PER_MBPS;
        if t.max(bc) < f {
            // Fast recovery: halfway back to the target.
        } else if t.min(bc) > f {
            let i = u64::from(t.min(bc) - f);
            self.rt = self.rt.saturating_add(i.saturating_mul(hai));
        } else {
            self.rt = self.rt.saturating_add(ai);
        }
        self.rt = self.rt.min(max);
        // Rounded up, so the rate reaches the target rather than stopping one short.
        self.rc = (self.rt.saturating_add(self.rc).div_ceil(2)).min(max);
        match ev {
            Event::Timer => {
                self.t_count = self.t_count.saturating_add(1);
                if p.rp_clamp_tgt_rate_ati != 0 {
                    self.increased = true;
                }
            }
            Event::Bytes => {
                self.bc_count = self.bc_count.saturating_add(1);
                self.increased = true;
            }
        }
        if self.rc >= max {
            // Back at full speed: no longer limited.
            *self = Self::default();
        }
    }
}

/// Where a reaction point stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// No CNP since it was last at full speed.
    Unlimited,
    /// Cut by a CNP: each increase goes halfway back to the target rate.
    FastRecovery,
    /// The target rises by `rp_ai_rate` per increase.
    AdditiveIncrease,
    /// Both the timer and the byte counter passed the threshold: the target
    /// rises by `rp_hai_rate` times their excess.
    HyperIncrease,
}

impl Stage {
    pub fn name(self) -> &'static core::ffi::CStr {
        match self {
            Self::Unlimited => c"unlimited",
            Self::FastRecovery => c"fast_recovery",
            Self::AdditiveIncrease => c"additive_increase",
            Self::HyperIncrease => c"hyper_increase",
        }
    }
}

#[derive(Clone, Copy)]
enum Event {
    Timer,
    Bytes,
}

/// The rate ceiling in kbit/s.
fn ceiling(p: &Params, line_kbps: u64) -> u64 {
    let max = if p.rp_max_rate != 0 { u64::from(p.rp_max_rate) * KBPS_PER_MBPS } else { line_kbps };
    max.max(u64::from(p.rp_min_rate) * KBPS_PER_MBPS).max(1)
}

/// The notification point's limit: at most one CNP per QP per interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CnpLimiter {
    last_ns: Option<u64>,
}

impl CnpLimiter {
    /// A CE-marked packet arrived at `now`: whether to send a CNP for it.
    pub fn should_send(&mut self, now: u64, p: &Params) -> bool {
        let gap = u64::from(p.np_min_time_between_cnps) * NS_PER_US;
        match self.last_ns {
            Some(last) if now.saturating_sub(last) < gap => false,
            _ => {
                self.last_ns = Some(now);
                true
            }
        }
    }
}

/// Holds a QP to its rate: each packet's bytes push the next send time out
/// by their duration at the rate. The send time may lag the clock by at
/// most `burst_ns`, so a QP that waited does not send a burst beyond that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pacer {
    next_ns: u64,
}

impl Pacer {
    /// Nanoseconds to wait before the next packet; 0 = it may go now.
    pub fn wait_ns(&self, now: u64) -> u64 {
        self.next_ns.saturating_sub(now)
    }

    /// `bytes` went out at `now` at `rate_kbps`.
    pub fn sent(&mut self, now: u64, bytes: u64, rate_kbps: u64, burst_ns: u64) {
        let duration = bytes.saturating_mul(8_000_000) / rate_kbps.max(1);
        self.next_ns = self.next_ns.max(now.saturating_sub(burst_ns)).saturating_add(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;
    const LINE: u64 = 10_000_000; // 10 Gbit/s in kbit/s

    fn cut(p: &Params) -> ReactionPoint {
        let mut rp = ReactionPoint::default();
        assert_eq!(rp.on_cnp(1_000_000, p, LINE), CnpOutcome::Handled);
        rp
    }

    #[test]
    fn unlimited_until_a_cnp() {
        let p = Params::default();
        let mut rp = ReactionPoint::default();
        rp.advance(10_000_000, 1 << 30, &p, LINE);
        assert_eq!(rp.rate_kbps(), None);
    }

    #[test]
    fn first_cnp_cuts_by_alpha_over_two() {
        let p = Params::default();
        let rp = cut(&p);
        // alpha 1023/1024: rate * (1 - 1023/2048).
        let expect = LINE - (LINE * 1023 >> 11);
        assert_eq!(rp.rate_kbps(), Some(expect));
        assert_eq!(rp.target_kbps(), LINE);
        // alpha = (1 - g) alpha + g, with g = 5/1024.
        assert_eq!(rp.alpha(), ((1019 * 1023 + 5 * 1024) / 1024) as u32);
    }

    #[test]
    fn rate_to_set_on_first_cnp() {
        let p = Params { rp_rate_to_set_on_first_cnp: 1000, ..Params::default() };
        let rp = cut(&p);
        assert_eq!(rp.rate_kbps(), Some(1_000_000));
    }

    #[test]
    fn cnps_within_the_monitor_period_are_ignored() {
        let p = Params::default();
        let mut rp = cut(&p);
        let r = rp.rate_kbps();
        assert_eq!(rp.on_cnp(1_000_000 + 3 * US, &p, LINE), CnpOutcome::Ignored);
        assert_eq!(rp.rate_kbps(), r);
        assert_eq!(rp.on_cnp(1_000_000 + 5 * US, &p, LINE), CnpOutcome::Handled);
        assert!(rp.rate_kbps() < r);
    }

    #[test]
    fn cuts_never_go_below_min_dec_fac_or_min_rate() {
        let p = Params { rp_min_dec_fac: 90, rp_gd: 0, ..Params::default() };
        let rp = cut(&p);
        assert_eq!(rp.rate_kbps(), Some(LINE * 90 / 100));
        let p = Params { rp_min_rate: 2000, rp_min_dec_fac: 0, rp_gd: 0, rp_rate_reduce_monitor_period: 0, ..Params::default() };
        let mut rp = ReactionPoint::default();
        for i in 0..100 {
            rp.on_cnp(i * US, &p, LINE);
        }
        assert_eq!(rp.rate_kbps(), Some(2_000_000));
    }

    #[test]
    fn alpha_decays_without_cnps() {
        let p = Params::default();
        let mut rp = cut(&p);
        let a0 = rp.alpha();
        rp.advance(1_000_000 + 10 * US, 0, &p, LINE);
        let mut a = u64::from(a0);
        for _ in 0..10 {
            a = a * 1019 / 1024;
        }
        assert_eq!(u64::from(rp.alpha()), a);
        rp.advance(1_000_000 + 100_000 * US, 0, &p, LINE);
        assert_eq!(rp.alpha(), 0);
    }

    #[test]
    fn fast_recovery_halves_the_gap_to_the_target() {
        let p = Params { rp_threshold: 5, rp_byte_reset: 1000, ..Params::default() };
        let mut rp = cut(&p);
        let (rc0, rt0) = (rp.rc, rp.rt);
        rp.advance(1_000_000, 1000, &p, LINE);
        assert_eq!(rp.rt, rt0, "the target stays in fast recovery");
        assert_eq!(rp.rc, (rt0 + rc0).div_ceil(2));
    }

    #[test]
    fn hyper_increase_adds_i_times_hai() {
        let p = Params { rp_threshold: 1, rp_byte_reset: 1000, rp_time_reset: 100, rp_clamp_tgt_rate: 1, ..Params::default() };
        let mut rp = cut(&p);
        // Second cut so the target is below the line rate.
        rp.on_cnp(1_000_000 + 10 * US, &p, LINE);
        let t0 = 1_000_000 + 10 * US;
        let rt = rp.rt;
        // Timer to 2, bytes to 2: both above F = 1 only from (2, 2) on.
        rp.advance(t0 + 100 * US, 0, &p, LINE); // t: 0 -> 1, fast recovery (0 < 1)
        assert_eq!(rp.rt, rt);
        rp.advance(t0 + 200 * US, 0, &p, LINE); // t 1, bc 0: additive
        assert_eq!(rp.rt, rt + 5000);
        rp.advance(t0 + 200 * US, 1000, &p, LINE); // t 2, bc 0: additive
        assert_eq!(rp.rt, rt + 10_000);
        rp.advance(t0 + 200 * US, 1000, &p, LINE); // t 2, bc 1: additive (min 1 = F)
        assert_eq!(rp.rt, rt + 15_000);
        rp.advance(t0 + 200 * US, 1000, &p, LINE); // t 2, bc 2: hyper, i = 1
        assert_eq!(rp.rt, rt + 15_000 + 50_000);
    }

    #[test]
    fn stage_follows_the_increase_that_comes_next() {
        let p = Params { rp_threshold: 1, rp_byte_reset: 1000, rp_time_reset: 100, rp_clamp_tgt_rate: 1, ..Params::default() };
        assert_eq!(ReactionPoint::default().stage(&p), Stage::Unlimited);
        let mut rp = cut(&p);
        rp.on_cnp(1_000_000 + 10 * US, &p, LINE);
        let t0 = 1_000_000 + 10 * US;
        assert_eq!(rp.stage(&p), Stage::FastRecovery);
        rp.advance(t0 + 100 * US, 0, &p, LINE); // t 1, bc 0
        assert_eq!(rp.stage(&p), Stage::AdditiveIncrease);
        let rt = rp.rt;
        rp.advance(t0 + 200 * US, 1000, &p, LINE); // t 2, bc 1
        rp.advance(t0 + 200 * US, 1000, &p, LINE); // t 2, bc 2
        assert_eq!(rp.stage(&p), Stage::HyperIncrease);
        assert_eq!(rp.rt, rt + 15_000, "the increases so far were additive");
        assert_eq!(Stage::HyperIncrease.name(), c"hyper_increase");
    }

    #[test]
    fn recovers_to_unlimited() {
        let p = Params::default();
        let mut rp = cut(&p);
        rp.advance(1_000_000 + 1_000_000 * US, 0, &p, LINE);
        assert_eq!(rp.rate_kbps(), None, "back at line rate after enough timer periods");
    }

    #[test]
    fn rp_max_rate_caps() {
        let p = Params { rp_max_rate: 1000, ..Params::default() };
        let rp = cut(&p);
        assert!(rp.rate_kbps().unwrap() <= 1_000_000);
    }

    #[test]
    fn np_limits_cnps_per_interval() {
        let p = Params { np_min_time_between_cnps: 50, ..Params::default() };
        let mut np = CnpLimiter::default();
        assert!(np.should_send(0, &p));
        assert!(!np.should_send(49 * US, &p));
        assert!(np.should_send(50 * US, &p));
        assert!(!np.should_send(60 * US, &p));
    }

    #[test]
    fn pacer_holds_the_rate() {
        let mut pacer = Pacer::default();
        let rate = 1_000_000; // 1 Gbit/s: 1000 bytes take 8 us.
        let mut now = 0;
        let mut sent = 0u64;
        while now < 1_000_000 {
            let w = pacer.wait_ns(now);
            if w > 0 {
                now += w;
                continue;
            }
            pacer.sent(now, 1000, rate, 20 * US);
            sent += 1000;
        }
        // 1 ms at 1 Gbit/s is 125,000 bytes.
        assert!((124_000..=127_000).contains(&sent), "{sent}");
        // After idling, at most the burst goes at once.
        let later = 10_000_000;
        let mut n = 0;
        while pacer.wait_ns(later) == 0 {
            pacer.sent(later, 1000, rate, 20 * US);
            n += 1;
        }
        assert!(n <= 4, "{n}");
    }

    #[test]
    fn param_table_reads_and_writes_each_field() {
        let mut p = Params::default();
        for (i, d) in PARAMS.iter().enumerate() {
            (d.set)(&mut p, i as u32 + 1);
        }
        for (i, d) in PARAMS.iter().enumerate() {
            assert_eq!((d.get)(&p), i as u32 + 1, "{:?}", d.name);
        }
        assert_eq!(PARAMS.len(), 17);
    }

    proptest::proptest! {
        #[test]
        fn rate_stays_within_bounds(
            steps in proptest::collection::vec((0u64..2_000_000, 0u64..100_000, proptest::prelude::any::<bool>()), 1..60),
            g in 0u32..=1024, gd in 0u32..=15, fac in 0u32..=100, thr in 0u32..=31,
        ) {
            let p = Params { rp_dce_tcp_g: g, rp_gd: gd, rp_min_dec_fac: fac, rp_threshold: thr, ..Params::default() };
            let mut rp = ReactionPoint::default();
            let mut now = 0u64;
            for (dt, bytes, cnp) in steps {
                now += dt;
                if cnp { rp.on_cnp(now, &p, LINE); } else { rp.advance(now, bytes, &p, LINE); }
                if let Some(r) = rp.rate_kbps() {
                    proptest::prop_assert!((1000..=LINE).contains(&r));
                    proptest::prop_assert!(rp.target_kbps() <= LINE);
                }
                proptest::prop_assert!(rp.alpha() <= ALPHA_ONE);
            }
        }
    }
}
