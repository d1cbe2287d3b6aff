//! Heartbeat and the watchdog: an IN_PROGRESS stack whose locks are held
//! only by dead engines, or where nothing moved for `stall_timeout` and no
//! live engine holds a lock, gets its dead engines' locks reclaimed (the
//! resource marked FAILED "Worker went down during resource ACTION") and a
//! new traversal of the same action over the same template (completed
//! resources are unchanged), so it finishes without a user action.
//!
//! Without a controller every engine runs the pass every
//! `periodic_interval`; with one (`EngineSettings::controller_registry`)
//! the engine only heartbeats and the controller primary's singleton duty
//! asks one engine at a time for a pass (`EngineWorker.RunWatchdog`).

use std::sync::{Arc, Weak};

use super::traversal::StackChanges;
use super::Engine;
use crate::store::{self, action, status, ResourceChange};
use crate::EngineError;

/// What one watchdog pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchdogReport {
    /// Resource locks of dead engines cleared.
    pub locks_reclaimed: u32,
    /// The stacks given a new traversal.
    pub retriggered: Vec<String>,
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
                &[status::IN_PROGRESS.into()],
            )
            .await?;
        let mut report = WatchdogReport::default();
        for r in rows {
            let id = r.string(0)?;
            let Some(dead) = self.stuck_stack_dead_holders(&id).await? else {
                continue;
            };
            report.locks_reclaimed += self.reclaim_locks(&id, &dead).await?;
            if let Some(stack) = store::stacks::get(&self.db, &id).await? {
                let started = self
                    .converge_stack(
                        &stack,
                        stack.raw_template_id,
                        &stack.action.clone(),
                        &stack.current_traversal,
                        StackChanges::default(),
                    )
                    .await?;
                if started {
                    report.retriggered.push(id);
                }
            }
        }
        Ok(report)
    }

    /// Clears the locks `dead` engines hold on the stack's resources, as
    /// check_resource does when it meets one.
    async fn reclaim_locks(
        self: &Arc<Self>,
        stack_id: &str,
        dead: &[String],
    ) -> Result<u32, EngineError> {
        let mut reclaimed = 0;
        for row in store::resources::list(&self.db, stack_id).await? {
            let Some(holder) = row
                .engine_id
                .as_deref()
                .filter(|h| dead.iter().any(|d| d == h))
            else {
                continue;
            };
            let act = if row.action == action::INIT {
                action::CREATE
            } else {
                row.action.as_str()
            };
            let reason = format!("Worker went down during resource {act}");
            let change = ResourceChange::state(act, status::FAILED, reason.clone());
            if store::resources::steal_lock(&self.db, row.id, holder, change).await? {
                reclaimed += 1;
                if let Some(stolen) = store::resources::get(&self.db, row.id).await? {
                    self.resource_event(&stolen, act, status::FAILED, &reason, None)
                        .await;
                }
            }
        }
        Ok(reclaimed)
    }

    /// None: the stack is not stuck (a live engine holds a lock, or it
    /// moved within `stall_timeout`). Some(the dead lock holders).
    async fn stuck_stack_dead_holders(
        self: &Arc<Self>,
        stack_id: &str,
    ) -> Result<Option<Vec<String>>, EngineError> {
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
        let last = rows
            .iter()
            .filter_map(|r| r.opt_time(0).ok().flatten())
            .max();
        let Some(last) = last else { return Ok(None) };
        let idle = keelson_common::db::now() - last;
        Ok(
            (idle.num_milliseconds() > self.settings.stall_timeout.as_millis() as i64)
                .then(Vec::new),
        )
    }
}
