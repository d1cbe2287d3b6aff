//! Tests of the whole service on in-memory SQLite: fleets are written with
//! plain SQL into Placement's schema, requests go through the store.

mod explain;
mod property;
mod scenarios;
mod trait_cache;
mod window;

use std::collections::HashMap;

use keelson_db::Db;
use keelson_db::{DatabaseUrl, PoolSettings, Value};
use keelson_placement_schema::{schema, seed};

use crate::domain::request::{GroupPolicy, Request, RequestGroup};
use crate::domain::{NamedOutcome, Settings, Strategy};
use crate::error::Result;
use crate::store::Store;

/// A fleet under construction; providers are named, uuids derive from the
/// order of creation.
pub struct World {
    pub db: Db,
    ids: HashMap<String, i64>,
    roots: HashMap<String, i64>,
    pub names: HashMap<String, String>,
    count: u32,
}

impl World {
    pub async fn new() -> World {
        let url = DatabaseUrl::parse("sqlite://").expect("url");
        let db = Db::connect(&url, &PoolSettings::default()).await.expect("connect");
        schema::sync(&db).await.expect("schema");
        seed::seed_standard(&db).await.expect("seed");
        World { db, ids: HashMap::new(), roots: HashMap::new(), names: HashMap::new(), count: 0 }
    }

    async fn exec(&self, sql: &str, params: &[Value]) -> i64 {
        let mut tx = self.db.begin().await.expect("begin");
        let id = tx.insert(sql, params).await.expect(sql);
        tx.commit().await.expect("commit");
        id
    }

    async fn scalar(&self, sql: &str, params: &[Value]) -> Option<i64> {
        self.db.fetch_all(sql, params).await.expect(sql).first().map(|r| r.i64(0).expect("int"))
    }

    pub fn uuid(&self, name: &str) -> String {
        self.names.iter().find(|(_, n)| n.as_str() == name).map(|(u, _)| u.clone()).unwrap_or_default()
    }

    pub async fn provider(&mut self, name: &str, parent: Option<&str>) -> i64 {
        self.count += 1;
        let uuid = format!("00000000-0000-4000-8000-{:012x}", self.count);
        let parent_id = parent.map(|p| self.ids[p]);
        let root = parent.map(|p| self.roots[p]);
        let id = self
            .exec(
                "INSERT INTO resource_providers (uuid, name, generation, parent_provider_id, root_provider_id) VALUES (?, ?, 0, ?, ?)",
                &[uuid.clone().into(), name.into(), parent_id.into(), root.into()],
            )
            .await;
        let root = root.unwrap_or(id);
        if parent.is_none() {
            self.exec("UPDATE resource_providers SET root_provider_id = ? WHERE id = ?", &[root.into(), id.into()])
                .await;
        }
        self.ids.insert(name.to_string(), id);
        self.roots.insert(name.to_string(), root);
        self.names.insert(uuid, name.to_string());
        id
    }

    async fn class_id(&self, class: &str) -> i64 {
        if let Some(id) = self.scalar("SELECT id FROM resource_classes WHERE name = ?", &[class.into()]).await {
            return id;
        }
        let next = self.scalar("SELECT MAX(id) FROM resource_classes", &[]).await.unwrap_or(0).max(9999) + 1;
        self.exec("INSERT INTO resource_classes (id, name) VALUES (?, ?)", &[next.into(), class.into()]).await;
        next
    }

    pub async fn inventory(&self, p: &str, class: &str, total: i64) {
        self.inventory_full(p, class, total, 0, 1, total, 1, 1.0).await;
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn inventory_full(
        &self,
        p: &str,
        class: &str,
        total: i64,
        reserved: i64,
        min: i64,
        max: i64,
        step: i64,
        ratio: f64,
    ) {
        let class = self.class_id(class).await;
        self.exec(
            "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            &[self.ids[p].into(), class.into(), total.into(), reserved.into(), min.into(), max.into(), step.into(), ratio.into()],
        )
        .await;
    }

    pub async fn add_trait(&self, p: &str, name: &str) {
        let id = match self.scalar("SELECT id FROM traits WHERE name = ?", &[name.into()]).await {
            Some(id) => id,
            None => self.exec("INSERT INTO traits (name) VALUES (?)", &[name.into()]).await,
        };
        self.exec(
            "INSERT INTO resource_provider_traits (trait_id, resource_provider_id) VALUES (?, ?)",
            &[id.into(), self.ids[p].into()],
        )
        .await;
    }

    pub async fn aggregate(&self, p: &str, agg: &str) {
        let id = match self.scalar("SELECT id FROM placement_aggregates WHERE uuid = ?", &[agg.into()]).await {
            Some(id) => id,
            None => self.exec("INSERT INTO placement_aggregates (uuid) VALUES (?)", &[agg.into()]).await,
        };
        self.exec(
            "INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id) VALUES (?, ?)",
            &[self.ids[p].into(), id.into()],
        )
        .await;
    }

    pub async fn allocate(&self, p: &str, class: &str, used: i64) {
        let class = self.class_id(class).await;
        self.exec(
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) VALUES (?, ?, ?, ?)",
            &[self.ids[p].into(), "11111111-1111-4111-8111-111111111111".into(), class.into(), used.into()],
        )
        .await;
    }

    /// The answer by name, after a round trip through the gRPC answer's
    /// encoding (which must lose nothing).
    pub async fn ask(&self, settings: Settings, req: &Request) -> Result<NamedOutcome> {
        let o = Store::new(self.db.clone(), settings).allocation_candidates(req).await?;
        let named = o.named();
        assert_eq!(crate::rpc::pb_to_named(&crate::rpc::outcome_to_pb(&o)), named, "the gRPC answer differs");
        Ok(named)
    }

    /// Each candidate as `provider:CLASS=n,...|suffix=providers;...`,
    /// sorted, with provider names.
    pub fn shapes(&self, o: &NamedOutcome) -> Vec<String> {
        let mut out: Vec<String> = o
            .allocation_requests
            .iter()
            .map(|a| {
                let mut parts: Vec<String> = a
                    .allocations
                    .iter()
                    .flat_map(|(u, res)| res.iter().map(move |(c, n)| format!("{}:{c}={n}", self.names[u])))
                    .collect();
                parts.sort();
                let maps: Vec<String> = a
                    .mappings
                    .iter()
                    .map(|(s, us)| {
                        let mut ns: Vec<&str> = us.iter().map(|u| self.names[u].as_str()).collect();
                        ns.sort();
                        format!("{s}={}", ns.join("+"))
                    })
                    .collect();
                format!("{}|{}", parts.join(","), maps.join(";"))
            })
            .collect();
        out.sort();
        out
    }

    /// The names of the summarised providers, sorted.
    pub fn summarised(&self, o: &NamedOutcome) -> Vec<String> {
        let mut names: Vec<String> = o.provider_summaries.iter().map(|s| self.names[&s.uuid].clone()).collect();
        names.sort();
        names
    }
}

/// A 1.39 request of the given groups.
pub fn request(groups: Vec<RequestGroup>, policy: Option<GroupPolicy>) -> Request {
    Request {
        groups,
        group_policy: policy,
        nested_aware: true,
        allow_resourceless_groups: true,
        all_classes_in_summaries: true,
        traits_in_summaries: true,
        ..Default::default()
    }
}

pub fn settings(strategy: Strategy, optimize: bool, max: i64) -> Settings {
    Settings::from_options(
        if strategy == Strategy::BreadthFirst { "breadth-first" } else { "depth-first" },
        optimize,
        max,
        false,
    )
}
