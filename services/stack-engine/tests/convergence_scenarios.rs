//! Replays the 21 upstream engine scenarios of
//! heat/tests/convergence/scenarios on SQLite, stepping the worker queue
//! exactly as upstream's framework.
//!
//! The scenarios come as data (convergence_scenarios.json) from the
//! openstack-heat 27.0.1 wheel, built by
//! tests/conformance/heat-test-data/extract.py into the directory named by
//! KEELSON_HEAT_TEST_DATA. The tests are ignored by default; run with
//! `--include-ignored` and the variable set.

// A test: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use keelson_db::{DatabaseUrl, Db, PoolSettings};
use serde_json::{json, Map, Value};

use keelson_stack_engine::convergence::{Engine, EngineSettings, NewDefinition, NewStack, QueueDispatcher};
use keelson_stack_engine::resources::{
    changed_properties, ActionContext, ActionResult, AttributeSchema, Plugin, Properties, PropertySchema, PropertyType,
    Registry, ResourceSchema, ResourceState, SupportStatus, UpdateDecision,
};
use keelson_stack_engine::store::{self, Action, ResourceRow, Status};
use keelson_stack_engine::EngineError;

/// Upstream's test-framework plugin (framework/fake_resource.py): string
/// properties a, b, c, ca, !a, !b (update-allowed, defaults = their names);
/// changing a property whose name has `!` needs replacement; attributes
/// `a` and `!a` give the stored values.
struct FrameworkTestResource {
    schema: ResourceSchema,
}

const PROPS: [&str; 6] = ["a", "b", "c", "ca", "!a", "!b"];

impl FrameworkTestResource {
    fn new() -> Self {
        let properties = PROPS
            .iter()
            .map(|p| PropertySchema::new(p, PropertyType::String, "fake").default_value(*p).update_allowed())
            .collect();
        FrameworkTestResource {
            schema: ResourceSchema {
                properties,
                attributes: vec![AttributeSchema::new("a", "a", None), AttributeSchema::new("!a", "!a", None)],
                support_status: SupportStatus::supported("5.0.0"),
                description: "framework test resource",
            },
        }
    }
}

fn store_props(ctx: &mut ActionContext) {
    for (k, v) in &ctx.properties {
        if let Some(s) = v.as_str() {
            ctx.state.data.insert(k.clone(), s.to_string());
        }
    }
}

impl Plugin for FrameworkTestResource {
    const TYPE: &'static str = "OS::Heat::TestResource";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }
    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        let changed = changed_properties(old, new);
        if changed.is_empty() {
            UpdateDecision::Unchanged
        } else if changed.iter().any(|k| k.contains('!')) {
            UpdateDecision::Replace
        } else {
            UpdateDecision::InPlace
        }
    }
    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        ctx.state.physical_id = Some(uuid::Uuid::new_v4().to_string());
        store_props(ctx);
        Ok(())
    }
    async fn update(&self, ctx: &mut ActionContext, _old: &Properties) -> ActionResult {
        store_props(ctx);
        Ok(())
    }
    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        Ok(state
            .data
            .get(name)
            .map(|v| Value::String(v.clone()))
            .or_else(|| state.properties.get(name).cloned())
            .unwrap_or(Value::Null))
    }
}

struct Replay {
    db: Db,
    engine: Arc<Engine>,
    queue: Arc<QueueDispatcher>,
    stacks: BTreeMap<String, String>,
    stored_uuid: BTreeMap<String, String>,
    dir: std::path::PathBuf,
}

impl Drop for Replay {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Replay {
    async fn start() -> Replay {
        let dir = std::env::temp_dir().join(format!("keelson-scenarios-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = DatabaseUrl::parse(&format!("sqlite:///{}/orchestration.db", dir.display())).unwrap();
        let db = Db::connect(&url, &PoolSettings::default()).await.unwrap();
        store::schema::sync(&db).await.unwrap();
        let mut registry = Registry::builtin();
        registry.register(Arc::new(FrameworkTestResource::new()));
        let registry = Arc::new(registry);
        let queue = QueueDispatcher::new();
        let settings = EngineSettings { engine_id: Some("engine-1".into()), ..EngineSettings::default() };
        let engine = Engine::new(db.clone(), registry.clone(), settings, queue.clone()).await.unwrap();
        queue.attach(&engine);
        Replay { db, engine, queue, stacks: BTreeMap::new(), stored_uuid: BTreeMap::new(), dir }
    }

    fn stack_id(&self, step: &Value) -> String {
        let name = step["stack"].as_str().unwrap_or("foo");
        self.stacks.get(name).cloned().unwrap_or_else(|| panic!("no stack {name}"))
    }

    /// Upstream reality: the rows in CREATE/UPDATE _COMPLETE.
    async fn reality(&self) -> Vec<ResourceRow> {
        let id = self.stacks.get("foo").cloned().unwrap_or_default();
        store::resources::list(&self.db, &id)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| (r.action == Action::Create || r.action == Action::Update) && r.status == Status::Complete)
            .collect()
    }

    async fn by_name(&self, name: &str) -> Vec<ResourceRow> {
        self.reality().await.into_iter().filter(|r| r.name == name).collect()
    }

    /// Upstream testutils.verify.
    async fn verify(&self, scenario: &str, template: &Value) {
        let rows = self.reality().await;
        let resources = template["resources"].as_object().cloned().unwrap_or_default();
        for name in resources.keys() {
            let n = rows.iter().filter(|r| &r.name == name).count();
            assert_eq!(n, 1, "{scenario}: found {n} copies of resource {name}: {rows:?}");
        }
        for (name, defn) in &resources {
            let row = rows.iter().find(|r| &r.name == name).unwrap();
            let data = store::resources::data_get_all(&self.db, row.id).await.unwrap();
            let given = defn["properties"].as_object().cloned().unwrap_or_default();
            for (prop, def) in &given {
                let real = data.get(prop).map(|d| d.value.clone());
                let want = if let Some(target) = def.get("get_resource").and_then(Value::as_str) {
                    rows.iter().find(|r| r.name == target).and_then(|r| r.physical_resource_id.clone())
                } else if let Some(args) = def.get("get_attr").and_then(Value::as_array) {
                    let target = args[0].as_str().unwrap();
                    let attr = args[1].as_str().unwrap();
                    let t = rows.iter().find(|r| r.name == target).unwrap();
                    t.properties_data.as_ref().and_then(|p| p.get(attr)).and_then(Value::as_str).map(str::to_string)
                } else {
                    def.as_str().map(str::to_string)
                };
                assert_eq!(real, want, "{scenario}: {name}.{prop}");
            }
        }
        assert_eq!(rows.len(), resources.len(), "{scenario}: live resources {rows:?}");
    }

    async fn check(&mut self, scenario: &str, name: &str, args: &[Value]) {
        let rows = self.reality().await;
        let count = |n: &str| rows.iter().filter(|r| r.name == n).count() as i64;
        match name {
            "check_resource_count" => {
                assert_eq!(rows.len() as i64, args[0].as_i64().unwrap(), "{scenario}: {name} {rows:?}")
            }
            "check_c_count" => assert_eq!(count("C"), args[0].as_i64().unwrap(), "{scenario}: {name} {rows:?}"),
            "check_resource_counts" => {
                for (n, want) in args[0].as_object().unwrap() {
                    assert_eq!(count(n), want.as_i64().unwrap(), "{scenario}: {name} {n} {rows:?}");
                }
            }
            _ if name.starts_with("store_") => {
                let res = name.trim_start_matches("store_").trim_end_matches("_uuid").to_uppercase();
                let found = self.by_name(&res).await;
                self.stored_uuid.insert(res.clone(), found[0].uuid.clone());
            }
            _ if name.ends_with("_not_replaced") => {
                let res = name.trim_start_matches("check_").trim_end_matches("_not_replaced").to_uppercase();
                assert_eq!(self.by_name(&res).await[0].uuid, self.stored_uuid[&res], "{scenario}: {name}");
            }
            _ if name.ends_with("_replaced") => {
                let res = name.trim_start_matches("check_").trim_end_matches("_replaced").to_uppercase();
                // The stored resource is gone: no live row has its uuid.
                let stored = self.stored_uuid[&res].clone();
                assert!(self.reality().await.iter().all(|r| r.uuid != stored), "{scenario}: {name}");
            }
            other => panic!("{scenario}: unknown check {other}"),
        }
    }

    /// One worker turn (upstream's event loop alternates engine and worker).
    async fn worker_turn(&self) {
        if let Some(msg) = self.queue.pop() {
            self.engine.check_resource(msg).await;
        }
    }

    async fn run(&mut self, scenario: &str, steps: &[Value]) {
        for step in steps {
            match step["op"].as_str().unwrap() {
                "create" => {
                    let id = uuid::Uuid::new_v4().to_string();
                    let name = step["stack"].as_str().unwrap().to_string();
                    self.engine
                        .create_stack(NewStack {
                            id: id.clone(),
                            name: name.clone(),
                            tenant: "p".into(),
                            template: step["template"].clone(),
                            environment: json!({}),
                            disable_rollback: true,
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                    self.stacks.insert(name, id);
                }
                "update" => {
                    let id = self.stack_id(step);
                    let new = NewDefinition {
                        template: step["template"].clone(),
                        environment: json!({}),
                        disable_rollback: true,
                        ..Default::default()
                    };
                    self.engine.update_stack(&id, new).await.unwrap();
                }
                "delete" => {
                    let id = self.stack_id(step);
                    self.engine.delete_stack(&id).await.unwrap();
                }
                "rollback" => {
                    let id = self.stack_id(step);
                    self.engine.rollback_stack(&id).await.unwrap();
                }
                "process_messages" => {
                    // n engine no-op turns, each followed by a worker turn
                    // (the last one by the turn every statement gets).
                    let n = usize::try_from(step["count"].as_u64().unwrap()).unwrap();
                    for _ in 1..n {
                        self.worker_turn().await;
                    }
                }
                "verify" => self.verify(scenario, &step["template"]).await,
                "check" => {
                    let args = step["args"].as_array().cloned().unwrap_or_default();
                    self.check(scenario, step["name"].as_str().unwrap(), &args).await;
                }
                other => panic!("{scenario}: unknown op {other}"),
            }
            self.worker_turn().await;
        }
        self.queue.drain(&self.engine, 10_000).await;
    }
}

/// How many scenario files the 27.0.1 wheel has (extract.py checks it too).
const SCENARIOS: usize = 21;

fn scenarios() -> Map<String, Value> {
    let Some(dir) = std::env::var_os("KEELSON_HEAT_TEST_DATA") else {
        panic!("set KEELSON_HEAT_TEST_DATA to the output of tests/conformance/heat-test-data/extract.py");
    };
    let path = std::path::Path::new(&dir).join("convergence_scenarios.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Value>(&text).unwrap().as_object().cloned().unwrap()
}

async fn replay(name: &str) {
    let all = scenarios();
    let steps = all[name]["steps"].as_array().unwrap().clone();
    let mut r = Replay::start().await;
    r.run(name, &steps).await;
}

macro_rules! scenario_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            #[ignore = "needs KEELSON_HEAT_TEST_DATA (tests/conformance/heat-test-data/extract.py)"]
            async fn $name() {
                replay(stringify!($name)).await;
            }
        )*
    };
}

scenario_tests!(
    basic_create,
    basic_create_rollback,
    basic_update_delete,
    create_early_delete,
    disjoint_create,
    multiple_update,
    update_add,
    update_add_concurrent,
    update_add_rollback,
    update_add_rollback_early,
    update_interrupt_create,
    update_remove,
    update_remove_rollback,
    update_replace,
    update_replace_invert_deps,
    update_replace_missed_cleanup,
    update_replace_missed_cleanup_delete,
    update_replace_rollback,
    update_user_replace,
    update_user_replace_rollback,
    update_user_replace_rollback_update,
);

#[test]
#[ignore = "needs KEELSON_HEAT_TEST_DATA (tests/conformance/heat-test-data/extract.py)"]
fn the_file_has_the_21_scenarios() {
    assert_eq!(scenarios().len(), SCENARIOS);
}
