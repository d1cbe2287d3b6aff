//! Two engines on loopback dispatching check_resource to each other over
//! `EngineWorker` gRPC, the liveness probe, and lock stealing from an
//! engine that is registered but gone.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use keelson_db::{DatabaseUrl, Db, PoolSettings};
use keelson_runtime::shutdown::{self, ShutdownTrigger};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use keelson_stack_engine::convergence::{Engine, EngineSettings, NewDefinition, NewStack};
use keelson_stack_engine::resources::Registry;
use keelson_stack_engine::rpc::worker::WorkerService;
use keelson_stack_engine::store::{self, EventQuery, StackRow};

struct Node {
    engine: Arc<Engine>,
    _stop: ShutdownTrigger,
}

async fn node(db: &Db, id: &str) -> Node {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let settings = EngineSettings {
        engine_id: Some(id.to_string()),
        worker_endpoint: endpoint,
        periodic_interval: Duration::from_secs(1),
        ..EngineSettings::default()
    };
    let engine = keelson_stack_engine::start_engine(db.clone(), Arc::new(Registry::builtin()), settings).await.unwrap();
    let (stop, wait) = shutdown::channel();
    let worker = WorkerService::new(engine.clone());
    tokio::spawn(keelson_runtime::grpc::serve(listener, &[], |r| r.add_service(worker.into_server()), wait));
    Node { engine, _stop: stop }
}

async fn database() -> (Db, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("keelson-grpc-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).unwrap();
    let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
    store::schema::sync(&db).await.unwrap();
    (db, dir)
}

fn template(value: &str, n: usize) -> Value {
    let mut resources = serde_json::Map::new();
    for i in 0..n {
        resources.insert(format!("r{i}"), json!({"type": "OS::Heat::TestResource", "properties": {"value": value}}));
    }
    resources.insert(
        "last".into(),
        json!({"type": "OS::Heat::TestResource", "properties": {"value": {"get_attr": ["r0", "output"]}}}),
    );
    json!({"heat_template_version": "2015-04-30", "resources": resources})
}

async fn wait_for(db: &Db, id: &str, state: &str) -> StackRow {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = store::stacks::get(db, id).await.unwrap().unwrap();
        if s.state() == state {
            return s;
        }
        assert!(Instant::now() < deadline, "stack stuck in {} ({})", s.state(), s.status_reason);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create(engine: &Arc<Engine>, t: Value) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    engine
        .create_stack(NewStack {
            id: id.clone(),
            name: "g".into(),
            tenant: "p".into(),
            template: t,
            environment: json!({}),
            disable_rollback: true,
            ..Default::default()
        })
        .await
        .unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_converge_a_stack_over_grpc() {
    let (db, dir) = database().await;
    let a = node(&db, "engine-a").await;
    let b = node(&db, "engine-b").await;
    assert!(a.engine.probe_engine("engine-b").await);
    assert!(b.engine.probe_engine("engine-a").await);
    let id = create(&a.engine, template("x", 8)).await;
    wait_for(&db, &id, "CREATE_COMPLETE").await;
    b.engine
        .update_stack(
            &id,
            NewDefinition {
                template: template("y", 8),
                environment: json!({}),
                disable_rollback: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    wait_for(&db, &id, "UPDATE_COMPLETE").await;
    a.engine.delete_stack(&id).await.unwrap();
    wait_for(&db, &id, "DELETE_COMPLETE").await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_but_dead_engine_is_skipped_and_its_locks_stolen() {
    let (db, dir) = database().await;
    let a = node(&db, "engine-a").await;
    // A fresh service row whose endpoint refuses connections.
    store::services::register(&db, "ghost", "h", "h", "http://127.0.0.1:1", 5).await.unwrap();
    let started = Instant::now();
    assert!(!a.engine.probe_engine("ghost").await);
    assert!(started.elapsed() < Duration::from_secs(3), "a refused connection answers fast");
    let id = create(&a.engine, template("x", 4)).await;
    wait_for(&db, &id, "CREATE_COMPLETE").await;
    // ghost takes r0's lock and dies; the update steals it.
    let r0 = store::resources::list(&db, &id).await.unwrap().into_iter().find(|r| r.name == "r0").unwrap();
    assert!(store::resources::acquire_lock(&db, r0.id, "ghost", r0.atomic_key).await.unwrap());
    a.engine
        .update_stack(
            &id,
            NewDefinition {
                template: template("y", 4),
                environment: json!({}),
                disable_rollback: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let s = wait_for(&db, &id, "UPDATE_COMPLETE").await;
    assert_eq!(s.status_reason, "Stack UPDATE completed successfully");
    let events =
        store::events::list(&db, &EventQuery { stack_ids: vec![id.clone()], ..Default::default() }).await.unwrap();
    assert!(events
        .iter()
        .any(|e| e.resource_name == "r0" && e.resource_status_reason == "Worker went down during resource CREATE"));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_resources_over_two_engines() {
    let (db, dir) = database().await;
    let a = node(&db, "engine-a").await;
    let _b = node(&db, "engine-b").await;
    let id = create(&a.engine, template("x", 50)).await;
    wait_for(&db, &id, "CREATE_COMPLETE").await;
    a.engine.delete_stack(&id).await.unwrap();
    wait_for(&db, &id, "DELETE_COMPLETE").await;
    let _ = std::fs::remove_dir_all(dir);
}
