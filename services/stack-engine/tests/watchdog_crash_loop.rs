//! The watchdog's crash-loop guard at the engine level: an operation
//! whose engine dies every time it runs is re-triggered at most twice,
//! then the stack is marked FAILED with the reason; the count lives in
//! the database.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keelson_db::{DatabaseUrl, Db, PoolSettings};
use serde_json::{json, Value};

use keelson_stack_engine::convergence::{Engine, EngineSettings, NewStack, QueueDispatcher, WATCHDOG_RETRIGGER_LIMIT};
use keelson_stack_engine::resources::Registry;
use keelson_stack_engine::store::{self, EventQuery, SortDir, StackRow};

struct Setup {
    db: Db,
    engine: Arc<Engine>,
    queue: Arc<QueueDispatcher>,
    dir: std::path::PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn setup() -> Setup {
    let dir = std::env::temp_dir().join(format!("keelson-crash-loop-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).unwrap();
    let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
    store::schema::sync(&db).await.unwrap();
    let queue = QueueDispatcher::new();
    let settings = EngineSettings { engine_id: Some("engine-a".into()), ..EngineSettings::default() };
    let engine = Engine::new(db.clone(), Arc::new(Registry::builtin()), settings, queue.clone()).await.unwrap();
    queue.attach(&engine);
    Setup { db, engine, queue, dir }
}

fn template() -> Value {
    json!({"heat_template_version": "2015-04-30", "resources": {
        "a": {"type": "OS::Heat::TestResource", "properties": {"value": "x"}}}})
}

async fn create(s: &Setup) -> StackRow {
    s.engine
        .create_stack(NewStack {
            id: uuid::Uuid::new_v4().to_string(),
            name: "poisoned".into(),
            tenant: "p".into(),
            template: template(),
            environment: json!({}),
            disable_rollback: true,
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The check of the stack's resource is taken by engine `victim`, which
/// dies holding the lock (as a process killed by what it checks).
async fn die_in_check(s: &Setup, victim: &str) {
    let msg = s.queue.pop().expect("a check was dispatched");
    let row = store::resources::get(&s.db, msg.resource_id).await.unwrap().unwrap();
    assert!(store::resources::acquire_lock(&s.db, row.id, victim, row.atomic_key).await.unwrap());
    s.queue.kill(victim);
}

#[tokio::test]
async fn an_operation_that_kills_its_engine_is_retriggered_twice_then_failed() {
    let s = setup().await;
    let stack = create(&s).await;
    for round in 1..=WATCHDOG_RETRIGGER_LIMIT {
        die_in_check(&s, &format!("dead-{round}")).await;
        let report = s.engine.run_watchdog_pass().await.unwrap();
        assert_eq!(report.retriggered, vec![stack.id.clone()], "round {round}");
        let row = store::retriggers::get(&s.db, &stack.id).await.unwrap().expect("counted durably");
        assert_eq!(row.retriggers, round);
        let now = store::stacks::get(&s.db, &stack.id).await.unwrap().unwrap();
        assert_eq!(row.started_traversal.as_deref(), Some(now.current_traversal.as_str()));
        assert_eq!(now.state(), "CREATE_IN_PROGRESS");
    }
    die_in_check(&s, "dead-3").await;
    let report = s.engine.run_watchdog_pass().await.unwrap();
    assert!(report.retriggered.is_empty());
    assert_eq!(report.given_up, vec![stack.id.clone()]);
    let failed = store::stacks::get(&s.db, &stack.id).await.unwrap().unwrap();
    let reason =
        "Engine went down during stack CREATE 3 times (re-triggered 2 times by the watchdog); not re-triggered again";
    assert_eq!(
        (failed.state(), failed.status_reason.as_str(), failed.current_traversal.as_str()),
        ("CREATE_FAILED".into(), reason, "")
    );
    assert!(store::retriggers::get(&s.db, &stack.id).await.unwrap().is_none());
    let q = EventQuery { stack_ids: vec![stack.id.clone()], sort_dir: Some(SortDir::Asc), ..Default::default() };
    let events = store::events::list(&s.db, &q).await.unwrap();
    assert!(events
        .iter()
        .any(|e| e.resource_name == "poisoned" && e.resource_status == "FAILED" && e.resource_status_reason == reason));
    // Nothing runs it again: the next pass leaves it alone.
    let report = s.engine.run_watchdog_pass().await.unwrap();
    assert!(report.retriggered.is_empty() && report.given_up.is_empty());
    assert!(s.queue.is_empty());
}

#[tokio::test]
async fn a_recovered_operation_starts_counting_anew() {
    let s = setup().await;
    let stack = create(&s).await;
    die_in_check(&s, "dead-1").await;
    assert_eq!(s.engine.run_watchdog_pass().await.unwrap().retriggered, vec![stack.id.clone()]);
    s.queue.drain(&s.engine, 100).await;
    assert_eq!(store::stacks::get(&s.db, &stack.id).await.unwrap().unwrap().state(), "CREATE_COMPLETE");
    s.engine.run_watchdog_pass().await.unwrap();
    assert!(store::retriggers::get(&s.db, &stack.id).await.unwrap().is_none(), "settled stacks are forgotten");
}
