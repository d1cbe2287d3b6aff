//! Keystone's admin API over a [`Session`]: create, read, update, list and
//! delete of its entities (projects, domains, roles, users, groups,
//! services, endpoints, regions), role grants and group membership, for the
//! OS::Keystone::* resource types. Bodies are the caller's: this module
//! only knows where each entity lives and how Keystone wraps it. A delete
//! (or revoke) of something already gone is success.

use http::Method;
use serde_json::{json, Map, Value};

use crate::ec2::quote;
use crate::error::OsError;
use crate::session::Session;

/// A Keystone entity collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Project,
    Domain,
    Role,
    User,
    Group,
    Service,
    Endpoint,
    Region,
}

impl Entity {
    /// The collection's path under `/v3`.
    pub fn collection(self) -> &'static str {
        match self {
            Entity::Project => "/projects",
            Entity::Domain => "/domains",
            Entity::Role => "/roles",
            Entity::User => "/users",
            Entity::Group => "/groups",
            Entity::Service => "/services",
            Entity::Endpoint => "/endpoints",
            Entity::Region => "/regions",
        }
    }

    /// The key one entity is wrapped in (`{"project": {...}}`).
    pub fn member_key(self) -> &'static str {
        match self {
            Entity::Project => "project",
            Entity::Domain => "domain",
            Entity::Role => "role",
            Entity::User => "user",
            Entity::Group => "group",
            Entity::Service => "service",
            Entity::Endpoint => "endpoint",
            Entity::Region => "region",
        }
    }

    /// The key a list is wrapped in (`{"projects": [...]}`).
    fn list_key(self) -> &'static str {
        &self.collection()[1..]
    }

    fn member(self, id: &str) -> String {
        format!("{}/{}", self.collection(), quote(id))
    }
}

/// The actor of a role grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor<'a> {
    User(&'a str),
    Group(&'a str),
}

/// Where a role is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    Project(&'a str),
    Domain(&'a str),
}

/// The path of one grant: `/projects/{p}/users/{u}/roles/{r}` and the
/// other three combinations.
pub fn grant_path(target: Target<'_>, actor: Actor<'_>, role_id: &str) -> String {
    let (target_kind, target_id) = match target {
        Target::Project(id) => ("projects", id),
        Target::Domain(id) => ("domains", id),
    };
    let (actor_kind, actor_id) = match actor {
        Actor::User(id) => ("users", id),
        Actor::Group(id) => ("groups", id),
    };
    format!("/{target_kind}/{}/{actor_kind}/{}/roles/{}", quote(target_id), quote(actor_id), quote(role_id))
}

/// One role assignment as `GET /v3/role_assignments` lists it (an
/// inherited or system one has neither project nor domain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub role_id: String,
    pub project_id: Option<String>,
    pub domain_id: Option<String>,
}

impl Assignment {
    /// Reads one listed assignment; None without a role id.
    fn parse(doc: &Value) -> Option<Assignment> {
        let id_at = |pointer: &str| doc.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
        Some(Assignment {
            role_id: id_at("/role/id")?,
            project_id: id_at("/scope/project/id"),
            domain_id: id_at("/scope/domain/id"),
        })
    }
}

/// Keystone's admin API as one session sees it.
pub struct IdentityAdmin<'a> {
    session: &'a Session,
}

fn ok_if_gone(result: Result<crate::http::Answer, OsError>) -> Result<(), OsError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The entity under `key` of Keystone's answer.
fn unwrap_member(doc: Value, key: &str) -> Result<Value, OsError> {
    match doc {
        Value::Object(mut m) => {
            m.remove(key).ok_or_else(|| OsError::InvalidResponse(format!("no {key} in Keystone's answer")))
        }
        _ => Err(OsError::InvalidResponse("Keystone's answer is not an object".into())),
    }
}

/// `?k=v&...`, values encoded; empty without pairs.
fn query_string(query: &[(&str, &str)]) -> String {
    let pairs: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", quote(v))).collect();
    if pairs.is_empty() {
        String::new()
    } else {
        format!("?{}", pairs.join("&"))
    }
}

/// The entity's fields without the unset (null) ones: Keystone refuses
/// a null where it expects a value, and the Python client drops them.
pub fn without_nulls(fields: Map<String, Value>) -> Map<String, Value> {
    fields.into_iter().filter(|(_, v)| !v.is_null()).collect()
}

impl<'a> IdentityAdmin<'a> {
    pub fn new(session: &'a Session) -> Self {
        IdentityAdmin { session }
    }

    /// The session Keystone is asked through (others of its services are
    /// reached through it too).
    pub fn session(&self) -> &'a Session {
        self.session
    }

    /// `POST /v3/<entity>s` with `fields` (nulls dropped); answers the new
    /// entity as Keystone shows it.
    pub async fn create(&self, entity: Entity, fields: Map<String, Value>) -> Result<Value, OsError> {
        let body = json!({ entity.member_key(): without_nulls(fields) });
        let doc = self.session.identity_call(Method::POST, entity.collection(), Some(&body)).await?.json()?;
        unwrap_member(doc, entity.member_key())
    }

    /// `GET /v3/<entity>s/{id}`.
    pub async fn get(&self, entity: Entity, id: &str) -> Result<Value, OsError> {
        let doc = self.session.identity_call(Method::GET, &entity.member(id), None).await?.json()?;
        unwrap_member(doc, entity.member_key())
    }

    /// `PATCH /v3/<entity>s/{id}` with `fields` (nulls dropped); answers
    /// the entity after the update.
    pub async fn update(&self, entity: Entity, id: &str, fields: Map<String, Value>) -> Result<Value, OsError> {
        let body = json!({ entity.member_key(): without_nulls(fields) });
        let doc = self.session.identity_call(Method::PATCH, &entity.member(id), Some(&body)).await?.json()?;
        unwrap_member(doc, entity.member_key())
    }

    /// `GET /v3/<entity>s?<query>`.
    pub async fn list(&self, entity: Entity, query: &[(&str, &str)]) -> Result<Vec<Value>, OsError> {
        let path = format!("{}{}", entity.collection(), query_string(query));
        let doc = self.session.identity_call(Method::GET, &path, None).await?.json()?;
        match unwrap_member(doc, entity.list_key())? {
            Value::Array(items) => Ok(items),
            _ => Err(OsError::InvalidResponse(format!("{} is not a list", entity.list_key()))),
        }
    }

    /// `DELETE /v3/<entity>s/{id}`; Ok when it is gone already.
    pub async fn delete(&self, entity: Entity, id: &str) -> Result<(), OsError> {
        ok_if_gone(self.session.identity_call(Method::DELETE, &entity.member(id), None).await)
    }

    /// `PUT` of a role grant.
    pub async fn grant(&self, target: Target<'_>, actor: Actor<'_>, role_id: &str) -> Result<(), OsError> {
        self.session.identity_call(Method::PUT, &grant_path(target, actor, role_id), None).await.map(|_| ())
    }

    /// `DELETE` of a role grant; Ok when it is gone already.
    pub async fn revoke(&self, target: Target<'_>, actor: Actor<'_>, role_id: &str) -> Result<(), OsError> {
        ok_if_gone(self.session.identity_call(Method::DELETE, &grant_path(target, actor, role_id), None).await)
    }

    /// `PUT /v3/groups/{group}/users/{user}`.
    pub async fn add_to_group(&self, user_id: &str, group_id: &str) -> Result<(), OsError> {
        let path = format!("/groups/{}/users/{}", quote(group_id), quote(user_id));
        self.session.identity_call(Method::PUT, &path, None).await.map(|_| ())
    }

    /// `DELETE /v3/groups/{group}/users/{user}`.
    pub async fn remove_from_group(&self, user_id: &str, group_id: &str) -> Result<(), OsError> {
        let path = format!("/groups/{}/users/{}", quote(group_id), quote(user_id));
        self.session.identity_call(Method::DELETE, &path, None).await.map(|_| ())
    }

    /// `GET /v3/role_assignments?user.id=` (or `group.id=`): the actor's
    /// direct assignments.
    pub async fn role_assignments(&self, actor: Actor<'_>) -> Result<Vec<Assignment>, OsError> {
        let query = match actor {
            Actor::User(id) => format!("user.id={}", quote(id)),
            Actor::Group(id) => format!("group.id={}", quote(id)),
        };
        let doc = self.session.identity_call(Method::GET, &format!("/role_assignments?{query}"), None).await?.json()?;
        let listed = doc
            .get("role_assignments")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no role_assignments in Keystone's answer".into()))?;
        Ok(listed.iter().filter_map(Assignment::parse).collect())
    }

    /// The id of the entity `name_or_id` names: itself when an entity has
    /// that id, else the one whose name is exactly `name_or_id` (in
    /// `domain_id`, when given). None when there is none.
    pub async fn find_id(
        &self,
        entity: Entity,
        name_or_id: &str,
        domain_id: Option<&str>,
    ) -> Result<Option<String>, OsError> {
        match self.get(entity, name_or_id).await {
            Ok(found) => return Ok(found.get("id").and_then(Value::as_str).map(str::to_owned)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let mut query = vec![("name", name_or_id)];
        if let Some(d) = domain_id {
            query.push(("domain_id", d));
        }
        let found = self.list(entity, &query).await?;
        Ok(found
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name_or_id))
            .and_then(|e| e.get("id").and_then(Value::as_str))
            .map(str::to_owned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_keys() {
        assert_eq!(Entity::Project.member("a b/c"), "/projects/a%20b%2Fc");
        assert_eq!(Entity::Domain.list_key(), "domains");
        assert_eq!(query_string(&[("name", "x y"), ("domain_id", "d")]), "?name=x%20y&domain_id=d");
        assert_eq!(query_string(&[]), "");
        assert_eq!(grant_path(Target::Domain("d"), Actor::Group("g"), "r"), "/domains/d/groups/g/roles/r");
        assert_eq!(grant_path(Target::Project("p"), Actor::User("u"), "r"), "/projects/p/users/u/roles/r");
    }

    #[test]
    fn listed_assignments() {
        let listed = json!({"role": {"id": "r"}, "scope": {"project": {"id": "p"}}, "user": {"id": "u"}});
        assert_eq!(
            Assignment::parse(&listed),
            Some(Assignment { role_id: "r".into(), project_id: Some("p".into()), domain_id: None })
        );
        assert_eq!(Assignment::parse(&json!({"scope": {"domain": {"id": "d"}}})), None);
    }

    #[test]
    fn nulls_are_dropped_and_members_unwrapped() {
        let fields = json!({"name": "n", "parent_id": null, "enabled": false});
        let Value::Object(m) = fields else { unreachable!() };
        assert_eq!(Value::Object(without_nulls(m)), json!({"name": "n", "enabled": false}));
        assert_eq!(unwrap_member(json!({"role": {"id": "r"}}), "role"), Ok(json!({"id": "r"})));
        assert!(matches!(unwrap_member(json!({}), "role"), Err(OsError::InvalidResponse(_))));
    }
}
