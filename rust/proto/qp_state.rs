// SPDX-License-Identifier: GPL-2.0
//! QP states (IBTA 10.3.1), with the values of `enum ib_qp_state`.

/// The state of a queue pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub enum QpState {
    #[default]
    Reset = 0,
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained: nothing new is sent.
    Sqd = 4,
    /// Send queue error (UD, UC).
    Sqe = 5,
    Err = 6,
}

impl QpState {
    /// The state an `enum ib_qp_state` value names.
    pub const fn from_ib(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Reset,
            1 => Self::Init,
            2 => Self::Rtr,
            3 => Self::Rts,
            4 => Self::Sqd,
            5 => Self::Sqe,
            6 => Self::Err,
            _ => return None,
        })
    }

    /// The `enum ib_qp_state` value.
    pub const fn to_ib(self) -> u32 {
        self as u32
    }

    /// Whether the QP takes packets from the wire: RTR and the states after it.
    pub const fn receives(self) -> bool {
        matches!(self, Self::Rtr | Self::Rts | Self::Sqd | Self::Sqe)
    }

    /// Whether a kernel consumer may post a send work request: from RTS on
    /// (SQD and SQE hold it, the error state flushes it). Earlier states
    /// refuse it rather than hold it, as rdma_rxe does.
    pub const fn accepts_sends(self) -> bool {
        matches!(self, Self::Rts | Self::Sqd | Self::Sqe | Self::Err)
    }

    /// Whether a kernel consumer may post a receive: from INIT on (the error
    /// state flushes it).
    pub const fn accepts_receives(self) -> bool {
        !matches!(self, Self::Reset)
    }

    /// Whether acknowledgements still retire send WQEs: RTS, and SQD, where
    /// WQEs already on the wire complete.
    pub const fn completes_sends(self) -> bool {
        matches!(self, Self::Rts | Self::Sqd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_values_round_trip() {
        for v in 0..7 {
            assert_eq!(QpState::from_ib(v).map(QpState::to_ib), Some(v));
        }
        assert_eq!(QpState::from_ib(7), None);
        assert_eq!(QpState::from_ib(u32::MAX), None);
    }

    #[test]
    fn posting_states() {
        use QpState::*;
        let all = [Reset, Init, Rtr, Rts, Sqd, Sqe, Err];
        assert_eq!(all.map(QpState::accepts_sends), [false, false, false, true, true, true, true]);
        assert_eq!(all.map(QpState::accepts_receives), [false, true, true, true, true, true, true]);
    }

    #[test]
    fn receiving_and_completing_states() {
        use QpState::*;
        let receives: [bool; 7] = [Reset, Init, Rtr, Rts, Sqd, Sqe, Err].map(QpState::receives);
        assert_eq!(receives, [false, false, true, true, true, true, false]);
        let completes = [Reset, Init, Rtr, Rts, Sqd, Sqe, Err].map(QpState::completes_sends);
        assert_eq!(completes, [false, false, false, true, true, false, false]);
    }
}
