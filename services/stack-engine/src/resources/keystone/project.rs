//! OS::Keystone::Project: a Keystone project, as Heat 27.0.1's
//! `KeystoneProject`. Everything but `parent` updates in place (a new
//! `domain` is sent and Keystone refuses a move). Delete first removes the
//! `default` security groups Neutron made for the project, when the
//! catalog has a network service, as Heat does.

use std::sync::Arc;

use keelson_openstack::identity_admin::{Entity, IdentityAdmin};
use keelson_openstack::network::Network;
use keelson_openstack::{OsError, Session};
use serde_json::{json, Map, Value};

use super::super::host::HostSlot;
use super::super::schema::{
    AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus,
};
use super::super::{changed_properties, ActionContext, ActionResult, Properties};
use super::{domain_id, entity_name, failure, fields, remember, scoped_id, str_prop, KeystoneType};

pub struct Project {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// The fields of `POST /v3/projects` (null ones are left out).
fn create_fields(props: &Properties, name: &str, domain_id: &str, parent_id: Option<&str>) -> Map<String, Value> {
    fields([
        ("name", json!(name)),
        ("domain_id", json!(domain_id)),
        ("description", props.get("description").cloned().unwrap_or(Value::Null)),
        ("enabled", props.get("enabled").cloned().unwrap_or(Value::Null)),
        ("parent_id", json!(parent_id)),
        ("tags", props.get("tags").cloned().unwrap_or(Value::Null)),
    ])
}

/// The fields of `PATCH /v3/projects/{id}` for the properties in `diff`:
/// name, description and enabled only when they changed (a cleared name
/// is the physical name again); the domain and the tags always (Heat sends
/// the old tags when the new list is empty).
fn update_fields(
    old: &Properties,
    new: &Properties,
    diff: &[String],
    name: &str,
    domain_id: &str,
) -> Map<String, Value> {
    let non_empty = |p: &Properties| p.get("tags").filter(|t| t.as_array().is_some_and(|a| !a.is_empty())).cloned();
    let tags = non_empty(new).or_else(|| old.get("tags").cloned()).unwrap_or(Value::Null);
    let in_diff = |k: &str| diff.iter().any(|d| d == k);
    let changed_value = |k: &str| if in_diff(k) { new.get(k).cloned().unwrap_or(Value::Null) } else { Value::Null };
    fields([
        ("name", if in_diff("name") { json!(name) } else { Value::Null }),
        ("description", changed_value("description")),
        ("enabled", changed_value("enabled")),
        ("domain_id", json!(domain_id)),
        ("tags", tags),
    ])
}

impl Project {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let schema = ResourceSchema {
            properties: vec![
                PropertySchema::new("name", T::String, "Name of keystone project.").update_allowed(),
                PropertySchema::new("domain", T::String, "Name or id of keystone domain.")
                    .default_value("default")
                    .update_allowed()
                    .constraint(Constraint::custom("keystone.domain")),
                PropertySchema::new("description", T::String, "Description of keystone project.")
                    .default_value("")
                    .update_allowed(),
                PropertySchema::new("enabled", T::Boolean, "This project is enabled or disabled.")
                    .default_value(true)
                    .update_allowed(),
                PropertySchema::new(
                    "parent",
                    T::String,
                    "The name or ID of parent of this keystone project in hierarchy.",
                )
                .constraint(Constraint::custom("keystone.project")),
                PropertySchema::new("tags", T::List, "A list of tags for labeling and sorting projects.")
                    .default_value(json!([]))
                    .update_allowed(),
            ],
            attributes: vec![
                AttributeSchema::new("name", "Project name.", Some("string")),
                AttributeSchema::new("parent_id", "Parent project id.", Some("string")),
                AttributeSchema::new("domain_id", "Domain id for project.", Some("string")),
                AttributeSchema::new("enabled", "Flag of enable project.", Some("boolean")),
                AttributeSchema::new("is_domain", "Indicates whether the project also acts as a domain.", Some("boolean")),
            ],
            support_status: SupportStatus {
                message: Some("Supported versions: keystone v3"),
                ..SupportStatus::supported("2015.1")
            },
            description: "Heat Template Resource for Keystone Project.\n\nProjects represent the base unit of ownership in OpenStack, in that all\nresources in OpenStack should be owned by a specific project. A project\nitself must be owned by a specific domain, and hence all project names are\nnot globally unique, but unique to their domain. If the domain for a\nproject is not specified, then it is added to the default domain.",
        };
        Project { host, schema }
    }

    /// Deletes the `default` security groups Neutron keeps for the project
    /// (Neutron makes one per project and never removes it). Without a
    /// network service in the catalog there is nothing to remove.
    async fn delete_default_security_groups(session: &Session, project_id: &str) -> Result<(), OsError> {
        let endpoint = match session.client_endpoint("neutron", "network").await {
            Ok(url) => url,
            Err(OsError::EndpointNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let network = Network::new(session, &endpoint);
        for id in network.security_group_ids(project_id, "default").await? {
            network.delete_security_group(&id).await?;
        }
        Ok(())
    }
}

impl KeystoneType for Project {
    const TYPE: &'static str = "OS::Keystone::Project";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, api: &IdentityAdmin<'_>, ctx: &mut ActionContext) -> ActionResult {
        let domain = domain_id(api, str_prop(&ctx.properties, "domain").unwrap_or("default")).await?;
        let parent = match str_prop(&ctx.properties, "parent") {
            Some(p) => Some(scoped_id(api, Entity::Project, p).await?),
            None => None,
        };
        let name = entity_name(ctx);
        let body = create_fields(&ctx.properties, &name, &domain, parent.as_deref());
        let project = api.create(Entity::Project, body).await.map_err(failure)?;
        remember(&mut ctx.state, &project);
        Ok(())
    }

    async fn update_with(
        &self,
        api: &IdentityAdmin<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
        id: &str,
    ) -> ActionResult {
        let diff = changed_properties(old, &ctx.properties);
        let domain = domain_id(api, str_prop(&ctx.properties, "domain").unwrap_or("default")).await?;
        let name = entity_name(ctx);
        let body = update_fields(old, &ctx.properties, &diff, &name, &domain);
        let project = api.update(Entity::Project, id, body).await.map_err(failure)?;
        remember(&mut ctx.state, &project);
        Ok(())
    }

    async fn delete_with(&self, api: &IdentityAdmin<'_>, _ctx: &mut ActionContext, id: &str) -> ActionResult {
        Self::delete_default_security_groups(api.session(), id).await.map_err(failure)?;
        api.delete(Entity::Project, id).await.map_err(failure)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::assert_schema_as_heat;
    use super::*;
    use crate::resources::{ResourceState, ResourceType, UpdateDecision};

    fn plugin() -> Arc<dyn ResourceType> {
        Arc::new(Project::new(Arc::new(HostSlot::default())))
    }

    #[test]
    fn schema_is_heats() {
        assert_schema_as_heat("OS::Keystone::Project");
    }

    #[test]
    fn create_body_has_heats_defaults_and_leaves_out_a_missing_parent() {
        let rt = plugin();
        let props = rt.validate_properties("p", &json!({})).unwrap();
        assert_eq!(
            Value::Object(create_fields(&props, "st-p-abc", "default", None)),
            json!({"name": "st-p-abc", "domain_id": "default", "description": "", "enabled": true,
                   "parent_id": null, "tags": []})
        );
        let props = rt
            .validate_properties("p", &json!({"name": "n", "enabled": false, "tags": ["a"], "parent": "top"}))
            .unwrap();
        let body = create_fields(&props, "n", "d1", Some("p0"));
        assert_eq!(body["parent_id"], json!("p0"));
        assert_eq!(body["tags"], json!(["a"]));
        assert_eq!(body["enabled"], json!(false));
    }

    #[test]
    fn update_body_sends_what_changed_plus_domain_and_tags() {
        let rt = plugin();
        let old = rt.validate_properties("p", &json!({"name": "a", "description": "d"})).unwrap();
        let new = rt.validate_properties("p", &json!({"name": "a", "description": "e"})).unwrap();
        let diff = changed_properties(&old, &new);
        assert_eq!(
            Value::Object(keelson_openstack::identity_admin::without_nulls(update_fields(
                &old, &new, &diff, "a", "default"
            ))),
            json!({"description": "e", "domain_id": "default", "tags": []})
        );
        // A cleared name is the physical name again.
        let cleared = rt.validate_properties("p", &json!({"description": "d"})).unwrap();
        let diff = changed_properties(&old, &cleared);
        assert_eq!(update_fields(&old, &cleared, &diff, "st-p-abc", "default")["name"], json!("st-p-abc"));
        // Emptied tags: Heat sends the old ones.
        let tagged = rt.validate_properties("p", &json!({"name": "a", "tags": ["x"]})).unwrap();
        let untagged = rt.validate_properties("p", &json!({"name": "a"})).unwrap();
        let diff = changed_properties(&tagged, &untagged);
        assert_eq!(update_fields(&tagged, &untagged, &diff, "a", "default")["tags"], json!(["x"]));
    }

    #[test]
    fn only_a_new_parent_replaces() {
        let rt = plugin();
        let props = |v: Value| rt.validate_properties("p", &v).unwrap();
        let base = props(json!({"name": "a"}));
        for changed in [
            json!({"name": "b"}),
            json!({"name": "a", "domain": "other"}),
            json!({"name": "a", "enabled": false}),
            json!({"name": "a", "tags": ["x"]}),
            json!({"name": "a", "description": "x"}),
        ] {
            assert_eq!(rt.update_decision(&base, &props(changed.clone())), UpdateDecision::InPlace, "{changed}");
        }
        assert_eq!(rt.update_decision(&base, &props(json!({"name": "a", "parent": "x"}))), UpdateDecision::Replace);
    }

    #[tokio::test]
    async fn attributes_and_delete_without_a_project() {
        let rt = plugin();
        let mut state = ResourceState::default();
        assert_eq!(rt.attribute(&state, "domain_id").await.unwrap(), Value::Null);
        super::super::remember(&mut state, &json!({"id": "p1", "domain_id": "default", "is_domain": false}));
        assert_eq!(rt.attribute(&state, "domain_id").await.unwrap(), json!("default"));
        assert_eq!(rt.attribute(&state, "is_domain").await.unwrap(), json!(false));
        let (mut ctx, _tx) = crate::resources::context::test_context(Properties::new());
        assert_eq!(rt.delete(&mut ctx).await, Ok(()));
    }
}
