//! Keystone's calls Heat needs, over a [`Session`]: trusts, the projects
//! and users of the stack-user domain, role grants, EC2 credentials, and
//! `POST /v3/ec2tokens`. A delete of something already gone is success.

use http::Method;
use serde_json::{json, Value};

use crate::error::OsError;
use crate::session::{AccessInfo, Session};

/// Keystone's identity API as one session sees it.
pub struct Identity<'a> {
    session: &'a Session,
}

/// The roles a trust delegates: by name (`trusts_delegated_roles`) or by
/// id (the trustor's token's roles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roles {
    Names(Vec<String>),
    Ids(Vec<String>),
}

/// A user as Keystone shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub domain_id: String,
    pub default_project_id: Option<String>,
}

/// What a stack user's EC2 credential is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Credential {
    pub id: String,
    pub access: String,
    pub secret: String,
}

fn ok_if_gone(result: Result<crate::http::Answer, OsError>) -> Result<(), OsError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

fn string_at(doc: &Value, pointer: &str) -> Result<String, OsError> {
    doc.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| OsError::InvalidResponse(format!("no {pointer} in Keystone's answer")))
}

impl<'a> Identity<'a> {
    pub fn new(session: &'a Session) -> Self {
        Identity { session }
    }

    /// `POST /v3/OS-TRUST/trusts` (the session is the trustor's).
    pub async fn create_trust(
        &self,
        trustor_user_id: &str,
        trustee_user_id: &str,
        project_id: &str,
        roles: &Roles,
        impersonation: bool,
    ) -> Result<String, OsError> {
        let roles: Vec<Value> = match roles {
            Roles::Names(n) => n.iter().map(|r| json!({"name": r})).collect(),
            Roles::Ids(i) => i.iter().map(|r| json!({"id": r})).collect(),
        };
        let body = json!({"trust": {
            "trustor_user_id": trustor_user_id,
            "trustee_user_id": trustee_user_id,
            "project_id": project_id,
            "impersonation": impersonation,
            "allow_redelegation": false,
            "roles": roles,
        }});
        let doc = self.session.identity_call(Method::POST, "/OS-TRUST/trusts", Some(&body)).await?.json()?;
        string_at(&doc, "/trust/id")
    }

    /// `DELETE /v3/OS-TRUST/trusts/{id}`; a trust already gone is deleted.
    pub async fn delete_trust(&self, trust_id: &str) -> Result<(), OsError> {
        ok_if_gone(self.session.identity_call(Method::DELETE, &format!("/OS-TRUST/trusts/{trust_id}"), None).await)
    }

    /// The id of the domain named `name`.
    pub async fn domain_id(&self, name: &str) -> Result<String, OsError> {
        let doc =
            self.session.identity_call(Method::GET, &format!("/domains?name={}", query(name)), None).await?.json()?;
        string_at(&doc, "/domains/0/id").map_err(|_| OsError::NotFound(format!("domain {name}")))
    }

    /// `POST /v3/projects`.
    pub async fn create_project(&self, name: &str, domain_id: &str, description: &str) -> Result<String, OsError> {
        let body = json!({"project": {"name": name, "domain_id": domain_id, "description": description}});
        let doc = self.session.identity_call(Method::POST, "/projects", Some(&body)).await?.json()?;
        string_at(&doc, "/project/id")
    }

    /// The domain of project `id`; None when it is gone.
    pub async fn project_domain(&self, id: &str) -> Result<Option<String>, OsError> {
        match self.session.identity_call(Method::GET, &format!("/projects/{id}"), None).await {
            Ok(answer) => Ok(Some(string_at(&answer.json()?, "/project/domain_id")?)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn delete_project(&self, id: &str) -> Result<(), OsError> {
        ok_if_gone(self.session.identity_call(Method::DELETE, &format!("/projects/{id}"), None).await)
    }

    /// The id of the role named `name`, if there is one.
    pub async fn role_id(&self, name: &str) -> Result<Option<String>, OsError> {
        let doc =
            self.session.identity_call(Method::GET, &format!("/roles?name={}", query(name)), None).await?.json()?;
        let roles = doc.get("roles").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(match roles.as_slice() {
            [one] => one.get("id").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
    }

    /// `POST /v3/users`, with the options Heat sets on the users it makes
    /// (no password change, expiry or lockout for an automated user).
    pub async fn create_user(
        &self,
        name: &str,
        password: &str,
        domain_id: &str,
        default_project_id: &str,
    ) -> Result<String, OsError> {
        let body = json!({"user": {
            "name": name,
            "password": password,
            "domain_id": domain_id,
            "default_project_id": default_project_id,
            "enabled": true,
            "options": {
                "ignore_change_password_upon_first_use": true,
                "ignore_password_expiry": true,
                "ignore_lockout_failure_attempts": true,
            },
        }});
        let doc = self.session.identity_call(Method::POST, "/users", Some(&body)).await?.json()?;
        string_at(&doc, "/user/id")
    }

    /// A user; None when it is gone.
    pub async fn user(&self, id: &str) -> Result<Option<User>, OsError> {
        match self.session.identity_call(Method::GET, &format!("/users/{id}"), None).await {
            Ok(answer) => {
                let doc = answer.json()?;
                Ok(Some(User {
                    id: string_at(&doc, "/user/id")?,
                    domain_id: string_at(&doc, "/user/domain_id")?,
                    default_project_id: doc
                        .pointer("/user/default_project_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                }))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn delete_user(&self, id: &str) -> Result<(), OsError> {
        ok_if_gone(self.session.identity_call(Method::DELETE, &format!("/users/{id}"), None).await)
    }

    /// `PATCH /v3/users/{id}` `enabled`.
    pub async fn set_user_enabled(&self, id: &str, enabled: bool) -> Result<(), OsError> {
        let body = json!({"user": {"enabled": enabled}});
        self.session.identity_call(Method::PATCH, &format!("/users/{id}"), Some(&body)).await.map(|_| ())
    }

    /// `PUT /v3/projects/{project}/users/{user}/roles/{role}`.
    pub async fn grant_project_role(&self, project_id: &str, user_id: &str, role_id: &str) -> Result<(), OsError> {
        let path = format!("/projects/{project_id}/users/{user_id}/roles/{role_id}");
        self.session.identity_call(Method::PUT, &path, None).await.map(|_| ())
    }

    /// `POST /v3/credentials` of type `ec2` holding `access` and `secret`.
    pub async fn create_ec2_credential(
        &self,
        user_id: &str,
        project_id: &str,
        access: &str,
        secret: &str,
    ) -> Result<Ec2Credential, OsError> {
        let blob = json!({"access": access, "secret": secret}).to_string();
        let body = json!({"credential": {"user_id": user_id, "project_id": project_id, "type": "ec2", "blob": blob}});
        let doc = self.session.identity_call(Method::POST, "/credentials", Some(&body)).await?.json()?;
        Ok(Ec2Credential { id: string_at(&doc, "/credential/id")?, access: access.into(), secret: secret.into() })
    }

    pub async fn delete_credential(&self, id: &str) -> Result<(), OsError> {
        ok_if_gone(self.session.identity_call(Method::DELETE, &format!("/credentials/{id}"), None).await)
    }
}

/// `POST <identity v3>/ec2tokens`, as `service` (a session holding
/// Keystone's `admin` or `service` role: Keystone checks
/// `identity:ec2tokens_validate`): Keystone checks an EC2-signed request
/// (`credentials`: access, signature, host, verb, path, params, headers,
/// body_hash) and answers a token of the credential's user. A refusal is
/// Keystone's error as it came (Keystone 30 answers a wrong signature, an
/// unknown access key and an expired timestamp alike: 401 with no
/// reason). A 401 is not retried with a renewed service token: it is the
/// signature's answer.
pub async fn ec2_tokens(service: &Session, credentials: &Value) -> Result<AccessInfo, OsError> {
    let url = format!("{}/ec2tokens", service.identity_v3());
    let access = service.access().await?;
    let answer = service
        .http()
        .send(
            Method::POST,
            &url,
            &[("x-auth-token", access.token.as_str())],
            Some(&json!({"credentials": credentials})),
        )
        .await?
        .success()?;
    let token = answer
        .header("x-subject-token")
        .map(str::to_owned)
        .ok_or_else(|| OsError::InvalidResponse("no X-Subject-Token in Keystone's answer".into()))?;
    AccessInfo::parse(&token, &answer.json()?)
}

/// A query value, encoded.
fn query(value: &str) -> String {
    crate::ec2::quote(value)
}
