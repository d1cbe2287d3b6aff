//! Heartbeat and the watchdog: an IN_PROGRESS stack whose locks are held
//! only by dead engines, or where nothing moved for `stall_timeout` and no
//! live engine holds a lock, gets its dead engines' locks reclaimed (the
//! resource marked FAILED "Worker went down during resource ACTION") and a
//! new traversal of the same action over the same template (completed
//! resources are unchanged), so it finishes without a user action.
//!
//! An operation re-run this way that gets stuck again (its engine died
//! again: a stack whose check kills the process would otherwise take every
//! restarted engine down with it, forever) is re-run at most
//! [`WATCHDOG_RETRIGGER_LIMIT`] times: then the stack is marked FAILED
//! with the reason. The count is kept in the database
//! (`store::retriggers`), as the engine that counts may be the next to die.
//!
//! Without a controller every engine runs the pass every
//! `periodic_interval`; with one (`EngineSettings::controller_registry`)
//! the engine only heartbeats and the controller primary's singleton duty
//! asks one engine at a time for a pass (`EngineWorker.RunWatchdog`).

use std::sync::{Arc, Weak};

use super::traversal::StackChanges;
use super::Engine;
use crate::error::EngineError;
use crate::store::{self, Action, ResourceChange, StackRow, StackStateChange, Status};

/// How many times the watchdog re-runs one stuck operation before it
/// marks the stack FAILED.
pub const WATCHDOG_RETRIGGER_LIMIT: i64 = 2;

/// What one watchdog pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchdogReport {
    /// Resource locks of dead engines cleared.
    pub locks_reclaimed: u32,
    /// The stacks given a new traversal.
    pub retriggered: Vec<String>,
    /// The stacks marked FAILED: stuck again after
    /// [`WATCHDOG_RETRIGGER_LIMIT`] re-triggers.
    pub given_up: Vec<String>,
}

pub(super) fn spawn_background(engine: &Arc<Engine>) {
    let weak: Weak<Engine> = Arc::downgrade(engine);
    let interval = engine.settings.periodic_interval;
    let watchdog = engine.settings.controller_registry.is_none();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        loop {
            ticker.tick().await;
            let Some(engine) = weak.upgrade() else { return };
            if let Err(e) = store::services::heartbeat(&engine.db, &engine.engine_id).await {
                tracing::warn!(error = %e, "engine heartbeat failed");
            }
            if watchdog {
                if let Err(e) = engine.run_watchdog_pass().await {
                    tracing::warn!(error = %e, "watchdog pass failed");
                }
            }
        }
    });
}

impl Engine {
    /// One watchdog pass; answers the ids of the stacks re-triggered.
    pub async fn run_watchdog_once(self: &Arc<Self>) -> Result<Vec<String>, EngineError> {
        Ok(self.run_watchdog_pass().await?.retriggered)
    }

    /// One watchdog pass: reclaims the dead engines' locks of stuck
    /// stacks and re-triggers them.
    pub async fn run_watchdog_pass(self: &Arc<Self>) -> Result<WatchdogReport, EngineError> {
        let rows = self
            .db
            .fetch_all(
                "SELECT id FROM stack WHERE status = ? AND deleted_at IS NULL AND current_traversal <> ''",
                &[Status::InProgress.into()],
            )
            .await?;
        let mut report = WatchdogReport::default();
        store::retriggers::forget_settled(&self.db).await?;
        for r in rows {
            let id = r.string(0)?;
            let Some(dead) = self.stuck_stack_dead_holders(&id).await? else {
                continue;
            };
            report.locks_reclaimed += self.reclaim_locks(&id, &dead).await?;
            let Some(stack) = store::stacks::get(&self.db, &id).await? else {
                continue;
            };
            let prior = store::retriggers::get(&self.db, &id).await?;
            let retriggers = prior.filter(|p| p.covers(&stack.current_traversal)).map_or(0, |p| p.retriggers);
            if retriggers >= WATCHDOG_RETRIGGER_LIMIT {
                if self.give_up(&stack, retriggers).await? {
                    report.given_up.push(id);
                }
                continue;
            }
            // Counted before the operation runs again: it may kill this
            // engine too.
            store::retriggers::record_attempt(&self.db, &id, &stack.current_traversal, retriggers + 1).await?;
            let started = self
                .converge_stack(
                    &stack,
                    stack.raw_template_id,
                    stack.action,
                    &stack.current_traversal,
                    StackChanges::default(),
                )
                .await?;
            if started {
                if let Some(now) = store::stacks::get(&self.db, &id).await? {
                    store::retriggers::record_started(&self.db, &id, &now.current_traversal).await?;
                }
                report.retriggered.push(id);
            }
        }
        Ok(report)
    }

    /// The stack's operation got stuck again after `retriggers`
    /// re-triggers: ACTION_FAILED with the reason (no rollback, which
    /// would run the same definition again), its traversal ended. False
    /// when another traversal took over meanwhile.
    async fn give_up(self: &Arc<Self>, stack: &StackRow, retriggers: i64) -> Result<bool, EngineError> {
        let traversal = stack.current_traversal.as_str();
        let reason = format!(
            "Engine went down during stack {} {} times (re-triggered {retriggers} times by the watchdog); not re-triggered again",
            stack.action,
            retriggers + 1
        );
        let change = StackStateChange {
            current_traversal: Some(String::new()),
            ..StackStateChange::new(stack.action, Status::Failed, reason.clone())
        };
        if !store::stacks::set_state(&self.db, &stack.id, traversal, change).await? {
            return Ok(false);
        }
        tracing::warn!(stack = %stack.id, %reason, "stack marked FAILED by the watchdog");
        store::sync_points::delete_for_traversal(&self.db, &stack.id, traversal).await?;
        store::retriggers::forget(&self.db, &stack.id).await?;
        self.stack_settled(&stack.id);
        self.stack_event(stack, stack.action, Status::Failed, &reason).await;
        Ok(true)
    }

    /// Clears the locks `dead` engines hold on the stack's resources, as
    /// check_resource does when it meets one.
    async fn reclaim_locks(self: &Arc<Self>, stack_id: &str, dead: &[String]) -> Result<u32, EngineError> {
        let mut reclaimed = 0;
        for row in store::resources::list(&self.db, stack_id).await? {
            let Some(holder) = row.engine_id.as_deref().filter(|h| dead.iter().any(|d| d == h)) else {
                continue;
            };
            let act = if row.action == Action::Init { Action::Create } else { row.action };
            let reason = format!("Worker went down during resource {act}");
            let change = ResourceChange::state(act, Status::Failed, reason.clone());
            if store::resources::steal_lock(&self.db, row.id, holder, change).await? {
                reclaimed += 1;
                if let Some(stolen) = store::resources::get(&self.db, row.id).await? {
                    self.resource_event(&stolen, act, Status::Failed, &reason, None).await;
                }
            }
        }
        Ok(reclaimed)
    }

    /// None: the stack is not stuck (a live engine holds a lock, or it
    /// moved within `stall_timeout`). Some(the dead lock holders).
    async fn stuck_stack_dead_holders(self: &Arc<Self>, stack_id: &str) -> Result<Option<Vec<String>>, EngineError> {
        let holders = store::resources::lock_holders(&self.db, stack_id).await?;
        for h in &holders {
            if self.dispatcher.is_alive(self, h).await {
                return Ok(None);
            }
        }
        if !holders.is_empty() {
            return Ok(Some(holders));
        }
        let rows = self
            .db
            .fetch_all(
                "SELECT MAX(updated_at) FROM resource WHERE stack_id = ? UNION ALL SELECT updated_at FROM stack WHERE id = ?",
                &[stack_id.into(), stack_id.into()],
            )
            .await?;
        let last = rows.iter().filter_map(|r| r.opt_time(0).ok().flatten()).max();
        let Some(last) = last else { return Ok(None) };
        let idle = keelson_db::now() - last;
        Ok((idle.num_milliseconds() > i64::try_from(self.settings.stall_timeout.as_millis()).unwrap_or(i64::MAX))
            .then(Vec::new))
    }
}
