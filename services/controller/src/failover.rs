//! The client's failover policy, transport-free so that it can be tested
//! step by step: given what an attempt got, which node to try next.
//!
//! - Reads and writes rotate over the configured nodes when a node cannot
//!   be reached or answers ERR_NOT_READY (INIT, ELECTING, catching up).
//! - ERR_STANDBY names the primary the standby knows: the next attempt goes
//!   there (bounded, so that two nodes pointing at each other cannot loop).
//! - ERR_DEPOSED is safe to retry elsewhere: the fence guarantees that
//!   nothing was written.
//! - A definitive answer (invalid, not found, no quorum) ends the call. An
//!   internal error ends a write (its outcome is unknown: retrying could
//!   apply it twice) but only moves a read on.
//! - After a whole round without an answer the caller backs off before the
//!   next round; the caller's deadline ends it all.

use std::time::Duration;

use crate::model::CtrlError;

/// What one attempt got, short of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// No answer: connection refused, reset, timed out.
    Unreachable(String),
    /// A typed refusal from the node.
    Refused(CtrlError),
}

/// The next move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Try this address now.
    Try(String),
    /// Wait, then try this address.
    Backoff(Duration, String),
    /// Give up with this refusal.
    Fail(CtrlError),
}

/// The policy's state for one call.
#[derive(Debug)]
pub struct Failover {
    addrs: Vec<String>,
    is_write: bool,
    pos: usize,
    tried_in_round: usize,
    hint_hops: usize,
    backoff: Duration,
    /// Some node answered (with a refusal) during this call.
    pub answered: bool,
    /// The last thing that went wrong, for the final error.
    pub last: Option<AttemptError>,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

impl Failover {
    /// `start` is where the previous successful call ended (sticky primary).
    pub fn new(addrs: Vec<String>, start: usize, is_write: bool) -> Failover {
        let pos = if addrs.is_empty() { 0 } else { start % addrs.len() };
        Failover {
            addrs,
            is_write,
            pos,
            tried_in_round: 0,
            hint_hops: 0,
            backoff: FIRST_BACKOFF,
            answered: false,
            last: None,
        }
    }

    pub fn first(&self) -> Option<String> {
        self.addrs.get(self.pos).cloned()
    }

    /// The index of the address that answered last (to start there next time).
    pub fn position(&self) -> usize {
        self.pos
    }

    fn rotate(&mut self) -> Step {
        self.pos = (self.pos + 1) % self.addrs.len().max(1);
        self.tried_in_round += 1;
        let addr = self.addrs.get(self.pos).cloned().unwrap_or_default();
        if self.tried_in_round >= self.addrs.len() {
            self.tried_in_round = 0;
            self.hint_hops = 0;
            let wait = self.backoff;
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            Step::Backoff(wait, addr)
        } else {
            Step::Try(addr)
        }
    }

    /// Decides after a failed attempt at the current address.
    pub fn next(&mut self, outcome: AttemptError) -> Step {
        let step = match &outcome {
            AttemptError::Unreachable(_) => self.rotate(),
            AttemptError::Refused(e) => {
                self.answered = true;
                match e {
                    CtrlError::Standby { primary: Some(p) } if self.hint_hops < self.addrs.len() + 1 => {
                        self.hint_hops += 1;
                        // Follow the hint; remember it as a position when it
                        // is one of ours, so the next call starts there.
                        if let Some(i) = self.addrs.iter().position(|a| *a == p.address) {
                            self.pos = i;
                        }
                        Step::Try(p.address.clone())
                    }
                    CtrlError::Standby { .. } | CtrlError::NotReady(_) | CtrlError::Deposed => self.rotate(),
                    CtrlError::Internal(_) if !self.is_write => self.rotate(),
                    other => Step::Fail(other.clone()),
                }
            }
        };
        self.last = Some(outcome);
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PrimaryRef;

    fn addrs() -> Vec<String> {
        vec!["a:1".into(), "b:2".into(), "c:3".into()]
    }

    fn standby(to: &str) -> AttemptError {
        AttemptError::Refused(CtrlError::Standby { primary: Some(PrimaryRef { name: "x".into(), address: to.into() }) })
    }

    #[test]
    fn reads_rotate_on_failure_and_not_ready_then_back_off() {
        let mut f = Failover::new(addrs(), 0, false);
        assert_eq!(f.first().as_deref(), Some("a:1"));
        assert_eq!(f.next(AttemptError::Unreachable("refused".into())), Step::Try("b:2".into()));
        assert_eq!(f.next(AttemptError::Refused(CtrlError::NotReady("electing".into()))), Step::Try("c:3".into()));
        // A whole round without an answer: back off, then start over.
        assert_eq!(f.next(AttemptError::Unreachable("refused".into())), Step::Backoff(FIRST_BACKOFF, "a:1".into()));
        assert!(f.answered);
        f.next(AttemptError::Unreachable("x".into()));
        f.next(AttemptError::Unreachable("x".into()));
        assert_eq!(f.next(AttemptError::Unreachable("x".into())), Step::Backoff(FIRST_BACKOFF * 2, "a:1".into()));
    }

    #[test]
    fn writes_follow_the_standby_hint() {
        let mut f = Failover::new(addrs(), 0, true);
        assert_eq!(f.next(standby("c:3")), Step::Try("c:3".into()));
        assert_eq!(f.position(), 2, "the hinted primary is where the next call starts");
        // The hinted node moved on too: rotate from there.
        assert_eq!(f.next(AttemptError::Refused(CtrlError::NotReady("x".into()))), Step::Try("a:1".into()));
    }

    #[test]
    fn standby_hints_cannot_loop_forever() {
        let mut f = Failover::new(addrs(), 0, true);
        let mut hops = 0;
        while let Step::Try(_) = f.next(standby(if hops % 2 == 0 { "b:2" } else { "a:1" })) {
            hops += 1;
            assert!(hops < 20, "ping-pong not bounded");
        }
        assert!(hops <= addrs().len() + 1 + addrs().len());
    }

    #[test]
    fn unknown_primary_rotates() {
        let mut f = Failover::new(addrs(), 1, true);
        assert_eq!(f.next(AttemptError::Refused(CtrlError::Standby { primary: None })), Step::Try("c:3".into()));
    }

    #[test]
    fn definitive_answers_end_the_call() {
        for e in [CtrlError::NoQuorum, CtrlError::Invalid("x".into()), CtrlError::NotFound("y".into())] {
            let mut f = Failover::new(addrs(), 0, true);
            assert_eq!(f.next(AttemptError::Refused(e.clone())), Step::Fail(e.clone()));
            let mut f = Failover::new(addrs(), 0, false);
            assert_eq!(f.next(AttemptError::Refused(e.clone())), Step::Fail(e));
        }
        // Internal: a write's outcome is unknown (stop), a read moves on.
        let mut w = Failover::new(addrs(), 0, true);
        assert!(matches!(w.next(AttemptError::Refused(CtrlError::Internal("x".into()))), Step::Fail(_)));
        let mut r = Failover::new(addrs(), 0, false);
        assert_eq!(r.next(AttemptError::Refused(CtrlError::Internal("x".into()))), Step::Try("b:2".into()));
        // Deposed: nothing was written, try elsewhere.
        let mut w = Failover::new(addrs(), 0, true);
        assert_eq!(w.next(AttemptError::Refused(CtrlError::Deposed)), Step::Try("b:2".into()));
    }
}
