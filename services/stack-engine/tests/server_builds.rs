//! `[orchestration] max_concurrent_server_builds`: an engine hands out at
//! most that many server-build slots (OS::Nova::Server and
//! AWS::EC2::Instance hold one from Nova's POST /servers until the server
//! is ACTIVE or failed); below 1 there is no bound.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::FutureExt;
use keelson_db::{DatabaseUrl, Db, PoolSettings};

use keelson_stack_engine::convergence::{Engine, EngineSettings, QueueDispatcher};
use keelson_stack_engine::resources::Registry;
use keelson_stack_engine::store;

async fn engine(bound: Option<usize>) -> (Arc<Engine>, Arc<Registry>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("keelson-builds-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).unwrap();
    let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
    store::schema::sync(&db).await.unwrap();
    let registry = Arc::new(Registry::builtin());
    let settings = EngineSettings {
        engine_id: Some("engine-a".into()),
        max_concurrent_server_builds: bound,
        ..EngineSettings::default()
    };
    let engine = Engine::new(db, registry.clone(), settings, QueueDispatcher::new()).await.unwrap();
    (engine, registry, dir)
}

#[tokio::test]
async fn an_engine_has_at_most_its_bound_of_servers_building() {
    let (engine, registry, dir) = engine(Some(2)).await;
    let host = registry.host().get();
    let first = host.server_build_slot().await.expect("a slot");
    let _second = host.server_build_slot().await.expect("a slot");
    // The third boot waits until one of the two builds is over.
    assert!(host.server_build_slot().now_or_never().is_none());
    drop(first);
    assert!(host.server_build_slot().now_or_never().flatten().is_some());
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn without_a_bound_every_boot_goes_at_once() {
    let (engine, registry, dir) = engine(None).await;
    let host = registry.host().get();
    for _ in 0..100 {
        assert!(host.server_build_slot().now_or_never().expect("not waiting").is_none());
    }
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn no_bound_unless_the_option_sets_one() {
    assert_eq!(EngineSettings::default().max_concurrent_server_builds, None);
    let read = |value: &str| {
        let mut config = keelson_runtime::Config::default();
        config.set("orchestration", "max_concurrent_server_builds", value);
        keelson_stack_engine::settings_from_config(&config, String::new()).engine.max_concurrent_server_builds
    };
    assert_eq!(read("4"), Some(4));
    assert_eq!(read("0"), None);
    assert_eq!(read("-1"), None);
}
