//! OS::Cinder::VolumeType: a Cinder volume type (admin, by Heat's and
//! Cinder's default policies).
//!
//! Physical id (and `get_resource`) = the type's id. Every property
//! changes in place: name, description and is_public through `PUT
//! /types/{id}`, `metadata` (the extra specs: all old keys unset, the new
//! ones set), and `projects` (the access list of a private type: projects
//! removed and added by difference). `projects` name Keystone projects by
//! name or id (`keystone.project`), resolved through Keystone.

use std::collections::BTreeSet;
use std::sync::Arc;

use keelson_openstack::volume::Volume;
use keelson_openstack::Session;
use serde_json::{json, Value};

use super::super::nova::{
    attribute_error, attribute_session, keystone_id, stack_session, str_prop, Entity, STACK_DATA,
};
use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    changed_properties, ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState,
    SupportStatus,
};
use super::{conflict_retryable, failure, volume_client, with_delete_retries};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct VolumeType {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

fn is_public(props: &Properties) -> bool {
    props.get("is_public").and_then(Value::as_bool).unwrap_or(true)
}

impl VolumeType {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("name", T::String, "Name of the volume type.").required().update_allowed(),
            PropertySchema::new("metadata", T::Map, "The extra specs key and value pairs of the volume type.")
                .update_allowed(),
            PropertySchema::new("is_public", T::Boolean, "Whether the volume type is accessible to the public.")
                .default_value(true)
                .update_allowed(),
            PropertySchema::new("description", T::String, "Description of the volume type.").update_allowed(),
            PropertySchema::new(
                "projects",
                T::List,
                "Projects to add volume type access to. NOTE: This property is only supported since Cinder API V2.",
            )
            .update_allowed()
            .list_of(PropertySchema::new("*", T::String, "").constraint(Constraint::custom("keystone.project")))
            .default_value(json!([])),
        ];
        VolumeType {
            host,
            schema: ResourceSchema {
                properties,
                attributes: vec![],
                support_status: SupportStatus::supported("2015.1"),
                description: "A resource for creating cinder volume types.\n\nVolume type resource allows to define, whether volume, which will be use\nthis type, will public and which projects are allowed to work with it.\nAlso, there can be some user-defined metadata.\n\nNote that default cinder security policy usage of this resource\nis limited to being used by administrators only.",
            },
        }
    }

    /// The project ids `projects` names.
    async fn projects(session: &Session, props: &Properties) -> Result<Vec<String>, ResourceFailure> {
        let mut ids = Vec::new();
        for p in props.get("projects").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            ids.push(keystone_id(session, Entity::Project, p).await?);
        }
        Ok(ids)
    }

    async fn create_with(&self, session: &Session, volumes: &Volume<'_>, ctx: &mut ActionContext) -> ActionResult {
        let props = &ctx.properties;
        let name = props.get("name").and_then(Value::as_str).unwrap_or_default();
        let description = props.get("description").and_then(Value::as_str);
        let id = volumes.create_type(name, description, is_public(props)).await.map_err(failure)?;
        ctx.state.physical_id = Some(id.clone());
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        if let Some(specs) = props.get("metadata").and_then(Value::as_object).filter(|m| !m.is_empty()) {
            volumes.set_type_extra_specs(&id, specs).await.map_err(failure)?;
        }
        for project in Self::projects(session, props).await? {
            volumes.set_type_access(&id, &project, true).await.map_err(failure)?;
        }
        Ok(())
    }

    async fn update_with(
        &self,
        session: &Session,
        volumes: &Volume<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
    ) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let props = &ctx.properties;
        let changed = changed_properties(old, props);
        let has = |name: &str| changed.iter().any(|c| c == name);
        if has("name") || has("description") || has("is_public") {
            let name = if has("name") { str_prop(props, "name") } else { None };
            let description = if has("description") { props.get("description").and_then(Value::as_str) } else { None };
            let public = has("is_public").then(|| is_public(props));
            volumes.update_type(&id, name, description, public).await.map_err(failure)?;
        }
        if has("metadata") {
            for key in volumes.type_extra_specs(&id).await.map_err(failure)?.keys() {
                volumes.unset_type_extra_spec(&id, key).await.map_err(failure)?;
            }
            if let Some(specs) = props.get("metadata").and_then(Value::as_object) {
                volumes.set_type_extra_specs(&id, specs).await.map_err(failure)?;
            }
        }
        if has("projects") && !is_public(props) {
            let before: BTreeSet<String> = volumes.type_access(&id).await.map_err(failure)?.into_iter().collect();
            let after: BTreeSet<String> = Self::projects(session, props).await?.into_iter().collect();
            for project in before.difference(&after) {
                volumes.set_type_access(&id, project, false).await.map_err(failure)?;
            }
            for project in after.difference(&before) {
                volumes.set_type_access(&id, project, true).await.map_err(failure)?;
            }
        }
        Ok(())
    }
}

impl Plugin for VolumeType {
    const TYPE: &'static str = "OS::Cinder::VolumeType";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::CINDER)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let has_projects = props.get("projects").and_then(Value::as_array).is_some_and(|p| !p.is_empty());
        if has_projects && is_public(props) {
            return Err(EngineError::validation("Can not specify property \"projects\" if the volume type is public."));
        }
        Ok(())
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        self.create_with(&session, &volumes, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        self.update_with(&session, &volumes, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let volumes = volume_client(&session).await?;
        with_delete_retries(ctx, || async { conflict_retryable(volumes.delete_type(&id).await) }).await
    }

    /// `show`: the type as Cinder shows it now (Heat's `_show_resource`).
    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let (Some(id), "show") = (&state.physical_id, name) else { return Ok(Value::Null) };
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let volumes = Volume::connect(&session).await.map_err(attribute_error)?;
        volumes.volume_type(id).await.map(Value::Object).map_err(attribute_error)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::nova::testing;
    use super::super::super::UpdateDecision;
    use super::*;

    fn vtype() -> VolumeType {
        VolumeType::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&vtype(), "vt", &v).unwrap()
    }

    const TYPES: &str = "/volume/v3/p1/types";

    #[test]
    fn projects_need_a_private_type() {
        let e = Plugin::validate_properties(&vtype(), "vt", &json!({"name": "n", "projects": ["demo"]})).unwrap_err();
        assert_eq!(e.message(), "Can not specify property \"projects\" if the volume type is public.");
        assert!(Plugin::validate_properties(
            &vtype(),
            "vt",
            &json!({"name": "n", "projects": ["demo"], "is_public": false})
        )
        .is_ok());
    }

    #[tokio::test]
    async fn creates_a_private_type_with_specs_and_access() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer("GET /v3/projects/demo", 200, json!({"project": {"id": "p-demo", "name": "demo"}}));
        cinder.answer(&format!("POST {TYPES}"), 200, json!({"volume_type": {"id": "tid", "name": "ssd"}}));
        cinder.answer(&format!("POST {TYPES}/tid/extra_specs"), 200, json!({"extra_specs": {"k": "v"}}));
        cinder.answer(&format!("POST {TYPES}/tid/action"), 202, Value::Null);
        let volumes = volume_client(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(
            json!({"name": "ssd", "is_public": false, "projects": ["demo"], "metadata": {"k": "v"}}),
        ));
        vtype().create_with(&session, &volumes, &mut ctx).await.unwrap();
        let writes: Vec<(String, String, Value)> =
            cinder.calls().into_iter().filter(|(m, p, _)| m != "GET" && !p.starts_with("/v3")).collect();
        assert_eq!(
            writes,
            [
                (
                    "POST".into(),
                    TYPES.into(),
                    json!({"volume_type": {"name": "ssd", "description": null, "os-volume-type-access:is_public": false}})
                ),
                ("POST".into(), format!("{TYPES}/tid/extra_specs"), json!({"extra_specs": {"k": "v"}})),
                ("POST".into(), format!("{TYPES}/tid/action"), json!({"addProjectAccess": {"project": "p-demo"}})),
            ]
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("tid"));
    }

    #[tokio::test]
    async fn updates_everything_in_place() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(&format!("PUT {TYPES}/tid"), 200, json!({"volume_type": {"id": "tid"}}));
        cinder.answer(&format!("GET {TYPES}/tid/extra_specs"), 200, json!({"extra_specs": {"a": "1"}}));
        cinder.answer(&format!("DELETE {TYPES}/tid/extra_specs/a"), 202, Value::Null);
        cinder.answer(&format!("POST {TYPES}/tid/extra_specs"), 200, json!({"extra_specs": {"b": "2"}}));
        cinder.answer(
            &format!("GET {TYPES}/tid/os-volume-type-access"),
            200,
            json!({"volume_type_access": [{"volume_type_id": "tid", "project_id": "p-old"}]}),
        );
        cinder.answer("GET /v3/projects/p-new", 200, json!({"project": {"id": "p-new"}}));
        cinder.answer(&format!("POST {TYPES}/tid/action"), 202, Value::Null);
        let t = vtype();
        let old = props(json!({"name": "a", "is_public": false, "projects": ["p-old"], "metadata": {"a": "1"}}));
        let new = props(json!({"name": "a", "description": "d", "is_public": false, "projects": ["p-new"],
            "metadata": {"b": "2"}}));
        assert_eq!(Plugin::update_decision(&t, &old, &new), UpdateDecision::InPlace);
        let (mut ctx, _tx) = test_context(new);
        ctx.state.physical_id = Some("tid".into());
        let volumes = volume_client(&session).await.unwrap();
        t.update_with(&session, &volumes, &mut ctx, &old).await.unwrap();
        let writes: Vec<(String, String, Value)> =
            cinder.calls().into_iter().filter(|(m, p, _)| m != "GET" && !p.starts_with("/v3")).collect();
        assert_eq!(
            writes,
            [
                ("PUT".into(), format!("{TYPES}/tid"), json!({"volume_type": {"name": null, "description": "d"}})),
                ("DELETE".into(), format!("{TYPES}/tid/extra_specs/a"), Value::Null),
                ("POST".into(), format!("{TYPES}/tid/extra_specs"), json!({"extra_specs": {"b": "2"}})),
                ("POST".into(), format!("{TYPES}/tid/action"), json!({"removeProjectAccess": {"project": "p-old"}})),
                ("POST".into(), format!("{TYPES}/tid/action"), json!({"addProjectAccess": {"project": "p-new"}})),
            ]
        );
    }

    #[tokio::test]
    async fn acts_through_the_stack_session_and_deletes() {
        let (cinder, session) = testing::nova("2.96").await;
        cinder.answer(&format!("POST {TYPES}"), 200, json!({"volume_type": {"id": "tid"}}));
        let (slot, _host) = testing::bound(Some(session));
        let t = VolumeType::new(slot);
        let (mut ctx, _tx) = test_context(props(json!({"name": "n", "is_public": true})));
        Plugin::create(&t, &mut ctx).await.unwrap();
        assert_eq!(Plugin::reference_id(&t, &ctx.state), json!("tid"));
        cinder.answer(&format!("GET {TYPES}/tid"), 200, json!({"volume_type": {"id": "tid", "name": "n"}}));
        assert_eq!(t.attribute(&ctx.state, "show").await.unwrap(), json!({"id": "tid", "name": "n"}));
        // Cinder answers 404: gone already.
        Plugin::delete(&t, &mut ctx).await.unwrap();
        cinder.answer(
            &format!("DELETE {TYPES}/tid"),
            400,
            json!({"badRequest": {"message": "Target volume type is still in use."}}),
        );
        assert_eq!(
            Plugin::delete(&t, &mut ctx).await,
            Err(ResourceFailure::error("BadRequest", "Target volume type is still in use. (HTTP 400)"))
        );
        // A 409 is retried (Heat's Resource.delete), here accepted the
        // second time.
        cinder.answer(&format!("DELETE {TYPES}/tid"), 409, json!({"conflictingRequest": {"message": "busy"}}));
        let deletes = || cinder.calls().iter().filter(|(m, _, _)| m == "DELETE").count();
        let before = deletes();
        let cinder_relents = async {
            while deletes() == before {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            cinder.answer(&format!("DELETE {TYPES}/tid"), 202, Value::Null);
        };
        let (deleted, ()) = tokio::join!(Plugin::delete(&t, &mut ctx), cinder_relents);
        assert_eq!(deleted, Ok(()));
        assert_eq!(deletes(), before + 2);
    }
}
