//! Shared fixture of the service tests: a fresh SQLite file with the
//! orchestration schema, the built-in plugins, one running engine and the
//! API operations on top.

#![allow(dead_code)]
// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use keelson_db::{DatabaseUrl, Db, PoolSettings};
use serde_json::Value;

use keelson_stack_engine::convergence::{Engine, EngineSettings};
use keelson_stack_engine::resources::Registry;
use keelson_stack_engine::service::{Caller, Orchestration, QueryParams, ServiceSettings, StackRef};

pub struct Harness {
    pub api: Orchestration,
    pub engine: Arc<Engine>,
    pub db: Db,
    _dir: TempDir,
}

/// A directory removed when the test ends.
pub struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Harness {
    pub async fn start() -> Harness {
        Self::start_with(ServiceSettings::default()).await
    }

    pub async fn start_with(settings: ServiceSettings) -> Harness {
        Self::start_with_registry(settings, Registry::builtin()).await
    }

    /// With the test's own plugins in `registry`.
    pub async fn start_with_registry(settings: ServiceSettings, registry: Registry) -> Harness {
        let dir = std::env::temp_dir().join(format!("keelson-service-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).expect("url");
        let db = Db::connect(&url, &PoolSettings::default()).await.expect("connect");
        keelson_stack_engine::store::schema::sync(&db).await.expect("schema");
        let registry = Arc::new(registry);
        let engine = keelson_stack_engine::start_engine(db.clone(), registry.clone(), EngineSettings::default())
            .await
            .expect("engine");
        let api = Orchestration::new(engine.clone(), db.clone(), registry, settings);
        Harness { api, engine, db, _dir: TempDir(dir) }
    }

    /// Polls show until the stack reaches `state` (ACTION_STATUS); panics
    /// after 30 s or on a terminal state that is not the expected one.
    pub async fn wait_for_status(&self, caller: &Caller, stack: &StackRef, state: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let shown = self.api.show_stack(caller, stack, &QueryParams::default()).await.expect("show");
            let status = shown["stack"]["stack_status"].as_str().unwrap_or_default().to_string();
            if status == state {
                return shown;
            }
            if status.ends_with("_FAILED") || std::time::Instant::now() > deadline {
                panic!("waiting for {state}, stack is {status}: {}", shown["stack"]["stack_status_reason"]);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

pub fn admin(project: &str) -> Caller {
    Caller {
        project_id: project.to_string(),
        user_id: "admin".to_string(),
        user_name: "admin".to_string(),
        roles: vec!["admin".to_string()],
        is_admin: true,
        auth_token: String::new(),
        path_project_id: project.to_string(),
    }
}

pub fn member(project: &str) -> Caller {
    Caller {
        project_id: project.to_string(),
        user_id: "demo".to_string(),
        user_name: "demo".to_string(),
        roles: vec!["member".to_string()],
        is_admin: false,
        auth_token: String::new(),
        path_project_id: project.to_string(),
    }
}
