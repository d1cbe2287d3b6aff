//! Allocations: amounts of a provider's inventory held by consumers.
//!
//! A write replaces the whole allocation set of each consumer it names, in
//! one transaction: the consumers are created or checked (consumer
//! generation), the new amounts are checked against every inventory
//! involved (min_unit, max_unit, step_size and capacity), and the
//! generation of every provider and consumer involved moves on by one.
//!
//! Each attempt reads the provider generations in its own, new
//! transaction and moves them on with `UPDATE … WHERE generation = ?`; a
//! writer that committed in between makes that update miss, and the whole
//! write is retried from a fresh read (never the failed attempt's
//! snapshot), up to `allocation_conflict_retry_count` times. A consumer
//! generation mismatch is the caller's conflict and is never retried.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;

use keelson_db::DbError;
use keelson_db::{in_list, now, Tx, Value, IN_LIST_CHUNK};

use super::consumers::{
    create_consumer, delete_consumers, ensure_consumer_type, ensure_project, ensure_user, find_consumer,
    increment_consumer_generation, update_consumer, ConsumerRow,
};
use super::inventories::{increment_provider_generation, resource_class_ids, stored_ratio, PROVIDER_CONCURRENT_UPDATE};
use super::{sum_as_bigint, Store, StoreSettings};
use crate::error::{Error, Result};

/// Retries of a write that hit a deadlock, a serialization failure or a
/// concurrent insert of the same project, user, type or consumer. On
/// Galera, writers of the same provider through different nodes fail
/// certification at COMMIT (1213) in runs while a node's applier catches
/// up: 5 retries (at most about 60 ms of pauses) let a few writes in ten
/// thousand fail with 64 writers on 10 providers over 3 nodes
/// (tests/bench/galera.py); 10 pause at most about 0.6 s.
const DB_RETRIES: u32 = 10;

/// Amounts asked of one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderAmounts {
    pub provider_uuid: String,
    /// In request order (it decides which failure is reported first).
    pub resources: Vec<(String, i64)>,
}

/// How a write checks the caller's idea of a consumer's generation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GenerationCheck {
    /// Not checked (REST before 1.28).
    Ignored,
    /// Must equal the stored generation; `None`: the consumer must not
    /// exist yet.
    Expect(Option<i64>),
}

/// The allocations one consumer should hold after a write.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerWrite {
    pub uuid: String,
    /// Empty: remove the consumer's allocations.
    pub allocations: Vec<ProviderAmounts>,
    /// `None`: an incomplete consumer (the configured project and user).
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub generation: GenerationCheck,
    /// `None`: the consumer keeps its type.
    pub consumer_type: Option<String>,
}

/// Which operation a write is: upstream words some failures differently
/// for each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WriteOp<'a> {
    /// One consumer's allocations (REST PUT /allocations/{consumer}).
    Consumer(&'a str),
    /// Several consumers at once (REST POST /allocations).
    Many,
    /// Part of a reshape (REST POST /reshaper).
    Reshape,
}

impl WriteOp<'_> {
    fn unknown_class(self, name: &str) -> Error {
        let cause = format!("No such resource class {name}.");
        Error::BadRequest(match self {
            WriteOp::Consumer(uuid) => format!("Unable to allocate inventory for consumer {uuid}: {cause}"),
            WriteOp::Many => format!("Unable to allocate inventory {cause}"),
            WriteOp::Reshape => format!("malformed reshaper data: {cause}"),
        })
    }

    /// A generation that moved under the write.
    pub(crate) fn concurrent_update(self, cause: &str) -> Error {
        Error::concurrent_update(match self {
            WriteOp::Reshape => format!("update conflict: {cause}"),
            _ => format!("Inventory and/or allocations changed while attempting to allocate: {cause}"),
        })
    }
}

const CONSUMER_CONCURRENT_UPDATE: &str = "Another thread concurrently updated the data. Please retry your update";

/// A provider as a write saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProviderState {
    pub id: i64,
    pub generation: i64,
}

/// Why one attempt at a write failed.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// A provider generation moved since it was read: try again.
    ProviderConflict,
    /// Deadlock, serialization failure or lost insert race: try again.
    Retry(DbError),
    /// The caller's error (or a database failure): give up.
    Fail(Error),
}

impl From<Error> for WriteFailure {
    fn from(e: Error) -> Self {
        match e {
            Error::Db(d) if d.is_retryable() || d.is_unique_violation() => WriteFailure::Retry(d),
            e => WriteFailure::Fail(e),
        }
    }
}

impl From<DbError> for WriteFailure {
    fn from(e: DbError) -> Self {
        Error::Db(e).into()
    }
}

type AttemptResult<T> = std::result::Result<T, WriteFailure>;

/// One allocation row to write; `used == 0` only removes (a consumer that
/// asks for nothing gives up what it held).
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    pub provider_uuid: String,
    /// Index into the consumers of the write.
    pub consumer: usize,
    pub resource_class: String,
    pub used: i64,
}

/// A consumer as the write found or created it, with what the request
/// asks its project, user and type to be.
#[derive(Debug, Clone)]
pub(crate) struct EnsuredConsumer {
    pub row: ConsumerRow,
    pub wanted_project: (i64, String),
    pub wanted_user: (i64, String),
    pub wanted_type: Option<(i64, String)>,
}

/// Finds or creates each consumer, checking generations (upstream's
/// `ensure_consumer`), in request order.
pub(crate) async fn ensure_consumers(
    tx: &mut Tx,
    consumers: &[ConsumerWrite],
    settings: &StoreSettings,
) -> AttemptResult<Vec<EnsuredConsumer>> {
    let mut out = Vec::with_capacity(consumers.len());
    for c in consumers {
        let (project, user) = match &c.project_id {
            Some(p) => (p.clone(), c.user_id.clone().unwrap_or_else(|| settings.incomplete_consumer_user_id.clone())),
            None => (settings.incomplete_consumer_project_id.clone(), settings.incomplete_consumer_user_id.clone()),
        };
        let project_id = ensure_project(tx, &project).await?;
        let user_id = ensure_user(tx, &user).await?;
        let existing = find_consumer(tx, &c.uuid).await?;
        if let (GenerationCheck::Expect(expected), Some(row)) = (c.generation, &existing) {
            if expected != Some(row.generation) {
                let got = expected.map(|g| g.to_string()).unwrap_or_else(|| "None".into());
                return Err(WriteFailure::Fail(Error::concurrent_update(format!(
                    "consumer generation conflict - expected {} but got {got}",
                    row.generation
                ))));
            }
        }
        if let (GenerationCheck::Expect(Some(got)), None) = (c.generation, &existing) {
            return Err(WriteFailure::Fail(Error::concurrent_update(format!(
                "consumer generation conflict - expected null but got {got}"
            ))));
        }
        let wanted_type = match &c.consumer_type {
            Some(name) => Some((ensure_consumer_type(tx, name).await?, name.clone())),
            None => None,
        };
        let row = match existing {
            Some(row) => row,
            None => {
                let ty = wanted_type.as_ref().map(|(id, n)| (*id, n.as_str()));
                create_consumer(tx, &c.uuid, (project_id, &project), (user_id, &user), ty).await?
            }
        };
        out.push(EnsuredConsumer {
            row,
            wanted_project: (project_id, project),
            wanted_user: (user_id, user),
            wanted_type,
        });
    }
    Ok(out)
}

/// Records the requested project, user and type of consumers whose
/// stored ones differ (upstream's `update_consumers`).
pub(crate) async fn update_consumers(tx: &mut Tx, ensured: &mut [EnsuredConsumer]) -> AttemptResult<()> {
    for c in ensured.iter_mut() {
        let owner_changed = c.row.project_id != c.wanted_project.0 || c.row.user_id != c.wanted_user.0;
        let type_changed = c.wanted_type.as_ref().is_some_and(|(id, _)| Some(*id) != c.row.consumer_type_id);
        if !owner_changed && !type_changed {
            continue;
        }
        if owner_changed {
            c.row.project_id = c.wanted_project.0;
            c.row.project = c.wanted_project.1.clone();
            c.row.user_id = c.wanted_user.0;
            c.row.user = c.wanted_user.1.clone();
        }
        if let Some((id, name)) = c.wanted_type.clone().filter(|_| type_changed) {
            c.row.consumer_type_id = Some(id);
            c.row.consumer_type = Some(name);
        }
        update_consumer(tx, &c.row).await?;
    }
    Ok(())
}

/// The rows a write will produce, in request order. A consumer asking for
/// nothing contributes its current allocations at 0 (so their providers
/// and the consumer itself take part in the write).
pub(crate) async fn plan_allocations(
    tx: &mut Tx,
    consumers: &[ConsumerWrite],
    providers: &HashMap<String, ProviderState>,
) -> AttemptResult<Vec<Planned>> {
    let mut plan = Vec::new();
    for (index, c) in consumers.iter().enumerate() {
        if c.allocations.is_empty() {
            for (provider_uuid, resource_class, _) in allocations_of_consumer(tx, &c.uuid).await? {
                plan.push(Planned { provider_uuid, consumer: index, resource_class, used: 0 });
            }
            continue;
        }
        if let Some(missing) = c.allocations.iter().find(|a| !providers.contains_key(&a.provider_uuid)) {
            return Err(WriteFailure::Fail(Error::BadRequest(format!(
                "Allocation for resource provider '{}' that does not exist.",
                missing.provider_uuid
            ))));
        }
        for a in &c.allocations {
            for (rc, used) in &a.resources {
                plan.push(Planned {
                    provider_uuid: a.provider_uuid.clone(),
                    consumer: index,
                    resource_class: rc.clone(),
                    used: *used,
                });
            }
        }
    }
    Ok(plan)
}

/// (provider uuid, class, used) of a consumer's allocations.
async fn allocations_of_consumer(tx: &mut Tx, consumer_uuid: &str) -> Result<Vec<(String, String, i64)>> {
    let rows = tx
        .fetch_all(
            "SELECT rp.uuid, rc.name, a.used FROM allocations a \
             JOIN resource_providers rp ON rp.id = a.resource_provider_id \
             JOIN resource_classes rc ON rc.id = a.resource_class_id \
             WHERE a.consumer_id = ? ORDER BY a.id",
            &[consumer_uuid.into()],
        )
        .await?;
    rows.iter().map(|r| Ok((r.string(0)?, r.string(1)?, r.i64(2)?))).collect()
}

/// Upstream's `InvalidInventory` family, as 409 "Unable to allocate
/// inventory: …".
fn unable_to_allocate(cause: String) -> WriteFailure {
    WriteFailure::Fail(Error::conflict(format!("Unable to allocate inventory: {cause}")))
}

/// One inventory with what is allocated of it.
struct InventoryUsage {
    total: i64,
    reserved: i64,
    min_unit: i64,
    max_unit: i64,
    step_size: i64,
    allocation_ratio: f64,
    used: i64,
}

/// Usage by (provider id, class id) of the given providers and classes.
async fn usage_summary(tx: &mut Tx, provider_ids: &[i64], class_ids: &[i64]) -> Result<HashMap<(i64, i64), i64>> {
    let mut params: Vec<Value> = provider_ids.iter().map(|id| Value::from(*id)).collect();
    params.extend(class_ids.iter().map(|id| Value::from(*id)));
    let sql = format!(
        "SELECT resource_provider_id, resource_class_id, {} FROM allocations \
         WHERE resource_provider_id IN ({}) AND resource_class_id IN ({}) \
         GROUP BY resource_provider_id, resource_class_id",
        sum_as_bigint(tx.dialect, "used"),
        in_list(provider_ids.len()),
        in_list(class_ids.len())
    );
    let mut out = HashMap::new();
    for r in tx.fetch_all(&sql, &params).await? {
        out.insert((r.i64(0)?, r.i64(1)?), r.opt_i64(2)?.unwrap_or(0));
    }
    Ok(out)
}

/// Writes a plan: replaces the allocations of its consumers, checks every
/// inventory involved, and moves the generations of its consumers on by
/// one. Consumers left without allocations are deleted. The generations of
/// the plan's providers ([`plan_providers`]) are the caller's to move.
pub(crate) async fn write_planned(
    tx: &mut Tx,
    op: WriteOp<'_>,
    plan: &[Planned],
    consumers: &[EnsuredConsumer],
    providers: &HashMap<String, ProviderState>,
) -> AttemptResult<()> {
    if plan.is_empty() {
        return Ok(());
    }
    let class_names: Vec<&str> = plan.iter().map(|p| p.resource_class.as_str()).collect();
    let class_ids = resource_class_ids(tx, &class_names).await?;
    if let Some(unknown) = plan.iter().find(|p| !class_ids.contains_key(&p.resource_class)) {
        return Err(WriteFailure::Fail(op.unknown_class(&unknown.resource_class)));
    }
    let provider_order = plan_providers(plan);
    let mut provider_ids = Vec::with_capacity(provider_order.len());
    for uuid in &provider_order {
        // A provider the read did not see appeared or changed since.
        let state = providers.get(*uuid).ok_or(WriteFailure::ProviderConflict)?;
        provider_ids.push(state.id);
    }
    let unique_class_ids: Vec<i64> = class_ids.values().copied().collect::<BTreeSet<_>>().into_iter().collect();
    let previous_usage = usage_summary(tx, &provider_ids, &unique_class_ids).await?;

    // A clean slate for every consumer of the plan.
    let consumer_indexes: BTreeSet<usize> = plan.iter().map(|p| p.consumer).collect();
    let consumer_uuids: Vec<String> = consumer_indexes.iter().map(|i| consumers[*i].row.uuid.clone()).collect();
    let params: Vec<Value> = consumer_uuids.iter().map(Value::from).collect();
    // Deleting by primary key, and only rows that exist: a ranged DELETE
    // on MariaDB gap-locks the consumer index, and concurrent writers of
    // new consumers then deadlock on their inserts.
    // Each row is read with what it holds, so that the usage after giving
    // it up is the usage before minus these (no second read of the sums).
    let mut ids: Vec<Value> = Vec::new();
    let mut after_giving_up: Option<HashMap<(i64, i64), i64>> = None;
    for chunk in params.chunks(IN_LIST_CHUNK) {
        let sql = format!(
            "SELECT id, resource_provider_id, resource_class_id, used FROM allocations WHERE consumer_id IN ({})",
            in_list(chunk.len())
        );
        for r in tx.fetch_all(&sql, chunk).await? {
            ids.push(Value::from(r.i64(0)?));
            let usage = after_giving_up.get_or_insert_with(|| previous_usage.clone());
            // Rows on providers or classes outside the write are not checked.
            if let Some(used) = usage.get_mut(&(r.i64(1)?, r.i64(2)?)) {
                *used -= r.i64(3)?;
            }
        }
    }
    for chunk in ids.chunks(IN_LIST_CHUNK) {
        tx.execute(&format!("DELETE FROM allocations WHERE id IN ({})", in_list(chunk.len())), chunk).await?;
    }
    // The usage the capacity check counts from: the usage before the
    // write unless the plan's consumers gave some of it up just now (a new
    // consumer, as in every boot, gives up nothing). Both are true to the
    // end of the transaction: every other writer of these providers waits
    // on their generations moved above, and every other writer of these
    // consumers fails the compare-and-swap of their generations below.
    let usage_now = after_giving_up.as_ref().unwrap_or(&previous_usage);
    let usage = UsageAround { now: usage_now, before: &previous_usage };

    check_capacity(tx, plan, providers, &provider_order, &class_ids, &unique_class_ids, usage).await?;

    // One statement for all the rows (a boot's VCPU, MEMORY_MB and DISK_GB).
    let ts = now();
    let mut rows: Vec<Value> = Vec::with_capacity(5 * plan.len());
    for p in plan.iter().filter(|p| p.used > 0) {
        let (Some(state), Some(rc_id)) = (providers.get(&p.provider_uuid), class_ids.get(&p.resource_class)) else {
            return Err(WriteFailure::ProviderConflict);
        };
        rows.extend([
            state.id.into(),
            consumers[p.consumer].row.uuid.as_str().into(),
            (*rc_id).into(),
            p.used.into(),
            ts.into(),
        ]);
    }
    if !rows.is_empty() {
        tx.insert_rows(
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at)",
            5,
            &rows,
        )
        .await?;
    }

    for i in &consumer_indexes {
        let row = &consumers[*i].row;
        if !increment_consumer_generation(tx, row.id, row.generation).await? {
            return Err(WriteFailure::Fail(op.concurrent_update(CONSUMER_CONCURRENT_UPDATE)));
        }
    }
    // Their generations just moved, and the plan removed all they held.
    let holding: BTreeSet<usize> = plan.iter().filter(|p| p.used > 0).map(|p| p.consumer).collect();
    let emptied: Vec<i64> = consumer_indexes.difference(&holding).map(|i| consumers[*i].row.id).collect();
    delete_consumers(tx, &emptied).await?;
    Ok(())
}

/// Usage by (provider id, class id) of a write's providers: `before` the
/// write, and `now`, once its consumers gave up their previous allocations.
#[derive(Clone, Copy)]
struct UsageAround<'a> {
    now: &'a HashMap<(i64, i64), i64>,
    before: &'a HashMap<(i64, i64), i64>,
}

/// Placement's capacity check, run after the plan's consumers gave up
/// their previous allocations. Every provider must have inventory of at
/// least one class of the write; every amount must respect its
/// inventory's min_unit, max_unit and step_size; and the provider's usage
/// must fit `(total - reserved) * allocation_ratio`, unless the write
/// leaves an already over-committed inventory no worse than before.
async fn check_capacity(
    tx: &mut Tx,
    plan: &[Planned],
    providers: &HashMap<String, ProviderState>,
    provider_order: &[&str],
    class_ids: &HashMap<String, i64>,
    unique_class_ids: &[i64],
    usage: UsageAround<'_>,
) -> AttemptResult<()> {
    let previous_usage = usage.before;
    let ids: Vec<i64> = provider_order.iter().filter_map(|u| providers.get(*u).map(|s| s.id)).collect();
    let mut params: Vec<Value> = ids.iter().map(|id| Value::from(*id)).collect();
    params.extend(unique_class_ids.iter().map(|id| Value::from(*id)));
    // The usage comes from `usage`, summed over the (provider, class)
    // index by a range the optimizer measures, not from a subquery per
    // inventory row: for that one MariaDB judges its index by table
    // statistics, which lag a growing allocations table, and under a
    // stream of writes it chose the class index and read every allocation
    // of the class for each write.
    let sql = format!(
        "SELECT i.resource_provider_id, i.resource_class_id, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, \
         i.allocation_ratio FROM inventories i \
         WHERE i.resource_provider_id IN ({}) AND i.resource_class_id IN ({})",
        in_list(ids.len()),
        in_list(unique_class_ids.len())
    );
    let mut inventory: HashMap<(i64, i64), InventoryUsage> = HashMap::new();
    for r in tx.fetch_all(&sql, &params).await? {
        let key = (r.i64(0)?, r.i64(1)?);
        inventory.insert(
            key,
            InventoryUsage {
                total: r.i64(2)?,
                reserved: r.i64(3)?,
                min_unit: r.i64(4)?,
                max_unit: r.i64(5)?,
                step_size: r.i64(6)?,
                allocation_ratio: stored_ratio(tx.dialect, r.f64(7)?),
                used: usage.now.get(&key).copied().unwrap_or(0),
            },
        );
    }
    let with_inventory: BTreeSet<i64> = inventory.keys().map(|(rp, _)| *rp).collect();
    let missing: Vec<&str> = provider_order
        .iter()
        .copied()
        .filter(|u| providers.get(*u).is_some_and(|s| !with_inventory.contains(&s.id)))
        .collect();
    if !missing.is_empty() {
        let mut by_id: Vec<(&i64, &String)> = class_ids.iter().map(|(n, id)| (id, n)).collect();
        by_id.sort();
        by_id.dedup_by_key(|(id, _)| **id);
        let classes: Vec<&str> = by_id.iter().map(|(_, n)| n.as_str()).collect();
        return Err(unable_to_allocate(format!(
            "Inventory for '{}' on resource provider '{}' invalid.",
            classes.join(", "),
            missing.join(", ")
        )));
    }

    let mut asked: HashMap<(i64, i64), i64> = HashMap::new();
    for p in plan {
        let (Some(state), Some(&rc_id)) = (providers.get(&p.provider_uuid), class_ids.get(&p.resource_class)) else {
            return Err(WriteFailure::ProviderConflict);
        };
        let key = (state.id, rc_id);
        let asked_all = {
            let sum = asked.entry(key).or_insert(0);
            *sum = sum.saturating_add(p.used);
            *sum
        };
        if p.used == 0 {
            continue;
        }
        let (rc, rp) = (&p.resource_class, &p.provider_uuid);
        let Some(inv) = inventory.get(&key) else {
            return Err(unable_to_allocate(format!("Inventory for '{rc}' on resource provider '{rp}' invalid.")));
        };
        if p.used < inv.min_unit || p.used > inv.max_unit || p.used % inv.step_size.max(1) != 0 {
            tracing::warn!(
                target: "keelson::inventory",
                "Allocation for {rc} on resource provider {rp} violates min_unit, max_unit, or step_size. \
                 Requested: {}, min_unit: {}, max_unit: {}, step_size: {}",
                p.used, inv.min_unit, inv.max_unit, inv.step_size
            );
            return Err(unable_to_allocate(format!(
                "Unable to create allocation for '{rc}' on resource provider '{rp}'. The requested amount would violate inventory constraints."
            )));
        }
        let capacity = inv.total.saturating_sub(inv.reserved) as f64 * inv.allocation_ratio;
        let needed = inv.used.saturating_add(p.used) as f64;
        let needed_all = inv.used.saturating_add(asked_all);
        if capacity < needed || capacity < needed_all as f64 {
            // Over capacity: allowed only when no worse than before.
            match previous_usage.get(&key) {
                Some(&before) if needed_all <= before => {
                    tracing::warn!(
                        target: "keelson::inventory",
                        "Over capacity for {rc} on resource provider {rp} but allocation of {} reduces existing overage from {before} to {needed_all}",
                        p.used
                    );
                }
                _ => {
                    tracing::warn!(
                        target: "keelson::inventory",
                        "Over capacity for {rc} on resource provider {rp}. Needed: {}, Used: {}, Capacity: {capacity}",
                        p.used, inv.used
                    );
                    return Err(unable_to_allocate(format!(
                        "Unable to create allocation for '{rc}' on resource provider '{rp}'. The requested amount would exceed the capacity."
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Ids and generations of providers by uuid (those that exist).
pub(crate) async fn provider_states(tx: &mut Tx, uuids: &BTreeSet<String>) -> Result<HashMap<String, ProviderState>> {
    let mut out = HashMap::new();
    if uuids.is_empty() {
        return Ok(out);
    }
    let params: Vec<Value> = uuids.iter().map(Value::from).collect();
    for chunk in params.chunks(IN_LIST_CHUNK) {
        let sql =
            format!("SELECT id, uuid, generation FROM resource_providers WHERE uuid IN ({})", in_list(chunk.len()));
        for r in tx.fetch_all(&sql, chunk).await? {
            let uuid = r.string(1)?;
            if uuids.contains(&uuid) {
                out.insert(uuid, ProviderState { id: r.i64(0)?, generation: r.opt_i64(2)?.unwrap_or(0) });
            }
        }
    }
    Ok(out)
}

/// The providers a plan touches, each once, in plan order: those whose
/// generations the write moves on.
pub(crate) fn plan_providers(plan: &[Planned]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for p in plan {
        if !out.contains(&p.provider_uuid.as_str()) {
            out.push(&p.provider_uuid);
        }
    }
    out
}

/// The providers a write names (as found now) and, of those, the ones
/// whose generations it moves on, as [`plan_allocations`] will find them:
/// those asked for some amount and, for a consumer asking for nothing,
/// those it holds allocations against now.
async fn providers_of_write(
    tx: &mut Tx,
    consumers: &[ConsumerWrite],
) -> Result<(HashMap<String, ProviderState>, BTreeSet<String>)> {
    let (mut named, mut moved) = (BTreeSet::new(), BTreeSet::new());
    for c in consumers {
        if c.allocations.is_empty() {
            for (provider_uuid, _, _) in allocations_of_consumer(tx, &c.uuid).await? {
                moved.insert(provider_uuid);
            }
        } else {
            named.extend(c.allocations.iter().map(|a| a.provider_uuid.clone()));
            moved.extend(c.allocations.iter().filter(|a| !a.resources.is_empty()).map(|a| a.provider_uuid.clone()));
        }
    }
    named.extend(moved.iter().cloned());
    let states = provider_states(tx, &named).await?;
    // A provider that does not exist is reported by the plan.
    moved.retain(|uuid| states.contains_key(uuid));
    Ok((states, moved))
}

/// Moves the generation of each provider on by one, in id order (so that
/// two writers lock shared providers in the same order). A provider that
/// moved since it was read is a lost race.
pub(crate) async fn increment_generations<'a>(
    tx: &mut Tx,
    providers: &mut HashMap<String, ProviderState>,
    uuids: impl IntoIterator<Item = &'a str>,
) -> AttemptResult<()> {
    let mut states: Vec<&mut ProviderState> = Vec::new();
    let wanted: BTreeSet<&str> = uuids.into_iter().collect();
    for (uuid, state) in providers.iter_mut() {
        if wanted.contains(uuid.as_str()) {
            states.push(state);
        }
    }
    if states.len() != wanted.len() {
        return Err(WriteFailure::ProviderConflict);
    }
    states.sort_by_key(|s| s.id);
    for state in states {
        if !increment_provider_generation(tx, state.id, state.generation).await? {
            return Err(WriteFailure::ProviderConflict);
        }
        state.generation += 1;
    }
    Ok(())
}

/// Amounts held, grouped by the other side of the allocation: by provider
/// for a consumer, by consumer for a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Holding {
    pub uuid: String,
    /// The provider's (or consumer's) generation.
    pub generation: i64,
    /// (class, used) in allocation order.
    pub resources: Vec<(String, i64)>,
}

/// Adds one allocation row to its group.
fn hold(groups: &mut Vec<Holding>, uuid: String, generation: i64, rc: String, used: i64) {
    // From the end: rows come in allocation order, so a group's rows are
    // usually together and the row's group is the last one.
    match groups.iter_mut().rev().find(|h| h.uuid == uuid) {
        Some(h) => h.resources.push((rc, used)),
        None => groups.push(Holding { uuid, generation, resources: vec![(rc, used)] }),
    }
}

/// What a consumer holds, as GET /allocations/{consumer} shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerAllocationsView {
    /// `None` when the consumer holds nothing (or does not exist).
    pub consumer: Option<ConsumerRow>,
    /// By provider.
    pub allocations: Vec<Holding>,
    pub last_modified: Option<chrono::NaiveDateTime>,
}

/// What a provider's inventory is allocated to.
#[derive(Debug, Clone)]
pub struct ProviderAllocationsView {
    pub provider_generation: i64,
    /// By consumer.
    pub consumers: Vec<Holding>,
    pub last_modified: Option<chrono::NaiveDateTime>,
}

/// What a write answers when its last retry failed with `e`: `conflict`
/// (409, the client's to retry, as for a generation that kept moving) when
/// other writers of the same rows kept winning, as many writers of a few
/// providers through different Galera nodes make them; the database's own
/// failure (500) otherwise.
fn gave_up(e: DbError, conflict: Error) -> Error {
    if e.is_write_conflict() || e.is_unique_violation() {
        tracing::warn!(target: "keelson::inventory", "Gave up an allocations write after {DB_RETRIES} retries: {e}");
        conflict
    } else {
        Error::Db(e)
    }
}

/// The pause before retrying a write that lost a race.
pub(crate) async fn backoff(attempt: u32) {
    tokio::time::sleep(keelson_db::retry_pause(attempt)).await;
}

/// A hook run in each attempt's transaction between reading the provider
/// generations and writing (tests race the write with it).
pub(crate) type BetweenReadAndWrite<'a> =
    &'a mut (dyn for<'t> FnMut(&'t mut Tx) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 't>> + Send);

impl Store {
    /// GET /allocations/{consumer}: an unknown consumer holds nothing.
    pub async fn get_consumer_allocations(&self, consumer_uuid: &str) -> Result<ConsumerAllocationsView> {
        let mut tx = self.db.begin_read().await?;
        // Inner joins: allocations of a consumer without a record (written
        // before consumers existed) are not shown, as upstream.
        let rows = tx
            .fetch_all(
                "SELECT rp.uuid, rp.generation, rc.name, a.used, a.created_at, a.updated_at FROM allocations a \
                 JOIN resource_providers rp ON rp.id = a.resource_provider_id \
                 JOIN resource_classes rc ON rc.id = a.resource_class_id \
                 JOIN consumers c ON c.uuid = a.consumer_id \
                 JOIN projects p ON p.id = c.project_id \
                 JOIN users u ON u.id = c.user_id \
                 WHERE a.consumer_id = ? ORDER BY a.id",
                &[consumer_uuid.into()],
            )
            .await?;
        let consumer = if rows.is_empty() { None } else { find_consumer(&mut tx, consumer_uuid).await? };
        tx.commit().await?;
        let mut allocations = Vec::new();
        let mut last_modified = None;
        for r in &rows {
            let (rp, generation, rc, used) = (r.string(0)?, r.opt_i64(1)?.unwrap_or(0), r.string(2)?, r.i64(3)?);
            last_modified = last_modified.max(r.opt_time(5)?.or(r.opt_time(4)?));
            hold(&mut allocations, rp, generation, rc, used);
        }
        Ok(ConsumerAllocationsView { consumer, allocations, last_modified })
    }

    /// GET /resource_providers/{uuid}/allocations, outside any transaction:
    /// one statement (one snapshot, one round trip) reads the provider's
    /// generation with each of its allocations; only when it comes back
    /// empty does a second tell a provider without allocations from no
    /// provider. (An outer join of the provider to the allocations answers
    /// both at once, but MariaDB sorts it through a temporary table, which
    /// cost more than the second statement saves.)
    pub async fn get_provider_allocations(&self, uuid: &str) -> Result<ProviderAllocationsView> {
        // Inner joins: allocations of a consumer without a record (written
        // before consumers existed) are not shown, as upstream.
        let sql = "SELECT rp.generation, c.uuid, c.generation, rc.name, a.used, a.created_at, a.updated_at \
                   FROM resource_providers rp \
                   JOIN allocations a ON a.resource_provider_id = rp.id \
                   JOIN consumers c ON c.uuid = a.consumer_id \
                   JOIN projects p ON p.id = c.project_id \
                   JOIN users u ON u.id = c.user_id \
                   JOIN resource_classes rc ON rc.id = a.resource_class_id \
                   WHERE rp.uuid = ? ORDER BY a.id";
        let mut provider_generation = None;
        let mut consumers = Vec::new();
        let mut last_modified = None;
        self.db
            .for_each_row(sql, &[uuid.into()], |r| -> Result<()> {
                provider_generation = Some(r.opt_i64(0)?.unwrap_or(0));
                let (consumer, generation, rc, used) = (r.string(1)?, r.i64(2)?, r.string(3)?, r.i64(4)?);
                last_modified = last_modified.max(r.opt_time(6)?.or(r.opt_time(5)?));
                hold(&mut consumers, consumer, generation, rc, used);
                Ok(())
            })
            .await?;
        let provider_generation = match provider_generation {
            Some(generation) => generation,
            None => {
                let provider = self
                    .db
                    .fetch_all("SELECT generation FROM resource_providers WHERE uuid = ?", &[uuid.into()])
                    .await?;
                match provider.first() {
                    Some(r) => r.opt_i64(0)?.unwrap_or(0),
                    None => {
                        return Err(Error::NotFound(format!(
                            "Resource provider '{uuid}' not found: No resource provider with uuid {uuid} found"
                        )))
                    }
                }
            }
        };
        Ok(ProviderAllocationsView { provider_generation, consumers, last_modified })
    }

    /// PUT /allocations/{consumer} and POST /allocations: replaces the
    /// allocations of every consumer named, atomically.
    pub async fn set_allocations(&self, op: WriteOp<'_>, consumers: &[ConsumerWrite]) -> Result<()> {
        self.set_allocations_between(op, consumers, &mut |_| Box::pin(async { Ok(()) })).await
    }

    /// [`Store::set_allocations`] with a hook run after each read of the
    /// provider generations and before the write (tests use it to lose the
    /// race on purpose).
    pub(crate) async fn set_allocations_between(
        &self,
        op: WriteOp<'_>,
        consumers: &[ConsumerWrite],
        between: BetweenReadAndWrite<'_>,
    ) -> Result<()> {
        let attempts = self.settings.allocation_conflict_retry_count.max(1);
        let (mut conflicts, mut db_retries) = (0u32, 0u32);
        loop {
            // A new transaction on every attempt: the failed attempt's
            // snapshot would show the old generations again.
            let mut tx = self.db.begin().await?;
            let outcome = async {
                let (mut providers, moved) = providers_of_write(&mut tx, consumers).await?;
                between(&mut tx).await?;
                // Moved first: the row locks taken here keep every other
                // writer off these providers until this one commits, so
                // what the rest of the write reads of them stays true, and
                // a lost race is found before any work is done.
                increment_generations(&mut tx, &mut providers, moved.iter().map(String::as_str)).await?;
                let mut ensured = ensure_consumers(&mut tx, consumers, &self.settings).await?;
                let plan = plan_allocations(&mut tx, consumers, &providers).await?;
                update_consumers(&mut tx, &mut ensured).await?;
                write_planned(&mut tx, op, &plan, &ensured, &providers).await
            }
            .await;
            let failure = match outcome {
                Ok(()) => match tx.commit().await {
                    Ok(()) => return Ok(()),
                    Err(e) => WriteFailure::from(e),
                },
                Err(f) => {
                    drop(tx);
                    f
                }
            };
            match failure {
                WriteFailure::ProviderConflict => {
                    conflicts += 1;
                    if conflicts >= attempts {
                        tracing::warn!(target: "keelson::inventory", "Exceeded retry limit of {attempts} on allocations write");
                        return Err(op.concurrent_update(PROVIDER_CONCURRENT_UPDATE));
                    }
                    tracing::debug!(target: "keelson::inventory", "Retrying allocations write on resource provider generation conflict");
                    backoff(conflicts).await;
                }
                WriteFailure::Retry(e) => {
                    db_retries += 1;
                    if db_retries > DB_RETRIES {
                        return Err(gave_up(e, op.concurrent_update(PROVIDER_CONCURRENT_UPDATE)));
                    }
                    tracing::debug!(target: "keelson::inventory", "Retrying allocations write after {e}");
                    backoff(db_retries).await;
                }
                WriteFailure::Fail(e) => return Err(e),
            }
        }
    }

    /// DELETE /allocations/{consumer}: removes everything the consumer
    /// holds, and the consumer. Generations do not move (upstream's
    /// delete never moved them).
    pub async fn delete_consumer_allocations(&self, consumer_uuid: &str) -> Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut tx = self.db.begin().await?;
            let result = async {
                // The consumer's row first: every allocation write of the
                // consumer moves its generation, so holding the row keeps
                // them off until this transaction ends (on Galera, one
                // through another node conflicts with this one). Locked
                // before anything is read, the allocations read next (on
                // MariaDB the snapshot starts there) are all it holds. The
                // generation moved here goes with the row.
                let locked = tx
                    .execute("UPDATE consumers SET generation = generation + 1 WHERE uuid = ?", &[consumer_uuid.into()])
                    .await?;
                let rows = if locked == 0 {
                    Vec::new()
                } else {
                    tx.fetch_all(
                        "SELECT a.id, c.id FROM allocations a \
                         JOIN resource_providers rp ON rp.id = a.resource_provider_id \
                         JOIN consumers c ON c.uuid = a.consumer_id \
                         JOIN projects p ON p.id = c.project_id \
                         JOIN users u ON u.id = c.user_id \
                         WHERE a.consumer_id = ?",
                        &[consumer_uuid.into()],
                    )
                    .await?
                };
                let Some(first) = rows.first() else {
                    return Err(Error::NotFound(format!("No allocations for consumer '{consumer_uuid}'")));
                };
                let consumer_id = first.i64(1)?;
                let params: Vec<Value> =
                    rows.iter().map(|r| r.i64(0).map(Value::from)).collect::<std::result::Result<_, _>>()?;
                tx.execute(&format!("DELETE FROM allocations WHERE id IN ({})", in_list(params.len())), &params)
                    .await?;
                delete_consumers(&mut tx, &[consumer_id]).await?;
                Ok(())
            }
            .await;
            let failure = match result {
                Ok(()) => match tx.commit().await {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                },
                Err(Error::Db(e)) => e,
                Err(e) => return Err(e),
            };
            if !failure.is_retryable() {
                return Err(failure.into());
            }
            if attempt > DB_RETRIES {
                return Err(gave_up(failure, Error::concurrent_update(CONSUMER_CONCURRENT_UPDATE)));
            }
            backoff(attempt).await;
        }
    }
}

/// A consumer's amounts by (provider, class) (tests).
#[cfg(test)]
fn totals(view: &ConsumerAllocationsView) -> std::collections::BTreeMap<(String, String), i64> {
    view.allocations
        .iter()
        .flat_map(|h| h.resources.iter().map(move |(rc, used)| ((h.uuid.clone(), rc.clone()), *used)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::error::CONCURRENT_UPDATE;
    use crate::store::consumers::test_support::{provider, store};
    use crate::store::inventories::InventoryRecord;

    fn write(consumer: &str, rp: &str, res: &[(&str, i64)]) -> ConsumerWrite {
        ConsumerWrite {
            uuid: consumer.to_string(),
            allocations: vec![ProviderAmounts {
                provider_uuid: rp.to_string(),
                resources: res.iter().map(|(rc, n)| (rc.to_string(), *n)).collect(),
            }],
            project_id: Some("proj".into()),
            user_id: Some("user".into()),
            generation: GenerationCheck::Ignored,
            consumer_type: None,
        }
    }

    async fn with_inventory(store: &Store, name: &str, inv: Vec<InventoryRecord>) -> String {
        let rp = provider(store, name).await;
        store.set_inventories(&rp, 0, inv, false).await.unwrap();
        rp
    }

    fn conflict_text(e: &Error) -> &str {
        match e {
            Error::Conflict(_, d) => d,
            other => panic!("not a conflict: {other:?}"),
        }
    }

    const C1: &str = "11111111-1111-1111-1111-111111111111";
    const C2: &str = "22222222-2222-2222-2222-222222222222";

    #[tokio::test]
    async fn capacity_and_constraints() {
        let store = store().await;
        let mut disk = InventoryRecord::new("DISK_GB", 100);
        disk.reserved = 10;
        disk.min_unit = 10;
        disk.max_unit = 50;
        disk.step_size = 10;
        let mut vcpu = InventoryRecord::new("VCPU", 4);
        vcpu.allocation_ratio = 2.0;
        let rp = with_inventory(&store, "rp", vec![disk, vcpu]).await;

        for (amount, why) in [
            (5, "violate inventory constraints"),
            (60, "violate inventory constraints"),
            (15, "violate inventory constraints"),
        ] {
            let e = store.set_allocations(WriteOp::Many, &[write(C1, &rp, &[("DISK_GB", amount)])]).await.unwrap_err();
            assert!(conflict_text(&e).contains(why), "{amount}: {e:?}");
        }
        // (4 - 0) * 2.0 = 8 VCPU.
        store.set_allocations(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 8)])]).await.unwrap();
        let e = store.set_allocations(WriteOp::Many, &[write(C2, &rp, &[("VCPU", 1)])]).await.unwrap_err();
        assert_eq!(
            conflict_text(&e),
            format!("Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource provider '{rp}'. The requested amount would exceed the capacity.")
        );
        // Two consumers of one write add up: 50 + 50 > (100 - 10) * 1.0.
        let e = store
            .set_allocations(WriteOp::Many, &[write(C2, &rp, &[("DISK_GB", 50)]), write("c3", &rp, &[("DISK_GB", 50)])])
            .await
            .unwrap_err();
        assert!(conflict_text(&e).contains("would exceed the capacity"), "{e:?}");
        // A class the provider has no inventory of.
        let e = store.set_allocations(WriteOp::Many, &[write(C2, &rp, &[("MEMORY_MB", 1)])]).await.unwrap_err();
        assert!(conflict_text(&e).contains("Inventory for 'MEMORY_MB' on resource provider"), "{e:?}");
        // An unknown class is the caller's mistake.
        let e = store.set_allocations(WriteOp::Consumer(C2), &[write(C2, &rp, &[("COWS", 1)])]).await.unwrap_err();
        assert!(
            matches!(e, Error::BadRequest(ref d) if *d == format!("Unable to allocate inventory for consumer {C2}: No such resource class COWS."))
        );
        // Replacing the consumer's own allocation frees what it held.
        store.set_allocations(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 6)])]).await.unwrap();
        store.set_allocations(WriteOp::Many, &[write(C2, &rp, &[("VCPU", 2)])]).await.unwrap();
    }

    #[tokio::test]
    async fn over_committed_provider_may_shrink() {
        let store = store().await;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        store.set_allocations(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 8)])]).await.unwrap();
        // The operator shrinks the inventory below its usage.
        store.set_inventories(&rp, 2, vec![InventoryRecord::new("VCPU", 4)], false).await.unwrap();
        // Still over, but better than before: allowed.
        store.set_allocations(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 6)])]).await.unwrap();
        // Worse: refused.
        assert!(store.set_allocations(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 7)])]).await.is_err());
    }

    #[tokio::test]
    async fn consumer_generations() {
        let store = store().await;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        let mut w = write(C1, &rp, &[("VCPU", 1)]);
        w.generation = GenerationCheck::Expect(Some(3));
        let e = store.set_allocations(WriteOp::Consumer(C1), &[w.clone()]).await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(CONCURRENT_UPDATE, ref d) if d == "consumer generation conflict - expected null but got 3")
        );

        w.generation = GenerationCheck::Expect(None);
        store.set_allocations(WriteOp::Consumer(C1), &[w.clone()]).await.unwrap();
        let view = store.get_consumer_allocations(C1).await.unwrap();
        assert_eq!(view.consumer.as_ref().unwrap().generation, 1);
        assert_eq!(view.allocations[0].generation, 2, "provider generation: inventory write, then allocation");

        // A new consumer must not exist yet.
        let e = store.set_allocations(WriteOp::Consumer(C1), &[w.clone()]).await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(CONCURRENT_UPDATE, ref d) if d == "consumer generation conflict - expected 1 but got None")
        );
        w.generation = GenerationCheck::Expect(Some(1));
        store.set_allocations(WriteOp::Consumer(C1), &[w.clone()]).await.unwrap();
        assert_eq!(store.get_consumer_allocations(C1).await.unwrap().consumer.unwrap().generation, 2);
    }

    #[tokio::test]
    async fn consumer_lifecycle() {
        let store = store().await;
        let rp =
            with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8), InventoryRecord::new("DISK_GB", 8)])
                .await;

        // An incomplete consumer gets the configured project and user.
        let mut w = write(C1, &rp, &[("VCPU", 2), ("DISK_GB", 1)]);
        w.project_id = None;
        w.user_id = None;
        store.set_allocations(WriteOp::Consumer(C1), &[w]).await.unwrap();
        let c = store.get_consumer_allocations(C1).await.unwrap().consumer.unwrap();
        assert_eq!(c.project, StoreSettings::default().incomplete_consumer_project_id);

        // A later write moves it to a project, user and type.
        let mut w = write(C1, &rp, &[("VCPU", 1)]);
        w.consumer_type = Some("INSTANCE".into());
        store.set_allocations(WriteOp::Consumer(C1), &[w]).await.unwrap();
        let view = store.get_consumer_allocations(C1).await.unwrap();
        let c = view.consumer.clone().unwrap();
        assert_eq!(
            (c.project.as_str(), c.user.as_str(), c.consumer_type.as_deref()),
            ("proj", "user", Some("INSTANCE"))
        );
        assert_eq!(totals(&view).len(), 1);

        // Asking for nothing removes the allocations and the consumer.
        let mut empty = write(C1, &rp, &[]);
        empty.allocations.clear();
        store.set_allocations(WriteOp::Many, &[empty, write(C2, &rp, &[("DISK_GB", 2)])]).await.unwrap();
        assert!(store.get_consumer_allocations(C1).await.unwrap().consumer.is_none());
        let mut tx = store.db.begin_read().await.unwrap();
        assert!(find_consumer(&mut tx, C1).await.unwrap().is_none());
        drop(tx);

        // DELETE removes the consumer too; a second DELETE is 404.
        store.delete_consumer_allocations(C2).await.unwrap();
        let mut tx = store.db.begin_read().await.unwrap();
        assert!(find_consumer(&mut tx, C2).await.unwrap().is_none());
        drop(tx);
        assert!(matches!(store.delete_consumer_allocations(C2).await.unwrap_err(), Error::NotFound(_)));

        // A failed write leaves no consumer behind.
        assert!(store.set_allocations(WriteOp::Many, &[write(C2, &rp, &[("VCPU", 99)])]).await.is_err());
        let mut tx = store.db.begin_read().await.unwrap();
        assert!(find_consumer(&mut tx, C2).await.unwrap().is_none());
    }

    /// Moves a provider's generation inside the attempt's transaction, as a
    /// writer that committed between the read and the write would have.
    fn race(tx: &mut Tx, provider_uuid: String) -> Pin<Box<dyn Future<Output = Result<()>> + Send + '_>> {
        Box::pin(async move {
            tx.execute(
                "UPDATE resource_providers SET generation = generation + 1 WHERE uuid = ?",
                &[provider_uuid.into()],
            )
            .await?;
            Ok(())
        })
    }

    /// Types a closure as a [`BetweenReadAndWrite`] hook.
    fn hook<F>(f: F) -> F
    where
        F: for<'t> FnMut(&'t mut Tx) -> Pin<Box<dyn Future<Output = Result<()>> + Send + 't>> + Send,
    {
        f
    }

    #[tokio::test]
    async fn provider_generation_conflict_is_retried() {
        let store = store().await;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        let attempts = Arc::new(AtomicU32::new(0));
        let (r, n) = (rp.clone(), attempts.clone());
        // The first two attempts lose the race.
        let mut hook =
            hook(
                move |tx| {
                    if n.fetch_add(1, Ordering::SeqCst) < 2 {
                        race(tx, r.clone())
                    } else {
                        Box::pin(async { Ok(()) })
                    }
                },
            );
        store.set_allocations_between(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 1)])], &mut hook).await.unwrap();
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        let view = store.get_consumer_allocations(C1).await.unwrap();
        // 1 (inventory) + 1 (this write); the lost attempts left nothing.
        assert_eq!(view.allocations[0].generation, 2);
        assert_eq!(view.consumer.unwrap().generation, 1);
    }

    #[tokio::test]
    async fn provider_generation_conflict_gives_up() {
        let mut store = store().await;
        store.settings.allocation_conflict_retry_count = 3;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        let attempts = Arc::new(AtomicU32::new(0));
        let (r, n) = (rp.clone(), attempts.clone());
        let mut hook = hook(move |tx| {
            n.fetch_add(1, Ordering::SeqCst);
            race(tx, r.clone())
        });
        let e = store
            .set_allocations_between(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 1)])], &mut hook)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Conflict(CONCURRENT_UPDATE, ref d)
            if d == "Inventory and/or allocations changed while attempting to allocate: Another thread concurrently updated the resource provider data. Please retry your update"));
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert!(store.get_consumer_allocations(C1).await.unwrap().consumer.is_none());
    }

    /// A retryable database failure (as a Galera certification failure
    /// at COMMIT) in every one of the first `DB_RETRIES` attempts.
    #[tokio::test]
    async fn database_failures_are_retried_as_new_transactions() {
        let store = store().await;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        let attempts = Arc::new(AtomicU32::new(0));
        let n = attempts.clone();
        let mut fails_first = hook(move |_| {
            let failing = n.fetch_add(1, Ordering::SeqCst) < DB_RETRIES;
            Box::pin(async move {
                if failing {
                    return Err(Error::Db(DbError::Sqlx(sqlx::Error::PoolTimedOut)));
                }
                Ok(())
            })
        });
        store
            .set_allocations_between(WriteOp::Many, &[write(C1, &rp, &[("VCPU", 1)])], &mut fails_first)
            .await
            .unwrap();
        assert_eq!(attempts.load(Ordering::SeqCst), DB_RETRIES + 1);
        let view = store.get_consumer_allocations(C1).await.unwrap();
        // 1 (inventory) + 1 (the one attempt that committed).
        assert_eq!(view.allocations[0].generation, 2);

        let attempts = Arc::new(AtomicU32::new(0));
        let n = attempts.clone();
        let mut fails_always = hook(move |_| {
            n.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Err(Error::Db(DbError::Sqlx(sqlx::Error::PoolTimedOut))) })
        });
        let e = store
            .set_allocations_between(WriteOp::Many, &[write(C2, &rp, &[("VCPU", 1)])], &mut fails_always)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Db(_)), "{e:?}");
        assert_eq!(attempts.load(Ordering::SeqCst), DB_RETRIES + 1);
        assert!(store.get_consumer_allocations(C2).await.unwrap().consumer.is_none());
    }

    /// Writers that keep winning (many writers of a few providers through
    /// different Galera nodes) make the write give up with the 409 a
    /// moving generation gives, which the client retries, not a 500.
    #[tokio::test]
    async fn lost_write_conflicts_give_up_as_a_concurrent_update() {
        let store = store().await;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        let attempts = Arc::new(AtomicU32::new(0));
        let n = attempts.clone();
        let mut deadlocks = hook(move |_| {
            n.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Err(Error::Db(crate::store::tests::deadlock())) })
        });
        let e = store
            .set_allocations_between(WriteOp::Consumer(C1), &[write(C1, &rp, &[("VCPU", 1)])], &mut deadlocks)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::Conflict(CONCURRENT_UPDATE, ref d)
            if d == "Inventory and/or allocations changed while attempting to allocate: Another thread concurrently updated the resource provider data. Please retry your update"),
            "{e:?}"
        );
        assert_eq!(attempts.load(Ordering::SeqCst), DB_RETRIES + 1);
        assert!(store.get_consumer_allocations(C1).await.unwrap().consumer.is_none());
    }

    #[tokio::test]
    async fn missing_provider_is_reported_after_consumer_checks() {
        let store = store().await;
        let rp = with_inventory(&store, "rp", vec![InventoryRecord::new("VCPU", 8)]).await;
        let mut w = write(C1, "be8b9cba-e7db-4a12-a386-99b4242167fe", &[("VCPU", 1)]);
        let e = store.set_allocations(WriteOp::Many, &[w.clone()]).await.unwrap_err();
        assert!(matches!(e, Error::BadRequest(ref d) if d.contains("that does not exist")));
        w.generation = GenerationCheck::Expect(Some(4));
        let e = store.set_allocations(WriteOp::Many, &[w]).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(CONCURRENT_UPDATE, _)));
        let _ = rp;
    }
}
