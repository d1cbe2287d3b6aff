//! Allocations Nova does not account for (`nova-manage placement audit`'s
//! question, asked through Nova's API instead of its databases): the
//! consumers holding Nova's resource classes on a provider are judged
//! against what Nova says of its compute nodes, servers and in-progress
//! migrations ([`NovaView`], read by the caller). Judging is a pure
//! function of the rows and the view, so it is unit-tested without Nova.
//!
//! nova-manage asks the same of every provider: the consumer must be a
//! server on the provider's compute node (the provider's root) or a
//! migration in progress from or to it. keelson keeps that rule for the
//! providers of Nova's compute node trees, and for any other provider (a
//! sharing provider, a tree Nova does not own) asks only that Nova know the
//! consumer at all, where nova-manage reports every such allocation as an
//! orphan.

use std::collections::{BTreeMap, HashMap};

use keelson_db::{Db, DbError};

use super::{Finding, Provider};

/// The resource classes whose allocations are Nova's (nova-manage's list).
pub const NOVA_CLASSES: [&str; 8] = [
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "VGPU",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
    "PCPU",
    "MEM_ENCRYPTION_CONTEXT",
];

/// A compute node as Nova names it: its service's host and its
/// hypervisor hostname.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Node {
    pub host: String,
    pub name: String,
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host == self.name {
            f.write_str(&self.host)
        } else {
            write!(f, "{} on {}", self.name, self.host)
        }
    }
}

/// What Nova says, read after the database (so that anything the audit
/// read that Nova made is already known to Nova).
#[derive(Debug, Clone, Default)]
pub struct NovaView {
    /// Compute node uuid (its resource provider's uuid) → the node.
    pub compute_nodes: HashMap<String, Node>,
    /// Server uuid → the node it is on; `None` while it is on none (being
    /// scheduled or built, shelved offloaded).
    pub servers: HashMap<String, Option<Node>>,
    /// Migration uuid (a move's consumer) → its source and destination
    /// nodes, for the migrations Nova counts as in progress.
    pub migrations: HashMap<String, Vec<Node>>,
}

/// Nova's migration states that end a migration (every other one is in
/// progress, as nova-manage counts them).
pub const FINISHED_MIGRATION_STATES: [&str; 7] =
    ["confirmed", "reverted", "error", "failed", "completed", "cancelled", "done"];

/// What one consumer holds of Nova's classes on one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Holding {
    pub provider: Provider,
    /// The uuid of the provider's root (a compute node's uuid for Nova's
    /// trees).
    pub root_uuid: String,
    pub consumer: String,
    /// The consumer record's generation (None: no record).
    pub consumer_generation: Option<i64>,
    pub resources: BTreeMap<String, i64>,
}

/// Every holding of a Nova class, in one read.
pub async fn read_holdings(db: &Db) -> Result<Vec<Holding>, DbError> {
    let mut tx = db.begin_read().await?;
    let params: Vec<keelson_db::Value> = NOVA_CLASSES.iter().map(|c| (*c).into()).collect();
    let marks = vec!["?"; NOVA_CLASSES.len()].join(", ");
    let rows = tx
        .fetch_all(
            &format!(
                "SELECT rp.id, rp.uuid, rp.name, root.uuid, a.consumer_id, c.generation, rc.name, a.used \
                 FROM allocations a \
                 JOIN resource_providers rp ON rp.id = a.resource_provider_id \
                 LEFT OUTER JOIN resource_providers root ON root.id = rp.root_provider_id \
                 JOIN resource_classes rc ON rc.id = a.resource_class_id \
                 LEFT OUTER JOIN consumers c ON c.uuid = a.consumer_id \
                 WHERE rc.name IN ({marks}) \
                 ORDER BY a.consumer_id, rp.id, rc.name"
            ),
            &params,
        )
        .await?;
    tx.commit().await?;
    let mut holdings: Vec<Holding> = Vec::new();
    for r in &rows {
        let (provider_id, consumer) = (r.i64(0)?, r.string(4)?);
        let (class, used) = (r.string(6)?, r.i64(7)?);
        match holdings.last_mut() {
            Some(h) if h.provider.id == provider_id && h.consumer == consumer => {
                h.resources.insert(class, used);
            }
            _ => {
                let provider = Provider { id: provider_id, uuid: r.string(1)?, name: r.opt_string(2)? };
                // A provider without a root row is its own root (the
                // tree findings report the broken chain).
                let root_uuid = r.opt_string(3)?.unwrap_or_else(|| provider.uuid.clone());
                holdings.push(Holding {
                    provider,
                    root_uuid,
                    consumer,
                    consumer_generation: r.opt_i64(5)?,
                    resources: BTreeMap::from([(class, used)]),
                });
            }
        }
    }
    Ok(holdings)
}

/// The findings of `holdings` against `nova`: an allocation whose consumer
/// Nova does not know, and a server's allocation on a compute node it is
/// not on (with no migration of it in progress there).
pub fn judge(holdings: &[Holding], nova: &NovaView) -> Vec<Finding> {
    let mut findings = Vec::new();
    for h in holdings {
        let server = nova.servers.get(&h.consumer);
        let migration = nova.migrations.get(&h.consumer);
        if server.is_none() && migration.is_none() {
            findings.push(Finding::AllocationUnknownToNova {
                provider: h.provider.clone(),
                consumer: h.consumer.clone(),
                resources: h.resources.clone(),
                consumer_generation: h.consumer_generation,
            });
            continue;
        }
        // Off Nova's trees, knowing the consumer is all Nova can vouch for.
        let Some(node) = nova.compute_nodes.get(&h.root_uuid) else { continue };
        let on_node = match server {
            // A server on no node yet is being scheduled or built: its
            // claim comes before its node.
            Some(None) => true,
            Some(Some(at)) => at == node,
            None => false,
        };
        let migrating_here = migration.is_some_and(|nodes| nodes.contains(node));
        if !on_node && !migrating_here {
            findings.push(Finding::AllocationOffServerNode {
                provider: h.provider.clone(),
                consumer: h.consumer.clone(),
                node: node.to_string(),
                server_node: server.and_then(|s| s.as_ref()).map(ToString::to_string),
                resources: h.resources.clone(),
            });
        }
    }
    findings
}

/// Deletes what one consumer Nova does not know holds on one provider, as
/// the API deletes an allocation: the consumer's generation moved (and the
/// write refused if it moved since the audit read it), the provider's
/// generation moved, the consumer record gone with its last allocation.
pub(super) async fn delete_unknown(
    db: &Db,
    provider: &Provider,
    consumer: &str,
    generation: i64,
) -> Result<bool, DbError> {
    let mut tx = db.begin().await?;
    let moved = tx
        .execute(
            "UPDATE consumers SET generation = ?, updated_at = ? WHERE uuid = ? AND generation = ?",
            &[(generation + 1).into(), keelson_db::now().into(), consumer.into(), generation.into()],
        )
        .await?;
    if moved != 1 {
        // Nothing written: ending it is the rollback.
        tx.end_read();
        return Ok(false);
    }
    tx.execute(
        "DELETE FROM allocations WHERE consumer_id = ? AND resource_provider_id = ?",
        &[consumer.into(), provider.id.into()],
    )
    .await?;
    tx.execute("UPDATE resource_providers SET generation = generation + 1 WHERE id = ?", &[provider.id.into()]).await?;
    tx.execute(
        "DELETE FROM consumers WHERE uuid = ? AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = ?)",
        &[consumer.into(), consumer.into()],
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, name: &str) -> Node {
        Node { host: host.into(), name: name.into() }
    }

    fn holding(provider: &str, root: &str, consumer: &str) -> Holding {
        Holding {
            provider: Provider { id: 1, uuid: provider.into(), name: None },
            root_uuid: root.into(),
            consumer: consumer.into(),
            consumer_generation: Some(1),
            resources: BTreeMap::from([("VCPU".to_string(), 1)]),
        }
    }

    fn view() -> NovaView {
        NovaView {
            compute_nodes: HashMap::from([
                ("cn1".to_string(), node("cmp1", "cmp1-n01")),
                ("cn2".to_string(), node("cmp1", "cmp1-n02")),
            ]),
            servers: HashMap::from([
                ("on-n01".to_string(), Some(node("cmp1", "cmp1-n01"))),
                ("building".to_string(), None),
            ]),
            migrations: HashMap::from([("mig".to_string(), vec![node("cmp1", "cmp1-n01"), node("cmp1", "cmp1-n02")])]),
        }
    }

    fn kinds(findings: &[Finding]) -> Vec<(&'static str, String)> {
        findings
            .iter()
            .map(|f| match f {
                Finding::AllocationUnknownToNova { consumer, .. }
                | Finding::AllocationOffServerNode { consumer, .. } => (f.kind(), consumer.clone()),
                _ => (f.kind(), String::new()),
            })
            .collect()
    }

    #[test]
    fn a_server_on_its_node_and_a_migration_on_either_end_are_accounted_for() {
        let holdings = [
            holding("cn1", "cn1", "on-n01"),
            holding("cn1-child", "cn1", "on-n01"),
            holding("cn1", "cn1", "mig"),
            holding("cn2", "cn2", "mig"),
            holding("cn2", "cn2", "building"),
        ];
        assert!(judge(&holdings, &view()).is_empty());
    }

    #[test]
    fn unknown_consumers_and_servers_off_their_node_are_found() {
        let holdings = [
            holding("cn1", "cn1", "gone"),
            holding("cn2", "cn2", "on-n01"),
            holding("cn2-pf", "cn2", "on-n01"),
            // A sharing provider Nova does not own: only knowing matters.
            holding("shared", "shared", "on-n01"),
            holding("shared", "shared", "gone-too"),
        ];
        let findings = judge(&holdings, &view());
        assert_eq!(
            kinds(&findings),
            [
                ("allocation-unknown-to-nova", "gone".to_string()),
                ("allocation-off-server-node", "on-n01".to_string()),
                ("allocation-off-server-node", "on-n01".to_string()),
                ("allocation-unknown-to-nova", "gone-too".to_string()),
            ]
        );
        assert_eq!(
            findings[1].to_string(),
            "Server on-n01 holds VCPU=1 on resource provider cn2 of compute node cmp1-n02 on cmp1; \
             Nova has it on cmp1-n01 on cmp1 and no migration of it in progress there"
        );
        assert_eq!(
            findings[0].to_string(),
            "Allocations were set against consumer UUID gone but no existing instances or active \
             migrations are related: VCPU=1 on resource provider cn1"
        );
    }
}
