//! Seed scenarios 1-4 and lock stealing at the engine level: a SQLite
//! file, two engines sharing it, a step-able queue between them.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keelson_db::{DatabaseUrl, Db, PoolSettings};
use serde_json::{json, Value};

use keelson_stack_engine::convergence::{Engine, EngineSettings, NewDefinition, NewStack, QueueDispatcher};
use keelson_stack_engine::error::EngineError;
use keelson_stack_engine::resources::{
    ActionContext, ActionResult, Plugin, Registry, ResourceSchema, ResourceState, StackMember, SupportStatus,
};
use keelson_stack_engine::store::{self, EventQuery, ResourceRow, SortDir, StackRow};

struct Cluster {
    db: Db,
    a: Arc<Engine>,
    b: Arc<Engine>,
    queue: Arc<QueueDispatcher>,
    dir: std::path::PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cluster {
    async fn start() -> Cluster {
        Self::start_with(Registry::builtin()).await
    }

    async fn start_with(registry: Registry) -> Cluster {
        let dir = std::env::temp_dir().join(format!("keelson-convergence-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).unwrap();
        let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
        store::schema::sync(&db).await.unwrap();
        let registry = Arc::new(registry);
        let queue = QueueDispatcher::new();
        let engine = |id: &str| EngineSettings { engine_id: Some(id.to_string()), ..EngineSettings::default() };
        let a = Engine::new(db.clone(), registry.clone(), engine("engine-a"), queue.clone()).await.unwrap();
        let b = Engine::new(db.clone(), registry.clone(), engine("engine-b"), queue.clone()).await.unwrap();
        queue.attach(&a);
        queue.attach(&b);
        Cluster { db, a, b, queue, dir }
    }

    /// Runs queued messages alternately on both engines until none is left.
    async fn drain(&self) -> usize {
        let mut n = 0;
        while let Some(msg) = self.queue.pop() {
            let engine = if n % 2 == 0 { &self.a } else { &self.b };
            engine.check_resource(msg).await;
            n += 1;
            assert!(n < 10_000, "runaway traversal");
        }
        n
    }

    async fn create(&self, name: &str, template: Value, disable_rollback: bool) -> StackRow {
        self.a
            .create_stack(NewStack {
                id: uuid::Uuid::new_v4().to_string(),
                name: name.to_string(),
                tenant: "p".into(),
                username: "u".into(),
                user_id: "uid".into(),
                template,
                environment: json!({}),
                disable_rollback,
                ..Default::default()
            })
            .await
            .unwrap()
    }

    async fn update(&self, stack: &StackRow, template: Value) {
        self.a
            .update_stack(
                &stack.id,
                NewDefinition { template, environment: json!({}), disable_rollback: true, ..Default::default() },
            )
            .await
            .unwrap();
    }

    async fn stack(&self, id: &str) -> StackRow {
        store::stacks::get(&self.db, id).await.unwrap().unwrap()
    }

    async fn rows(&self, id: &str) -> Vec<ResourceRow> {
        store::resources::list(&self.db, id).await.unwrap()
    }

    async fn events(&self, id: &str) -> Vec<(String, String, String, String)> {
        let q = EventQuery { stack_ids: vec![id.to_string()], sort_dir: Some(SortDir::Asc), ..Default::default() };
        store::events::list(&self.db, &q)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.resource_name, e.resource_action, e.resource_status, e.resource_status_reason))
            .collect()
    }

    async fn sync_points(&self, id: &str) -> i64 {
        let rows = self.db.fetch_all("SELECT COUNT(*) FROM sync_point WHERE stack_id = ?", &[id.into()]).await.unwrap();
        rows[0].i64(0).unwrap()
    }
}

fn test_resource(props: Value) -> Value {
    json!({"type": "OS::Heat::TestResource", "properties": props})
}

fn diamond(value: &str) -> Value {
    json!({"heat_template_version": "2015-04-30", "resources": {
        "a": test_resource(json!({"value": value})),
        "b": test_resource(json!({"value": {"get_attr": ["a", "output"]}})),
        "c": test_resource(json!({"value": {"get_resource": "a"}})),
        "d": test_resource(json!({"value": {"list_join": ["-", [{"get_attr": ["b", "output"]}, {"get_attr": ["c", "output"]}]]}})),
    }})
}

fn position(events: &[(String, String, String, String)], name: &str, action: &str, status: &str) -> usize {
    events
        .iter()
        .position(|e| e.0 == name && e.1 == action && e.2 == status)
        .unwrap_or_else(|| panic!("no {name} {action}_{status} in {events:?}"))
}

#[tokio::test]
async fn diamond_create_runs_in_dependency_order_and_completes_once() {
    let c = Cluster::start().await;
    let stack = c.create("diamond", diamond("x"), true).await;
    assert_eq!(stack.state(), "CREATE_IN_PROGRESS");
    assert_eq!(c.queue.len(), 1, "only the leaf a is dispatched at once");
    c.drain().await;
    let stack = c.stack(&stack.id).await;
    assert_eq!(
        (stack.state(), stack.status_reason.as_str()),
        ("CREATE_COMPLETE".into(), "Stack CREATE completed successfully")
    );
    let events = c.events(&stack.id).await;
    assert_eq!(events.first().unwrap().3, "Stack CREATE started");
    assert!(position(&events, "a", "CREATE", "COMPLETE") < position(&events, "b", "CREATE", "IN_PROGRESS"));
    assert!(position(&events, "a", "CREATE", "COMPLETE") < position(&events, "c", "CREATE", "IN_PROGRESS"));
    assert!(position(&events, "b", "CREATE", "COMPLETE") < position(&events, "d", "CREATE", "IN_PROGRESS"));
    assert!(position(&events, "c", "CREATE", "COMPLETE") < position(&events, "d", "CREATE", "IN_PROGRESS"));
    let completions = events.iter().filter(|e| e.0 == "diamond" && e.2 == "COMPLETE").count();
    assert_eq!(completions, 1, "the stack completes exactly once");
    let d_creates = events.iter().filter(|e| e.0 == "d" && e.2 == "IN_PROGRESS").count();
    assert_eq!(d_creates, 1, "d's sync point fires once");
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.state() == "CREATE_COMPLETE" && r.engine_id.is_none()));
    let a = rows.iter().find(|r| r.name == "a").unwrap();
    let d = rows.iter().find(|r| r.name == "d").unwrap();
    assert_eq!(
        d.properties_data.as_ref().unwrap()["value"],
        json!(format!("x-{}", a.physical_resource_id.clone().unwrap()))
    );
    assert_eq!(c.sync_points(&stack.id).await, 0, "sync points purged");
}

/// A type that, as Heat's Neutron types do, needs resources its template
/// does not name: every OS::Heat::TestResource of its stack.
struct AfterTestResources(ResourceSchema);

impl Plugin for AfterTestResources {
    const TYPE: &'static str = "Test::AfterTestResources";

    fn schema(&self) -> &ResourceSchema {
        &self.0
    }

    async fn create(&self, _ctx: &mut ActionContext) -> ActionResult {
        Ok(())
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }

    fn implicit_requirements(
        &self,
        _this: &StackMember<'_>,
        _explicit: &std::collections::BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String> {
        stack.iter().filter(|m| m.type_name == "OS::Heat::TestResource").map(|m| m.name.to_string()).collect()
    }
}

#[tokio::test]
async fn implicit_dependencies_order_create_and_delete_and_are_stored_by_updates() {
    let mut registry = Registry::builtin();
    registry.register(Arc::new(AfterTestResources(ResourceSchema {
        properties: vec![],
        attributes: vec![],
        support_status: SupportStatus::default(),
        description: "",
    })));
    let c = Cluster::start_with(registry).await;
    let template = |names: &[&str]| {
        let mut resources = serde_json::Map::new();
        resources.insert("a_late".into(), json!({"type": "Test::AfterTestResources"}));
        for name in names {
            resources.insert(name.to_string(), test_resource(json!({"value": name})));
        }
        json!({"heat_template_version": "2015-04-30", "resources": resources})
    };
    let stack = c.create("implicit", template(&["z_early"]), true).await;
    c.drain().await;
    assert_eq!(c.stack(&stack.id).await.state(), "CREATE_COMPLETE");
    let events = c.events(&stack.id).await;
    assert!(position(&events, "z_early", "CREATE", "COMPLETE") < position(&events, "a_late", "CREATE", "IN_PROGRESS"));
    // An update adds a second one; a_late, unchanged, now requires both
    // (what the delete below goes by).
    c.update(&stack, template(&["z_early", "y_added"])).await;
    c.drain().await;
    assert_eq!(c.stack(&stack.id).await.state(), "UPDATE_COMPLETE");
    let rows = c.rows(&stack.id).await;
    let id_of = |name: &str| rows.iter().find(|r| r.name == name).unwrap().id;
    let late = rows.iter().find(|r| r.name == "a_late").unwrap();
    let mut required = late.requires.clone();
    required.sort_unstable();
    let mut expected = vec![id_of("z_early"), id_of("y_added")];
    expected.sort_unstable();
    assert_eq!(required, expected);
    c.a.delete_stack(&stack.id).await.unwrap();
    c.drain().await;
    assert_eq!(c.stack(&stack.id).await.state(), "DELETE_COMPLETE");
    let events = c.events(&stack.id).await;
    for early in ["z_early", "y_added"] {
        assert!(
            position(&events, "a_late", "DELETE", "COMPLETE") < position(&events, early, "DELETE", "IN_PROGRESS"),
            "{early}"
        );
    }
}

#[tokio::test]
async fn failure_without_rollback_marks_the_stack_failed() {
    let c = Cluster::start().await;
    let t = json!({"heat_template_version": "2015-04-30", "resources": {
        "ok": test_resource(json!({"value": "v"})),
        "bad": test_resource(json!({"value": "v", "fail": true})),
    }});
    let stack = c.create("failing", t, true).await;
    c.drain().await;
    let stack = c.stack(&stack.id).await;
    assert_eq!(stack.state(), "CREATE_FAILED");
    assert_eq!(stack.status_reason, "Resource CREATE failed: ValueError: resources.bad: Test Resource failed bad");
    assert_eq!(stack.current_traversal, "", "purged: workers bail out");
    let bad = c.rows(&stack.id).await.into_iter().find(|r| r.name == "bad").unwrap();
    assert_eq!(
        (bad.state(), bad.status_reason.as_str()),
        ("CREATE_FAILED".into(), "ValueError: resources.bad: Test Resource failed bad")
    );
}

#[tokio::test]
async fn failure_with_rollback_deletes_what_was_created() {
    let c = Cluster::start().await;
    let t = json!({"heat_template_version": "2015-04-30", "resources": {
        "ok": test_resource(json!({"value": "v"})),
        "bad": test_resource(json!({"value": {"get_resource": "ok"}, "fail": true})),
    }});
    let stack = c.create("rollback", t, false).await;
    c.drain().await;
    let stack = c.stack(&stack.id).await;
    assert_eq!(
        (stack.state(), stack.status_reason.as_str()),
        ("ROLLBACK_COMPLETE".into(), "Stack ROLLBACK completed successfully")
    );
    assert!(c.rows(&stack.id).await.is_empty());
    let events = c.events(&stack.id).await;
    let reasons: Vec<&str> = events.iter().filter(|e| e.0 == "rollback").map(|e| e.3.as_str()).collect();
    assert_eq!(
        reasons,
        vec![
            "Stack CREATE started",
            "Resource CREATE failed: ValueError: resources.bad: Test Resource failed bad",
            "Stack ROLLBACK started",
            "Stack ROLLBACK completed successfully"
        ]
    );
    assert!(position(&events, "ok", "DELETE", "COMPLETE") > position(&events, "rollback", "ROLLBACK", "IN_PROGRESS"));
}

#[tokio::test]
async fn update_in_place_and_by_replacement() {
    let c = Cluster::start().await;
    let stack = c.create("upd", diamond("x"), true).await;
    c.drain().await;
    let before = c.rows(&stack.id).await;
    let old_a = before.iter().find(|r| r.name == "a").unwrap().clone();
    // value is update_allowed: in place.
    c.update(&stack, diamond("y")).await;
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(s.state(), "UPDATE_COMPLETE");
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.len(), 4);
    let a = rows.iter().find(|r| r.name == "a").unwrap();
    assert_eq!((a.id, a.state()), (old_a.id, "UPDATE_COMPLETE".to_string()));
    let c_row = rows.iter().find(|r| r.name == "c").unwrap();
    assert_eq!(c_row.state(), "CREATE_COMPLETE", "c only references a's id: unchanged");
    // update_replace forces a new a; old a is deleted in the cleanup phase.
    let mut t = diamond("z");
    t["resources"]["a"]["properties"]["update_replace"] = json!(true);
    c.update(&s, t).await;
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(s.state(), "UPDATE_COMPLETE", "{}", s.status_reason);
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    let new_a = rows.iter().find(|r| r.name == "a").unwrap();
    assert_ne!(new_a.id, old_a.id);
    assert_ne!(new_a.physical_resource_id, old_a.physical_resource_id);
    let events = c.events(&stack.id).await;
    assert!(events.iter().any(|e| e.0 == "a" && e.3 == "The Resource a requires replacement."));
    let c_row = rows.iter().find(|r| r.name == "c").unwrap();
    assert_eq!(c_row.properties_data.as_ref().unwrap()["value"], json!(new_a.physical_resource_id.clone().unwrap()));
    assert!(
        position(&events, "c", "UPDATE", "COMPLETE")
            < events.iter().rposition(|e| e.0 == "a" && e.1 == "DELETE" && e.2 == "COMPLETE").unwrap()
    );
    assert_eq!(c.sync_points(&stack.id).await, 0);
}

#[tokio::test]
async fn update_during_update_second_traversal_wins() {
    let c = Cluster::start().await;
    let chain = |v: &str| {
        json!({"heat_template_version": "2015-04-30", "resources": {
            "a": test_resource(json!({"value": v})),
            "b": test_resource(json!({"value": {"get_attr": ["a", "output"]}})),
        }})
    };
    let stack = c.create("uu", chain("v0"), true).await;
    c.drain().await;
    c.update(&stack, chain("v1")).await;
    // a starts update 1 ...
    let first = c.queue.pop().unwrap();
    assert!(first.is_update);
    let s = c.stack(&stack.id).await;
    // ... while update 2 is accepted: T1's message is now stale.
    c.update(&s, chain("v2")).await;
    c.a.check_resource(first).await;
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(
        (s.state(), s.status_reason.as_str()),
        ("UPDATE_COMPLETE".into(), "Stack UPDATE completed successfully")
    );
    let b = c.rows(&stack.id).await.into_iter().find(|r| r.name == "b").unwrap();
    assert_eq!(b.properties_data.unwrap()["value"], json!("v2"));
    let events = c.events(&stack.id).await;
    let completions = events.iter().filter(|e| e.0 == "uu" && e.1 == "UPDATE" && e.2 == "COMPLETE").count();
    assert_eq!(completions, 1);
}

#[tokio::test]
async fn update_during_update_with_the_first_worker_mid_action() {
    let c = Cluster::start().await;
    let chain = |v: &str| {
        json!({"heat_template_version": "2015-04-30", "resources": {
            "a": test_resource(json!({"value": v, "wait_secs": 0.3})),
            "b": test_resource(json!({"value": {"get_attr": ["a", "output"]}})),
        }})
    };
    let stack = c.create("uu2", chain("v0"), true).await;
    c.drain().await;
    c.update(&stack, chain("v1")).await;
    let first = c.queue.pop().unwrap();
    let a = c.a.clone();
    let running = tokio::spawn(async move { a.check_resource(first).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let s = c.stack(&stack.id).await;
    c.update(&s, chain("v2")).await;
    // T2's check of a finds it locked by a live engine and drops out ...
    c.drain().await;
    // ... T1's worker finishes and retriggers a in T2.
    running.await.unwrap();
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(s.state(), "UPDATE_COMPLETE", "{}", s.status_reason);
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.iter().find(|r| r.name == "b").unwrap().properties_data.as_ref().unwrap()["value"], json!("v2"));
}

#[tokio::test]
async fn delete_during_create_cancels_and_deletes() {
    let c = Cluster::start().await;
    let t = json!({"heat_template_version": "2015-04-30", "resources": {
        "slow": test_resource(json!({"value": "v", "wait_secs": 30})),
        "after": test_resource(json!({"value": {"get_resource": "slow"}})),
    }});
    let stack = c.create("dc", t, true).await;
    let msg = c.queue.pop().unwrap();
    let b = c.b.clone();
    let running = tokio::spawn(async move { b.check_resource(msg).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    c.a.delete_stack(&stack.id).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), running).await.expect("cancelled promptly").unwrap();
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(s.state(), "DELETE_COMPLETE");
    assert!(s.deleted_at.is_some());
    assert!(c.rows(&stack.id).await.is_empty());
    let events = c.events(&stack.id).await;
    let cancelled = position(&events, "dc", "CREATE", "FAILED");
    assert_eq!(events[cancelled].3, "Stack CREATE cancelled");
    let aborted = position(&events, "slow", "CREATE", "FAILED");
    assert_eq!(events[aborted].3, "CREATE aborted (user triggered cancel)");
    assert!(position(&events, "slow", "DELETE", "COMPLETE") > aborted);
    assert!(!events.iter().any(|e| e.0 == "after" && e.1 == "DELETE"), "never-started rows are just removed");
    assert_eq!(c.sync_points(&stack.id).await, 0);
}

#[tokio::test]
async fn delete_of_complete_stack_goes_in_reverse_order_and_second_delete_is_404() {
    let c = Cluster::start().await;
    let stack = c.create("del", diamond("x"), true).await;
    c.drain().await;
    c.a.delete_stack(&stack.id).await.unwrap();
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(
        (s.state(), s.status_reason.as_str()),
        ("DELETE_COMPLETE".into(), "Stack DELETE completed successfully")
    );
    let events = c.events(&stack.id).await;
    assert!(position(&events, "d", "DELETE", "COMPLETE") < position(&events, "b", "DELETE", "IN_PROGRESS"));
    assert!(position(&events, "b", "DELETE", "COMPLETE") < position(&events, "a", "DELETE", "IN_PROGRESS"));
    let err = c.a.delete_stack(&stack.id).await.unwrap_err();
    assert_eq!(err.heat_type(), "EntityNotFound");
}

#[tokio::test]
async fn watchdog_steals_locks_of_dead_engines_and_finishes() {
    let c = Cluster::start().await;
    let stack = c.create("dead", diamond("x"), true).await;
    // engine-b takes a's check and dies holding the lock.
    let msg = c.queue.pop().unwrap();
    let a_row = store::resources::get(&c.db, msg.resource_id).await.unwrap().unwrap();
    assert!(store::resources::acquire_lock(&c.db, a_row.id, "engine-b", a_row.atomic_key).await.unwrap());
    c.queue.kill("engine-b");
    // A live holder would keep the watchdog away; a dead one does not.
    let retriggered = c.a.run_watchdog_once().await.unwrap();
    assert_eq!(retriggered, vec![stack.id.clone()]);
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(s.state(), "CREATE_COMPLETE", "{}", s.status_reason);
    let events = c.events(&stack.id).await;
    assert!(events.iter().any(|e| e.0 == "a" && e.2 == "FAILED" && e.3 == "Worker went down during resource CREATE"));
    assert!(c.rows(&stack.id).await.iter().all(|r| r.state() == "CREATE_COMPLETE"));
}

#[tokio::test]
async fn watchdog_leaves_stacks_with_live_lock_holders_alone() {
    let c = Cluster::start().await;
    c.create("alive", diamond("x"), true).await;
    let msg = c.queue.pop().unwrap();
    let row = store::resources::get(&c.db, msg.resource_id).await.unwrap().unwrap();
    assert!(store::resources::acquire_lock(&c.db, row.id, "engine-b", row.atomic_key).await.unwrap());
    assert!(c.a.run_watchdog_once().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_stack_past_its_timeout_fails_with_timed_out() {
    let c = Cluster::start().await;
    let stack =
        c.a.create_stack(NewStack {
            id: uuid::Uuid::new_v4().to_string(),
            name: "slowpoke".into(),
            tenant: "p".into(),
            template: diamond("x"),
            environment: json!({}),
            disable_rollback: true,
            timeout_mins: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    let past = keelson_db::now() - chrono::Duration::minutes(2);
    c.db.fetch_all("UPDATE stack SET updated_at = ? WHERE id = ?", &[past.into(), stack.id.as_str().into()])
        .await
        .unwrap();
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!((s.state(), s.status_reason.as_str()), ("CREATE_FAILED".into(), "Timed out"));
}

#[tokio::test]
async fn failed_update_rolls_back_to_the_previous_template() {
    let c = Cluster::start().await;
    let stack = c.create("ur", diamond("x"), true).await;
    c.drain().await;
    let mut t = diamond("y");
    t["resources"]["d"]["properties"]["fail"] = json!(true);
    c.a.update_stack(
        &stack.id,
        NewDefinition { template: t, environment: json!({}), disable_rollback: false, ..Default::default() },
    )
    .await
    .unwrap();
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!(
        (s.state(), s.status_reason.as_str()),
        ("ROLLBACK_COMPLETE".into(), "Stack ROLLBACK completed successfully")
    );
    let rows = c.rows(&stack.id).await;
    let live: Vec<&ResourceRow> = rows.iter().filter(|r| r.name == "a").collect();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].properties_data.as_ref().unwrap()["value"], json!("x"));
    let events = c.events(&stack.id).await;
    assert!(events.iter().any(|e| e.3 == "Resource UPDATE failed: ValueError: resources.d: Test Resource failed d"));
}

#[tokio::test]
async fn watchdog_retriggers_a_stalled_traversal_with_lost_messages() {
    let c = Cluster::start().await;
    let stack = c.create("lost", diamond("x"), true).await;
    c.queue.pop().unwrap(); // the message is lost with its engine
    let fast = EngineSettings {
        engine_id: Some("engine-c".into()),
        stall_timeout: std::time::Duration::ZERO,
        ..EngineSettings::default()
    };
    let c_engine = Engine::new(c.db.clone(), Arc::new(Registry::builtin()), fast, c.queue.clone()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(c_engine.run_watchdog_once().await.unwrap(), vec![stack.id.clone()]);
    c.drain().await;
    assert_eq!(c.stack(&stack.id).await.state(), "CREATE_COMPLETE");
}

async fn update_with_env(c: &Cluster, stack: &StackRow, template: Value, environment: Value) {
    c.a.update_stack(&stack.id, NewDefinition { template, environment, disable_rollback: true, ..Default::default() })
        .await
        .unwrap();
}

fn restricted_template(value: &str, update_replace: bool, type_name: &str) -> Value {
    json!({"heat_template_version": "2013-05-23", "resources": {"bar": {
        "type": type_name,
        "properties": {"value": value, "update_replace": update_replace}}}})
}

#[tokio::test]
async fn restricted_actions_fail_the_update_and_leave_the_resource_alone() {
    let c = Cluster::start().await;
    let tr = "OS::Heat::TestResource";
    let stack = c.create("restr", restricted_template("1234", false, tr), true).await;
    c.drain().await;
    let both = json!({"resource_registry": {"resources": {"bar": {"restricted_actions": ["update", "replace"]}}}});
    let replace_only = json!({"resource_registry": {"resources": {"*ar": {"restricted_actions": "replace"}}}});
    let cases = [
        // (template, environment, stack reason suffix, resource state after)
        (restricted_template("4567", false, tr), both.clone(), Some("update"), "CREATE_COMPLETE"),
        (restricted_template("4567", true, tr), both.clone(), Some("replace"), "CREATE_COMPLETE"),
        (
            restricted_template("1234", false, "OS::Heat::None"),
            replace_only.clone(),
            Some("replace"),
            "CREATE_COMPLETE",
        ),
        (restricted_template("4567", false, tr), replace_only.clone(), None, "UPDATE_COMPLETE"),
    ];
    for (template, environment, restricted, resource_state) in cases {
        let s = c.stack(&stack.id).await;
        update_with_env(&c, &s, template, environment).await;
        c.drain().await;
        let s = c.stack(&stack.id).await;
        match restricted {
            Some(what) => assert_eq!(
                (s.state(), s.status_reason.clone()),
                (
                    "UPDATE_FAILED".to_string(),
                    format!("Resource UPDATE failed: ResourceActionRestricted: resources.bar: {what} is restricted for resource.")
                )
            ),
            None => assert_eq!(s.state(), "UPDATE_COMPLETE", "{}", s.status_reason),
        }
        let rows = c.rows(&stack.id).await;
        assert_eq!(rows.len(), 1, "never replaced: {rows:?}");
        assert_eq!(rows[0].state(), resource_state);
        assert!(rows[0].engine_id.is_none());
    }
    let reasons: Vec<String> = c
        .events(&stack.id)
        .await
        .into_iter()
        .filter(|e| e.0 == "bar" && e.1 == "UPDATE" && e.2 == "FAILED")
        .map(|e| e.3)
        .collect();
    assert_eq!(
        reasons,
        vec![
            "update is restricted for resource.",
            "replace is restricted for resource.",
            "replace is restricted for resource."
        ]
    );
}

#[tokio::test]
async fn cancel_without_rollback_stops_the_traversal_and_lets_actions_finish() {
    let c = Cluster::start().await;
    let t = json!({"heat_template_version": "pike", "resources": {
        "test1": test_resource(json!({"value": "v", "action_wait_secs": {"create": 0.5}})),
        "test2": {"type": "OS::Heat::TestResource", "properties": {"value": "v"}, "depends_on": ["test1"]},
    }});
    let stack = c.create("cancel", t, true).await;
    let e = c.a.cancel_update(&stack.id, true).await.unwrap_err();
    assert_eq!(
        (e.heat_type(), e.message().as_str()),
        ("NotSupported", "Cancelling update when stack is CREATE_IN_PROGRESS is not supported.")
    );
    let msg = c.queue.pop().unwrap();
    let b = c.b.clone();
    let running = tokio::spawn(async move { b.check_resource(msg).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    c.a.cancel_update(&stack.id, false).await.unwrap();
    let s = c.stack(&stack.id).await;
    assert_eq!((s.state(), s.status_reason.as_str()), ("CREATE_FAILED".into(), "Stack CREATE cancelled"));
    running.await.unwrap();
    c.drain().await;
    let rows = c.rows(&stack.id).await;
    let state = |n: &str| rows.iter().find(|r| r.name == n).unwrap().state();
    assert_eq!(state("test1"), "CREATE_COMPLETE", "the running create is not interrupted");
    assert_eq!(state("test2"), "INIT_COMPLETE", "nothing propagates");
    assert_eq!(c.stack(&stack.id).await.state(), "CREATE_FAILED");
}

#[tokio::test]
async fn adopt_takes_over_physical_resources_by_id() {
    let c = Cluster::start().await;
    let t = json!({"heat_template_version": "2014-10-16", "resources": {
        "test1": test_resource(json!({"value": "one"})),
        "test2": test_resource(json!({"value": {"get_attr": ["test1", "output"]}})),
    }});
    let adopt = json!({"resources": {
        "test1": {"resource_id": "phys-1", "resource_data": {"value": "one"}, "metadata": {}},
        "test2": {"resource_id": "phys-2", "resource_data": {"value": "one"}},
    }});
    let stack =
        c.a.create_stack(NewStack {
            id: uuid::Uuid::new_v4().to_string(),
            name: "adopted".into(),
            tenant: "p".into(),
            template: t.clone(),
            environment: json!({}),
            disable_rollback: true,
            adopt_stack_data: Some(adopt),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(stack.state(), "ADOPT_IN_PROGRESS");
    c.drain().await;
    let s = c.stack(&stack.id).await;
    assert_eq!((s.state(), s.status_reason.as_str()), ("ADOPT_COMPLETE".into(), "Stack ADOPT completed successfully"));
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.len(), 2);
    for (name, physical) in [("test1", "phys-1"), ("test2", "phys-2")] {
        let row = rows.iter().find(|r| r.name == name).unwrap();
        assert_eq!(row.state(), "ADOPT_COMPLETE");
        assert_eq!(row.physical_resource_id.as_deref(), Some(physical));
    }
    let events = c.events(&stack.id).await;
    assert!(position(&events, "test1", "ADOPT", "COMPLETE") < position(&events, "test2", "ADOPT", "IN_PROGRESS"));
    assert!(!events.iter().any(|e| e.1 == "CREATE"), "nothing is created");

    // A resource the adopt data lacks fails to adopt.
    let missing =
        c.a.create_stack(NewStack {
            id: uuid::Uuid::new_v4().to_string(),
            name: "half".into(),
            tenant: "p".into(),
            template: t,
            environment: json!({}),
            disable_rollback: true,
            adopt_stack_data: Some(json!({"resources": {"test1": {"resource_id": "phys-1"}}})),
            ..Default::default()
        })
        .await
        .unwrap();
    c.drain().await;
    let s = c.stack(&missing.id).await;
    assert_eq!(
        (s.state(), s.status_reason.as_str()),
        ("ADOPT_FAILED".into(), "Resource ADOPT failed: Exception: resources.test2: Resource ID was not provided.")
    );
}

#[tokio::test]
async fn rows_keep_the_written_type_and_replace_only_when_the_plugin_changes() {
    let c = Cluster::start().await;
    let t = |ty: &str| json!({"heat_template_version": "2013-05-23", "resources": {"test1": {"type": ty}}});
    let env = |target: &str| json!({"resource_registry": {"My::A": target, "My::B": "OS::Heat::RandomString"}});
    let stack =
        c.a.create_stack(NewStack {
            id: uuid::Uuid::new_v4().to_string(),
            name: "alias".into(),
            tenant: "p".into(),
            template: t("My::A"),
            environment: env("OS::Heat::RandomString"),
            disable_rollback: true,
            ..Default::default()
        })
        .await
        .unwrap();
    c.drain().await;
    let first = c.rows(&stack.id).await.remove(0);
    assert_eq!((first.resource_type.as_str(), first.state().as_str()), ("My::A", "CREATE_COMPLETE"));
    // Another alias of the same plugin: the same resource, its new type.
    update_with_env(&c, &stack, t("My::B"), env("OS::Heat::RandomString")).await;
    c.drain().await;
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].id, rows[0].resource_type.as_str()), (first.id, "My::B"));
    assert_eq!(rows[0].physical_resource_id, first.physical_resource_id);
    // The alias now maps to another plugin: replaced.
    update_with_env(&c, &stack, t("My::A"), env("OS::Heat::TestResource")).await;
    c.drain().await;
    assert_eq!(c.stack(&stack.id).await.state(), "UPDATE_COMPLETE");
    let rows = c.rows(&stack.id).await;
    assert_eq!(rows.len(), 1);
    assert_ne!(rows[0].id, first.id);
    assert_eq!(rows[0].resource_type, "My::A");
}
