//! Heat 27.0.1's role-assignment mixin (`roles` of OS::Keystone::User and
//! OS::Keystone::Group) and the two types made of it alone,
//! OS::Keystone::UserRoleAssignment and OS::Keystone::GroupRoleAssignment.
//!
//! Each `roles` item grants a role on a project or on a domain. Create
//! grants them all; an update grants the items that are new and revokes
//! the ones that went (compared as written, resolved when sent); delete
//! revokes the items the actor still has. An assignment type whose user
//! or group is not found does nothing, as Heat's.

use std::collections::BTreeSet;
use std::sync::Arc;

use keelson_openstack::identity_admin::{Actor, Assignment, Entity, IdentityAdmin, Target};
use serde_json::Value;

use super::super::host::HostSlot;
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::{domain_id, failure, scoped_id, str_prop, KeystoneType};
use crate::error::EngineError;

/// The `roles` property.
pub(super) fn roles_property() -> PropertySchema {
    PropertySchema::new("roles", T::List, "List of role assignments.").update_allowed().list_of(
        PropertySchema::new("*", T::Map, "Map between role with either project or domain.").map_of(vec![
            PropertySchema::new("role", T::String, "Keystone role.")
                .required()
                .constraint(Constraint::custom("keystone.role")),
            PropertySchema::new("project", T::String, "Keystone project.")
                .constraint(Constraint::custom("keystone.project")),
            PropertySchema::new("domain", T::String, "Keystone domain.")
                .constraint(Constraint::custom("keystone.domain")),
        ]),
    )
}

/// Where one `roles` item grants its role, as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    Project(String),
    Domain(String),
}

/// One `roles` item as written: (role, scope). Items with neither a
/// project nor a domain grant nothing (validation refuses them).
pub(super) type Item = (String, Scope);

/// The `roles` items of `props`, in order.
pub(super) fn items(props: &Properties) -> Vec<Item> {
    let Some(list) = props.get("roles").and_then(Value::as_array) else { return Vec::new() };
    list.iter()
        .filter_map(|item| {
            let field = |k: &str| item.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
            let role = item.get("role").and_then(Value::as_str).unwrap_or_default().to_string();
            match (field("project"), field("domain")) {
                (Some(p), _) => Some((role, Scope::Project(p))),
                (None, Some(d)) => Some((role, Scope::Domain(d))),
                (None, None) => None,
            }
        })
        .collect()
}

/// Heat's `validate_assignment_properties`.
pub(super) fn validate_roles(props: &Properties) -> Result<(), EngineError> {
    let Some(list) = props.get("roles").and_then(Value::as_array) else { return Ok(()) };
    for item in list {
        let given = |k: &str| item.get(k).is_some_and(|v| !v.is_null());
        match (given("project"), given("domain")) {
            (true, true) => {
                return Err(EngineError::validation(
                    "Cannot define the following properties at the same time: project, domain.",
                ))
            }
            (false, false) => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("None");
                return Err(EngineError::validation(format!(
                    "Either project or domain must be specified for role {role}"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The items to grant and to revoke going from `old` to `new` (Heat's
/// `_find_differences`: set differences of the items as written).
pub(super) fn differences(new: &[Item], old: &[Item]) -> (Vec<Item>, Vec<Item>) {
    let new_set: BTreeSet<&Item> = new.iter().collect();
    let old_set: BTreeSet<&Item> = old.iter().collect();
    let added = new_set.difference(&old_set).map(|i| (*i).clone()).collect();
    let removed = old_set.difference(&new_set).map(|i| (*i).clone()).collect();
    (added, removed)
}

/// An item resolved to ids.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resolved {
    role_id: String,
    target: ResolvedTarget,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ResolvedTarget {
    Project(String),
    Domain(String),
}

impl Resolved {
    fn target(&self) -> Target<'_> {
        match &self.target {
            ResolvedTarget::Project(p) => Target::Project(p),
            ResolvedTarget::Domain(d) => Target::Domain(d),
        }
    }

    /// Whether the actor has this grant now.
    fn is_in(&self, current: &[Assignment]) -> bool {
        current.iter().any(|a| {
            a.role_id == self.role_id
                && match &self.target {
                    ResolvedTarget::Project(p) => a.project_id.as_deref() == Some(p) && a.domain_id.is_none(),
                    ResolvedTarget::Domain(d) => a.domain_id.as_deref() == Some(d) && a.project_id.is_none(),
                }
        })
    }
}

async fn resolve(api: &IdentityAdmin<'_>, items: &[Item]) -> Result<Vec<Resolved>, super::ResourceFailure> {
    let mut out = Vec::with_capacity(items.len());
    for (role, scope) in items {
        let role_id = scoped_id(api, Entity::Role, role).await?;
        let target = match scope {
            Scope::Project(p) => ResolvedTarget::Project(scoped_id(api, Entity::Project, p).await?),
            Scope::Domain(d) => ResolvedTarget::Domain(domain_id(api, d).await?),
        };
        out.push(Resolved { role_id, target });
    }
    Ok(out)
}

/// Grants every item to `actor`.
pub(super) async fn grant(api: &IdentityAdmin<'_>, actor: Actor<'_>, items: &[Item]) -> ActionResult {
    for r in resolve(api, items).await? {
        api.grant(r.target(), actor, &r.role_id).await.map_err(failure)?;
    }
    Ok(())
}

/// Revokes the items `actor` still has.
pub(super) async fn revoke(api: &IdentityAdmin<'_>, actor: Actor<'_>, items: &[Item]) -> ActionResult {
    let resolved = resolve(api, items).await?;
    let current = api.role_assignments(actor).await.map_err(failure)?;
    for r in resolved.iter().filter(|r| r.is_in(&current)) {
        api.revoke(r.target(), actor, &r.role_id).await.map_err(failure)?;
    }
    Ok(())
}

/// Heat's `update_assignment`: only when `roles` changed.
pub(super) async fn update(
    api: &IdentityAdmin<'_>,
    actor: Actor<'_>,
    old: &Properties,
    new: &Properties,
) -> ActionResult {
    if !changed_properties(old, new).iter().any(|k| k == "roles") {
        return Ok(());
    }
    let (added, removed) = differences(&items(new), &items(old));
    if !added.is_empty() {
        grant(api, actor, &added).await?;
    }
    if !removed.is_empty() {
        revoke(api, actor, &removed).await?;
    }
    Ok(())
}

/// Which actor an assignment type grants to.
#[derive(Debug, Clone, Copy)]
enum ActorKind {
    User,
    Group,
}

/// OS::Keystone::UserRoleAssignment or OS::Keystone::GroupRoleAssignment.
pub struct RoleAssignment {
    host: Arc<HostSlot>,
    kind: ActorKind,
    schema: ResourceSchema,
}

impl RoleAssignment {
    pub fn user(host: Arc<HostSlot>) -> Self {
        Self::new(host, ActorKind::User)
    }

    pub fn group(host: Arc<HostSlot>) -> Self {
        Self::new(host, ActorKind::Group)
    }

    fn new(host: Arc<HostSlot>, kind: ActorKind) -> Self {
        let (actor, description, constraint, doc) = match kind {
            ActorKind::User => (
                "user",
                "Name or id of keystone user.",
                "keystone.user",
                "Resource for granting roles to a user.\n\nResource for specifying users and their's roles.",
            ),
            ActorKind::Group => (
                "group",
                "Name or id of keystone group.",
                "keystone.group",
                "Resource for granting roles to a group.\n\nResource for specifying groups and their's roles.",
            ),
        };
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new(actor, T::String, description)
                    .required()
                    .update_allowed()
                    .constraint(Constraint::custom(constraint)),
                roles_property(),
            ],
            attributes: vec![],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("5.0.0")
            },
            description: doc,
        };
        RoleAssignment { host, kind, schema }
    }

    fn actor_property(&self) -> &'static str {
        match self.kind {
            ActorKind::User => "user",
            ActorKind::Group => "group",
        }
    }

    /// The actor's id; None when Keystone has no such user or group (Heat
    /// then grants and revokes nothing).
    async fn actor_id(
        &self,
        api: &IdentityAdmin<'_>,
        props: &Properties,
    ) -> Result<Option<String>, super::ResourceFailure> {
        let Some(value) = str_prop(props, self.actor_property()) else { return Ok(None) };
        let entity = match self.kind {
            ActorKind::User => Entity::User,
            ActorKind::Group => Entity::Group,
        };
        match scoped_id(api, entity, value).await {
            Ok(id) => Ok(Some(id)),
            Err(f) if is_not_found(&f) => Ok(None),
            Err(f) => Err(f),
        }
    }

    fn actor<'a>(&self, id: &'a str) -> Actor<'a> {
        match self.kind {
            ActorKind::User => Actor::User(id),
            ActorKind::Group => Actor::Group(id),
        }
    }
}

/// Whether a failure is Keystone's or Heat's "not found".
pub(super) fn is_not_found(f: &super::ResourceFailure) -> bool {
    matches!(f.exception(), Some(("EntityNotFound" | "NotFound", _)))
}

impl KeystoneType for RoleAssignment {
    const TYPE: &'static str = "OS::Keystone::UserRoleAssignment";

    fn type_name(&self) -> &'static str {
        match self.kind {
            ActorKind::User => "OS::Keystone::UserRoleAssignment",
            ActorKind::Group => "OS::Keystone::GroupRoleAssignment",
        }
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        validate_roles(props)
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = self.actor_id(api, &ctx.properties).await? else { return Ok(()) };
        grant(api, self.actor(&id), &items(&ctx.properties)).await
    }

    /// Grants and revokes for the user or group the resource had before
    /// the update: Heat resolves its actor from the old properties here,
    /// so a new `user` or `group` alone moves no grant.
    async fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
        _id: &str,
    ) -> ActionResult {
        let Some(id) = self.actor_id(api, old).await? else { return Ok(()) };
        update(api, self.actor(&id), old, &ctx.properties).await
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext, _id: &str) -> ActionResult {
        let revoked = match self.actor_id(api, &ctx.properties).await? {
            Some(id) => revoke(api, self.actor(&id), &items(&ctx.properties)).await,
            None => Ok(()),
        };
        match revoked {
            Err(f) if is_not_found(&f) => Ok(()),
            other => other,
        }
    }

    /// The grants are the actor's, named by the properties: an update
    /// always has them to reconcile.
    fn update_target(&self, ctx: &ActionContext, _old: &Properties) -> Option<String> {
        Some(ctx.state.physical_id.clone().unwrap_or_default())
    }

    /// A delete always revokes them.
    fn delete_target(&self, ctx: &ActionContext) -> Option<String> {
        Some(ctx.state.physical_id.clone().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    fn props(v: Value) -> Properties {
        let rt: Arc<dyn ResourceType> = Arc::new(RoleAssignment::user(Arc::new(HostSlot::default())));
        rt.validate_properties("ra", &v).unwrap()
    }

    #[test]
    fn schemas_are_heats() {
        assert_schema_as_heat("OS::Keystone::UserRoleAssignment");
        assert_schema_as_heat("OS::Keystone::GroupRoleAssignment");
    }

    #[test]
    fn each_item_needs_exactly_one_of_project_and_domain() {
        let rt: Arc<dyn ResourceType> = Arc::new(RoleAssignment::group(Arc::new(HostSlot::default())));
        let err = |v: Value| rt.validate_properties("ra", &v).unwrap_err().message();
        assert!(err(json!({"group": "g", "roles": [{"role": "r", "project": "p", "domain": "d"}]}))
            .contains("Cannot define the following properties at the same time: project, domain."));
        assert!(err(json!({"group": "g", "roles": [{"role": "r"}]}))
            .contains("Either project or domain must be specified for role r"));
        assert!(rt.validate_properties("ra", &json!({"group": "g", "roles": [{"role": "r", "domain": "d"}]})).is_ok());
    }

    #[test]
    fn differences_are_set_differences_of_the_items_as_written() {
        let old = items(&props(json!({"user": "u", "roles": [
            {"role": "a", "project": "p"}, {"role": "b", "domain": "d"}]})));
        let new = items(&props(json!({"user": "u", "roles": [
            {"role": "a", "project": "p"}, {"role": "c", "project": "p"}]})));
        let (added, removed) = differences(&new, &old);
        assert_eq!(added, [("c".to_string(), Scope::Project("p".into()))]);
        assert_eq!(removed, [("b".to_string(), Scope::Domain("d".into()))]);
    }

    #[test]
    fn revokes_only_what_the_actor_has() {
        let r = Resolved { role_id: "r".into(), target: ResolvedTarget::Project("p".into()) };
        let on_p = Assignment { role_id: "r".into(), project_id: Some("p".into()), domain_id: None };
        let on_d = Assignment { role_id: "r".into(), project_id: None, domain_id: Some("p".into()) };
        assert!(r.is_in(&[on_p]));
        assert!(!r.is_in(&[on_d]));
    }

    #[test]
    fn everything_updates_in_place() {
        let rt: Arc<dyn ResourceType> = Arc::new(RoleAssignment::user(Arc::new(HostSlot::default())));
        let old = props(json!({"user": "u", "roles": [{"role": "a", "project": "p"}]}));
        let new = props(json!({"user": "v", "roles": []}));
        assert_eq!(rt.update_decision(&old, &new), UpdateDecision::InPlace);
    }
}
