//! check_resource (upstream check_resource.py / resource.py
//! create_convergence, update_convergence, delete_convergence): one node of
//! a traversal, acted on under the resource's row lock, then propagated to
//! its successors through their sync points.
//!
//! A check talks to the database in few round trips, because on a chain
//! of resources every one of them is on the critical path:
//!
//! 1. one read: the stack (without its graph, which is cached per
//!    traversal), the resource row and the row's data, joined;
//! 2. the first write takes the lock with the compare-and-swap on
//!    (`engine_id` NULL, `atomic_key` as read) and writes the
//!    ACTION_IN_PROGRESS state and its event in the same transaction; a
//!    check that finds the row changed since its read (another engine
//!    acted on it) reads again;
//! 3. the plugin acts;
//! 4. the last write (data, ACTION_COMPLETE, lock released, event, or the
//!    row's removal after a delete) commits in one transaction with the
//!    reports to the successors' sync points, still under the CAS on
//!    (`engine_id`, `atomic_key`): the node completes and reports
//!    atomically, and a check whose lock was stolen reports nothing.
//!
//! No write is read back: the writer knows what it wrote.

use std::collections::BTreeMap;
use std::sync::Arc;

use keelson_common::db;
use serde_json::{json, Map, Value};

use super::dispatch::CheckResourceMsg;
use super::graph::{node_label, Node};
use super::traversal::graph_key;
use super::Engine;
use crate::definition::{LiveContext, ResourceFacts, StackDefinition};
use crate::resources::{ActionContext, Properties, ResourceFailure, ResourceState, ResourceType, UpdateDecision};
use crate::store::resources::ResourceDataEntry;
use crate::store::sync_points::Report;
use crate::store::{self, Action, MergeOutcome, NewEvent, ResourceChange, ResourceRow, StackRow, Status};
use crate::EngineError;

/// Times a check reads the row again after finding it changed between
/// its read and its first write (or after stealing a dead engine's lock).
const LOCK_ATTEMPTS: usize = 3;

/// How a node's work ended.
enum Outcome {
    /// Done: report to successors with this data; the node's last write
    /// (if any) commits together with the reports.
    /// (Boxed: the other outcomes are small.)
    Done(Box<ResourceRow>, Value, Option<Box<LastWrite>>),
    /// A replacement row took over; it is checked in the same traversal.
    Replaced(i64),
    /// Another live engine holds the lock: it will retrigger.
    Locked,
    /// The action failed; the stack fails with this reason.
    Failed(String),
    /// Cancelled or superseded: continue in the latest traversal.
    Retrigger,
    /// The row changed between this check's read and its first write, or
    /// a dead engine's lock was just stolen: read it again.
    Raced,
}

/// What a check read before acting.
type Seen = store::CheckSnapshot;

/// The last write of a node, committed with its reports.
struct LastWrite {
    id: i64,
    /// The CAS guard: the holder (None: unlocked) and version the row
    /// must still be at.
    engine: Option<String>,
    atomic_key: i64,
    kind: LastKind,
    /// Data entries the action set or changed.
    data: Vec<(String, String)>,
    event: Option<NewEvent>,
}

enum LastKind {
    /// The change, the lock released (boxed: a change is large, a delete
    /// holds nothing).
    Update(Box<ResourceChange>),
    /// The row and its data removed (a cleanup node's delete).
    Delete,
}

/// What committing a node's last write with its reports did.
enum Committed {
    Applied(Vec<MergeOutcome>),
    /// The row was not at the expected holder and version.
    CasLost,
    /// The batched reports did not apply as a whole: go one by one.
    Unbatchable,
}

/// The event of a resource state change.
struct EventSpec<'a> {
    action: Action,
    status: Status,
    reason: &'a str,
    properties: Option<Value>,
}

impl<'a> EventSpec<'a> {
    fn new(action: Action, status: Status, reason: &'a str, properties: Option<Value>) -> Self {
        EventSpec { action, status, reason, properties }
    }
}

/// Whether a lock may be taken.
enum Lockable {
    /// Unlocked as read: the first write takes it.
    Free(ResourceRow),
    /// A live engine (maybe this one) holds it.
    Held(ResourceRow),
    /// A dead engine held it; it was just stolen (the row changed).
    Stolen,
}

/// The plugin action a node runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Act {
    Create,
    Update,
    Delete,
    /// Stack ADOPT of a resource that runs a nested stack: its plugin
    /// creates the child, which adopts the nested resources.
    AdoptNested,
}

impl Act {
    /// The action the resource's row and events show.
    fn action(self) -> Action {
        match self {
            Act::Create => Action::Create,
            Act::Update => Action::Update,
            Act::Delete => Action::Delete,
            Act::AdoptNested => Action::Adopt,
        }
    }
}

fn failure_reason(name: &str, failure: &ResourceFailure, act: Act) -> String {
    match failure.exception() {
        // A nested stack's failure already names its resource path:
        // upstream joins the paths (`resources.parent.resources.child`).
        Some((type_name, message)) if message.starts_with("resources.") => {
            format!("{type_name}: resources.{name}.{message}")
        }
        Some((type_name, message)) => format!("{type_name}: resources.{name}: {message}"),
        None => format!("{} aborted (user triggered cancel)", act.action()),
    }
}

/// The resource's `update_policy`, resolved, for the plugins that act on
/// it (groups batch by it).
fn update_policy_of(
    plugin: &dyn ResourceType,
    defn: &keelson_hot::ResourceDefn,
    ctx: &LiveContext,
) -> Result<Option<Value>, EngineError> {
    match &defn.update_policy {
        Some(policy) if plugin.takes_update_policy() => Ok(Some(policy.resolve(ctx)?).filter(|p| !p.is_null())),
        _ => Ok(None),
    }
}

/// What a plugin sees of a row, from the data read with it.
fn state_from(row: &ResourceRow, data: &BTreeMap<String, ResourceDataEntry>) -> ResourceState {
    ResourceState {
        physical_id: row.physical_resource_id.clone(),
        data: data.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect(),
        properties: match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        },
        metadata: row.rsrc_metadata.clone().unwrap_or(Value::Null),
    }
}

/// The data entries an action set that are not stored as they are now
/// (entries are written unredacted, as the action left them).
fn data_changes(
    before: &BTreeMap<String, ResourceDataEntry>,
    after: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    after
        .iter()
        .filter(|(k, v)| before.get(*k).is_none_or(|e| e.value != **v || e.redact))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Engine {
    /// The worker entry point: never fails; errors are logged (the
    /// watchdog re-triggers a traversal that stopped on them).
    pub async fn check_resource(self: &Arc<Self>, msg: CheckResourceMsg) {
        if let Err(e) = self.check_resource_inner(&msg).await {
            tracing::warn!(error = %e, stack_id = msg.stack_id, resource_id = msg.resource_id, "check_resource failed");
            // A lock left behind by this engine would look alive forever;
            // freeing it lets the watchdog re-trigger the stack.
            let _ =
                store::resources::release_lock(&self.db, msg.resource_id, &self.engine_id, ResourceChange::default())
                    .await;
        }
    }

    async fn check_resource_inner(self: &Arc<Self>, msg: &CheckResourceMsg) -> Result<(), EngineError> {
        for _ in 0..LOCK_ATTEMPTS {
            let Some(seen) = self.read_seen(msg).await? else {
                return Ok(());
            };
            let stack = &seen.stack;
            if stack.current_traversal != msg.traversal_id || stack.deleted_at.is_some() {
                return Ok(());
            }
            if self.timed_out(stack) {
                self.mark_failed(&stack.id, &msg.traversal_id, "Timed out").await?;
                return Ok(());
            }
            let Some(row) = seen.row.clone() else {
                return Ok(());
            };
            let row_id = row.id;
            let outcome = if msg.is_update {
                self.check_update(stack, row, &seen.data, msg).await?
            } else {
                self.check_cleanup(stack, row, &seen.data).await?
            };
            match outcome {
                Outcome::Raced => continue,
                Outcome::Done(row, data, last) => {
                    if self.propagate(stack, &row, msg.is_update, data, last.map(|l| *l)).await? {
                        return Ok(());
                    }
                    // The row changed before the node's only write: the
                    // check starts over from a fresh read.
                    continue;
                }
                Outcome::Replaced(new_id) => {
                    let next = CheckResourceMsg { resource_id: new_id, ..msg.clone() };
                    self.dispatcher.dispatch(self, next).await;
                    return Ok(());
                }
                Outcome::Locked => return Ok(()),
                Outcome::Failed(reason) => {
                    if !self.mark_failed(&stack.id, &msg.traversal_id, &reason).await? {
                        self.retrigger(&stack.id, row_id, msg.is_update).await?;
                    }
                    return Ok(());
                }
                Outcome::Retrigger => return self.retrigger(&stack.id, row_id, msg.is_update).await,
            }
        }
        // The row kept changing under us: whoever changed it holds or held
        // its lock and retriggers, as when a check finds it locked.
        Ok(())
    }

    /// The stack, the row and the row's data, in one statement (the row
    /// is not read for a stale traversal).
    async fn read_seen(&self, msg: &CheckResourceMsg) -> Result<Option<Seen>, EngineError> {
        Ok(store::check_snapshot(&self.db, &msg.stack_id, &msg.traversal_id, msg.resource_id).await?)
    }

    fn timed_out(&self, stack: &StackRow) -> bool {
        let (Some(mins), Some(started)) = (stack.timeout_mins, stack.updated_at.or(stack.created_at)) else {
            return false;
        };
        let elapsed = keelson_common::db::now() - started;
        // A tenant's timeout_mins may be any integer.
        mins > 0 && elapsed.num_seconds() > mins.saturating_mul(60)
    }

    /// Whether the row's lock may be taken: a lock of a dead engine is
    /// stolen (the resource marked FAILED "Worker went down during
    /// resource ACTION"), and the row must then be read again.
    async fn lockable(self: &Arc<Self>, row: ResourceRow) -> Result<Lockable, EngineError> {
        let Some(holder) = row.engine_id.clone() else {
            return Ok(Lockable::Free(row));
        };
        if holder == self.engine_id || self.dispatcher.is_alive(self, &holder).await {
            return Ok(Lockable::Held(row));
        }
        let act = if row.action == Action::Init { Action::Create } else { row.action };
        let reason = format!("Worker went down during resource {act}");
        if store::resources::steal_lock(
            &self.db,
            row.id,
            &holder,
            ResourceChange::state(act, Status::Failed, reason.clone()),
        )
        .await?
        {
            if let Some(stolen) = store::resources::get(&self.db, row.id).await? {
                self.resource_event(&stolen, act, Status::Failed, &reason, None).await;
            }
        }
        Ok(Lockable::Stolen)
    }

    /// One write of `row` under the lock CAS, with the data entries and
    /// the event it goes with, in one transaction (retried on deadlock).
    /// A row unlocked as read is locked by the write itself (`hold`) or
    /// written and left unlocked; a row this check holds keeps its lock
    /// only with `hold`. The row is brought up to date in memory. Answers
    /// false when a row unlocked as read is no longer at that version
    /// (the check reads it again); losing a lock this check held is an
    /// error (a live engine stole it).
    async fn write_row(
        &self,
        row: &mut ResourceRow,
        change: ResourceChange,
        hold: bool,
        data: &[(String, String)],
        event: Option<EventSpec<'_>>,
    ) -> Result<bool, EngineError> {
        let now = db::now();
        let change =
            ResourceChange { engine_id: Some(hold.then(|| self.engine_id.clone())), updated_at: Some(now), ..change };
        let mut after = row.clone();
        change.apply_to(&mut after, now);
        let event = event.map(|e| super::events::resource_event_of(&after, e.action, e.status, e.reason, e.properties));
        let expected = row.engine_id.clone();
        let applied = db::retrying("resource write", || async {
            let mut tx = self.db.begin().await?;
            if !store::resources::update_cas_tx(&mut tx, row.id, expected.as_deref(), row.atomic_key, change.clone())
                .await?
            {
                // Dropping the transaction rolls it back.
                return Ok(false);
            }
            store::resources::data_set_many_tx(&mut tx, row.id, data).await?;
            if let Some(e) = &event {
                store::events::insert_tx(&mut tx, e).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await?;
        if !applied {
            if expected.is_some() {
                return Err(EngineError::internal(format!("lost the lock of resource {}", row.id)));
            }
            return Ok(false);
        }
        *row = after;
        if event.is_some() {
            self.events_written(&row.stack_id, 1).await;
        }
        Ok(true)
    }

    /// The last write of `row` (the lock released), to commit with the
    /// node's reports; answers it and the row as it will be.
    fn last_write(
        &self,
        row: &ResourceRow,
        change: ResourceChange,
        data: Vec<(String, String)>,
        event: Option<EventSpec<'_>>,
    ) -> (LastWrite, ResourceRow) {
        let now = db::now();
        let change = ResourceChange { engine_id: Some(None), updated_at: Some(now), ..change };
        let mut after = row.clone();
        change.apply_to(&mut after, now);
        let event = event.map(|e| super::events::resource_event_of(&after, e.action, e.status, e.reason, e.properties));
        let last = LastWrite {
            id: row.id,
            engine: row.engine_id.clone(),
            atomic_key: row.atomic_key,
            kind: LastKind::Update(Box::new(change)),
            data,
            event,
        };
        (last, after)
    }

    /// The removal of `row` (unlocked as read, or held by this check), to
    /// commit with the node's reports.
    fn last_delete(row: &ResourceRow) -> LastWrite {
        LastWrite {
            id: row.id,
            engine: row.engine_id.clone(),
            atomic_key: row.atomic_key,
            kind: LastKind::Delete,
            data: Vec::new(),
            event: None,
        }
    }

    /// ACTION_IN_PROGRESS "state changed" and its event, taking the lock
    /// of a row unlocked as read. False: the row changed since the read.
    async fn begin(&self, row: &mut ResourceRow, act: Action, properties: Option<Value>) -> Result<bool, EngineError> {
        let reason = "state changed";
        // A resource being created starts with its template metadata (set
        // on the row by the caller).
        let creating = act == Action::Create || act == Action::Adopt;
        let change = ResourceChange {
            rsrc_metadata: (creating && row.rsrc_metadata.is_some()).then(|| row.rsrc_metadata.clone()),
            ..ResourceChange::state(act, Status::InProgress, reason)
        };
        self.write_row(row, change, true, &[], Some(EventSpec::new(act, Status::InProgress, reason, properties))).await
    }

    async fn state_of(&self, row: &ResourceRow) -> Result<ResourceState, EngineError> {
        crate::definition::resource_state(&self.db, row).await
    }

    async fn facts_of(&self, plugin: &dyn ResourceType, row: &ResourceRow, state: &ResourceState) -> ResourceFacts {
        crate::definition::resource_facts(plugin, &row.name, state).await
    }

    /// Facts of the resources `name` requires: from the predecessors'
    /// inputs, else from their stored rows (retriggers carry no input),
    /// reading only the rows of the missing names.
    async fn gather_facts(
        &self,
        stack: &StackRow,
        def: &StackDefinition,
        name: &str,
        input: &Map<String, Value>,
    ) -> Result<BTreeMap<String, ResourceFacts>, EngineError> {
        let mut facts = BTreeMap::new();
        for v in input.values() {
            if let Some(n) = v.get("name").and_then(Value::as_str) {
                let attributes = v.get("attrs").and_then(Value::as_object).cloned().unwrap_or_default();
                facts.insert(
                    n.to_string(),
                    ResourceFacts { reference_id: v.get("reference_id").cloned().unwrap_or(Value::Null), attributes },
                );
            }
        }
        let missing: Vec<String> = def.requires(name).into_iter().filter(|r| !facts.contains_key(r)).collect();
        if missing.is_empty() {
            return Ok(facts);
        }
        let rows = store::resources::list_named(&self.db, &stack.id, &missing).await?;
        for req in missing {
            let best = rows
                .iter()
                .filter(|r| r.name == req && r.action != Action::Init && r.action != Action::Delete)
                .max_by_key(|r| (r.current_template_id == Some(stack.raw_template_id), r.replaced_by.is_none(), r.id));
            let Some(row) = best else { continue };
            let Some((_, plugin)) = self.plugin_of_row(stack, row).await else {
                continue;
            };
            let state = self.state_of(row).await?;
            let mut f = self.facts_of(plugin.as_ref(), row, &state).await;
            if let Some(Value::Object(cached)) = &row.attr_data {
                for (k, v) in cached {
                    f.attributes.insert(k.clone(), v.clone());
                }
            }
            facts.insert(req, f);
        }
        Ok(facts)
    }

    async fn check_update(
        self: &Arc<Self>,
        stack: &StackRow,
        row: ResourceRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        msg: &CheckResourceMsg,
    ) -> Result<Outcome, EngineError> {
        let mut row = match self.lockable(row).await? {
            Lockable::Free(row) => row,
            Lockable::Held(row) => {
                self.preempt_nested_update(stack, &row).await;
                return Ok(Outcome::Locked);
            }
            Lockable::Stolen => return Ok(Outcome::Raced),
        };
        let def = self.definitions.get(&self.db, stack, stack.raw_template_id, &self.settings.region_name).await?;
        let Some(defn) = def.resource(&row.name) else {
            let (last, after) = self.last_write(&row, ResourceChange::default(), Vec::new(), None);
            return Ok(Outcome::Done(Box::new(after), Value::Null, Some(Box::new(last))));
        };
        let graph = self.graph_of(stack).await?;
        let key = graph_key(&graph, &row, true);
        let requires: Vec<i64> = graph.predecessors(key).into_iter().filter(|n| n.1).map(|n| n.0).collect();
        let type_name = def.plugin_identity(&defn.name, &defn.type_name);
        let plugin = match def.plugin_for(&self.registry, &defn.name, &defn.type_name) {
            Ok(p) => p,
            Err(EngineError::BadRequest(message)) => {
                return self.fail_before_action(&mut row, Act::Create, &message).await;
            }
            Err(e) => return self.fail_before_action(&mut row, Act::Create, &e.to_string()).await,
        };
        let facts = self.gather_facts(stack, &def, &row.name, &msg.input).await?;
        let mut ctx = LiveContext::new(&def, facts);
        if def.nested && def.uses_resource_facade {
            ctx = ctx.with_facade(self.resource_facade(stack).await?);
        }
        let inputs = defn.properties.resolve(&ctx).map_err(EngineError::from).and_then(|given| {
            let policy = update_policy_of(plugin.as_ref(), defn, &ctx)?;
            Ok((plugin.validate_properties(&row.name, &given)?, policy))
        });
        let act = if row.action == Action::Init { Act::Create } else { Act::Update };
        let (props, update_policy) = match inputs {
            Ok(inputs) => inputs,
            Err(e) => {
                let reason = format!("{}: resources.{}: {}", e.heat_type(), row.name, e.message());
                return self.fail_before_action(&mut row, act, &reason).await;
            }
        };
        let written = Some(defn.type_name.clone());
        if row.action == Action::Init {
            // The template's metadata is the new resource's stored
            // metadata (upstream `metadata_get` of an INIT resource),
            // written as the action begins: a nested stack's
            // `resource_facade` reads it while its parent creates it.
            if row.rsrc_metadata.as_ref().is_none_or(Value::is_null) {
                if let Some(m) = &defn.metadata {
                    row.rsrc_metadata = m.resolve(&ctx).ok().filter(|m| !m.is_null());
                }
            }
            if stack.action == Action::Adopt && plugin.runs_nested_stack() {
                return self
                    .run_action(
                        stack,
                        row,
                        data,
                        plugin,
                        Act::AdoptNested,
                        (props, update_policy),
                        requires,
                        None,
                        written,
                    )
                    .await;
            }
            if stack.action == Action::Adopt {
                return self.run_adopt(stack, row, data, plugin, props, requires, defn.type_name.clone()).await;
            }
            return self
                .run_action(stack, row, data, plugin, Act::Create, (props, update_policy), requires, None, written)
                .await;
        }
        // The environment's restricted_actions for this resource (upstream
        // resource.update_convergence / _check_restricted_actions).
        let restricted = def.restricted_actions(&row.name);
        // A resource whose plugin changes is replaced (upstream compares
        // the classes the old and new environments map the types to).
        let retyped = match self.plugin_of_row(stack, &row).await {
            Some((old_type, _)) => old_type != type_name,
            None => true,
        };
        if retyped && restricted.contains("replace") {
            return self.restricted_failure(row, "replace").await;
        }
        // A failed, half-created, deleted or retyped resource is replaced
        // without UPDATE events (upstream needs_replace_failed).
        let broken =
            row.status == Status::Failed || row.status == Status::InProgress || row.action == Action::Delete || retyped;
        let old_props = match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        let decision = if broken { UpdateDecision::Replace } else { plugin.update_decision(&old_props, &props) };
        match decision {
            UpdateDecision::InPlace if restricted.contains("update") => {
                return self.restricted_failure(row, "update").await;
            }
            UpdateDecision::Replace if restricted.contains("replace") => {
                return self.restricted_failure(row, "replace").await;
            }
            _ => {}
        }
        match decision {
            UpdateDecision::Unchanged => {
                let change = ResourceChange {
                    resource_type: written,
                    current_template_id: Some(Some(stack.raw_template_id)),
                    requires: Some(requires),
                    replaced_by: Some(None),
                    ..Default::default()
                };
                let (last, after) = self.last_write(&row, change, Vec::new(), None);
                let state = state_from(&after, data);
                let facts = self.facts_of(plugin.as_ref(), &after, &state).await;
                let data = node_data(&after, &facts);
                Ok(Outcome::Done(Box::new(after), data, Some(Box::new(last))))
            }
            UpdateDecision::InPlace => {
                self.run_action(
                    stack,
                    row,
                    data,
                    plugin,
                    Act::Update,
                    (props, update_policy),
                    requires,
                    Some(old_props),
                    written,
                )
                .await
            }
            UpdateDecision::Replace => {
                if !broken {
                    if !self.begin(&mut row, Action::Update, None).await? {
                        return Ok(Outcome::Raced);
                    }
                    let reason = format!("The Resource {} requires replacement.", row.name);
                    self.write_row(
                        &mut row,
                        ResourceChange::state(Action::Update, Status::Complete, reason.clone()),
                        false,
                        &[],
                        Some(EventSpec::new(Action::Update, Status::Complete, &reason, None)),
                    )
                    .await?;
                }
                // The replacement's mark on the old row is itself the CAS
                // on the row as read (or as this check left it).
                match store::resources::make_replacement(
                    &self.db,
                    &row,
                    &defn.type_name,
                    stack.raw_template_id,
                    &requires,
                )
                .await?
                {
                    Some(new) => Ok(Outcome::Replaced(new.id)),
                    None if broken => Ok(Outcome::Raced),
                    None => Ok(Outcome::Locked),
                }
            }
        }
    }

    /// The plugin a stored resource runs as: its written type mapped by
    /// the environment of the template it was last acted on with (upstream
    /// `Resource.load`), else by the stack's current one.
    pub(super) async fn plugin_of_row(
        &self,
        stack: &StackRow,
        row: &ResourceRow,
    ) -> Option<(String, Arc<dyn ResourceType>)> {
        let region = &self.settings.region_name;
        for template_id in row.current_template_id.into_iter().chain([stack.raw_template_id]) {
            if let Ok(def) = self.definitions.get(&self.db, stack, template_id, region).await {
                let type_name = def.plugin_identity(&row.name, &row.resource_type);
                let plugin = def.plugin_for(&self.registry, &row.name, &row.resource_type).ok()?;
                return Some((type_name, plugin));
            }
        }
        let plugin = self.registry.get(&row.resource_type)?;
        Some((row.resource_type.clone(), plugin))
    }

    /// An update the environment restricts: an UPDATE_FAILED event only
    /// (the resource keeps its state), and the stack fails (upstream
    /// ResourceActionRestricted).
    async fn restricted_failure(&self, mut row: ResourceRow, what: &str) -> Result<Outcome, EngineError> {
        let message = format!("{what} is restricted for resource.");
        if !self
            .write_row(
                &mut row,
                ResourceChange::default(),
                false,
                &[],
                Some(EventSpec::new(Action::Update, Status::Failed, &message, None)),
            )
            .await?
        {
            return Ok(Outcome::Raced);
        }
        Ok(Outcome::Failed(format!(
            "Resource UPDATE failed: ResourceActionRestricted: resources.{}: {message}",
            row.name
        )))
    }

    /// Upstream `handle_preempt` of a nested-stack resource: a resource an
    /// older traversal still holds, waiting for its nested stack, would
    /// keep this traversal waiting as long; the nested stack's update is
    /// cancelled (without rollback) so that the older action ends and this
    /// traversal can take the resource over.
    async fn preempt_nested_update(&self, stack: &StackRow, row: &ResourceRow) {
        // Held for this very template: nothing older to preempt.
        if row.current_template_id == Some(stack.raw_template_id) {
            return;
        }
        let Some(child_id) = row.physical_resource_id.as_deref().filter(|id| !id.is_empty()) else {
            return;
        };
        let runs_nested = matches!(self.plugin_of_row(stack, row).await, Some((_, p)) if p.runs_nested_stack());
        if !runs_nested {
            return;
        }
        let Some(this) = self.this.upgrade() else { return };
        match this.cancel_update(child_id, false).await {
            Ok(()) => tracing::info!(
                stack_id = stack.id,
                resource = row.name,
                child_id,
                "preempted the nested stack's update"
            ),
            // Not in progress (any more): nothing to preempt.
            Err(e) => tracing::debug!(error = %e, child_id, "nested stack not preempted"),
        }
    }

    /// What `resource_facade` answers in nested stack `stack`: its parent
    /// resource's stored metadata and its definition's deletion and update
    /// policies (upstream `ResourceFacade`).
    async fn resource_facade(&self, stack: &StackRow) -> Result<Map<String, Value>, EngineError> {
        let mut facade = Map::new();
        let (Some(owner_id), Some(resource_name)) = (&stack.owner_id, &stack.parent_resource_name) else {
            return Ok(facade);
        };
        let Some(parent) = store::stacks::get(&self.db, owner_id).await? else {
            return Ok(facade);
        };
        let rows = store::resources::list(&self.db, owner_id).await?;
        let live = rows.iter().filter(|r| &r.name == resource_name && r.replaced_by.is_none()).max_by_key(|r| r.id);
        let metadata = live.and_then(|r| r.rsrc_metadata.clone()).filter(|m| !m.is_null()).unwrap_or_else(|| json!({}));
        facade.insert("metadata".into(), metadata);
        let def = self.definition(&parent, parent.raw_template_id).await?;
        if let Some(defn) = def.resource(resource_name) {
            facade.insert("deletion_policy".into(), Value::String(defn.deletion_policy.clone()));
            let unknown = LiveContext::placeholders(&def);
            let policy =
                defn.update_policy.as_ref().and_then(|p| p.resolve(&unknown).ok()).unwrap_or_else(|| json!({}));
            facade.insert("update_policy".into(), policy);
        }
        Ok(facade)
    }

    /// The adopt data of a nested-stack resource's children, which
    /// `prepare_adoption` kept in the row's data: taken out of the data
    /// (the child stack holds it from now on).
    async fn take_nested_adopt_data(
        &self,
        row: &ResourceRow,
        state: &mut ResourceState,
    ) -> Result<Option<Value>, EngineError> {
        let Some(text) = state.data.remove(super::operations::NESTED_ADOPT_KEY) else {
            return Ok(None);
        };
        store::resources::data_delete(&self.db, row.id, super::operations::NESTED_ADOPT_KEY).await?;
        Ok(serde_json::from_str(&text).ok())
    }

    /// Adopts an existing physical resource (stack ADOPT): the row holds
    /// what the adopt data gave for it (physical id, data, metadata); no
    /// plugin action runs (upstream `Resource.adopt` / `handle_adopt`).
    #[allow(clippy::too_many_arguments)]
    async fn run_adopt(
        &self,
        stack: &StackRow,
        mut row: ResourceRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        plugin: Arc<dyn ResourceType>,
        props: Properties,
        requires: Vec<i64>,
        written_type: String,
    ) -> Result<Outcome, EngineError> {
        let props_json = Value::Object(props.clone());
        if !self.begin(&mut row, Action::Adopt, Some(props_json.clone())).await? {
            return Ok(Outcome::Raced);
        }
        if row.physical_resource_id.as_deref().is_none_or(str::is_empty) {
            let reason = format!("Exception: resources.{}: Resource ID was not provided.", row.name);
            self.write_row(
                &mut row,
                ResourceChange::state(Action::Adopt, Status::Failed, reason.clone()),
                false,
                &[],
                Some(EventSpec::new(Action::Adopt, Status::Failed, &reason, None)),
            )
            .await?;
            return Ok(Outcome::Failed(format!("Resource ADOPT failed: {reason}")));
        }
        let mut state = state_from(&row, data);
        state.properties = props;
        let facts = self.facts_of(plugin.as_ref(), &row, &state).await;
        let change = ResourceChange { resource_type: Some(written_type), ..Default::default() };
        Ok(self.complete(stack, &row, Action::Adopt, change, Vec::new(), props_json, facts, requires))
    }

    /// ACTION_COMPLETE "state changed" with what the action produced
    /// (`change` adds to it), the lock released, the event: the node's
    /// last write, and its data for its successors.
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &self,
        stack: &StackRow,
        row: &ResourceRow,
        act: Action,
        change: ResourceChange,
        data: Vec<(String, String)>,
        props_json: Value,
        facts: ResourceFacts,
        requires: Vec<i64>,
    ) -> Outcome {
        let change = ResourceChange {
            properties_data: Some(Some(props_json.clone())),
            attr_data: Some(Some(Value::Object(facts.attributes.clone()))),
            current_template_id: Some(Some(stack.raw_template_id)),
            requires: Some(requires),
            replaced_by: Some(None),
            ..ResourceChange {
                action: Some(act),
                status: Some(Status::Complete),
                status_reason: Some("state changed".to_string()),
                ..change
            }
        };
        let (last, after) = self.last_write(
            row,
            change,
            data,
            Some(EventSpec::new(act, Status::Complete, "state changed", Some(props_json))),
        );
        let node = node_data(&after, &facts);
        Outcome::Done(Box::new(after), node, Some(Box::new(last)))
    }

    /// A failure found before the action (type, properties): FAILED and
    /// its event, no IN_PROGRESS.
    async fn fail_before_action(&self, row: &mut ResourceRow, act: Act, reason: &str) -> Result<Outcome, EngineError> {
        if !self
            .write_row(
                row,
                ResourceChange::state(act.action(), Status::Failed, reason),
                false,
                &[],
                Some(EventSpec::new(act.action(), Status::Failed, reason, None)),
            )
            .await?
        {
            return Ok(Outcome::Raced);
        }
        Ok(Outcome::Failed(format!("Resource {} failed: {reason}", act.action())))
    }

    /// Runs create/update/delete of a row through its plugin, under the
    /// lock its IN_PROGRESS write takes, with its properties and its
    /// resolved update policy.
    #[allow(clippy::too_many_arguments)]
    async fn run_action(
        &self,
        stack: &StackRow,
        mut row: ResourceRow,
        data: &BTreeMap<String, ResourceDataEntry>,
        plugin: Arc<dyn ResourceType>,
        act: Act,
        (props, update_policy): (Properties, Option<Value>),
        requires: Vec<i64>,
        old_props: Option<Properties>,
        written_type: Option<String>,
    ) -> Result<Outcome, EngineError> {
        let props_json = Value::Object(props.clone());
        if !self.begin(&mut row, act.action(), Some(props_json.clone())).await? {
            return Ok(Outcome::Raced);
        }
        let mut state = state_from(&row, data);
        let adopt = match act {
            Act::AdoptNested => {
                // The child is a new stack whatever id the adopt data gave.
                state.physical_id = None;
                self.take_nested_adopt_data(&row, &mut state).await?
            }
            _ => None,
        };
        let metadata_before = state.metadata.clone();
        let mut ctx = ActionContext {
            stack_id: stack.id.clone(),
            stack_name: stack.name.clone(),
            resource_name: row.name.clone(),
            properties: props.clone(),
            state,
            cancel: self.cancel_receiver(&stack.id),
            adopt,
            update_policy,
            timeout_mins: stack.timeout_mins,
        };
        let result = match act {
            Act::Create | Act::AdoptNested => plugin.create(&mut ctx).await,
            Act::Update => {
                let old = old_props.unwrap_or_default();
                plugin.update(&mut ctx, &old).await
            }
            Act::Delete => plugin.delete(&mut ctx).await,
        };
        let changed = data_changes(data, &ctx.state.data);
        let physical = Some(ctx.state.physical_id.clone());
        match result {
            Ok(()) => {
                ctx.state.properties = props.clone();
                let mut attr_row = row.clone();
                attr_row.physical_resource_id = ctx.state.physical_id.clone();
                let facts = self.facts_of(plugin.as_ref(), &attr_row, &ctx.state).await;
                let change = ResourceChange {
                    resource_type: written_type,
                    physical_resource_id: physical,
                    // Only what the plugin changed (a server's transport
                    // settings): other metadata is written by signals and
                    // deployments under the row's CAS, never overwritten here.
                    rsrc_metadata: (ctx.state.metadata != metadata_before).then(|| Some(ctx.state.metadata.clone())),
                    ..Default::default()
                };
                Ok(self.complete(stack, &row, act.action(), change, changed, props_json, facts, requires))
            }
            Err(failure) => {
                let reason = failure_reason(&row.name, &failure, act);
                let change = ResourceChange {
                    physical_resource_id: physical,
                    ..ResourceChange::state(act.action(), Status::Failed, reason.clone())
                };
                self.write_row(
                    &mut row,
                    change,
                    false,
                    &changed,
                    Some(EventSpec::new(act.action(), Status::Failed, &reason, None)),
                )
                .await?;
                match failure {
                    ResourceFailure::Cancelled => Ok(Outcome::Retrigger),
                    ResourceFailure::Error { .. } | ResourceFailure::NoActionRequired(_) => {
                        Ok(Outcome::Failed(format!("Resource {} failed: {reason}", act.action())))
                    }
                }
            }
        }
    }

    /// Cleanup node: a row not of the current template is deleted (INIT
    /// rows just removed); current rows pass.
    async fn check_cleanup(
        self: &Arc<Self>,
        stack: &StackRow,
        row: ResourceRow,
        data: &BTreeMap<String, ResourceDataEntry>,
    ) -> Result<Outcome, EngineError> {
        if row.current_template_id == Some(stack.raw_template_id) && row.replaced_by.is_none() {
            return Ok(Outcome::Done(Box::new(row), Value::Null, None));
        }
        let row = match self.lockable(row).await? {
            Lockable::Free(row) => row,
            Lockable::Held(row) => {
                self.preempt_nested_update(stack, &row).await;
                return Ok(Outcome::Locked);
            }
            Lockable::Stolen => return Ok(Outcome::Raced),
        };
        if row.action == Action::Init {
            let last = Self::last_delete(&row);
            return Ok(Outcome::Done(Box::new(row), Value::Null, Some(Box::new(last))));
        }
        let Some((_, plugin)) = self.plugin_of_row(stack, &row).await else {
            let last = Self::last_delete(&row);
            return Ok(Outcome::Done(Box::new(row), Value::Null, Some(Box::new(last))));
        };
        let props = match &row.properties_data {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        match self
            .run_action(stack, row.clone(), data, plugin, Act::Delete, (props, None), row.requires.clone(), None, None)
            .await?
        {
            Outcome::Done(done, _, Some(mut last)) => {
                // DELETE_COMPLETE is recorded (the event) and the row goes
                // with its data, in the transaction that reports it.
                last.kind = LastKind::Delete;
                last.data.clear();
                Ok(Outcome::Done(done, Value::Null, Some(last)))
            }
            other => Ok(other),
        }
    }

    /// Commits a node's last write together with its reports to each
    /// successor (and the stack's sync point for roots), then fires the
    /// successors this report completed. Answers false, having written
    /// nothing, when the node's only write found the row changed since
    /// the check read it.
    async fn propagate(
        self: &Arc<Self>,
        stack: &StackRow,
        row: &ResourceRow,
        is_update: bool,
        data: Value,
        last: Option<LastWrite>,
    ) -> Result<bool, EngineError> {
        let graph = self.graph_of(stack).await?;
        let key: Node = graph_key(&graph, row, is_update);
        let label = node_label(key);
        let traversal = &stack.current_traversal;
        let mut successors = graph.successors(key);
        // Cleanup successors first, update successors last (upstream);
        // the order in which they are fired.
        successors.sort_by_key(|n| (n.1, n.0));
        let reports: Vec<Report> = if successors.is_empty() {
            vec![Report {
                entity_id: stack.id.clone(),
                is_update: true,
                input: Value::Null,
                expected_required: graph.roots().len() as i64,
            }]
        } else {
            successors
                .iter()
                .map(|n| Report {
                    entity_id: n.0.to_string(),
                    is_update: n.1,
                    input: if n.1 { data.clone() } else { json!({ "replacement": row.id }) },
                    expected_required: graph.predecessors(*n).len() as i64,
                })
                .collect()
        };
        let outcomes = match self.commit_reports(traversal, &label, &reports, last.as_ref()).await? {
            Some(outcomes) => outcomes,
            None => {
                let held = last.as_ref().and_then(|l| l.engine.clone()).is_some();
                if held {
                    return Err(EngineError::internal(format!("lost the lock of resource {}", row.id)));
                }
                return Ok(false);
            }
        };
        if last.as_ref().is_some_and(|l| l.event.is_some()) {
            self.events_written(&stack.id, 1).await;
        }
        let mut gone = false;
        let mut stack_ready = false;
        let mut ready = Vec::new();
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                MergeOutcome::Ready(inputs) => match successors.get(i) {
                    Some(next) => ready.push(CheckResourceMsg {
                        stack_id: stack.id.clone(),
                        resource_id: next.0,
                        traversal_id: traversal.clone(),
                        is_update: next.1,
                        input: inputs,
                    }),
                    None => stack_ready = true,
                },
                MergeOutcome::Waiting => {}
                MergeOutcome::Gone => gone = true,
            }
        }
        if ready.len() == 1 {
            if let Some(msg) = ready.pop() {
                self.dispatcher.dispatch_continuation(self, msg).await;
            }
        } else {
            // A fan-out's successors go out at once, not one round trip
            // after the other.
            futures::future::join_all(ready.into_iter().map(|msg| self.dispatcher.dispatch(self, msg))).await;
        }
        if stack_ready {
            self.mark_complete(&stack.id, traversal).await?;
        }
        if gone {
            self.retrigger(&stack.id, row.id, is_update).await?;
        }
        Ok(true)
    }

    /// One transaction (retried on deadlock): the node's last write under
    /// its CAS, then the reports, batched when they can be. None: the CAS
    /// failed and nothing was written.
    async fn commit_reports(
        &self,
        traversal: &str,
        label: &str,
        reports: &[Report],
        last: Option<&LastWrite>,
    ) -> Result<Option<Vec<MergeOutcome>>, EngineError> {
        let mut one_by_one = false;
        loop {
            let committed = db::retrying("check completion", || async {
                let mut tx = self.db.begin().await?;
                if let Some(last) = last {
                    if !apply_last_tx(&mut tx, last).await? {
                        return Ok(Committed::CasLost);
                    }
                }
                let outcomes = if one_by_one {
                    let mut out = Vec::with_capacity(reports.len());
                    for r in reports {
                        out.push(store::sync_points::report_tx(&mut tx, traversal, label, r).await?);
                    }
                    out
                } else {
                    match store::sync_points::report_all_tx(&mut tx, traversal, label, reports).await? {
                        Some(out) => out,
                        // Dropping the transaction rolls the batch back.
                        None => return Ok(Committed::Unbatchable),
                    }
                };
                tx.commit().await?;
                Ok(Committed::Applied(outcomes))
            })
            .await?;
            match committed {
                Committed::Applied(outcomes) => return Ok(Some(outcomes)),
                Committed::CasLost => return Ok(None),
                Committed::Unbatchable => one_by_one = true,
            }
        }
    }

    /// The traversal moved on while this node worked: check the resource
    /// again in the latest traversal if that traversal already waits for
    /// it (its own attempt found the lock held and dropped out).
    pub(super) async fn retrigger(
        self: &Arc<Self>,
        stack_id: &str,
        resource_id: i64,
        is_update: bool,
    ) -> Result<(), EngineError> {
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Ok(());
        };
        if stack.current_traversal.is_empty() || stack.deleted_at.is_some() {
            return Ok(());
        }
        let graph = self.graph_of(&stack).await?;
        let row = store::resources::get(&self.db, resource_id).await?;
        let mut key = (resource_id, is_update);
        if !graph.contains(key) {
            key = (resource_id, !is_update);
        }
        if !graph.contains(key) {
            match row.and_then(|r| r.replaces) {
                Some(old) if graph.contains((old, true)) => key = (old, true),
                _ => return Ok(()),
            }
        }
        let ready = match store::sync_points::get(&self.db, &key.0.to_string(), &stack.current_traversal, key.1).await?
        {
            Some(sp) => sp.satisfied >= sp.required,
            None => false,
        };
        if ready {
            let msg = CheckResourceMsg {
                stack_id: stack.id.clone(),
                resource_id,
                traversal_id: stack.current_traversal.clone(),
                is_update: key.1,
                input: Map::new(),
            };
            self.dispatcher.dispatch(self, msg).await;
        }
        Ok(())
    }
}

/// A node's last write in the caller's transaction; false when the CAS
/// failed (the caller drops the transaction).
async fn apply_last_tx(tx: &mut db::Tx, last: &LastWrite) -> Result<bool, db::DbError> {
    let applied = match &last.kind {
        LastKind::Update(change) => {
            let applied = store::resources::update_cas_tx(
                tx,
                last.id,
                last.engine.as_deref(),
                last.atomic_key,
                (**change).clone(),
            )
            .await?;
            if applied {
                store::resources::data_set_many_tx(tx, last.id, &last.data).await?;
            }
            applied
        }
        LastKind::Delete => {
            store::resources::delete_cas_tx(tx, last.id, last.engine.as_deref(), last.atomic_key).await?
        }
    };
    if applied {
        if let Some(e) = &last.event {
            store::events::insert_tx(tx, e).await?;
        }
    }
    Ok(applied)
}

/// What an update node sends to the nodes that need it.
fn node_data(row: &ResourceRow, facts: &ResourceFacts) -> Value {
    json!({
        "id": row.id,
        "name": row.name,
        "uuid": row.uuid,
        "reference_id": facts.reference_id,
        "attrs": facts.attributes,
        "action": row.action,
        "status": row.status,
    })
}
