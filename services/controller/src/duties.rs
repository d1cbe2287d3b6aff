//! Singleton duties: work exactly one node of the mesh does, the serving
//! primary. The loop follows [`Controller::subscribe_roles`]: while the
//! view is `serving`, it runs the one-time sync once per term (retried on
//! each tick until it succeeds) and the periodic pass every `interval`;
//! on step-down (or a new term) the running pass is dropped at once.
//!
//! The actions themselves are the services' (the standard traits and
//! classes belong to the Placement schema, the locks and traversals to the
//! stack engines): the binary implements [`Duties`] over their clients, so
//! this module stays transport-agnostic.
//!
//! [`Controller::subscribe_roles`]: crate::Controller::subscribe_roles

use std::sync::Arc;
use std::time::Duration;

pub use futures::future::BoxFuture;
use keelson_runtime::shutdown::Shutdown;
use tokio::sync::watch;

use crate::node::RoleView;

pub type DutyError = Box<dyn std::error::Error + Send + Sync>;

/// The actions of the singleton duties.
pub trait Duties: Send + Sync + 'static {
    /// The one-time standard traits and resource classes sync (once per
    /// term); answers a summary for the log.
    fn sync_standard(&self) -> BoxFuture<'_, Result<String, DutyError>>;
    /// One periodic pass (reclaim dead engines' locks, re-trigger stalled
    /// traversals); answers a summary for the log (empty: nothing done).
    fn periodic(&self) -> BoxFuture<'_, Result<String, DutyError>>;
}

/// Runs the duties while `roles` says serving, until `shutdown`.
pub async fn run(
    mut roles: watch::Receiver<RoleView>,
    duties: Arc<dyn Duties>,
    interval: Duration,
    shutdown: Shutdown,
) {
    let mut synced_term = 0u64;
    loop {
        let view = *roles.borrow_and_update();
        if !view.serving {
            tokio::select! {
                changed = roles.changed() => if changed.is_err() { return },
                _ = shutdown.clone().wait() => return,
            }
            continue;
        }
        let term = view.term;
        tracing::info!(target: "keelson::controller::duties", "singleton duties running (primary of term {term})");
        let synced = &mut synced_term;
        let duties = &duties;
        let serve = async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                if *synced != term {
                    match duties.sync_standard().await {
                        Ok(summary) => {
                            *synced = term;
                            tracing::info!(target: "keelson::controller::duties", "standard traits and classes sync (term {term}): {summary}");
                        }
                        Err(e) => {
                            tracing::warn!(target: "keelson::controller::duties", "standard traits and classes sync failed (retrying): {e}")
                        }
                    }
                }
                match duties.periodic().await {
                    Ok(summary) if summary.is_empty() => {}
                    Ok(summary) => tracing::info!(target: "keelson::controller::duties", "watchdog duty: {summary}"),
                    Err(e) => tracing::warn!(target: "keelson::controller::duties", "watchdog duty failed: {e}"),
                }
            }
        };
        tokio::select! {
            () = serve => {}
            gone = until_not_serving(&mut roles, term) => {
                tracing::info!(target: "keelson::controller::duties", "singleton duties stopped (no longer the serving primary of term {term})");
                if !gone { return }
            }
            _ = shutdown.clone().wait() => return,
        }
    }
}

/// Resolves when the view leaves (serving, `term`); false when the sender
/// is gone.
async fn until_not_serving(roles: &mut watch::Receiver<RoleView>, term: u64) -> bool {
    loop {
        if roles.changed().await.is_err() {
            return false;
        }
        let v = *roles.borrow();
        if !v.serving || v.term != term {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    use super::*;
    use crate::model::Role;

    #[derive(Default)]
    struct Recorder {
        syncs: Mutex<Vec<u64>>,
        term: std::sync::atomic::AtomicU64,
        fail_next_sync: AtomicBool,
        passes: AtomicUsize,
    }

    impl Duties for Recorder {
        fn sync_standard(&self) -> BoxFuture<'_, Result<String, DutyError>> {
            Box::pin(async move {
                if self.fail_next_sync.swap(false, Ordering::SeqCst) {
                    return Err("database down".into());
                }
                self.syncs.lock().unwrap().push(self.term.load(Ordering::SeqCst));
                Ok("ok".into())
            })
        }
        fn periodic(&self) -> BoxFuture<'_, Result<String, DutyError>> {
            Box::pin(async move {
                self.passes.fetch_add(1, Ordering::SeqCst);
                Ok(String::new())
            })
        }
    }

    fn view(role: Role, term: u64, serving: bool) -> RoleView {
        RoleView { role, term, serving }
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(120)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_only_while_serving_and_syncs_once_per_term() {
        let (tx, rx) = watch::channel(view(Role::Standby, 1, false));
        let rec = Arc::new(Recorder::default());
        let (trigger, shutdown) = keelson_runtime::shutdown::channel();
        let task = tokio::spawn(run(rx, rec.clone(), Duration::from_millis(10), shutdown));

        settle().await;
        assert_eq!(rec.passes.load(Ordering::SeqCst), 0, "a standby runs nothing");
        assert!(rec.syncs.lock().unwrap().is_empty());

        // A primary without quorum (not serving) runs nothing either.
        tx.send(view(Role::Primary, 2, false)).unwrap();
        settle().await;
        assert_eq!(rec.passes.load(Ordering::SeqCst), 0);

        // Serving primary of term 2: one sync (the first attempt fails and
        // is retried), periodic passes.
        rec.term.store(2, Ordering::SeqCst);
        rec.fail_next_sync.store(true, Ordering::SeqCst);
        tx.send(view(Role::Primary, 2, true)).unwrap();
        settle().await;
        assert_eq!(*rec.syncs.lock().unwrap(), vec![2]);
        assert!(rec.passes.load(Ordering::SeqCst) >= 3);

        // Step-down: the passes stop.
        tx.send(view(Role::Standby, 2, false)).unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let stopped_at = rec.passes.load(Ordering::SeqCst);
        settle().await;
        assert_eq!(rec.passes.load(Ordering::SeqCst), stopped_at, "no pass after step-down");

        // Serving again in the same term: no second sync.
        tx.send(view(Role::Primary, 2, true)).unwrap();
        settle().await;
        assert!(rec.passes.load(Ordering::SeqCst) > stopped_at);
        assert_eq!(*rec.syncs.lock().unwrap(), vec![2]);

        // A new term: synced again, once.
        rec.term.store(3, Ordering::SeqCst);
        tx.send(view(Role::Primary, 3, true)).unwrap();
        settle().await;
        assert_eq!(*rec.syncs.lock().unwrap(), vec![2, 3]);

        trigger.trigger();
        tokio::time::timeout(Duration::from_secs(2), task).await.expect("stops on shutdown").unwrap();
    }

    /// The duty loop on a real single node: PRIMARY term 1, serving.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_single_node_runs_its_duties() {
        let settings = crate::ControllerSettings::single_node("c1", "127.0.0.1:1".parse().unwrap());
        let (trigger, shutdown) = keelson_runtime::shutdown::channel();
        let (ctl, _) = crate::start(settings, shutdown.clone()).await.unwrap();
        let rec = Arc::new(Recorder::default());
        rec.term.store(1, Ordering::SeqCst);
        let task = tokio::spawn(run(ctl.subscribe_roles(), rec.clone(), Duration::from_millis(10), shutdown));
        settle().await;
        assert_eq!(*rec.syncs.lock().unwrap(), vec![1]);
        assert!(rec.passes.load(Ordering::SeqCst) >= 2);
        trigger.trigger();
        tokio::time::timeout(Duration::from_secs(2), task).await.expect("stops on shutdown").unwrap();
    }
}
