//! Resource providers and their trees.
//!
//! Every provider records its parent and the root of its tree
//! (`root_provider_id`, its own id for a root), so a whole tree is found
//! with one indexed lookup instead of a recursive walk.

use std::collections::{BTreeMap, HashMap, HashSet};

use keelson_common::db::{in_list, now, Row, Tx, Value};

use super::{ProviderRow, Store};
use crate::error::{Error, Result, DUPLICATE_NAME, PROVIDER_CANNOT_DELETE_PARENT, PROVIDER_IN_USE};

/// A provider with the uuids of its parent and root.
#[derive(Debug, Clone)]
pub struct Provider {
    pub row: ProviderRow,
    pub parent_uuid: Option<String>,
    pub root_uuid: String,
}

/// The provider columns plus parent and root uuid, from `rp` joined to its
/// parent and root.
const SELECT_PROVIDERS: &str = "SELECT rp.id, rp.uuid, rp.name, rp.generation, rp.parent_provider_id, rp.root_provider_id, \
     rp.created_at, rp.updated_at, parent.uuid, root.uuid \
     FROM resource_providers rp \
     LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id \
     LEFT JOIN resource_providers root ON root.id = rp.root_provider_id";

fn provider_from_row(r: &Row) -> Result<Provider> {
    let row = ProviderRow::from_row(r)?;
    let parent_uuid = r.opt_string(8)?;
    // A provider written before roots were recorded is its own root.
    let root_uuid = r.opt_string(9)?.unwrap_or_else(|| row.uuid.clone());
    Ok(Provider { row, parent_uuid, root_uuid })
}

/// Loads a provider with its parent and root uuids.
pub async fn load_provider(tx: &mut Tx, uuid: &str) -> Result<Option<Provider>> {
    let sql = format!("{SELECT_PROVIDERS} WHERE rp.uuid = ?");
    tx.fetch_optional(&sql, &[uuid.into()]).await?.map(|r| provider_from_row(&r)).transpose()
}

fn not_found(uuid: &str) -> Error {
    Error::NotFound(format!("No resource provider with uuid {uuid} found"))
}

/// What `GET /resource_providers` filters on; every filter given must hold.
#[derive(Debug, Clone, Default)]
pub struct ProviderFilter {
    pub uuid: Option<String>,
    pub name: Option<String>,
    /// Each entry: the provider is in at least one of these aggregates.
    pub member_of: Vec<Vec<String>>,
    /// The provider is in none of these aggregates.
    pub forbidden_aggregates: Vec<String>,
    /// Resource class name → amount that must still fit.
    pub resources: BTreeMap<String, i64>,
    /// Only providers in the tree of this provider.
    pub in_tree: Option<String>,
    /// Each entry: the provider has at least one of these traits.
    pub required_traits: Vec<Vec<String>>,
    /// The provider has none of these traits.
    pub forbidden_traits: Vec<String>,
}

/// Looks up the ids of named traits: (found by name, unknown names in the
/// order given).
pub async fn trait_ids(tx: &mut Tx, names: &[String]) -> Result<(HashMap<String, i64>, Vec<String>)> {
    let mut ids = HashMap::new();
    if names.is_empty() {
        return Ok((ids, Vec::new()));
    }
    let unique: Vec<&String> = names.iter().collect::<HashSet<_>>().into_iter().collect();
    let sql = format!("SELECT id, name FROM traits WHERE name IN ({})", in_list(unique.len()));
    let params: Vec<Value> = unique.iter().map(|n| Value::from(n.as_str())).collect();
    for r in tx.fetch_all(&sql, &params).await? {
        let name = r.string(1)?;
        // MariaDB compares names case-insensitively; keep exact matches only.
        if unique.iter().any(|n| **n == name) {
            ids.insert(name, r.i64(0)?);
        }
    }
    let mut missing: Vec<String> = Vec::new();
    for n in names {
        if !ids.contains_key(n) && !missing.contains(n) {
            missing.push(n.clone());
        }
    }
    Ok((ids, missing))
}

/// Finds the internal ids of aggregates by uuid; unknown uuids are left out.
async fn aggregate_ids(tx: &mut Tx, uuids: &[&String]) -> Result<HashMap<String, i64>> {
    let mut ids = HashMap::new();
    if uuids.is_empty() {
        return Ok(ids);
    }
    let sql = format!("SELECT id, uuid FROM placement_aggregates WHERE uuid IN ({})", in_list(uuids.len()));
    let params: Vec<Value> = uuids.iter().map(|u| Value::from(u.as_str())).collect();
    for r in tx.fetch_all(&sql, &params).await? {
        ids.insert(r.string(1)?, r.i64(0)?);
    }
    Ok(ids)
}

/// A WHERE clause under construction: conditions AND'ed, with parameters.
#[derive(Default)]
struct Conditions {
    clauses: Vec<String>,
    params: Vec<Value>,
}

impl Conditions {
    fn push(&mut self, clause: String, params: impl IntoIterator<Item = Value>) {
        self.clauses.push(clause);
        self.params.extend(params);
    }

    fn ids_clause(ids: &[i64]) -> (String, Vec<Value>) {
        (in_list(ids.len()), ids.iter().map(|i| Value::Int(*i)).collect())
    }
}

impl Store {
    /// Creates a provider; a root when it has no parent. `uuid` is
    /// generated when absent.
    pub async fn create_resource_provider(&self, uuid: Option<&str>, name: &str, parent_uuid: Option<&str>) -> Result<Provider> {
        let uuid = match uuid {
            Some(u) if !u.is_empty() => u.to_string(),
            _ => uuid::Uuid::new_v4().to_string(),
        };
        let action_error = |reason: &str| {
            Error::BadRequest(format!(
                "Unable to create resource provider \"{name}\", {uuid}: Object action create failed because: {reason}"
            ))
        };
        let mut tx = self.db.begin().await?;
        let mut parent: Option<Provider> = None;
        if let Some(parent_uuid) = parent_uuid.filter(|p| !p.is_empty()) {
            if parent_uuid == uuid {
                return Err(action_error(
                    "parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent.",
                ));
            }
            parent = Some(load_provider(&mut tx, parent_uuid).await?.ok_or_else(|| action_error("parent provider UUID does not exist."))?);
        }
        check_duplicates(&mut tx, &uuid, name).await?;
        let ts = now();
        let parent_id = parent.as_ref().map(|p| p.row.id);
        let root_id = parent.as_ref().map(|p| p.row.root_id.unwrap_or(p.row.id));
        let inserted = tx
            .insert(
                "INSERT INTO resource_providers (uuid, name, generation, parent_provider_id, root_provider_id, created_at) \
                 VALUES (?, ?, 0, ?, ?, ?)",
                &[uuid.as_str().into(), name.into(), parent_id.into(), root_id.into(), ts.into()],
            )
            .await;
        let id = match inserted {
            Ok(id) => id,
            // A concurrent creator won the race between the check and the insert.
            Err(e) if e.is_unique_violation() => {
                drop(tx);
                let mut tx = self.db.begin_read().await?;
                check_duplicates(&mut tx, &uuid, name).await?;
                return Err(Error::Conflict(DUPLICATE_NAME, format!("Conflicting resource provider name: {name} already exists.")));
            }
            Err(e) => return Err(e.into()),
        };
        let root_id = match root_id {
            Some(r) => r,
            None => {
                tx.execute("UPDATE resource_providers SET root_provider_id = ? WHERE id = ?", &[id.into(), id.into()]).await?;
                id
            }
        };
        tx.commit().await?;
        let root_uuid = parent.as_ref().map(|p| p.root_uuid.clone()).unwrap_or_else(|| uuid.clone());
        Ok(Provider {
            row: ProviderRow {
                id,
                uuid,
                name: Some(name.to_string()),
                generation: 0,
                parent_id,
                root_id: Some(root_id),
                created_at: Some(ts),
                updated_at: None,
            },
            parent_uuid: parent.map(|p| p.row.uuid),
            root_uuid,
        })
    }

    pub async fn get_resource_provider(&self, uuid: &str) -> Result<Provider> {
        let mut tx = self.db.begin_read().await?;
        let rp = load_provider(&mut tx, uuid).await?.ok_or_else(|| not_found(uuid))?;
        tx.commit().await?;
        Ok(rp)
    }

    /// The providers matching every filter, in id order. A few statements
    /// whatever the number of providers: name lookups for traits, aggregates
    /// and classes, then one query.
    pub async fn list_resource_providers(&self, filter: &ProviderFilter) -> Result<Vec<Provider>> {
        let mut tx = self.db.begin_read().await?;
        let found = list_in(&mut tx, filter).await?;
        tx.commit().await?;
        Ok(found)
    }

    /// Renames and/or moves a provider. `parent_uuid`: `None` leaves the
    /// parent alone, `Some(None)` un-parents. Without `allow_reparent`
    /// (before 1.37) only giving a root its first parent is allowed.
    pub async fn update_resource_provider(
        &self,
        uuid: &str,
        name: &str,
        parent_uuid: Option<Option<&str>>,
        allow_reparent: bool,
    ) -> Result<Provider> {
        let mut tx = self.db.begin().await?;
        let me = load_provider(&mut tx, uuid).await?.ok_or_else(|| not_found(uuid))?;
        let action_error =
            |reason: &str| Error::BadRequest(format!("Unable to save resource provider {uuid}: Object action update failed because: {reason}"));
        // (new parent id, new root id, new root uuid) when the tree changes.
        let mut moved: Option<(Option<i64>, i64, String)> = None;
        let mut new_parent_uuid = me.parent_uuid.clone();
        match parent_uuid {
            None => {}
            Some(Some(parent_uuid)) => {
                let parent = load_provider(&mut tx, parent_uuid).await?.ok_or_else(|| {
                    Error::BadRequest(format!(
                        "Unable to save resource provider {uuid}: Object action create failed because: parent provider UUID does not exist."
                    ))
                })?;
                if me.row.parent_id != Some(parent.row.id) {
                    if me.row.parent_id.is_some() && !allow_reparent {
                        return Err(action_error("re-parenting a provider is not currently allowed."));
                    }
                    let subtree = subtree_ids(&mut tx, &me).await?;
                    if subtree.contains(&parent.row.id) {
                        return Err(action_error("creating loop in the provider tree is not allowed."));
                    }
                    let root_id = parent.row.root_id.unwrap_or(parent.row.id);
                    moved = Some((Some(parent.row.id), root_id, parent.root_uuid.clone()));
                    new_parent_uuid = Some(parent.row.uuid.clone());
                }
            }
            Some(None) => {
                if me.row.parent_id.is_some() {
                    if !allow_reparent {
                        return Err(action_error("un-parenting a provider is not currently allowed."));
                    }
                    moved = Some((None, me.row.id, me.row.uuid.clone()));
                    new_parent_uuid = None;
                }
            }
        }
        let ts = now();
        let mut out = me.clone();
        if let Some((parent_id, root_id, root_uuid)) = moved {
            let subtree = subtree_ids(&mut tx, &me).await?;
            let (list, mut params) = Conditions::ids_clause(&subtree);
            params.insert(0, Value::Int(root_id));
            tx.execute(&format!("UPDATE resource_providers SET root_provider_id = ? WHERE id IN ({list})"), &params).await?;
            tx.execute("UPDATE resource_providers SET parent_provider_id = ? WHERE id = ?", &[parent_id.into(), me.row.id.into()])
                .await?;
            out.row.parent_id = parent_id;
            out.row.root_id = Some(root_id);
            out.root_uuid = root_uuid;
            out.parent_uuid = new_parent_uuid;
        }
        if me.row.name.as_deref() != Some(name) {
            let clash = tx.fetch_all("SELECT id, name FROM resource_providers WHERE name = ? AND id <> ?", &[name.into(), me.row.id.into()]).await?;
            if !clash.is_empty() {
                return Err(Error::Conflict(DUPLICATE_NAME, format!("Conflicting resource provider {name} already exists.")));
            }
        }
        match tx
            .execute("UPDATE resource_providers SET name = ?, updated_at = ? WHERE id = ?", &[name.into(), ts.into(), me.row.id.into()])
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_unique_violation() => {
                return Err(Error::Conflict(DUPLICATE_NAME, format!("Conflicting resource provider {name} already exists.")));
            }
            Err(e) => return Err(e.into()),
        }
        tx.commit().await?;
        out.row.name = Some(name.to_string());
        out.row.updated_at = Some(ts);
        Ok(out)
    }

    /// Deletes a provider with its inventories and its trait and aggregate
    /// links; refused while it has children or allocations.
    pub async fn delete_resource_provider(&self, uuid: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let me = super::find_provider(&mut tx, uuid)
            .await?
            .ok_or_else(|| Error::NotFound(format!("No resource provider with uuid {uuid} found for delete")))?;
        let id = Value::Int(me.id);
        let children = tx.fetch_optional("SELECT COUNT(*) FROM resource_providers WHERE parent_provider_id = ?", &[id.clone()]).await?;
        if children.map(|r| r.i64(0)).transpose()?.unwrap_or(0) > 0 {
            return Err(Error::Conflict(
                PROVIDER_CANNOT_DELETE_PARENT,
                format!("Unable to delete parent resource provider {uuid}: It has child resource providers."),
            ));
        }
        let allocations = tx.fetch_optional("SELECT COUNT(*) FROM allocations WHERE resource_provider_id = ?", &[id.clone()]).await?;
        if allocations.map(|r| r.i64(0)).transpose()?.unwrap_or(0) > 0 {
            return Err(Error::Conflict(
                PROVIDER_IN_USE,
                format!("Unable to delete resource provider {uuid}: Resource provider has allocations."),
            ));
        }
        tx.execute("DELETE FROM inventories WHERE resource_provider_id = ?", &[id.clone()]).await?;
        tx.execute("DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?", &[id.clone()]).await?;
        tx.execute("DELETE FROM resource_provider_traits WHERE resource_provider_id = ?", &[id.clone()]).await?;
        // The self-reference of a root would block the delete where the
        // foreign key is enforced.
        tx.execute("UPDATE resource_providers SET root_provider_id = NULL WHERE id = ? AND root_provider_id = ?", &[id.clone(), id.clone()])
            .await?;
        let deleted = tx.execute("DELETE FROM resource_providers WHERE id = ?", &[id]).await?;
        if deleted == 0 {
            return Err(Error::NotFound(format!("No resource provider with uuid {uuid} found for delete")));
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The ids of `me` and every provider below it.
pub async fn subtree_ids(tx: &mut Tx, me: &Provider) -> Result<Vec<i64>> {
    let root_id = me.row.root_id.unwrap_or(me.row.id);
    let rows = tx
        .fetch_all("SELECT id, parent_provider_id FROM resource_providers WHERE root_provider_id = ?", &[root_id.into()])
        .await?;
    let mut children: HashMap<i64, Vec<i64>> = HashMap::new();
    for r in &rows {
        if let Some(parent) = r.opt_i64(1)? {
            children.entry(parent).or_default().push(r.i64(0)?);
        }
    }
    Ok(descendants_and_self(me.row.id, &children))
}

/// Walks a parent → children map from `start` (guarding against cycles a
/// corrupt table could hold).
fn descendants_and_self(start: i64, children: &HashMap<i64, Vec<i64>>) -> Vec<i64> {
    let mut seen = HashSet::from([start]);
    let mut out = vec![start];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            for k in kids {
                if seen.insert(*k) {
                    out.push(*k);
                }
            }
        }
        i += 1;
    }
    out
}

/// The resource class ids of the names given; an unknown class fails.
async fn class_ids(tx: &mut Tx, names: &[&String]) -> Result<HashMap<String, i64>> {
    let mut ids = HashMap::new();
    if names.is_empty() {
        return Ok(ids);
    }
    let sql = format!("SELECT id, name FROM resource_classes WHERE name IN ({})", in_list(names.len()));
    let params: Vec<Value> = names.iter().map(|n| Value::from(n.as_str())).collect();
    for r in tx.fetch_all(&sql, &params).await? {
        ids.insert(r.string(1)?, r.i64(0)?);
    }
    if let Some(missing) = names.iter().find(|n| !ids.contains_key(n.as_str())) {
        return Err(Error::BadRequest(format!("Invalid resource class in resources parameter: No such resource class {missing}.")));
    }
    Ok(ids)
}

/// The list query: name lookups first (so unknown names fail or empty the
/// answer early), then a single SELECT with one sub-select per filter.
async fn list_in(tx: &mut Tx, filter: &ProviderFilter) -> Result<Vec<Provider>> {
    let mut cond = Conditions::default();
    if let Some(name) = filter.name.as_deref().filter(|n| !n.is_empty()) {
        cond.push("rp.name = ?".into(), [name.into()]);
    }
    if let Some(uuid) = filter.uuid.as_deref().filter(|u| !u.is_empty()) {
        cond.push("rp.uuid = ?".into(), [uuid.into()]);
    }
    if let Some(in_tree) = filter.in_tree.as_deref().filter(|u| !u.is_empty()) {
        // An unknown provider yields NULL, which matches nothing.
        cond.push(
            "rp.root_provider_id = (SELECT COALESCE(t.root_provider_id, t.id) FROM resource_providers t WHERE t.uuid = ?)".into(),
            [in_tree.into()],
        );
    }
    let mut trait_names: Vec<String> = filter.required_traits.iter().flatten().cloned().collect();
    trait_names.extend(filter.forbidden_traits.iter().cloned());
    if !trait_names.is_empty() {
        let (ids, missing) = trait_ids(tx, &trait_names).await?;
        if let Some(first) = missing.first() {
            return Err(Error::BadRequest(format!("Invalid trait(s) in \"required\" parameter: No such trait(s): {first}.")));
        }
        for any_of in &filter.required_traits {
            let group: Vec<i64> = any_of.iter().filter_map(|n| ids.get(n).copied()).collect();
            let (list, params) = Conditions::ids_clause(&group);
            cond.push(
                format!("rp.id IN (SELECT rpt.resource_provider_id FROM resource_provider_traits rpt WHERE rpt.trait_id IN ({list}))"),
                params,
            );
        }
        let forbidden: Vec<i64> = filter.forbidden_traits.iter().filter_map(|n| ids.get(n).copied()).collect();
        if !forbidden.is_empty() {
            let (list, params) = Conditions::ids_clause(&forbidden);
            cond.push(
                format!(
                    "rp.id NOT IN (SELECT rpt.resource_provider_id FROM resource_provider_traits rpt WHERE rpt.trait_id IN ({list}))"
                ),
                params,
            );
        }
    }
    let agg_uuids: Vec<&String> = filter.member_of.iter().flatten().chain(filter.forbidden_aggregates.iter()).collect();
    if !agg_uuids.is_empty() {
        let ids = aggregate_ids(tx, &agg_uuids).await?;
        for any_of in &filter.member_of {
            let group: Vec<i64> = any_of.iter().filter_map(|u| ids.get(u).copied()).collect();
            if group.is_empty() {
                // Only unknown aggregates: nothing can be a member.
                return Ok(Vec::new());
            }
            let (list, params) = Conditions::ids_clause(&group);
            cond.push(
                format!(
                    "rp.id IN (SELECT rpa.resource_provider_id FROM resource_provider_aggregates rpa WHERE rpa.aggregate_id IN ({list}))"
                ),
                params,
            );
        }
        let forbidden: Vec<i64> = filter.forbidden_aggregates.iter().filter_map(|u| ids.get(u).copied()).collect();
        if !forbidden.is_empty() {
            let (list, params) = Conditions::ids_clause(&forbidden);
            cond.push(
                format!(
                    "rp.id NOT IN (SELECT rpa.resource_provider_id FROM resource_provider_aggregates rpa WHERE rpa.aggregate_id IN ({list}))"
                ),
                params,
            );
        }
    }
    if !filter.resources.is_empty() {
        let names: Vec<&String> = filter.resources.keys().collect();
        let ids = class_ids(tx, &names).await?;
        for (name, amount) in &filter.resources {
            let rc = Value::Int(ids.get(name).copied().unwrap_or(-1));
            let amount = Value::Int(*amount);
            cond.push(
                "rp.id IN (SELECT inv.resource_provider_id FROM inventories inv \
                 LEFT JOIN (SELECT a.resource_provider_id, SUM(a.used) AS used FROM allocations a \
                 WHERE a.resource_class_id = ? GROUP BY a.resource_provider_id) u \
                 ON u.resource_provider_id = inv.resource_provider_id \
                 WHERE inv.resource_class_id = ? \
                 AND COALESCE(u.used, 0) + ? <= (inv.total - inv.reserved) * inv.allocation_ratio \
                 AND inv.min_unit <= ? AND inv.max_unit >= ? AND ? % inv.step_size = 0)"
                    .into(),
                [rc.clone(), rc, amount.clone(), amount.clone(), amount.clone(), amount],
            );
        }
    }
    let mut sql = SELECT_PROVIDERS.to_string();
    if !cond.clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&cond.clauses.join(" AND "));
    }
    sql.push_str(" ORDER BY rp.id");
    let rows = tx.fetch_all(&sql, &cond.params).await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let p = provider_from_row(r)?;
        // Exact name match where the collation folds case.
        if filter.name.as_deref().is_some_and(|n| !n.is_empty() && p.row.name.as_deref() != Some(n)) {
            continue;
        }
        out.push(p);
    }
    Ok(out)
}

/// Answers 409 `placement.duplicate_name` when the uuid or the name is
/// taken (the uuid is reported first, as SQLite and MySQL do).
async fn check_duplicates(tx: &mut Tx, uuid: &str, name: &str) -> Result<()> {
    let rows = tx.fetch_all("SELECT uuid, name FROM resource_providers WHERE uuid = ? OR name = ?", &[uuid.into(), name.into()]).await?;
    let mut uuid_taken = false;
    let mut name_taken = false;
    for r in &rows {
        if r.string(0)? == uuid {
            uuid_taken = true;
        } else {
            name_taken = true;
        }
    }
    let what = if uuid_taken {
        format!("uuid: {uuid}")
    } else if name_taken {
        format!("name: {name}")
    } else {
        return Ok(());
    };
    Err(Error::Conflict(DUPLICATE_NAME, format!("Conflicting resource provider {what} already exists.")))
}
