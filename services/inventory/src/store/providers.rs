//! Resource providers and their trees.
//!
//! Every provider records its parent and the root of its tree
//! (`root_provider_id`, its own id for a root), so a whole tree is found
//! with one indexed lookup instead of a recursive walk.

use std::collections::{BTreeMap, HashMap, HashSet};

use keelson_db::{in_list, now, Cells, RowRef, Tx, Value};

use super::{write_retrying, ProviderRow, Store};
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
const SELECT_PROVIDERS: &str =
    "SELECT rp.id, rp.uuid, rp.name, rp.generation, rp.parent_provider_id, rp.root_provider_id, \
     rp.created_at, rp.updated_at, parent.uuid, root.uuid \
     FROM resource_providers rp \
     LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id \
     LEFT JOIN resource_providers root ON root.id = rp.root_provider_id";

fn provider_from_row(r: &impl Cells) -> Result<Provider> {
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
    let (traits, missing) = super::traits::named_traits(tx, names).await?;
    Ok((traits.into_iter().map(|(name, t)| (name, t.id)).collect(), missing))
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
    pub async fn create_resource_provider(
        &self,
        uuid: Option<&str>,
        name: &str,
        parent_uuid: Option<&str>,
    ) -> Result<Provider> {
        write_retrying("provider create", || self.try_create_resource_provider(uuid, name, parent_uuid)).await
    }

    async fn try_create_resource_provider(
        &self,
        uuid: Option<&str>,
        name: &str,
        parent_uuid: Option<&str>,
    ) -> Result<Provider> {
        let uuid = match uuid {
            Some(u) if !u.is_empty() => u.to_string(),
            _ => uuid::Uuid::new_v4().to_string(),
        };
        let action_error = |reason: &str| {
            Error::BadRequest(format!(
                "Unable to create resource provider \"{name}\", {uuid}: Object action create failed because: {reason}"
            ))
        };
        if name.is_empty() {
            return Err(action_error("name is required"));
        }
        let mut tx = self.db.begin().await?;
        let mut parent: Option<Provider> = None;
        if let Some(parent_uuid) = parent_uuid.filter(|p| !p.is_empty()) {
            if parent_uuid == uuid {
                return Err(action_error(
                    "parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent.",
                ));
            }
            parent = Some(
                load_provider(&mut tx, parent_uuid)
                    .await?
                    .ok_or_else(|| action_error("parent provider UUID does not exist."))?,
            );
        }
        // A taken uuid or name is found by the insert's unique violation
        // (one round trip less than asking first) and named below.
        let ts = now();
        let parent_id = parent.as_ref().map(|p| p.row.id);
        let root_id = parent.as_ref().map(|p| p.row.root_id.unwrap_or(p.row.id));
        // Literal NULLs rather than NULL parameters: PostgreSQL keeps the
        // parameter types of a prepared statement, and a NULL binds as a
        // wider integer than an id does.
        let inserted = match (parent_id, root_id) {
            (Some(parent_id), Some(root_id)) => {
                tx.insert(
                    "INSERT INTO resource_providers (uuid, name, generation, parent_provider_id, root_provider_id, created_at) \
                     VALUES (?, ?, 0, ?, ?, ?)",
                    &[uuid.as_str().into(), name.into(), parent_id.into(), root_id.into(), ts.into()],
                )
                .await
            }
            _ => {
                tx.insert(
                    "INSERT INTO resource_providers (uuid, name, generation, created_at) VALUES (?, ?, 0, ?)",
                    &[uuid.as_str().into(), name.into(), ts.into()],
                )
                .await
            }
        };
        let id = match inserted {
            Ok(id) => id,
            // Which of the two is taken is read outside the failed
            // transaction; one that is gone again by then was a concurrent
            // creator's, now deleted, and is answered as a name conflict.
            Err(e) if e.is_unique_violation() => {
                drop(tx);
                let mut tx = self.db.begin_read().await?;
                check_duplicates(&mut tx, &uuid, name).await?;
                return Err(Error::Conflict(
                    DUPLICATE_NAME,
                    format!("Conflicting resource provider name: {name} already exists."),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let root_id = match root_id {
            Some(r) => r,
            None => {
                tx.execute("UPDATE resource_providers SET root_provider_id = ? WHERE id = ?", &[id.into(), id.into()])
                    .await?;
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
    /// and classes, then one query; without lookups (no such filter), the
    /// query alone, outside any transaction.
    pub async fn list_resource_providers(&self, filter: &ProviderFilter) -> Result<Vec<Provider>> {
        let mut found = Vec::new();
        let keep = |r: &RowRef<'_>| -> Result<()> {
            let p = provider_from_row(r)?;
            // Exact name match where the collation folds case.
            if filter.name.as_deref().is_none_or(|n| n.is_empty() || p.row.name.as_deref() == Some(n)) {
                found.push(p);
            }
            Ok(())
        };
        if needs_lookups(filter) {
            let mut tx = self.db.begin_read().await?;
            if let Some(cond) = looked_up_conditions(&mut tx, filter).await? {
                tx.for_each_row(&list_sql(&cond), &cond.params, keep).await?;
            }
            // Everything is read: no need to wait for the transaction's end.
            tx.end_read();
        } else {
            let cond = plain_conditions(filter);
            self.db.for_each_row(&list_sql(&cond), &cond.params, keep).await?;
        }
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
        let write = || self.try_update_resource_provider(uuid, name, parent_uuid, allow_reparent);
        write_retrying("provider update", write).await
    }

    async fn try_update_resource_provider(
        &self,
        uuid: &str,
        name: &str,
        parent_uuid: Option<Option<&str>>,
        allow_reparent: bool,
    ) -> Result<Provider> {
        let mut tx = self.db.begin().await?;
        let me = load_provider(&mut tx, uuid).await?.ok_or_else(|| not_found(uuid))?;
        let action_error = |reason: &str| {
            Error::BadRequest(format!(
                "Unable to save resource provider {uuid}: Object action update failed because: {reason}"
            ))
        };
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
            // Un-parenting a root changes nothing.
            Some(None) if me.row.parent_id.is_none() => {}
            Some(None) => {
                if !allow_reparent {
                    return Err(action_error("un-parenting a provider is not currently allowed."));
                }
                moved = Some((None, me.row.id, me.row.uuid.clone()));
                new_parent_uuid = None;
            }
        }
        let ts = now();
        let mut out = me.clone();
        if let Some((parent_id, root_id, root_uuid)) = moved {
            let subtree = subtree_ids(&mut tx, &me).await?;
            let (list, mut params) = Conditions::ids_clause(&subtree);
            params.insert(0, Value::Int(root_id));
            tx.execute(&format!("UPDATE resource_providers SET root_provider_id = ? WHERE id IN ({list})"), &params)
                .await?;
            match parent_id {
                Some(p) => {
                    tx.execute(
                        "UPDATE resource_providers SET parent_provider_id = ? WHERE id = ?",
                        &[p.into(), me.row.id.into()],
                    )
                    .await?
                }
                // A literal NULL, as in create.
                None => {
                    tx.execute(
                        "UPDATE resource_providers SET parent_provider_id = NULL WHERE id = ?",
                        &[me.row.id.into()],
                    )
                    .await?
                }
            };
            out.row.parent_id = parent_id;
            out.row.root_id = Some(root_id);
            out.root_uuid = root_uuid;
            out.parent_uuid = new_parent_uuid;
        }
        // A name another provider has is the unique index's violation (no
        // read first: the index compares names as the read would).
        match tx
            .execute(
                "UPDATE resource_providers SET name = ?, updated_at = ? WHERE id = ?",
                &[name.into(), ts.into(), me.row.id.into()],
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_unique_violation() => {
                return Err(Error::Conflict(
                    DUPLICATE_NAME,
                    format!("Conflicting resource provider {name} already exists."),
                ));
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
        write_retrying("provider delete", || self.try_delete_resource_provider(uuid)).await
    }

    async fn try_delete_resource_provider(&self, uuid: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        let me = super::find_provider(&mut tx, uuid)
            .await?
            .ok_or_else(|| Error::NotFound(format!("No resource provider with uuid {uuid} found for delete")))?;
        let id = Value::Int(me.id);
        // Both refusals in one round trip.
        let blockers = tx
            .fetch_optional(
                "SELECT CASE WHEN EXISTS (SELECT 1 FROM resource_providers WHERE parent_provider_id = ?) THEN 1 ELSE 0 END, \
                 CASE WHEN EXISTS (SELECT 1 FROM allocations WHERE resource_provider_id = ?) THEN 1 ELSE 0 END",
                &[id.clone(), id.clone()],
            )
            .await?;
        let (has_children, has_allocations) = match blockers {
            Some(r) => (r.i64(0)? != 0, r.i64(1)? != 0),
            None => (false, false),
        };
        if has_children {
            return Err(Error::Conflict(
                PROVIDER_CANNOT_DELETE_PARENT,
                format!("Unable to delete parent resource provider {uuid}: It has child resource providers."),
            ));
        }
        if has_allocations {
            return Err(Error::Conflict(
                PROVIDER_IN_USE,
                format!("Unable to delete resource provider {uuid}: Resource provider has allocations."),
            ));
        }
        tx.execute("DELETE FROM inventories WHERE resource_provider_id = ?", std::slice::from_ref(&id)).await?;
        tx.execute(
            "DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?",
            std::slice::from_ref(&id),
        )
        .await?;
        tx.execute("DELETE FROM resource_provider_traits WHERE resource_provider_id = ?", std::slice::from_ref(&id))
            .await?;
        // The self-reference of a root would block the delete where the
        // foreign key is enforced.
        tx.execute(
            "UPDATE resource_providers SET root_provider_id = NULL WHERE id = ? AND root_provider_id = ?",
            &[id.clone(), id.clone()],
        )
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
        .fetch_all(
            "SELECT id, parent_provider_id FROM resource_providers WHERE root_provider_id = ?",
            &[root_id.into()],
        )
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
        return Err(Error::BadRequest(format!(
            "Invalid resource class in resources parameter: No such resource class {missing}."
        )));
    }
    Ok(ids)
}

/// Whether the filter names traits, aggregates or resource classes, which
/// are looked up (and may be refused) before the list query.
fn needs_lookups(filter: &ProviderFilter) -> bool {
    !filter.required_traits.is_empty()
        || !filter.forbidden_traits.is_empty()
        || !filter.member_of.is_empty()
        || !filter.forbidden_aggregates.is_empty()
        || !filter.resources.is_empty()
}

/// The list query's conditions on the provider's own columns.
fn plain_conditions(filter: &ProviderFilter) -> Conditions {
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
    cond
}

/// Every condition of the list query, name lookups first (so unknown names
/// fail or empty the answer early: `None`, nothing can match), with one
/// sub-select per filter.
async fn looked_up_conditions(tx: &mut Tx, filter: &ProviderFilter) -> Result<Option<Conditions>> {
    let mut cond = plain_conditions(filter);
    let mut trait_names: Vec<String> = filter.required_traits.iter().flatten().cloned().collect();
    trait_names.extend(filter.forbidden_traits.iter().cloned());
    if !trait_names.is_empty() {
        let (ids, missing) = trait_ids(tx, &trait_names).await?;
        if let Some(first) = missing.first() {
            return Err(Error::BadRequest(format!(
                "Invalid trait(s) in \"required\" parameter: No such trait(s): {first}."
            )));
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
                return Ok(None);
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
        // max_unit is an INTEGER column: a larger amount fits nowhere (and
        // would bind wider than the statement's other executions).
        if filter.resources.values().any(|a| i32::try_from(*a).is_err()) {
            return Ok(None);
        }
        for (name, amount) in &filter.resources {
            let rc = Value::Int(ids.get(name).copied().unwrap_or(-1));
            let amount = Value::Int(*amount);
            // The usage of each provider holding the class, summed from
            // `allocations_resource_provider_class_used_idx` (a range of
            // the provider's rows of the class): MariaDB evaluated a
            // grouped derived table of the class's whole usage for every
            // provider (0.9 s at 240 providers and 20,000 consumers).
            cond.push(
                "rp.id IN (SELECT inv.resource_provider_id FROM inventories inv \
                 WHERE inv.resource_class_id = ? \
                 AND COALESCE((SELECT SUM(a.used) FROM allocations a \
                 WHERE a.resource_provider_id = inv.resource_provider_id AND a.resource_class_id = ?), 0) + ? \
                 <= (inv.total - inv.reserved) * inv.allocation_ratio \
                 AND inv.min_unit <= ? AND inv.max_unit >= ? AND ? % inv.step_size = 0)"
                    .into(),
                [rc.clone(), rc, amount.clone(), amount.clone(), amount.clone(), amount],
            );
        }
    }
    Ok(Some(cond))
}

/// The list query with its conditions.
fn list_sql(cond: &Conditions) -> String {
    let mut sql = SELECT_PROVIDERS.to_string();
    if !cond.clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&cond.clauses.join(" AND "));
    }
    sql.push_str(" ORDER BY rp.id");
    sql
}

/// Answers 409 `placement.duplicate_name` when the uuid or the name is
/// taken (the uuid is reported first, as SQLite and MySQL do).
async fn check_duplicates(tx: &mut Tx, uuid: &str, name: &str) -> Result<()> {
    let rows = tx
        .fetch_all("SELECT uuid, name FROM resource_providers WHERE uuid = ? OR name = ?", &[uuid.into(), name.into()])
        .await?;
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

#[cfg(test)]
mod tests {
    use keelson_db::now;

    use super::*;
    use crate::store::consumers::test_support::store;

    async fn create(store: &Store, name: &str, parent: Option<&str>) -> Provider {
        store.create_resource_provider(None, name, parent).await.unwrap()
    }

    /// Writes an inventory row directly (the inventory API is not under test).
    async fn inventory(store: &Store, rp: &Provider, class: &str, total: i64, max_unit: i64) {
        let mut tx = store.db.begin().await.unwrap();
        let rc = crate::store::resource_class_id(&mut tx, class).await.unwrap().unwrap();
        tx.execute(
            "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size, \
             allocation_ratio, created_at) VALUES (?, ?, ?, 0, 1, ?, 1, 1.0, ?)",
            &[rp.row.id.into(), rc.into(), total.into(), max_unit.into(), now().into()],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    async fn allocate(store: &Store, rp: &Provider, class: &str, used: i64) {
        let mut tx = store.db.begin().await.unwrap();
        let rc = crate::store::resource_class_id(&mut tx, class).await.unwrap().unwrap();
        tx.execute(
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at) VALUES (?, ?, ?, ?, ?)",
            &[rp.row.id.into(), "c1".into(), rc.into(), used.into(), now().into()],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    fn names(rps: &[Provider]) -> Vec<String> {
        let mut n: Vec<String> = rps.iter().map(|p| p.row.name.clone().unwrap_or_default()).collect();
        n.sort();
        n
    }

    async fn list(store: &Store, filter: ProviderFilter) -> Vec<String> {
        names(&store.list_resource_providers(&filter).await.unwrap())
    }

    #[tokio::test]
    async fn trees_record_parent_and_root() {
        let store = store().await;
        let root = create(&store, "root", None).await;
        assert_eq!(root.root_uuid, root.row.uuid);
        assert!(root.parent_uuid.is_none());
        let child = create(&store, "child", Some(&root.row.uuid)).await;
        let grandchild = create(&store, "grandchild", Some(&child.row.uuid)).await;
        assert_eq!(grandchild.root_uuid, root.row.uuid);
        assert_eq!(grandchild.parent_uuid.as_deref(), Some(child.row.uuid.as_str()));
        let shown = store.get_resource_provider(&grandchild.row.uuid).await.unwrap();
        assert_eq!((shown.root_uuid.as_str(), shown.row.generation), (root.row.uuid.as_str(), 0));

        let in_tree = ProviderFilter { in_tree: Some(grandchild.row.uuid.clone()), ..Default::default() };
        create(&store, "other", None).await;
        assert_eq!(list(&store, in_tree).await, ["child", "grandchild", "root"]);
        let unknown =
            ProviderFilter { in_tree: Some("00000000-0000-0000-0000-000000000000".into()), ..Default::default() };
        assert!(list(&store, unknown).await.is_empty());
    }

    #[tokio::test]
    async fn create_refuses_bad_parents_and_duplicates() {
        let store = store().await;
        let uuid = "11111111-2222-3333-4444-555555555555";
        let e = store.create_resource_provider(Some(uuid), "a", Some(uuid)).await.unwrap_err();
        assert!(
            matches!(e, Error::BadRequest(ref d) if d.ends_with("parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent."))
        );
        let e = store
            .create_resource_provider(Some(uuid), "a", Some("11111111-2222-3333-4444-000000000000"))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::BadRequest(ref d) if d.ends_with("parent provider UUID does not exist.")));
        store.create_resource_provider(Some(uuid), "a", None).await.unwrap();
        let e = store.create_resource_provider(Some(uuid), "b", None).await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(DUPLICATE_NAME, ref d) if d == &format!("Conflicting resource provider uuid: {uuid} already exists."))
        );
        let e = store.create_resource_provider(None, "a", None).await.unwrap_err();
        assert!(
            matches!(e, Error::Conflict(DUPLICATE_NAME, ref d) if d == "Conflicting resource provider name: a already exists.")
        );
    }

    #[tokio::test]
    async fn reparenting_needs_permission_and_moves_the_subtree() {
        let store = store().await;
        let r1 = create(&store, "r1", None).await;
        let r2 = create(&store, "r2", None).await;
        let c = create(&store, "c", Some(&r1.row.uuid)).await;
        let gc = create(&store, "gc", Some(&c.row.uuid)).await;

        // Giving a root its first parent is always allowed.
        let moved = store.update_resource_provider(&r2.row.uuid, "r2", Some(Some(&r1.row.uuid)), false).await.unwrap();
        assert_eq!(moved.root_uuid, r1.row.uuid);
        // Moving or un-parenting a child needs 1.37.
        let e = store.update_resource_provider(&c.row.uuid, "c", Some(Some(&r2.row.uuid)), false).await.unwrap_err();
        assert!(
            matches!(e, Error::BadRequest(ref d) if d.ends_with("re-parenting a provider is not currently allowed."))
        );
        let e = store.update_resource_provider(&c.row.uuid, "c", Some(None), false).await.unwrap_err();
        assert!(
            matches!(e, Error::BadRequest(ref d) if d.ends_with("un-parenting a provider is not currently allowed."))
        );
        // Naming the current parent again is no move.
        store.update_resource_provider(&c.row.uuid, "c2", Some(Some(&r1.row.uuid)), false).await.unwrap();

        // Un-parenting makes c the root of itself and of gc.
        let c = store.update_resource_provider(&c.row.uuid, "c", Some(None), true).await.unwrap();
        assert_eq!((c.root_uuid.as_str(), c.parent_uuid.as_deref()), (c.row.uuid.as_str(), None));
        let gc_now = store.get_resource_provider(&gc.row.uuid).await.unwrap();
        assert_eq!(gc_now.root_uuid, c.row.uuid);

        // And moving it under r2 (in r1's tree) takes gc along.
        store.update_resource_provider(&c.row.uuid, "c", Some(Some(&r2.row.uuid)), true).await.unwrap();
        let gc_now = store.get_resource_provider(&gc.row.uuid).await.unwrap();
        assert_eq!(gc_now.root_uuid, r1.row.uuid);
    }

    #[tokio::test]
    async fn cycles_are_refused() {
        let store = store().await;
        let r = create(&store, "r", None).await;
        let c = create(&store, "c", Some(&r.row.uuid)).await;
        let gc = create(&store, "gc", Some(&c.row.uuid)).await;
        for (who, parent) in [(&r, &gc), (&c, &gc), (&c, &c)] {
            let e = store
                .update_resource_provider(&who.row.uuid, "x", Some(Some(&parent.row.uuid)), true)
                .await
                .unwrap_err();
            assert!(
                matches!(e, Error::BadRequest(ref d) if d.ends_with("creating loop in the provider tree is not allowed.")),
                "{e:?}"
            );
        }
        let e = store.update_resource_provider(&r.row.uuid, "c", None, true).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(DUPLICATE_NAME, _)));
    }

    #[tokio::test]
    async fn delete_refuses_parents_and_providers_in_use() {
        let store = store().await;
        let r = create(&store, "r", None).await;
        let c = create(&store, "c", Some(&r.row.uuid)).await;
        let e = store.delete_resource_provider(&r.row.uuid).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(PROVIDER_CANNOT_DELETE_PARENT, _)));
        inventory(&store, &c, "VCPU", 8, 8).await;
        allocate(&store, &c, "VCPU", 1).await;
        let e = store.delete_resource_provider(&c.row.uuid).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(PROVIDER_IN_USE, _)));

        let lone = create(&store, "lone", None).await;
        inventory(&store, &lone, "VCPU", 8, 8).await;
        store.ensure_trait("CUSTOM_GOLD").await.unwrap();
        store.set_provider_traits(&lone.row.uuid, 0, &["CUSTOM_GOLD".into()]).await.unwrap();
        store
            .set_provider_aggregates(&lone.row.uuid, None, &["a0000000-0000-0000-0000-000000000000".into()])
            .await
            .unwrap();
        store.delete_resource_provider(&lone.row.uuid).await.unwrap();
        for table in ["inventories", "resource_provider_traits", "resource_provider_aggregates"] {
            let n = store
                .db
                .fetch_all(
                    &format!("SELECT COUNT(*) FROM {table} WHERE resource_provider_id = ?"),
                    &[lone.row.id.into()],
                )
                .await
                .unwrap();
            assert_eq!(n[0].i64(0).unwrap(), 0, "{table}");
        }
        let e = store.delete_resource_provider(&lone.row.uuid).await.unwrap_err();
        assert!(matches!(e, Error::NotFound(ref d) if d.ends_with("found for delete")));
    }

    #[tokio::test]
    async fn list_filters() {
        let store = store().await;
        let a = create(&store, "a", None).await;
        let b = create(&store, "b", None).await;
        let c = create(&store, "c", None).await;
        let (agg1, agg2) =
            ("a1000000-0000-0000-0000-000000000000".to_string(), "a2000000-0000-0000-0000-000000000000".to_string());
        store.set_provider_aggregates(&a.row.uuid, None, std::slice::from_ref(&agg1)).await.unwrap();
        store.set_provider_aggregates(&b.row.uuid, None, &[agg1.clone(), agg2.clone()]).await.unwrap();
        store.ensure_trait("CUSTOM_X").await.unwrap();
        store.ensure_trait("CUSTOM_Y").await.unwrap();
        store.set_provider_traits(&a.row.uuid, 0, &["CUSTOM_X".into()]).await.unwrap();
        store.set_provider_traits(&b.row.uuid, 0, &["CUSTOM_X".into(), "CUSTOM_Y".into()]).await.unwrap();
        store.set_provider_traits(&c.row.uuid, 0, &["CUSTOM_Y".into()]).await.unwrap();
        inventory(&store, &a, "VCPU", 4, 4).await;
        inventory(&store, &b, "VCPU", 8, 2).await;
        allocate(&store, &a, "VCPU", 3).await;

        let f = |edit: &dyn Fn(&mut ProviderFilter)| {
            let mut f = ProviderFilter::default();
            edit(&mut f);
            f
        };
        assert_eq!(list(&store, f(&|_| {})).await, ["a", "b", "c"]);
        assert_eq!(list(&store, f(&|f| f.name = Some("b".into()))).await, ["b"]);
        assert_eq!(list(&store, f(&|f| f.uuid = Some(c.row.uuid.clone()))).await, ["c"]);
        assert_eq!(list(&store, f(&|f| f.member_of = vec![vec![agg1.clone()]])).await, ["a", "b"]);
        assert_eq!(list(&store, f(&|f| f.member_of = vec![vec![agg1.clone()], vec![agg2.clone()]])).await, ["b"]);
        assert_eq!(
            list(&store, f(&|f| f.member_of = vec![vec!["ffffffff-0000-0000-0000-000000000000".into()]])).await,
            Vec::<String>::new()
        );
        assert_eq!(list(&store, f(&|f| f.forbidden_aggregates = vec![agg2.clone()])).await, ["a", "c"]);
        assert_eq!(
            list(&store, f(&|f| f.required_traits = vec![vec!["CUSTOM_X".into()], vec!["CUSTOM_Y".into()]])).await,
            ["b"]
        );
        assert_eq!(
            list(&store, f(&|f| f.required_traits = vec![vec!["CUSTOM_X".into(), "CUSTOM_Y".into()]])).await,
            ["a", "b", "c"]
        );
        assert_eq!(list(&store, f(&|f| f.forbidden_traits = vec!["CUSTOM_X".into()])).await, ["c"]);
        let e =
            store.list_resource_providers(&f(&|f| f.forbidden_traits = vec!["CUSTOM_NOPE".into()])).await.unwrap_err();
        assert!(matches!(e, Error::BadRequest(ref d) if d.ends_with("No such trait(s): CUSTOM_NOPE.")));
        // a has 1 VCPU free; b has 8 but at most 2 per allocation.
        assert_eq!(
            list(
                &store,
                f(&|f| {
                    f.resources.insert("VCPU".into(), 1);
                })
            )
            .await,
            ["a", "b"]
        );
        assert_eq!(
            list(
                &store,
                f(&|f| {
                    f.resources.insert("VCPU".into(), 2);
                })
            )
            .await,
            ["b"]
        );
        assert_eq!(
            list(
                &store,
                f(&|f| {
                    f.resources.insert("VCPU".into(), 3);
                })
            )
            .await,
            Vec::<String>::new()
        );
        let e = store
            .list_resource_providers(&f(&|f| {
                f.resources.insert("HOUSE".into(), 1);
            }))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::BadRequest(ref d) if d.ends_with("No such resource class HOUSE.")));
    }

    #[test]
    fn subtree_walk_survives_cycles() {
        let children = HashMap::from([(1, vec![2, 3]), (2, vec![4]), (4, vec![1])]);
        let mut got = descendants_and_self(1, &children);
        got.sort();
        assert_eq!(got, [1, 2, 3, 4]);
        assert_eq!(descendants_and_self(3, &children), [3]);
    }
}
