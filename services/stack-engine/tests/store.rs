//! The convergence data model against SQLite always, and against
//! MariaDB/PostgreSQL when KEELSON_TEST_MYSQL / KEELSON_TEST_POSTGRES name
//! a server (each run gets a fresh `kt_<random>_orch` database, dropped at
//! the end).

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use keelson_db::{DatabaseUrl, Db, Dialect, PoolSettings};
use serde_json::json;

use keelson_stack_engine::store::{
    self, events, resources, schema, services, stacks, sync_points, templates, Action, EventQuery, MergeOutcome,
    NewEvent, NewResource, ResourceChange, SortDir, StackRow, StackStateChange, Status,
};

/// One database under test; [`TestDb::finish`] drops it.
struct TestDb {
    db: Db,
    name: String,
    /// The server connection that created it (None for SQLite).
    admin: Option<Db>,
    dir: Option<std::path::PathBuf>,
}

impl TestDb {
    async fn finish(self) {
        self.db.close().await;
        if let Some(admin) = self.admin {
            // PostgreSQL may still see a closing pool connection: FORCE.
            let sql = match admin.dialect {
                Dialect::Postgres => format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
                _ => format!("DROP DATABASE IF EXISTS `{}`", self.name),
            };
            admin.execute_raw(&sql).await.expect("drop test database");
            admin.close().await;
        }
        if let Some(dir) = self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn settings(max_connections: u32) -> PoolSettings {
    PoolSettings { max_connections, ..PoolSettings::default() }
}

async fn sqlite(max_connections: u32) -> TestDb {
    let dir = std::env::temp_dir().join(format!("keelson-store-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = DatabaseUrl::parse(&format!("sqlite:///{}/orch.db", dir.display())).expect("url");
    let db = Db::connect(&url, &settings(max_connections)).await.expect("connect sqlite");
    TestDb { db, name: "sqlite".into(), admin: None, dir: Some(dir) }
}

async fn server(env: &str, max_connections: u32) -> Option<TestDb> {
    let base = std::env::var(env).ok().filter(|u| !u.is_empty())?;
    let base = base.trim_end_matches('/').to_string();
    let name = format!("kt_{}_orch", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let admin_url = if base.starts_with("postgres") { format!("{base}/postgres") } else { base.clone() };
    let admin = Db::connect(&DatabaseUrl::parse(&admin_url).expect("url"), &settings(2)).await.expect("connect server");
    admin.execute_raw(&format!("CREATE DATABASE {name}")).await.expect("create test database");
    let url = DatabaseUrl::parse(&format!("{base}/{name}")).expect("url");
    let db = Db::connect(&url, &settings(max_connections)).await.expect("connect test database");
    Some(TestDb { db, name, admin: Some(admin), dir: None })
}

/// SQLite, plus MariaDB and PostgreSQL where configured; empty.
async fn fresh_backends(max_connections: u32) -> Vec<TestDb> {
    let mut out = vec![sqlite(max_connections).await];
    out.extend(server("KEELSON_TEST_MYSQL", max_connections).await);
    out.extend(server("KEELSON_TEST_POSTGRES", max_connections).await);
    eprintln!("backends: {:?}", out.iter().map(|t| t.db.dialect.name()).collect::<Vec<_>>());
    out
}

/// [`fresh_backends`] with the schema synced.
async fn backends(max_connections: u32) -> Vec<TestDb> {
    let out = fresh_backends(max_connections).await;
    for t in &out {
        schema::sync(&t.db).await.expect("schema sync");
    }
    out
}

fn stack_row(id: &str, name: &str, traversal: &str) -> StackRow {
    StackRow {
        id: id.into(),
        name: name.into(),
        raw_template_id: 1,
        tenant: "tenant-a".into(),
        username: "demo".into(),
        user_id: "u1".into(),
        disable_rollback: true,
        tags: Some(vec!["a".into(), "b".into()]),
        params: json!({"p": "v"}).as_object().cloned().unwrap_or_default(),
        current_traversal: traversal.into(),
        action: Action::Create,
        status: Status::InProgress,
        status_reason: "Stack CREATE started".into(),
        ..Default::default()
    }
}

async fn new_stack(db: &Db, name: &str, traversal: &str) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut tx = db.begin().await.expect("begin");
    let tid =
        templates::insert(&mut tx, &json!({"heat_template_version": "2018-08-31"}), &Default::default(), &json!({}))
            .await
            .expect("template");
    let mut row = stack_row(&id, name, traversal);
    row.raw_template_id = tid;
    stacks::insert(&mut tx, &row).await.expect("insert stack");
    tx.commit().await.expect("commit");
    id
}

fn resource(stack_id: &str, name: &str) -> NewResource {
    NewResource {
        stack_id: stack_id.into(),
        root_stack_id: stack_id.into(),
        name: name.into(),
        resource_type: "OS::Heat::None".into(),
        current_template_id: Some(1),
        ..Default::default()
    }
}

#[tokio::test]
async fn schema_sync_twice_is_a_noop() {
    for t in fresh_backends(4).await {
        assert_eq!(schema::recorded_version(&t.db).await.expect("version"), None);
        // Several engines starting at once on an empty database.
        let (a, b, c) = tokio::join!(schema::sync(&t.db), schema::sync(&t.db), schema::sync(&t.db));
        a.expect("concurrent sync a");
        b.expect("concurrent sync b");
        c.expect("concurrent sync c");
        schema::sync(&t.db).await.expect("second sync");
        assert_eq!(schema::recorded_version(&t.db).await.expect("version"), Some(schema::VERSION), "{}", t.name);
        let rows = t.db.fetch_all("SELECT COUNT(*) FROM orchestration_schema", &[]).await.expect("count");
        assert_eq!(rows[0].i64(0).expect("int"), 1, "{}", t.name);
        t.finish().await;
    }
}

#[tokio::test]
async fn templates_and_stacks_round_trip() {
    for t in backends(4).await {
        let db = &t.db;
        let mut files = serde_json::Map::new();
        files.insert("a.yaml".into(), json!("x".repeat(70_000)));
        let mut tx = db.begin().await.expect("begin");
        let tid = templates::insert(
            &mut tx,
            &json!({"resources": {"r": {"type": "OS::Heat::None"}}}),
            &files,
            &json!({"parameters": {}}),
        )
        .await
        .expect("insert template");
        tx.commit().await.expect("commit");
        let tmpl = templates::get(db, tid).await.expect("get").expect("present");
        assert_eq!(tmpl.template["resources"]["r"]["type"], "OS::Heat::None");
        assert_eq!(tmpl.files["a.yaml"].as_str().map(str::len), Some(70_000), "{}: LONGTEXT", t.name);

        let id = new_stack(db, "s1", "t1").await;
        let got = stacks::get(db, &id).await.expect("get").expect("present");
        assert_eq!(got.name, "s1");
        assert_eq!(got.tags, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(got.params["p"], "v");
        assert!(got.disable_rollback);
        assert_eq!(got.state(), "CREATE_IN_PROGRESS");
        assert!(got.created_at.is_some() && got.deleted_at.is_none());
        assert_eq!(stacks::get_by_name(db, "tenant-a", "s1").await.expect("by name").map(|s| s.id), Some(id.clone()));
        assert!(stacks::get_by_name(db, "tenant-b", "s1").await.expect("by name").is_none());

        let child = uuid::Uuid::new_v4().to_string();
        let mut row = stack_row(&child, "s1-child", "t9");
        row.owner_id = Some(id.clone());
        row.nested_depth = 1;
        let mut tx = db.begin().await.expect("begin");
        stacks::insert(&mut tx, &row).await.expect("insert child");
        tx.commit().await.expect("commit");
        let kids = stacks::children(db, &id).await.expect("children");
        assert_eq!(kids.len(), 1);
        assert_eq!(kids[0].nested_depth, 1);

        assert_eq!(stacks::count_live(db, "tenant-a").await.expect("count"), 2);
        let top = stacks::list_for_tenant(db, Some("tenant-a"), false, false).await.expect("list");
        assert_eq!(top.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["s1"]);
        assert_eq!(stacks::list_for_tenant(db, Some("tenant-a"), false, true).await.expect("list").len(), 2);
        assert!(stacks::list_for_tenant(db, Some("tenant-b"), true, true).await.expect("list").is_empty());

        let rows = resources::insert_many(db, &[resource(&id, "r1"), resource(&id, "r2")]).await.expect("insert many");
        assert_eq!(rows.len(), 2);
        assert!(rows[0].id < rows[1].id);
        assert_eq!(resources::list_by_root(db, &id).await.expect("by root").len(), 2);
        assert_eq!(resources::get_many(db, &[rows[1].id, rows[0].id]).await.expect("many")[0].name, "r1");
        assert_eq!(resources::get_by_uuid(db, &rows[1].uuid).await.expect("uuid").map(|r| r.id), Some(rows[1].id));

        assert!(stacks::set_current_deps(db, &id, "t1", &json!({"edges": [[[1, true], null]]})).await.expect("deps"));
        assert!(!stacks::set_current_deps(db, &id, "t0", &json!({"edges": []})).await.expect("deps"));
        let got = stacks::get(db, &id).await.expect("get").expect("present");
        assert_eq!(got.current_deps, Some(json!({"edges": [[[1, true], null]]})));

        assert!(stacks::delete_for_purge(db, &id).await.expect("purge"));
        assert!(stacks::get(db, &id).await.expect("get").is_none());
        assert!(resources::list(db, &id).await.expect("list").is_empty(), "purge takes the resources");
        assert!(templates::get(db, got.raw_template_id).await.expect("get").is_none());
        t.finish().await;
    }
}

#[tokio::test]
async fn traversal_cas_refuses_a_stale_traversal() {
    for t in backends(4).await {
        let db = &t.db;
        let id = new_stack(db, "cas", "t1").await;
        let stale = StackStateChange::new(Action::Create, Status::Complete, "stale");
        assert!(!stacks::set_state(db, &id, "t0", stale).await.expect("cas"), "{}", t.name);

        let update = StackStateChange {
            current_traversal: Some("t2".into()),
            raw_template_id: Some(7),
            prev_raw_template_id: Some(Some(1)),
            timeout_mins: Some(Some(5)),
            disable_rollback: Some(false),
            tags: Some(None),
            ..StackStateChange::new(Action::Update, Status::InProgress, "Stack UPDATE started")
        };
        assert!(stacks::set_state(db, &id, "t1", update).await.expect("cas"));
        // The old traversal lost its right to write.
        let late = StackStateChange::new(Action::Create, Status::Complete, "late");
        assert!(!stacks::set_state(db, &id, "t1", late).await.expect("cas"));
        let got = stacks::get(db, &id).await.expect("get").expect("present");
        assert_eq!((got.current_traversal.as_str(), got.raw_template_id, got.prev_raw_template_id), ("t2", 7, Some(1)));
        assert_eq!((got.timeout_mins, got.disable_rollback, got.tags.clone()), (Some(5), false, None));
        assert_eq!(got.state(), "UPDATE_IN_PROGRESS");
        assert!(got.updated_at.is_some());

        assert!(stacks::in_progress(db).await.expect("in progress").iter().any(|s| s.id == id));
        assert!(!stacks::soft_delete(db, &id, "t1").await.expect("soft delete"));
        assert!(stacks::soft_delete(db, &id, "t2").await.expect("soft delete"));
        let after = StackStateChange::new(Action::Delete, Status::Complete, "");
        assert!(!stacks::set_state(db, &id, "t2", after).await.expect("cas"), "a deleted stack takes no writes");
        assert!(stacks::get(db, &id).await.expect("get").expect("kept").deleted_at.is_some());
        assert!(stacks::get_by_name(db, "tenant-a", "cas").await.expect("by name").is_none());
        t.finish().await;
    }
}

#[tokio::test]
async fn resource_lock_cas() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "locks", "t1").await;
        let r =
            resources::insert(db, &NewResource { requires: vec![3, 4], ..resource(&sid, "r1") }).await.expect("insert");
        assert_eq!((r.atomic_key, r.engine_id.as_deref(), r.state()), (0, None, "INIT_COMPLETE".to_string()));
        assert_eq!(r.uuid.len(), 36);

        assert!(resources::acquire_lock(db, r.id, "e1", 0).await.expect("acquire"), "{}", t.name);
        assert!(!resources::acquire_lock(db, r.id, "e2", 1).await.expect("acquire"), "held by e1");
        assert!(!resources::acquire_lock(db, r.id, "e2", 0).await.expect("acquire"), "stale version");
        assert_eq!(resources::lock_holders(db, &sid).await.expect("holders"), vec!["e1".to_string()]);

        let progress = ResourceChange {
            physical_resource_id: Some(Some("phys-1".into())),
            properties_data: Some(Some(json!({"value": 1}))),
            ..ResourceChange::state(Action::Create, Status::InProgress, "state changed")
        };
        assert!(!resources::update_cas(db, r.id, Some("e2"), 1, progress.clone()).await.expect("cas"), "wrong engine");
        assert!(!resources::update_cas(db, r.id, Some("e1"), 0, progress.clone()).await.expect("cas"), "stale key");
        assert!(resources::update_cas(db, r.id, Some("e1"), 1, progress).await.expect("cas"));

        let done = ResourceChange {
            attr_data: Some(Some(json!({"a": "b"}))),
            ..ResourceChange::state(Action::Create, Status::Complete, "state changed")
        };
        assert!(!resources::release_lock(db, r.id, "e2", done.clone()).await.expect("release"), "not the holder");
        assert!(resources::release_lock(db, r.id, "e1", done).await.expect("release"));
        let got = resources::get(db, r.id).await.expect("get").expect("present");
        assert_eq!((got.engine_id.as_deref(), got.atomic_key, got.state()), (None, 3, "CREATE_COMPLETE".to_string()));
        assert_eq!(got.physical_resource_id.as_deref(), Some("phys-1"));
        assert_eq!(got.properties_data, Some(json!({"value": 1})));
        assert_eq!(got.attr_data, Some(json!({"a": "b"})));
        assert_eq!(got.requires, vec![3, 4]);
        assert!(resources::lock_holders(db, &sid).await.expect("holders").is_empty());
        assert!(resources::last_activity(db, &sid).await.expect("activity").is_some());
        assert!(resources::last_activity(db, "no-such-stack").await.expect("activity").is_none());

        // An engine that died holding the lock: another steals it.
        assert!(resources::acquire_lock(db, r.id, "dead", 3).await.expect("acquire"));
        let failed = ResourceChange::state(Action::Update, Status::Failed, "Engine went down during resource UPDATE");
        assert!(!resources::steal_lock(db, r.id, "e1", failed.clone()).await.expect("steal"), "e1 does not hold it");
        assert!(resources::steal_lock(db, r.id, "dead", failed).await.expect("steal"));
        let got = resources::get(db, r.id).await.expect("get").expect("present");
        assert_eq!((got.engine_id.clone(), got.state()), (None, "UPDATE_FAILED".to_string()));
        assert!(resources::acquire_lock(db, r.id, "e2", got.atomic_key).await.expect("acquire after steal"));

        assert!(resources::delete(db, r.id).await.expect("delete"));
        assert!(resources::get(db, r.id).await.expect("get").is_none());
        t.finish().await;
    }
}

#[tokio::test]
async fn make_replacement_links_both_rows_once() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "repl", "t1").await;
        let old = resources::insert(db, &resource(&sid, "server")).await.expect("insert");
        assert!(resources::acquire_lock(db, old.id, "e1", 0).await.expect("lock"));
        let old = resources::get(db, old.id).await.expect("get").expect("present");

        let new = resources::make_replacement(db, &old, &old.resource_type, 2, &[old.id + 100])
            .await
            .expect("replace")
            .expect("won");
        assert_eq!(
            (new.replaces, new.current_template_id, new.requires.clone()),
            (Some(old.id), Some(2), vec![old.id + 100])
        );
        assert_eq!((new.name.as_str(), new.state()), ("server", "INIT_COMPLETE".to_string()));
        let old_now = resources::get(db, old.id).await.expect("get").expect("present");
        assert_eq!(old_now.replaced_by, Some(new.id), "{}", t.name);
        assert_eq!(old_now.atomic_key, old.atomic_key + 1);
        assert_eq!(old_now.engine_id.as_deref(), Some("e1"), "the lock stays with its holder");

        // A second attempt from the stale copy loses and stores nothing.
        assert!(resources::make_replacement(db, &old, &old.resource_type, 2, &[]).await.expect("replace").is_none());
        let all = resources::list(db, &sid).await.expect("list");
        assert_eq!(all.len(), 2, "{}: every row, replaced ones included", t.name);
        t.finish().await;
    }
}

#[tokio::test]
async fn resource_data_set_get_delete() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "data", "t1").await;
        let r = resources::insert(db, &resource(&sid, "r")).await.expect("insert");
        resources::data_set(db, r.id, "value", "one", false).await.expect("set");
        resources::data_set(db, r.id, "value", "two", true).await.expect("overwrite");
        resources::data_set(db, r.id, "other", "x", false).await.expect("set");
        let all = resources::data_get_all(db, r.id).await.expect("get all");
        assert_eq!(all.len(), 2);
        assert_eq!((all["value"].value.as_str(), all["value"].redact), ("two", true));
        assert!(resources::data_delete(db, r.id, "other").await.expect("delete"));
        assert!(!resources::data_delete(db, r.id, "other").await.expect("delete"));
        assert!(resources::data_get(db, r.id, "other").await.expect("get").is_none());
        t.finish().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sync_point_merge_fires_exactly_once_under_concurrency() {
    for t in backends(50).await {
        let db = Arc::new(t.db.clone());
        let sid = new_stack(&db, "merge", "trav").await;
        sync_points::create_all(&db, &sid, "trav", &[("42".into(), true, 50), (sid.clone(), false, 1)])
            .await
            .expect("create");

        let mut tasks = Vec::new();
        for p in 0..50 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                sync_points::merge(&db, "42", "trav", true, &format!("{p}:1"), &json!({"attrs": {"p": p}})).await
            }));
        }
        let mut ready = Vec::new();
        for task in tasks {
            match task.await.expect("join").expect("merge") {
                MergeOutcome::Ready(inputs) => ready.push(inputs),
                MergeOutcome::Waiting => {}
                MergeOutcome::Gone => panic!("{}: sync point gone", t.name),
            }
        }
        assert_eq!(ready.len(), 1, "{}: exactly one predecessor fires the successor", t.name);
        assert_eq!(ready[0].len(), 50);
        assert_eq!(ready[0]["7:1"], json!({"attrs": {"p": 7}}));

        // A re-delivered report neither counts again nor fires again.
        let again = sync_points::merge(&db, "42", "trav", true, "7:1", &json!({})).await.expect("merge");
        assert_eq!(again, MergeOutcome::Waiting);
        let point = sync_points::get(&db, "42", "trav", true).await.expect("get").expect("present");
        assert_eq!((point.satisfied, point.required), (50, 50));
        t.finish().await;
    }
}

#[tokio::test]
async fn sync_point_redelivery_and_superseded_traversal() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "gone", "t1").await;
        sync_points::create_all(db, &sid, "t1", &[("1".into(), true, 2), ("2".into(), false, 1)])
            .await
            .expect("create");
        sync_points::create_all(db, &sid, "t2", &[("1".into(), true, 1)]).await.expect("create");

        assert_eq!(
            sync_points::merge(db, "1", "t1", true, "5:1", &json!(1)).await.expect("merge"),
            MergeOutcome::Waiting
        );
        assert_eq!(
            sync_points::merge(db, "1", "t1", true, "5:1", &json!(1)).await.expect("merge"),
            MergeOutcome::Waiting
        );
        assert_eq!(
            sync_points::get(db, "1", "t1", true).await.expect("get").expect("present").satisfied,
            1,
            "{}",
            t.name
        );
        let MergeOutcome::Ready(inputs) =
            sync_points::merge(db, "1", "t1", true, "6:0", &json!(2)).await.expect("merge")
        else {
            panic!("{}: second predecessor completes it", t.name)
        };
        assert_eq!(serde_json::Value::Object(inputs), json!({"5:1": 1, "6:0": 2}));

        // A new traversal supersedes t1: its points are gone.
        assert_eq!(sync_points::delete_for_stack_except(db, &sid, "t2").await.expect("delete"), 2);
        assert_eq!(
            sync_points::merge(db, "2", "t1", false, "1:1", &json!(null)).await.expect("merge"),
            MergeOutcome::Gone
        );
        assert_eq!(sync_points::merge(db, "1", "t1", true, "5:1", &json!(1)).await.expect("merge"), MergeOutcome::Gone);
        assert!(sync_points::get(db, "1", "t2", true).await.expect("get").is_some(), "the kept traversal stays");
        assert_eq!(sync_points::delete_for_traversal(db, &sid, "t2").await.expect("delete"), 1);
        assert_eq!(sync_points::merge(db, "1", "t2", true, "5:1", &json!(1)).await.expect("merge"), MergeOutcome::Gone);
        let left = db.fetch_all("SELECT COUNT(*) FROM sync_point_input", &[]).await.expect("count");
        assert_eq!(left[0].i64(0).expect("int"), 0, "{}: no orphan inputs", t.name);
        t.finish().await;
    }
}

#[tokio::test]
async fn sync_points_for_a_thousand_resources_are_created_quickly() {
    for t in backends(4).await {
        let nodes: Vec<(String, bool, i64)> =
            (0..1000).flat_map(|i| [(i.to_string(), true, 2), (i.to_string(), false, 1)]).collect();
        let started = Instant::now();
        sync_points::create_all(&t.db, "s", "big", &nodes).await.expect("create");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{}: 2000 sync points took {took:?}", t.name);
        let n =
            t.db.fetch_all("SELECT COUNT(*) FROM sync_point WHERE traversal_id = ?", &["big".into()])
                .await
                .expect("count");
        assert_eq!(n[0].i64(0).expect("int"), 2000);
        t.finish().await;
    }
}

async fn event(db: &Db, stack_id: &str, name: &str, action: Action, status: Status) -> String {
    events::insert(
        db,
        &NewEvent {
            stack_id: stack_id.into(),
            resource_name: name.into(),
            physical_resource_id: Some("phys".into()),
            resource_action: action.to_string(),
            resource_status: status.to_string(),
            resource_status_reason: "state changed".into(),
            resource_type: "OS::Heat::None".into(),
            resource_properties: Some(json!({})),
        },
    )
    .await
    .expect("insert event")
}

#[tokio::test]
async fn event_list_ordering_marker_and_limit() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "ev", "t1").await;
        let other = new_stack(db, "ev2", "t1").await;
        let mut uuids = Vec::new();
        for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let status = if i % 2 == 0 { Status::InProgress } else { Status::Complete };
            uuids.push(event(db, &sid, name, Action::Create, status).await);
        }
        event(db, &other, "x", Action::Create, Status::Complete).await;
        let q = |f: &dyn Fn(&mut EventQuery)| {
            let mut q = EventQuery { stack_ids: vec![sid.clone()], ..Default::default() };
            f(&mut q);
            q
        };
        let names = |rows: &[store::EventRow]| rows.iter().map(|e| e.resource_name.clone()).collect::<Vec<_>>();

        // Default: newest first (created_at, then id, descending).
        let all = events::list(db, &q(&|_| {})).await.expect("list");
        assert_eq!(names(&all), ["e", "d", "c", "b", "a"], "{}", t.name);
        let page = events::list(db, &q(&|q| q.limit = Some(2))).await.expect("list");
        assert_eq!(names(&page), ["e", "d"]);
        let next = events::list(
            db,
            &q(&|q| {
                q.limit = Some(2);
                q.marker = Some(page[1].uuid.clone());
            }),
        )
        .await
        .expect("list");
        assert_eq!(names(&next), ["c", "b"]);

        let asc = events::list(db, &q(&|q| q.sort_dir = Some(SortDir::Asc))).await.expect("list");
        assert_eq!(names(&asc), ["a", "b", "c", "d", "e"]);
        let after_b = events::list(
            db,
            &q(&|q| {
                q.sort_dir = Some(SortDir::Asc);
                q.marker = Some(uuids[1].clone());
            }),
        )
        .await
        .expect("list");
        assert_eq!(names(&after_b), ["c", "d", "e"]);

        // Sort keys given without a direction sort ascending, as oslo.db.
        let by_status = events::list(db, &q(&|q| q.sort_keys = vec!["resource_status".into()])).await.expect("list");
        assert_eq!(names(&by_status), ["b", "d", "a", "c", "e"]);
        assert!(events::list(db, &q(&|q| q.sort_keys = vec!["bogus".into()])).await.is_err());

        let filtered =
            events::list(db, &q(&|q| q.resource_status = vec![Status::Complete.to_string()])).await.expect("list");
        assert_eq!(names(&filtered), ["d", "b"]);
        let by_name = events::list(db, &q(&|q| q.resource_names = vec!["a".into(), "c".into()])).await.expect("list");
        assert_eq!(names(&by_name), ["c", "a"]);
        let one = events::list(db, &q(&|q| q.resource_name = Some("c".into()))).await.expect("list");
        assert_eq!(names(&one), ["c"]);
        let nested = events::list(db, &q(&|q| q.stack_ids.push(other.clone()))).await.expect("list");
        assert_eq!(nested.len(), 6);

        let got = events::get(db, &sid, &uuids[2]).await.expect("get").expect("present");
        assert_eq!((got.resource_name.as_str(), got.resource_properties.clone()), ("c", Some(json!({}))));
        assert!(events::get(db, &other, &uuids[2]).await.expect("get").is_none());

        assert_eq!(events::purge_oldest(db, &sid, 10, 2).await.expect("purge"), 0);
        assert_eq!(events::purge_oldest(db, &sid, 4, 2).await.expect("purge"), 2);
        let left = events::list(db, &q(&|_| {})).await.expect("list");
        assert_eq!(names(&left), ["e", "d", "c"], "{}: the oldest went", t.name);
        t.finish().await;
    }
}

#[tokio::test]
async fn service_registry() {
    for t in backends(4).await {
        let db = &t.db;
        let row = services::register(db, "eng-1", "host-a", "host-a.local", "http://127.0.0.1:9001", 60)
            .await
            .expect("register");
        assert_eq!((row.binary_name.as_str(), row.topic.as_str()), (services::BINARY, services::TOPIC));
        let again = services::register(db, "eng-1", "host-a", "host-a.local", "http://127.0.0.1:9002", 60)
            .await
            .expect("re-register");
        assert_eq!((again.id.clone(), again.worker_endpoint.as_str()), (row.id.clone(), "http://127.0.0.1:9002"));
        services::register(db, "eng-2", "host-b", "host-b.local", "http://127.0.0.1:9003", 60).await.expect("register");
        assert!(services::heartbeat(db, "eng-1").await.expect("heartbeat"));
        assert!(!services::heartbeat(db, "nobody").await.expect("heartbeat"));

        // Age eng-2 past the window.
        let old = keelson_db::now() - chrono::Duration::seconds(600);
        let mut tx = db.begin().await.expect("begin");
        tx.execute("UPDATE service SET updated_at = ? WHERE engine_id = ?", &[old.into(), "eng-2".into()])
            .await
            .expect("age");
        tx.commit().await.expect("commit");
        let live = services::live(db, Duration::from_secs(120)).await.expect("live");
        assert_eq!(live.iter().map(|s| s.engine_id.as_str()).collect::<Vec<_>>(), ["eng-1"], "{}", t.name);
        assert_eq!(services::list(db).await.expect("list").len(), 2);
        assert_eq!(services::cleanup_stale(db, Duration::from_secs(120)).await.expect("cleanup"), 1);
        assert_eq!(services::list(db).await.expect("list").len(), 1);
        t.finish().await;
    }
}

fn report(entity: &str, expected_required: i64, input: serde_json::Value) -> sync_points::Report {
    sync_points::Report { entity_id: entity.into(), is_update: true, input, expected_required }
}

/// A fan-out's reports to single-predecessor points complete them all in
/// one batch; a re-delivered report, a point gone or a point with other
/// predecessors makes the batch refuse (the caller then reports one by
/// one), and one by one each still counts once and fires once.
#[tokio::test]
async fn batched_reports_fire_each_single_predecessor_point_once() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "batch", "t1").await;
        sync_points::create_all(db, &sid, "t1", &[("1".into(), true, 1), ("2".into(), true, 1), ("3".into(), true, 2)])
            .await
            .expect("create");
        let batch = vec![report("1", 1, json!({"a": 1})), report("2", 1, json!({"a": 2}))];
        let mut tx = db.begin().await.expect("begin");
        let outcomes =
            sync_points::report_all_tx(&mut tx, "t1", "9:1", &batch).await.expect("report").expect("batched");
        tx.commit().await.expect("commit");
        assert_eq!(
            outcomes,
            vec![
                MergeOutcome::Ready(json!({"9:1": {"a": 1}}).as_object().cloned().unwrap_or_default()),
                MergeOutcome::Ready(json!({"9:1": {"a": 2}}).as_object().cloned().unwrap_or_default()),
            ],
            "{}",
            t.name
        );
        for e in ["1", "2"] {
            let p = sync_points::get(db, e, "t1", true).await.expect("get").expect("present");
            assert_eq!((p.satisfied, p.required), (1, 1), "{}", t.name);
        }

        // The same batch again (a re-delivery) does not apply as a whole;
        // one by one, neither point counts or fires again.
        let mut tx = db.begin().await.expect("begin");
        assert_eq!(sync_points::report_all_tx(&mut tx, "t1", "9:1", &batch).await.expect("report"), None, "{}", t.name);
        drop(tx);
        let mut tx = db.begin().await.expect("begin");
        for r in &batch {
            assert_eq!(
                sync_points::report_tx(&mut tx, "t1", "9:1", r).await.expect("report"),
                MergeOutcome::Waiting,
                "{}",
                t.name
            );
        }
        tx.commit().await.expect("commit");
        for e in ["1", "2"] {
            assert_eq!(
                sync_points::get(db, e, "t1", true).await.expect("get").expect("present").satisfied,
                1,
                "{}",
                t.name
            );
        }

        // A point with two predecessors (believed single by the reporter)
        // waits for the second one, which gets both inputs.
        let mut tx = db.begin().await.expect("begin");
        assert_eq!(
            sync_points::report_tx(&mut tx, "t1", "7:1", &report("3", 1, json!(7))).await.expect("report"),
            MergeOutcome::Waiting
        );
        let MergeOutcome::Ready(inputs) =
            sync_points::report_tx(&mut tx, "t1", "8:1", &report("3", 2, json!(8))).await.expect("report")
        else {
            panic!("{}: the second predecessor completes the point", t.name)
        };
        tx.commit().await.expect("commit");
        assert_eq!(serde_json::Value::Object(inputs), json!({"7:1": 7, "8:1": 8}), "{}", t.name);

        // Points gone: the batch refuses, one by one they are Gone, and no
        // input is left behind.
        sync_points::delete_for_traversal(db, &sid, "t1").await.expect("delete");
        let mut tx = db.begin().await.expect("begin");
        assert_eq!(sync_points::report_all_tx(&mut tx, "t1", "9:1", &batch).await.expect("report"), None, "{}", t.name);
        drop(tx);
        let mut tx = db.begin().await.expect("begin");
        for r in &batch {
            assert_eq!(
                sync_points::report_tx(&mut tx, "t1", "9:1", r).await.expect("report"),
                MergeOutcome::Gone,
                "{}",
                t.name
            );
        }
        tx.commit().await.expect("commit");
        let left = db.fetch_all("SELECT COUNT(*) FROM sync_point_input", &[]).await.expect("count");
        assert_eq!(left[0].i64(0).expect("int"), 0, "{}: no orphan inputs", t.name);
        t.finish().await;
    }
}

/// What a check reads: the stack without its graph, the row and its data
/// in one statement; nothing of the row for a stale traversal.
#[tokio::test]
async fn check_snapshot_reads_stack_row_and_data_together() {
    for t in backends(4).await {
        let db = &t.db;
        let sid = new_stack(db, "snap", "t1").await;
        stacks::set_current_deps(db, &sid, "t1", &json!({"edges": []})).await.expect("deps");
        let r = resources::insert(db, &resource(&sid, "r")).await.expect("insert");
        let bare = resources::insert(db, &resource(&sid, "bare")).await.expect("insert");
        resources::data_set(db, r.id, "k1", "v1", false).await.expect("data");
        resources::data_set(db, r.id, "k2", "v2", true).await.expect("data");

        let snap = store::check_snapshot(db, &sid, "t1", r.id).await.expect("read").expect("stack");
        assert_eq!(snap.stack.id, sid);
        assert_eq!(snap.stack.current_deps, None, "{}: the graph is not read", t.name);
        assert_eq!(snap.row.as_ref().map(|x| x.id), Some(r.id), "{}", t.name);
        assert_eq!(snap.row.as_ref().map(|x| x.name.as_str()), Some("r"));
        assert_eq!(snap.data.len(), 2, "{}", t.name);
        assert_eq!((snap.data["k2"].value.as_str(), snap.data["k2"].redact), ("v2", true));

        let snap = store::check_snapshot(db, &sid, "t1", bare.id).await.expect("read").expect("stack");
        assert_eq!((snap.row.map(|x| x.id), snap.data.len()), (Some(bare.id), 0), "{}", t.name);
        let snap = store::check_snapshot(db, &sid, "old", r.id).await.expect("read").expect("stack");
        assert!(snap.row.is_none() && snap.data.is_empty(), "{}: stale traversal", t.name);
        assert!(store::check_snapshot(db, "nope", "t1", r.id).await.expect("read").is_none());
        assert_eq!(stacks::current_deps(db, &sid, "t1").await.expect("deps"), Some(json!({"edges": []})), "{}", t.name);
        assert_eq!(stacks::current_deps(db, &sid, "old").await.expect("deps"), None);

        // Data entries set in a transaction overwrite (unredacted) and add.
        let mut tx = db.begin().await.expect("begin");
        resources::data_set_many_tx(&mut tx, r.id, &[("k2".into(), "w2".into()), ("k3".into(), "w3".into())])
            .await
            .expect("set");
        tx.commit().await.expect("commit");
        let all = resources::data_get_all(db, r.id).await.expect("get");
        assert_eq!(
            (all["k2"].value.as_str(), all["k2"].redact, all["k3"].value.as_str()),
            ("w2", false, "w3"),
            "{}",
            t.name
        );
        t.finish().await;
    }
}
