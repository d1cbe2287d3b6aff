//! Upstream `prepare_for_replace` and `needs_replace_failed` at the
//! engine level: the old resource's hook runs before its replacement is
//! created (OS::Nova::KeyPair frees its name with it), and its failure
//! fails the update without a replacement; a FAILED resource whose plugin
//! keeps it (OS::Nova::ServerGroup still in Nova) is not replaced. A
//! rollback that brings the old resource back runs its
//! `restore_prev_rsrc` with what its `prepare_for_replace` kept
//! (OS::Neutron::Port takes back its fixed IPs), before the replacement is
//! cleaned up.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use keelson_db::{DatabaseUrl, Db, PoolSettings};
use serde_json::{json, Value};

use keelson_stack_engine::convergence::{Engine, EngineSettings, NewDefinition, NewStack, QueueDispatcher};
use keelson_stack_engine::resources::{
    ActionContext, ActionResult, Plugin, PropertySchema, PropertyType, Registry, ResourceFailure, ResourceSchema,
    ResourceState, SupportStatus,
};
use keelson_stack_engine::store;
use keelson_stack_engine::EngineError;

/// A resource named by its `name` (which replaces), logging its actions.
struct Named {
    schema: ResourceSchema,
    log: Arc<Mutex<Vec<String>>>,
}

impl Plugin for Named {
    const TYPE: &'static str = "Test::Named";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let name = ctx.properties["name"].as_str().unwrap_or_default().to_string();
        self.log.lock().unwrap().push(format!("create {name}"));
        ctx.state.physical_id = Some(name.clone());
        if name == "boom" {
            return Err(ResourceFailure::error("Conflict", "boom cannot be made"));
        }
        Ok(())
    }

    async fn update(
        &self,
        ctx: &mut ActionContext,
        _old: &keelson_stack_engine::resources::Properties,
    ) -> ActionResult {
        if ctx.properties.get("value") == Some(&json!("fail")) {
            return Err(ResourceFailure::error("Conflict", "failed on purpose"));
        }
        Ok(())
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        self.log.lock().unwrap().push(format!("delete {}", ctx.state.physical_id.clone().unwrap_or_default()));
        Ok(())
    }

    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        let old = ctx.state.physical_id.clone().unwrap_or_default();
        self.log.lock().unwrap().push(format!("needs {old}"));
        Ok(old != "keep")
    }

    async fn prepare_for_replace(&self, ctx: &mut ActionContext) -> ActionResult {
        let old = ctx.state.physical_id.clone().unwrap_or_default();
        self.log.lock().unwrap().push(format!("prepare {old}"));
        if old == "stuck" {
            return Err(ResourceFailure::error("Conflict", "stuck cannot go"));
        }
        ctx.state.data.insert("freed".into(), old);
        Ok(())
    }

    async fn restore_prev_rsrc(&self, ctx: &mut ActionContext, replacement: Option<&str>) -> ActionResult {
        let old = ctx.state.physical_id.clone().unwrap_or_default();
        let freed = ctx.state.data.get("freed").cloned().unwrap_or_default();
        self.log.lock().unwrap().push(format!("restore {old} (freed {freed}) from {}", replacement.unwrap_or("-")));
        Ok(())
    }

    async fn attribute(&self, _: &ResourceState, _: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }
}

fn template(name: &str) -> Value {
    json!({"heat_template_version": "2015-04-30", "resources": {"r": {"type": "Test::Named", "properties": {"name": name}}}})
}

async fn engine(log: Arc<Mutex<Vec<String>>>) -> (Arc<Engine>, Arc<QueueDispatcher>, Db, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("keelson-prepare-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).unwrap();
    let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
    store::schema::sync(&db).await.unwrap();
    let mut registry = Registry::builtin();
    let schema = ResourceSchema {
        properties: vec![
            PropertySchema::new("name", PropertyType::String, "").required(),
            PropertySchema::new("value", PropertyType::String, "").update_allowed(),
        ],
        attributes: Vec::new(),
        support_status: SupportStatus::default(),
        description: "",
    };
    registry.register(Arc::new(Named { schema, log }));
    let queue = QueueDispatcher::new();
    let settings = EngineSettings { engine_id: Some("engine-a".into()), ..EngineSettings::default() };
    let engine = Engine::new(db.clone(), Arc::new(registry), settings, queue.clone()).await.unwrap();
    queue.attach(&engine);
    (engine, queue, db, dir)
}

async fn drain(engine: &Arc<Engine>, queue: &QueueDispatcher) {
    while let Some(msg) = queue.pop() {
        engine.check_resource(msg).await;
    }
}

#[tokio::test]
async fn the_old_resource_prepares_before_its_replacement_exists() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (engine, queue, db, dir) = engine(log.clone()).await;
    let new = |name: &str, template: Value| NewStack {
        id: uuid::Uuid::new_v4().to_string(),
        name: name.to_string(),
        tenant: "p".into(),
        username: "u".into(),
        user_id: "uid".into(),
        template,
        environment: json!({}),
        disable_rollback: true,
        ..Default::default()
    };
    let update = |template: Value| NewDefinition {
        template,
        environment: json!({}),
        disable_rollback: true,
        ..Default::default()
    };
    let stack = engine.create_stack(new("ok", template("a"))).await.unwrap();
    drain(&engine, &queue).await;
    engine.update_stack(&stack.id, update(template("b"))).await.unwrap();
    drain(&engine, &queue).await;
    let s = store::stacks::get(&db, &stack.id).await.unwrap().unwrap();
    assert_eq!(s.state(), "UPDATE_COMPLETE", "{}", s.status_reason);
    assert_eq!(*log.lock().unwrap(), ["create a", "prepare a", "create b", "delete a"]);

    // A failing hook fails the update; nothing replaces the resource.
    log.lock().unwrap().clear();
    let stack = engine.create_stack(new("stuck", template("stuck"))).await.unwrap();
    drain(&engine, &queue).await;
    engine.update_stack(&stack.id, update(template("c"))).await.unwrap();
    drain(&engine, &queue).await;
    let s = store::stacks::get(&db, &stack.id).await.unwrap().unwrap();
    assert_eq!(s.state(), "UPDATE_FAILED");
    assert_eq!(*log.lock().unwrap(), ["create stuck", "prepare stuck"]);
    let rows = store::resources::list(&db, &stack.id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state(), "UPDATE_FAILED");
    assert_eq!(rows[0].status_reason, "Conflict: resources.r: stuck cannot go");

    // A FAILED resource its plugin keeps is not replaced by the next
    // update (upstream needs_replace_failed); by default it is.
    for (name, replaced) in [("keep", false), ("other", true)] {
        log.lock().unwrap().clear();
        let stack = engine.create_stack(new(name, template(name))).await.unwrap();
        drain(&engine, &queue).await;
        let mut failing = template(name);
        failing["resources"]["r"]["properties"]["value"] = json!("fail");
        engine.update_stack(&stack.id, update(failing.clone())).await.unwrap();
        drain(&engine, &queue).await;
        let s = store::stacks::get(&db, &stack.id).await.unwrap().unwrap();
        assert_eq!(s.state(), "UPDATE_FAILED");
        engine.update_stack(&stack.id, update(failing)).await.unwrap();
        drain(&engine, &queue).await;
        let log = log.lock().unwrap().clone();
        let creates = log.iter().filter(|l| l.starts_with("create")).count();
        assert!(log.contains(&format!("needs {name}")), "{log:?}");
        assert_eq!(creates, if replaced { 2 } else { 1 }, "{log:?}");
    }
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_rollback_restores_the_old_resource_with_what_it_gave_up() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (engine, queue, db, dir) = engine(log.clone()).await;
    let stack = engine
        .create_stack(NewStack {
            id: uuid::Uuid::new_v4().to_string(),
            name: "rolled".into(),
            tenant: "p".into(),
            username: "u".into(),
            user_id: "uid".into(),
            template: template("a"),
            environment: json!({}),
            disable_rollback: false,
            ..Default::default()
        })
        .await
        .unwrap();
    drain(&engine, &queue).await;
    let update = NewDefinition {
        template: template("boom"),
        environment: json!({}),
        disable_rollback: false,
        ..Default::default()
    };
    engine.update_stack(&stack.id, update).await.unwrap();
    drain(&engine, &queue).await;
    let s = store::stacks::get(&db, &stack.id).await.unwrap().unwrap();
    assert_eq!(s.state(), "ROLLBACK_COMPLETE", "{}", s.status_reason);
    let log = log.lock().unwrap().clone();
    assert_eq!(log[..3], ["create a", "prepare a", "create boom"], "{log:?}");
    // Once, with what `prepare` kept, while the replacement still exists
    // (a server takes its ports back from it), and only then is the
    // replacement deleted.
    let restores: Vec<&String> = log.iter().filter(|l| l.starts_with("restore")).collect();
    assert_eq!(restores, ["restore a (freed a) from boom"], "{log:?}");
    let at = |line: &str| log.iter().position(|l| l == line);
    assert!(at("restore a (freed a) from boom") < at("delete boom"), "{log:?}");
    assert!(at("delete boom").is_some(), "{log:?}");
    let rows = store::resources::list(&db, &stack.id).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].physical_resource_id.as_deref(), Some("a"));
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
}
