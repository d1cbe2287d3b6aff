//! `keelson placement audit`: what a Placement database can hold that the
//! API never writes (rows edited by hand, a restore from mixed backups,
//! an inventory shrunk below its allocations through an old release), found
//! by reading the tables directly, and the part of it that can be repaired
//! without guessing.
//!
//! With Nova's view of its servers (`--nova-endpoint`, [`nova`]) it also
//! finds the allocations Nova does not account for.
//!
//! Invariant: a repair never changes a row whose state differs from the
//! one the audit read (each repair's statement repeats the condition it
//! found, in a transaction of its own), and never removes or changes an
//! allocation, with one exception: an allocation of a consumer Nova does
//! not know, which is deleted (as `nova-manage placement audit --delete`
//! does) only when Nova, asked again just before, still does not know it
//! and the consumer's generation is the one the audit read. Whatever needs
//! a decision (an over-allocated provider, an allocation of a class
//! without inventory, a broken parent chain, a server's allocation on a
//! node Nova has it elsewhere) is reported and left to the operator.

pub mod nova;
pub mod tree;

use std::collections::{BTreeMap, BTreeSet};

use keelson_db::{Db, DbError};
use keelson_placement_schema::online_migrations::{self, IncompleteConsumerOwner, OnlineMigration};
use serde::Serialize;

pub use tree::ProviderRow;

/// A provider as findings name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provider {
    #[serde(skip)]
    pub id: i64,
    pub uuid: String,
    pub name: Option<String>,
}

/// One inconsistency, as a fact about the rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Finding {
    /// Allocations of a class exceed what its inventory now offers
    /// (`(total - reserved) * allocation_ratio`), e.g. after the inventory
    /// was shrunk outside the API.
    OverCapacity { provider: Provider, resource_class: String, used: i64, capacity: f64 },
    /// A consumer holds a class on a provider that has no inventory of it.
    AllocationWithoutInventory { provider: Provider, resource_class: String, consumer: String, used: i64 },
    /// Allocations name a provider id no provider has.
    AllocationOnMissingProvider { provider_id: i64, consumer: String, used: i64 },
    /// Allocations name a resource class id no class has.
    AllocationOfUnknownClass { provider_id: i64, resource_class_id: i64, consumer: String },
    /// An allocation of nothing or less (the API refuses amounts below 1).
    NonPositiveAllocation { provider_id: i64, resource_class: String, consumer: String, used: i64 },
    /// A consumer record with no allocations: Placement deletes a consumer
    /// with its last allocation, so this one is left over.
    ConsumerWithoutAllocations { consumer: String },
    /// Allocations whose consumer has no record (written before consumers
    /// had records, or the record was deleted by hand).
    IncompleteConsumer { consumer: String },
    /// A consumer whose project or user row is missing.
    ConsumerWithoutOwner { consumer: String },
    /// A provider's parent id names no provider.
    MissingParent { provider: Provider, parent_id: i64 },
    /// A provider is its own ancestor.
    ParentCycle { provider: Provider },
    /// A provider's recorded root is not the top of its parent chain.
    WrongRoot {
        provider: Provider,
        recorded: Option<i64>,
        expected: i64,
        #[serde(skip)]
        parent_id: Option<i64>,
    },
    /// A provider has no generation, so no client can update it.
    MissingGeneration { provider: Provider },
    /// Allocations of Nova's classes whose consumer Nova knows neither as a
    /// server nor as a migration in progress (a deleted server's leftover).
    AllocationUnknownToNova {
        provider: Provider,
        consumer: String,
        resources: BTreeMap<String, i64>,
        #[serde(skip)]
        consumer_generation: Option<i64>,
    },
    /// A server's allocation on a compute node (tree) Nova has it on
    /// another node of, with no migration of it in progress there.
    AllocationOffServerNode {
        provider: Provider,
        consumer: String,
        /// The node of the provider's tree.
        node: String,
        /// The node Nova has the server on.
        server_node: Option<String>,
        resources: BTreeMap<String, i64>,
    },
}

impl Finding {
    /// The finding's stable name (the JSON `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Finding::OverCapacity { .. } => "over-capacity",
            Finding::AllocationWithoutInventory { .. } => "allocation-without-inventory",
            Finding::AllocationOnMissingProvider { .. } => "allocation-on-missing-provider",
            Finding::AllocationOfUnknownClass { .. } => "allocation-of-unknown-class",
            Finding::NonPositiveAllocation { .. } => "non-positive-allocation",
            Finding::ConsumerWithoutAllocations { .. } => "consumer-without-allocations",
            Finding::IncompleteConsumer { .. } => "incomplete-consumer",
            Finding::ConsumerWithoutOwner { .. } => "consumer-without-owner",
            Finding::MissingParent { .. } => "missing-parent",
            Finding::ParentCycle { .. } => "parent-cycle",
            Finding::WrongRoot { .. } => "wrong-root",
            Finding::MissingGeneration { .. } => "missing-generation",
            Finding::AllocationUnknownToNova { .. } => "allocation-unknown-to-nova",
            Finding::AllocationOffServerNode { .. } => "allocation-off-server-node",
        }
    }

    /// The provider the finding is about, when it is about one that exists.
    pub fn provider(&self) -> Option<&Provider> {
        match self {
            Finding::OverCapacity { provider, .. }
            | Finding::AllocationWithoutInventory { provider, .. }
            | Finding::MissingParent { provider, .. }
            | Finding::ParentCycle { provider }
            | Finding::WrongRoot { provider, .. }
            | Finding::MissingGeneration { provider }
            | Finding::AllocationUnknownToNova { provider, .. }
            | Finding::AllocationOffServerNode { provider, .. } => Some(provider),
            _ => None,
        }
    }

    /// Whether `--fix` may repair it: what restores a state the API itself
    /// would have written, and the deletion of an allocation Nova does not
    /// know (once Nova confirms it).
    pub fn is_repairable(&self) -> bool {
        matches!(
            self,
            Finding::ConsumerWithoutAllocations { .. }
                | Finding::IncompleteConsumer { .. }
                | Finding::WrongRoot { .. }
                | Finding::MissingGeneration { .. }
                | Finding::AllocationUnknownToNova { consumer_generation: Some(_), .. }
        )
    }
}

fn named(p: &Provider) -> String {
    match &p.name {
        Some(name) => format!("{} ({name})", p.uuid),
        None => p.uuid.clone(),
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::OverCapacity { provider, resource_class, used, capacity } => write!(
                f,
                "Resource provider {} is over capacity for {resource_class}: {used} allocated, capacity {capacity}",
                named(provider)
            ),
            Finding::AllocationWithoutInventory { provider, resource_class, consumer, used } => write!(
                f,
                "Consumer {consumer} holds {used} {resource_class} on resource provider {}, which has no {resource_class} inventory",
                named(provider)
            ),
            Finding::AllocationOnMissingProvider { provider_id, consumer, used } => {
                write!(f, "Consumer {consumer} holds {used} units on resource provider id {provider_id}, which does not exist")
            }
            Finding::AllocationOfUnknownClass { provider_id, resource_class_id, consumer } => write!(
                f,
                "Consumer {consumer} holds resource class id {resource_class_id} on resource provider id {provider_id}; no such class exists"
            ),
            Finding::NonPositiveAllocation { provider_id, resource_class, consumer, used } => write!(
                f,
                "Consumer {consumer} holds {used} {resource_class} on resource provider id {provider_id} (amounts below 1 are never valid)"
            ),
            Finding::ConsumerWithoutAllocations { consumer } => {
                write!(f, "Consumer {consumer} has a record but no allocations")
            }
            Finding::IncompleteConsumer { consumer } => write!(f, "Consumer {consumer} has allocations but no record"),
            Finding::ConsumerWithoutOwner { consumer } => {
                write!(f, "Consumer {consumer} names a project or user that does not exist")
            }
            Finding::MissingParent { provider, parent_id } => {
                write!(f, "Resource provider {} has parent id {parent_id}, which does not exist", named(provider))
            }
            Finding::ParentCycle { provider } => {
                write!(f, "Resource provider {} is its own ancestor", named(provider))
            }
            Finding::WrongRoot { provider, recorded, expected, .. } => match recorded {
                Some(r) => write!(
                    f,
                    "Resource provider {} records root id {r}; the top of its parent chain is id {expected}",
                    named(provider)
                ),
                None => write!(
                    f,
                    "Resource provider {} records no root; the top of its parent chain is id {expected}",
                    named(provider)
                ),
            },
            Finding::MissingGeneration { provider } => {
                write!(f, "Resource provider {} has no generation", named(provider))
            }
            // nova-manage's words, so that scripts reading its output read ours.
            Finding::AllocationUnknownToNova { provider, consumer, resources, .. } => write!(
                f,
                "Allocations were set against consumer UUID {consumer} but no existing instances or active \
                 migrations are related: {} on resource provider {}",
                amounts(resources),
                named(provider)
            ),
            Finding::AllocationOffServerNode { provider, consumer, node, server_node, resources } => write!(
                f,
                "Server {consumer} holds {} on resource provider {} of compute node {node}; Nova has it on {} \
                 and no migration of it in progress there",
                amounts(resources),
                named(provider),
                server_node.as_deref().unwrap_or("no node")
            ),
        }
    }
}

fn amounts(resources: &BTreeMap<String, i64>) -> String {
    resources.iter().map(|(class, used)| format!("{class}={used}")).collect::<Vec<_>>().join(",")
}

/// What one audit read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub providers: u64,
    pub allocations: u64,
    pub consumers: u64,
    pub findings: Vec<Finding>,
}

/// Reads the whole database once and answers every finding.
pub async fn audit(db: &Db) -> Result<Report, DbError> {
    let mut tx = db.begin_read().await?;
    let mut report = Report {
        providers: count(&mut tx, "SELECT COUNT(*) FROM resource_providers").await?,
        allocations: count(&mut tx, "SELECT COUNT(*) FROM allocations").await?,
        consumers: count(&mut tx, "SELECT COUNT(*) FROM consumers").await?,
        findings: Vec::new(),
    };

    let providers = read_providers(&mut tx).await?;
    let by_id: BTreeMap<i64, Provider> = providers.iter().map(|r| (r.provider.id, r.provider.clone())).collect();
    let classes: BTreeMap<i64, String> = tx
        .fetch_all("SELECT id, name FROM resource_classes", &[])
        .await?
        .iter()
        .map(|r| Ok((r.i64(0)?, r.string(1)?)))
        .collect::<Result<_, DbError>>()?;
    let class_name = |id: i64| classes.get(&id).cloned().unwrap_or_else(|| format!("resource class id {id}"));

    // Capacity: the sum of allocations per inventory, judged as the
    // allocation write judges it.
    for r in tx
        .fetch_all(
            "SELECT i.resource_provider_id, i.resource_class_id, i.total, i.reserved, i.allocation_ratio, SUM(a.used) \
             FROM inventories i JOIN allocations a \
             ON a.resource_provider_id = i.resource_provider_id AND a.resource_class_id = i.resource_class_id \
             GROUP BY i.resource_provider_id, i.resource_class_id, i.total, i.reserved, i.allocation_ratio \
             ORDER BY i.resource_provider_id, i.resource_class_id",
            &[],
        )
        .await?
    {
        let (rp, rc, total, reserved, ratio, used) = (r.i64(0)?, r.i64(1)?, r.i64(2)?, r.i64(3)?, r.f64(4)?, r.i64(5)?);
        #[allow(clippy::cast_precision_loss)] // inventory totals are far below 2^52
        let capacity = (total - reserved) as f64 * ratio;
        #[allow(clippy::cast_precision_loss)]
        let over = used as f64 > capacity;
        if over {
            if let Some(provider) = by_id.get(&rp) {
                report.findings.push(Finding::OverCapacity {
                    provider: provider.clone(),
                    resource_class: class_name(rc),
                    used,
                    capacity,
                });
            }
        }
    }

    // Each allocation row against its provider, class and inventory.
    for r in tx
        .fetch_all(
            "SELECT a.resource_provider_id, a.resource_class_id, a.consumer_id, a.used, \
             i.id, rc.id FROM allocations a \
             LEFT OUTER JOIN inventories i \
             ON i.resource_provider_id = a.resource_provider_id AND i.resource_class_id = a.resource_class_id \
             LEFT OUTER JOIN resource_classes rc ON rc.id = a.resource_class_id \
             ORDER BY a.consumer_id, a.resource_provider_id, a.resource_class_id",
            &[],
        )
        .await?
    {
        let (rp, rc, consumer, used) = (r.i64(0)?, r.i64(1)?, r.string(2)?, r.i64(3)?);
        let (has_inventory, class_known) = (!r.is_null(4), !r.is_null(5));
        if used < 1 {
            report.findings.push(Finding::NonPositiveAllocation {
                provider_id: rp,
                resource_class: class_name(rc),
                consumer: consumer.clone(),
                used,
            });
        }
        match by_id.get(&rp) {
            None => report.findings.push(Finding::AllocationOnMissingProvider { provider_id: rp, consumer, used }),
            Some(_) if !class_known => report.findings.push(Finding::AllocationOfUnknownClass {
                provider_id: rp,
                resource_class_id: rc,
                consumer,
            }),
            Some(provider) if !has_inventory => report.findings.push(Finding::AllocationWithoutInventory {
                provider: provider.clone(),
                resource_class: class_name(rc),
                consumer,
                used,
            }),
            Some(_) => {}
        }
    }

    // Consumers against allocations and owners.
    for r in tx
        .fetch_all(
            "SELECT c.uuid FROM consumers c WHERE NOT EXISTS \
             (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid) ORDER BY c.uuid",
            &[],
        )
        .await?
    {
        report.findings.push(Finding::ConsumerWithoutAllocations { consumer: r.string(0)? });
    }
    for r in tx
        .fetch_all(
            "SELECT DISTINCT a.consumer_id FROM allocations a LEFT OUTER JOIN consumers c ON c.uuid = a.consumer_id \
             WHERE c.id IS NULL ORDER BY a.consumer_id",
            &[],
        )
        .await?
    {
        report.findings.push(Finding::IncompleteConsumer { consumer: r.string(0)? });
    }
    for r in tx
        .fetch_all(
            "SELECT c.uuid FROM consumers c LEFT OUTER JOIN projects p ON p.id = c.project_id \
             LEFT OUTER JOIN users u ON u.id = c.user_id WHERE p.id IS NULL OR u.id IS NULL ORDER BY c.uuid",
            &[],
        )
        .await?
    {
        report.findings.push(Finding::ConsumerWithoutOwner { consumer: r.string(0)? });
    }
    tx.commit().await?;

    report.findings.extend(tree::check(&providers));
    Ok(report)
}

async fn count(tx: &mut keelson_db::Tx, sql: &str) -> Result<u64, DbError> {
    let rows = tx.fetch_all(sql, &[]).await?;
    let n = rows.first().map(|r| r.i64(0)).transpose()?.unwrap_or(0);
    Ok(n.max(0).unsigned_abs())
}

async fn read_providers(tx: &mut keelson_db::Tx) -> Result<Vec<ProviderRow>, DbError> {
    tx.fetch_all(
        "SELECT id, uuid, name, generation, root_provider_id, parent_provider_id FROM resource_providers ORDER BY id",
        &[],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(ProviderRow {
            provider: Provider { id: r.i64(0)?, uuid: r.string(1)?, name: r.opt_string(2)? },
            generation: r.opt_i64(3)?,
            root_provider_id: r.opt_i64(4)?,
            parent_provider_id: r.opt_i64(5)?,
        })
    })
    .collect()
}

/// What `--fix` did with one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepairOutcome {
    /// Repaired.
    Repaired,
    /// The rows changed since the audit read them; nothing was written.
    Changed,
    /// Not repairable without a decision; left alone.
    Left,
}

/// Repairs what is repairable among `findings`, each in a transaction of
/// its own whose statement repeats the condition found; answers one
/// outcome per finding, in order. An allocation unknown to Nova is deleted
/// only when its consumer is in `unknown_to_nova`: the consumers Nova,
/// asked again just before, still does not know.
pub async fn repair(
    db: &Db,
    findings: &[Finding],
    owner: &IncompleteConsumerOwner,
    unknown_to_nova: &BTreeSet<String>,
) -> Result<Vec<RepairOutcome>, DbError> {
    let mut outcomes = Vec::with_capacity(findings.len());
    let incomplete = findings.iter().filter(|f| matches!(f, Finding::IncompleteConsumer { .. })).count();
    // Upstream's own migration creates the missing consumer records; it
    // runs once for all of them.
    let mut created = if incomplete > 0 {
        let limit = u64::try_from(incomplete).unwrap_or(u64::MAX);
        online_migrations::run_batch(db, OnlineMigration::CreateIncompleteConsumers, limit, owner).await?.done
    } else {
        0
    };
    for finding in findings {
        let outcome = match finding {
            Finding::IncompleteConsumer { .. } => {
                if created > 0 {
                    created -= 1;
                    RepairOutcome::Repaired
                } else {
                    RepairOutcome::Changed
                }
            }
            Finding::ConsumerWithoutAllocations { consumer } => {
                written(
                    db,
                    "DELETE FROM consumers WHERE uuid = ? AND NOT EXISTS \
                 (SELECT 1 FROM allocations WHERE allocations.consumer_id = ?)",
                    &[consumer.as_str().into(), consumer.as_str().into()],
                )
                .await?
            }
            Finding::WrongRoot { provider, recorded, expected, parent_id } => {
                let (root_test, parent_test) = (
                    if recorded.is_some() { "root_provider_id = ?" } else { "root_provider_id IS NULL" },
                    if parent_id.is_some() { "parent_provider_id = ?" } else { "parent_provider_id IS NULL" },
                );
                let mut params = vec![(*expected).into(), provider.id.into()];
                params.extend(recorded.iter().map(|r| (*r).into()));
                params.extend(parent_id.iter().map(|p| (*p).into()));
                written(
                    db,
                    &format!(
                        "UPDATE resource_providers SET root_provider_id = ? WHERE id = ? AND {root_test} AND {parent_test}"
                    ),
                    &params,
                )
                .await?
            }
            Finding::MissingGeneration { provider } => {
                written(
                    db,
                    "UPDATE resource_providers SET generation = 0 WHERE id = ? AND generation IS NULL",
                    &[provider.id.into()],
                )
                .await?
            }
            Finding::AllocationUnknownToNova { provider, consumer, consumer_generation: Some(generation), .. } => {
                if !unknown_to_nova.contains(consumer) {
                    RepairOutcome::Changed
                } else if nova::delete_unknown(db, provider, consumer, *generation).await? {
                    RepairOutcome::Repaired
                } else {
                    RepairOutcome::Changed
                }
            }
            _ => RepairOutcome::Left,
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// One guarded statement in its own transaction: repaired when it changed
/// a row, changed-meanwhile when its condition no longer held.
async fn written(db: &Db, sql: &str, params: &[keelson_db::Value]) -> Result<RepairOutcome, DbError> {
    let mut tx = db.begin().await?;
    let n = tx.execute(sql, params).await?;
    tx.commit().await?;
    Ok(if n > 0 { RepairOutcome::Repaired } else { RepairOutcome::Changed })
}
