//! Heartbeat and the watchdog: an IN_PROGRESS stack whose locks are held
//! only by dead engines, or where nothing moved for `stall_timeout` and no
//! live engine holds a lock, gets a new traversal of the same action over
//! the same template (completed resources are unchanged, dead locks are
//! stolen), so it finishes without a user action.

use std::sync::{Arc, Weak};

use super::traversal::StackChanges;
use super::Engine;
use crate::store::{self, status};
use crate::EngineError;

pub(super) fn spawn_background(engine: &Arc<Engine>) {
    let weak: Weak<Engine> = Arc::downgrade(engine);
    let interval = engine.settings.periodic_interval;
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        loop {
            ticker.tick().await;
            let Some(engine) = weak.upgrade() else { return };
            if let Err(e) = store::services::heartbeat(&engine.db, &engine.engine_id).await {
                tracing::warn!(error = %e, "engine heartbeat failed");
            }
            if let Err(e) = engine.run_watchdog_once().await {
                tracing::warn!(error = %e, "watchdog pass failed");
            }
        }
    });
}

impl Engine {
    /// One watchdog pass; answers the ids of the stacks re-triggered.
    pub async fn run_watchdog_once(self: &Arc<Self>) -> Result<Vec<String>, EngineError> {
        let rows = self
            .db
            .fetch_all(
                "SELECT id FROM stack WHERE status = ? AND deleted_at IS NULL AND current_traversal <> ''",
                &[status::IN_PROGRESS.into()],
            )
            .await?;
        let mut retriggered = Vec::new();
        for r in rows {
            let id = r.string(0)?;
            if self.stack_is_stuck(&id).await? {
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
                        retriggered.push(id);
                    }
                }
            }
        }
        Ok(retriggered)
    }

    async fn stack_is_stuck(self: &Arc<Self>, stack_id: &str) -> Result<bool, EngineError> {
        let holders = store::resources::lock_holders(&self.db, stack_id).await?;
        for h in &holders {
            if self.dispatcher.is_alive(self, h).await {
                return Ok(false);
            }
        }
        if !holders.is_empty() {
            return Ok(true);
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
        let Some(last) = last else { return Ok(false) };
        let idle = keelson_common::db::now() - last;
        Ok(idle.num_milliseconds() > self.settings.stall_timeout.as_millis() as i64)
    }
}
