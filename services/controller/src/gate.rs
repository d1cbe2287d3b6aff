//! The dispatch gate: one table, opcode × role, deciding whether a node
//! serves a request or refuses it with a typed error.
//!
//! The primary has three columns because what it may serve depends on more
//! than its role: a primary that has lost the etcd quorum keeps answering
//! the reads that stay correct (`ctrlstatus`; `clusterconf`, because no
//! other node can commit until its lease has expired, and it steps down at
//! that moment) and refuses the rest; a primary still applying the log
//! (fenced) serves nothing but `ctrlstatus`.

use crate::model::{Opcode, Role};

/// The gate's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GateRole {
    Init,
    Electing,
    Standby,
    /// Primary, quorum, caught up.
    PrimaryServing,
    /// Primary whose lease keep-alive cannot reach etcd (still within the lease).
    PrimaryNoQuorum,
    /// Primary applying the log (applied < committed, or recovering).
    PrimaryFenced,
}

impl GateRole {
    pub const ALL: [GateRole; 6] = [
        GateRole::Init,
        GateRole::Electing,
        GateRole::Standby,
        GateRole::PrimaryServing,
        GateRole::PrimaryNoQuorum,
        GateRole::PrimaryFenced,
    ];

    /// The column for a node's state. Fenced wins over no-quorum: a primary
    /// that has not applied the log has nothing correct to read.
    pub fn of(role: Role, quorum: bool, fenced: bool) -> GateRole {
        match role {
            Role::Init => GateRole::Init,
            Role::Electing => GateRole::Electing,
            Role::Standby => GateRole::Standby,
            Role::Primary if fenced => GateRole::PrimaryFenced,
            Role::Primary if !quorum => GateRole::PrimaryNoQuorum,
            Role::Primary => GateRole::PrimaryServing,
        }
    }

    fn column(self) -> usize {
        match self {
            GateRole::Init => 0,
            GateRole::Electing => 1,
            GateRole::Standby => 2,
            GateRole::PrimaryServing => 3,
            GateRole::PrimaryNoQuorum => 4,
            GateRole::PrimaryFenced => 5,
        }
    }
}

/// What the gate says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Allow,
    /// ERR_STANDBY with the primary this node knows.
    Standby,
    /// ERR_NOT_READY.
    NotReady,
    /// ERR_NO_QUORUM.
    NoQuorum,
}

use Verdict::{Allow as A, NoQuorum as NQ, NotReady as NR, Standby as SB};

/// Rows: opcodes; columns: INIT, ELECTING, STANDBY, PRIMARY serving,
/// PRIMARY without quorum, PRIMARY fenced.
const TABLE: [(Opcode, [Verdict; 6]); 7] = [
    //                     INIT ELECT STANDBY SERVING NOQUORUM FENCED
    (Opcode::CtrlStatus, [A, A, A, A, A, A]),
    (Opcode::ClusterConf, [NR, NR, SB, A, A, NR]),
    (Opcode::List, [NR, NR, SB, A, NQ, NR]),
    (Opcode::SetConf, [NR, NR, SB, A, NQ, NR]),
    (Opcode::Register, [NR, NR, SB, A, NQ, NR]),
    (Opcode::Heartbeat, [NR, NR, SB, A, NQ, NR]),
    (Opcode::Deregister, [NR, NR, SB, A, NQ, NR]),
];

/// The gate's decision for one request.
pub fn decide(op: Opcode, role: GateRole) -> Verdict {
    TABLE.iter().find(|(o, _)| *o == op).map(|(_, row)| row[role.column()]).unwrap_or(Verdict::NotReady)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(op: Opcode, role: GateRole) -> Verdict {
        // The rules of the issue, written independently of the table.
        if op == Opcode::CtrlStatus {
            return Verdict::Allow;
        }
        match role {
            GateRole::Init | GateRole::Electing | GateRole::PrimaryFenced => Verdict::NotReady,
            GateRole::Standby => Verdict::Standby,
            GateRole::PrimaryServing => Verdict::Allow,
            GateRole::PrimaryNoQuorum if op == Opcode::ClusterConf => Verdict::Allow,
            GateRole::PrimaryNoQuorum => Verdict::NoQuorum,
        }
    }

    #[test]
    fn every_opcode_in_every_role() {
        let mut walked = 0;
        for op in Opcode::ALL {
            for role in GateRole::ALL {
                assert_eq!(decide(op, role), expected(op, role), "{op:?} in {role:?}");
                walked += 1;
            }
        }
        assert_eq!(walked, Opcode::ALL.len() * GateRole::ALL.len());
        // The table has exactly one row per opcode.
        for op in Opcode::ALL {
            assert_eq!(TABLE.iter().filter(|(o, _)| *o == op).count(), 1, "{op:?}");
        }
    }

    #[test]
    fn ctrlstatus_answers_everywhere_and_writes_only_on_a_serving_primary() {
        for role in GateRole::ALL {
            assert_eq!(decide(Opcode::CtrlStatus, role), Verdict::Allow);
            for op in Opcode::ALL.into_iter().filter(|o| o.is_write()) {
                assert_eq!(decide(op, role) == Verdict::Allow, role == GateRole::PrimaryServing, "{op:?} {role:?}");
            }
        }
    }

    #[test]
    fn column_of_node_state() {
        assert_eq!(GateRole::of(Role::Primary, true, false), GateRole::PrimaryServing);
        assert_eq!(GateRole::of(Role::Primary, false, false), GateRole::PrimaryNoQuorum);
        assert_eq!(GateRole::of(Role::Primary, false, true), GateRole::PrimaryFenced);
        assert_eq!(GateRole::of(Role::Standby, true, false), GateRole::Standby);
        assert_eq!(GateRole::of(Role::Electing, false, true), GateRole::Electing);
        assert_eq!(GateRole::of(Role::Init, false, true), GateRole::Init);
    }
}
