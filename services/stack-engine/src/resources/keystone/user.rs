//! OS::Keystone::User: a Keystone user with its group memberships and role
//! assignments, as Heat 27.0.1's `KeystoneUser`. Every property updates in
//! place. The group ids the user was last put in are kept in the resource
//! data (Heat keeps them as resolved properties): an update adds and
//! removes the difference, delete leaves them before the user goes.

use std::sync::Arc;

use keelson_openstack::identity_admin::{Actor, Entity, IdentityAdmin};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{
    AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus,
};
use super::super::{changed_properties, ActionContext, ActionResult, Properties, ResourceState};
use super::group::update_domain;
use super::role_assignments::{self, is_not_found, roles_property, validate_roles};
use super::{domain_id, entity_name, failure, fields, remember, scoped_id, str_prop, KeystoneType, ResourceFailure};
use crate::error::EngineError;

/// Resource data key of the group ids the user is in (a JSON list).
const GROUPS_DATA: &str = "group_ids";

pub struct User {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// A property's value, Null when absent.
fn prop(props: &Properties, name: &str) -> Value {
    props.get(name).cloned().unwrap_or(Value::Null)
}

/// The fields of `POST /v3/users`.
fn create_fields(props: &Properties, name: &str, domain_id: &str, default_project: Option<&str>) -> Map<String, Value> {
    fields([
        ("name", json!(name)),
        ("domain_id", json!(domain_id)),
        ("default_project_id", json!(default_project)),
        ("password", prop(props, "password")),
        ("email", prop(props, "email")),
        ("description", prop(props, "description")),
        ("enabled", prop(props, "enabled")),
    ])
}

/// The fields of `PATCH /v3/users/{id}`: the changed ones among name,
/// description, email, password, default project and enabled, plus the
/// domain; None when none of them has a value (Keystone refuses an empty
/// update, so Heat sends none).
fn update_fields(
    new: &Properties,
    diff: &[String],
    name: &str,
    domain_id: &str,
    default_project: Option<&str>,
) -> Option<Map<String, Value>> {
    let in_diff = |k: &str| diff.iter().any(|d| d == k);
    let changed_value = |k: &str| if in_diff(k) { prop(new, k) } else { Value::Null };
    let values = fields([
        ("name", if in_diff("name") { json!(name) } else { Value::Null }),
        ("description", changed_value("description")),
        ("email", changed_value("email")),
        ("password", changed_value("password")),
        ("default_project_id", json!(default_project.filter(|_| in_diff("default_project")))),
        ("enabled", changed_value("enabled")),
    ]);
    if values.values().all(Value::is_null) {
        return None;
    }
    let mut values = values;
    values.insert("domain_id".into(), json!(domain_id));
    Some(values)
}

/// The group ids the user was last put in.
fn stored_groups(state: &ResourceState) -> Vec<String> {
    state.data.get(GROUPS_DATA).and_then(|g| serde_json::from_str(g).ok()).unwrap_or_default()
}

/// The ids of the `groups` property's groups.
async fn group_ids(api: &IdentityAdmin<'_>, props: &Properties) -> Result<Vec<String>, ResourceFailure> {
    let names: Vec<&str> = props
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| g.iter().filter_map(Value::as_str).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        ids.push(scoped_id(api, Entity::Group, name).await?);
    }
    Ok(ids)
}

impl User {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "Name of keystone user.").update_allowed(),
                PropertySchema::new("domain", T::String, "Name or ID of keystone domain.")
                    .default_value("default")
                    .update_allowed()
                    .constraint(Constraint::custom("keystone.domain")),
                PropertySchema::new("description", T::String, "Description of keystone user.")
                    .default_value("")
                    .update_allowed(),
                PropertySchema::new("enabled", T::Boolean, "Keystone user is enabled or disabled.")
                    .default_value(true)
                    .update_allowed(),
                PropertySchema::new("email", T::String, "Email address of keystone user.").update_allowed(),
                PropertySchema::new("password", T::String, "Password of keystone user.").update_allowed(),
                PropertySchema::new("default_project", T::String, "Name or ID of default project of keystone user.")
                    .update_allowed()
                    .constraint(Constraint::custom("keystone.project")),
                PropertySchema::new("groups", T::List, "Keystone user groups.").update_allowed().list_of(
                    PropertySchema::new("*", T::String, "Keystone user group.")
                        .constraint(Constraint::custom("keystone.group")),
                ),
                roles_property(),
            ],
            attributes: vec![
                AttributeSchema::new("name", "User name.", Some("string")),
                AttributeSchema::new("default_project_id", "Default project id for user.", Some("string")),
                AttributeSchema::new("domain_id", "Domain id for user.", Some("string")),
                AttributeSchema::new("enabled", "Flag of enable user.", Some("boolean")),
                AttributeSchema::new("password_expires_at", "Show user password expiration time.", Some("string")),
            ],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("2015.1")
            },
            description: "Heat Template Resource for Keystone User.\n\nUsers represent an individual API consumer. A user itself must be owned by\na specific domain, and hence all user names are not globally unique, but\nonly unique to their domain.",
        };
        User { host, schema }
    }
}

impl KeystoneType for User {
    const TYPE: &'static str = "OS::Keystone::User";

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
        let domain = domain_id(api, str_prop(&ctx.properties, "domain").unwrap_or("default")).await?;
        let default_project = match str_prop(&ctx.properties, "default_project") {
            Some(p) => Some(scoped_id(api, Entity::Project, p).await?),
            None => None,
        };
        let groups = group_ids(api, &ctx.properties).await?;
        let name = entity_name(ctx);
        let body = create_fields(&ctx.properties, &name, &domain, default_project.as_deref());
        let user = api.create(Entity::User, body).await.map_err(failure)?;
        remember(&mut ctx.state, &user);
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        for group in &groups {
            api.add_to_group(&id, group).await.map_err(failure)?;
        }
        ctx.state.data.insert(GROUPS_DATA.into(), json!(groups).to_string());
        role_assignments::grant(api, Actor::User(&id), &role_assignments::items(&ctx.properties)).await
    }

    async fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
        id: &str,
    ) -> ActionResult {
        let diff = changed_properties(old, &ctx.properties);
        let default_project = match str_prop(&ctx.properties, "default_project") {
            Some(p) if diff.iter().any(|d| d == "default_project") => Some(scoped_id(api, Entity::Project, p).await?),
            _ => None,
        };
        let domain = domain_id(api, update_domain(old, &ctx.properties, &diff)).await?;
        let name = entity_name(ctx);
        if let Some(body) = update_fields(&ctx.properties, &diff, &name, &domain, default_project.as_deref()) {
            let user = api.update(Entity::User, id, body).await.map_err(failure)?;
            remember(&mut ctx.state, &user);
        }
        if diff.iter().any(|d| d == "groups") {
            let new = group_ids(api, &ctx.properties).await?;
            let old = stored_groups(&ctx.state);
            for group in new.iter().filter(|g| !old.contains(g)) {
                api.add_to_group(id, group).await.map_err(failure)?;
            }
            for group in old.iter().filter(|g| !new.contains(g)) {
                api.remove_from_group(id, group).await.map_err(failure)?;
            }
            ctx.state.data.insert(GROUPS_DATA.into(), json!(new).to_string());
        }
        role_assignments::update(api, Actor::User(id), old, &ctx.properties).await
    }

    /// Leaves the groups, then deletes the user; a "not found" on the way
    /// ends the delete as done (Heat's one `ignore_not_found` around both).
    async fn delete_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        let result = async {
            for group in stored_groups(&ctx.state) {
                api.remove_from_group(id, &group).await.map_err(failure)?;
            }
            api.delete(Entity::User, id).await.map_err(failure)
        }
        .await;
        match result {
            Err(f) if is_not_found(&f) => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceType, UpdateDecision};

    fn plugin() -> Arc<dyn ResourceType> {
        Arc::new(User::new(Arc::new(HostSlot::default())))
    }

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::User");
    }

    #[test]
    fn create_body() {
        let rt = plugin();
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        let props = rt.validate_properties("u", &json!({"password": "pw", "email": "a@b"})).unwrap();
        assert_eq!(
            strip(create_fields(&props, "st-u-x", "default", Some("p1"))),
            json!({"name": "st-u-x", "domain_id": "default", "default_project_id": "p1", "password": "pw",
                   "email": "a@b", "description": "", "enabled": true})
        );
    }

    #[test]
    fn update_body_only_with_a_user_field_changed() {
        let rt = plugin();
        let props = |v: Value| rt.validate_properties("u", &v).unwrap();
        let old = props(json!({"name": "a"}));
        let new = props(json!({"name": "a", "password": "new"}));
        let diff = changed_properties(&old, &new);
        let strip = |m| Value::Object(keelson_openstack::identity_admin::without_nulls(m));
        assert_eq!(
            update_fields(&new, &diff, "a", "default", None).map(strip),
            Some(json!({"password": "new", "domain_id": "default"}))
        );
        // Groups alone: no user update.
        let grouped = props(json!({"name": "a", "groups": ["g"]}));
        assert_eq!(update_fields(&grouped, &changed_properties(&old, &grouped), "a", "default", None), None);
        assert_eq!(rt.update_decision(&old, &grouped), UpdateDecision::InPlace);
    }

    #[test]
    fn stored_groups_read_back() {
        let mut state = ResourceState::default();
        assert!(stored_groups(&state).is_empty());
        state.data.insert(GROUPS_DATA.into(), json!(["g1", "g2"]).to_string());
        assert_eq!(stored_groups(&state), ["g1", "g2"]);
    }
}
