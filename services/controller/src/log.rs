//! The replicated log: entries, log positions, and the state they build.
//!
//! Every write the primary commits is one entry with the next log position
//! (LSN) and the term it was committed under. The committed LSN is the last
//! committed entry; a node's applied LSN is the last entry it applied to
//! its copy of the state. A node is fenced while it cannot vouch for its
//! copy: before its first sync, while applied < committed, and when the log
//! it needs has been trimmed (it then recovers from a snapshot).

use crate::config_doc::CommittedConfig;
use crate::model::Registration;

/// What an entry does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Op {
    /// Replace the committed configuration (canonical document).
    SetConf {
        document: serde_json::Value,
    },
    /// A service instance registered (its liveness is an etcd lease, not an entry).
    Register {
        registration: Registration,
    },
    Deregister {
        service: String,
        instance: String,
    },
}

/// One log entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub lsn: u64,
    pub term: u64,
    pub op: Op,
}

/// Why an entry cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The next entry is missing (trimmed): recover from a snapshot.
    #[error("log gap: expected entry {expected}, got {got}")]
    Gap { expected: u64, got: u64 },
    /// An entry of an older term after a newer one: the log is corrupt.
    #[error("entry {lsn} has term {term}, older than the applied term {applied_term}")]
    TermWentBack { lsn: u64, term: u64, applied_term: u64 },
    #[error("entry {lsn} holds an invalid configuration: {reason}")]
    BadConfig { lsn: u64, reason: String },
}

/// A node's log positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Positions {
    pub committed: u64,
    pub applied: u64,
    /// Whether the node has read the committed LSN at least once since it
    /// started (before that it knows nothing to be caught up with).
    pub synced: bool,
    /// The log the node needs is gone; it is recovering from a snapshot.
    pub unrecoverable: bool,
}

impl Positions {
    pub fn fenced(&self) -> bool {
        !self.synced || self.unrecoverable || self.applied < self.committed
    }

    /// Records a committed LSN read from the replicated store. It never
    /// goes back: a read from a lagging source cannot un-commit entries.
    pub fn observe_committed(&mut self, committed: u64) {
        self.synced = true;
        self.committed = self.committed.max(committed);
    }
}

/// The state the log builds on one node.
#[derive(Debug, Clone, Default)]
pub struct Replicated {
    pub positions: Positions,
    pub config: Option<CommittedConfig>,
    /// The term of the last applied entry.
    pub applied_term: u64,
}

impl Replicated {
    /// Applies the next entry. Idempotent for entries already applied (the
    /// primary applies its own writes and the tailing task may see them).
    pub fn apply(&mut self, entry: &Entry) -> Result<bool, ApplyError> {
        if entry.lsn <= self.positions.applied {
            return Ok(false);
        }
        if entry.lsn != self.positions.applied + 1 {
            return Err(ApplyError::Gap { expected: self.positions.applied + 1, got: entry.lsn });
        }
        if entry.term < self.applied_term {
            return Err(ApplyError::TermWentBack { lsn: entry.lsn, term: entry.term, applied_term: self.applied_term });
        }
        if let Op::SetConf { document } = &entry.op {
            let config = CommittedConfig::from_value(document.clone())
                .map_err(|e| ApplyError::BadConfig { lsn: entry.lsn, reason: e.to_string() })?;
            self.config = Some(config);
        }
        // Register/Deregister change the registry, which lives in the
        // replicated store itself (keys with leases) and is read there by
        // the primary; applying them only advances the position.
        self.positions.applied = entry.lsn;
        self.applied_term = entry.term;
        self.positions.observe_committed(entry.lsn);
        Ok(true)
    }

    /// Replaces the state with a snapshot taken at `lsn` (recovery when the
    /// log has been trimmed past this node's applied LSN).
    pub fn restore(&mut self, lsn: u64, term: u64, config: Option<CommittedConfig>) {
        self.positions.unrecoverable = false;
        if lsn < self.positions.applied {
            // An older snapshot than what is applied (a concurrent apply
            // got further): keep the newer state.
            return;
        }
        self.config = config;
        self.positions.applied = lsn;
        self.positions.observe_committed(lsn);
        self.applied_term = self.applied_term.max(term);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(n: u64) -> Op {
        Op::SetConf { document: serde_json::json!({"clusterName": "k", "settings": {"n": n}}) }
    }

    #[test]
    fn fenced_until_synced_and_caught_up() {
        let mut r = Replicated::default();
        assert!(r.positions.fenced(), "fenced before the first sync");
        r.positions.observe_committed(2);
        assert!(r.positions.fenced(), "behind");
        r.apply(&Entry { lsn: 1, term: 1, op: conf(1) }).unwrap();
        assert!(r.positions.fenced());
        r.apply(&Entry { lsn: 2, term: 1, op: conf(2) }).unwrap();
        assert!(!r.positions.fenced());
        assert_eq!(r.positions.applied, 2);
        assert_eq!(r.config.as_ref().map(|c| c.value()["settings"]["n"].as_u64()), Some(Some(2)));
    }

    #[test]
    fn gaps_and_replays() {
        let mut r = Replicated::default();
        r.apply(&Entry { lsn: 1, term: 1, op: conf(1) }).unwrap();
        assert_eq!(r.apply(&Entry { lsn: 1, term: 1, op: conf(1) }), Ok(false), "replay is a no-op");
        assert_eq!(r.apply(&Entry { lsn: 3, term: 1, op: conf(3) }), Err(ApplyError::Gap { expected: 2, got: 3 }));
        r.apply(&Entry { lsn: 2, term: 3, op: conf(2) }).unwrap();
        assert!(matches!(r.apply(&Entry { lsn: 3, term: 2, op: conf(3) }), Err(ApplyError::TermWentBack { .. })));
    }

    #[test]
    fn committed_never_goes_back_and_restore_unfences() {
        let mut r = Replicated::default();
        r.positions.observe_committed(10);
        r.positions.observe_committed(4);
        assert_eq!(r.positions.committed, 10);
        r.positions.unrecoverable = true;
        assert!(r.positions.fenced());
        r.restore(10, 2, None);
        assert!(!r.positions.fenced());
        assert_eq!(r.positions.applied, 10);
    }

    #[test]
    fn entries_round_trip_as_json() {
        let e = Entry {
            lsn: 7,
            term: 3,
            op: Op::Register {
                registration: Registration {
                    service: "stack-engine".into(),
                    instance: "e1".into(),
                    address: "x".into(),
                    ttl_seconds: 5,
                },
            },
        };
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains("\"kind\":\"register\""), "{s}");
        assert_eq!(serde_json::from_str::<Entry>(&s).unwrap(), e);
    }
}
