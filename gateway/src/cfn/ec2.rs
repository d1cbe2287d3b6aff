//! Heat's `ec2authtoken` middleware: an EC2-signed request is
//! authenticated by Keystone (`POST /v3/ec2tokens`), which answers a token
//! of the credential's user; that user is the caller.
//!
//! Keystone's refusals are told apart by status: 404 ("EC2 access key not
//! found.": the credential does not exist, or went with its stack user) is
//! `InvalidClientTokenId`; 401 (a signature that does not match the
//! request: a changed URL, host or method; also an expired `Timestamp`) is
//! `SignatureDoesNotMatch`. Heat 27.0.1's code means the same mapping (by
//! Keystone's messages) but, posting through a keystoneauth adapter that
//! raises on any error status, answers the 401 with `AccessDenied` and the
//! 404 with an unhandled 500.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use keelson_openstack::{OsError, Session};
use keelson_proto::orchestration::v1::Caller;
use serde_json::{json, Map, Value};
use sha2::{Digest as _, Sha256};

use super::fault::CfnFault;
use crate::orchestration::urls;

/// Authenticates EC2-signed requests against one Keystone, as the
/// gateway's service user (`[keystone_authtoken]`; Keystone lets only
/// admin and service users validate EC2 signatures).
pub struct Ec2Auth {
    service: Session,
}

/// webob's `Request.path`: the decoded path quoted again, keeping
/// `/~!$&'()*+,;=:@` (what Keystone recomputes the signature over).
fn webob_path(decoded: &str) -> String {
    let mut out = String::with_capacity(decoded.len());
    for b in decoded.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Ec2Auth {
    pub fn new(service: Session) -> Self {
        Ec2Auth { service }
    }

    /// The EC2 credentials document of a request (Heat's `creds`), or the
    /// refusal of one that carries no signature or access key.
    pub fn credentials(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Value, CfnFault> {
        // webob's params: the last value of a repeated key.
        let mut params: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in urls::query_pairs(uri.query().unwrap_or("")) {
            params.insert(k, v);
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let authorization = header("authorization");
        let signature = params.get("Signature").or_else(|| params.get("X-Amz-Signature")).cloned().or_else(|| {
            authorization
                .as_ref()
                .map(|a| a.split_once("Signature=").map_or("", |(_, s)| s).split(',').next().unwrap_or("").to_string())
        });
        let Some(signature) = signature.filter(|s| !s.is_empty()) else {
            return Err(CfnFault::incomplete_signature());
        };
        let access = params
            .get("AWSAccessKeyId")
            .cloned()
            .or_else(|| params.get("X-Amz-Credential").map(|c| c.split('/').next().unwrap_or("").to_string()))
            .or_else(|| {
                authorization.as_ref().map(|a| {
                    let cred = a.split_once("Credential=").map_or("", |(_, s)| s).split(',').next().unwrap_or("");
                    cred.split('/').next().unwrap_or("").to_string()
                })
            });
        let Some(access) = access.filter(|a| !a.is_empty()) else {
            return Err(CfnFault::missing_authentication_token());
        };
        params.remove("Signature");
        let mut sent_headers = Map::new();
        for (name, value) in headers {
            if let Ok(v) = value.to_str() {
                sent_headers.insert(title_case(name.as_str()), Value::String(v.to_string()));
            }
        }
        Ok(json!({
            "access": access,
            "signature": signature,
            "host": header("host").unwrap_or_default(),
            "verb": method.as_str(),
            "path": webob_path(&urls::unquote(uri.path(), false)),
            "params": params,
            "headers": sent_headers,
            "body_hash": hex::encode(Sha256::digest(body)),
        }))
    }

    /// The caller of an EC2-signed request, as Keystone's token for it says.
    pub async fn authenticate(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Caller, CfnFault> {
        let creds = Self::credentials(method, uri, headers, body)?;
        let access = keelson_openstack::identity::ec2_tokens(&self.service, &creds).await.map_err(|e| {
            tracing::info!(target: "keelson::cfn", "AWS authentication failure: {e}");
            match e {
                OsError::NotFound(_) => CfnFault::invalid_client_token_id(),
                OsError::Unauthorized(_) => CfnFault::signature_does_not_match(),
                OsError::Unavailable(_) => CfnFault::service_unavailable(),
                _ => CfnFault::access_denied(),
            }
        })?;
        let Some(project_id) = access.project_id.clone() else {
            return Err(CfnFault::access_denied());
        };
        Ok(Caller {
            project_id,
            user_id: access.user_id.clone(),
            user_name: access.user_id.clone(),
            roles: access.role_names.clone(),
            is_admin: false,
            auth_token: access.token.clone(),
            path_project_id: String::new(),
        })
    }
}

/// `content-type` → `Content-Type`, as WSGI servers hand headers on.
fn title_case(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(uri: &str) -> Result<Value, CfnFault> {
        let uri: Uri = uri.parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("host", "127.0.0.1:8000".parse().unwrap());
        Ec2Auth::credentials(&Method::PUT, &uri, &headers, b"{}")
    }

    #[test]
    fn credentials_as_heat_builds_them() {
        let c = creds("/v1/waitcondition/arn%3Aopenstack%3Aheat%3A%3Ap%3Astacks%2Fs%2F1%2Fresources%2Fh?Timestamp=2026-01-01T00%3A00%3A00Z&SignatureMethod=HmacSHA256&AWSAccessKeyId=ak&SignatureVersion=2&Signature=c2ln")
            .unwrap();
        assert_eq!(c["access"], "ak");
        assert_eq!(c["signature"], "c2ln");
        assert_eq!(c["host"], "127.0.0.1:8000");
        assert_eq!(c["path"], "/v1/waitcondition/arn:openstack:heat::p:stacks/s/1/resources/h");
        assert_eq!(
            c["params"],
            json!({"AWSAccessKeyId": "ak", "SignatureMethod": "HmacSHA256", "SignatureVersion": "2", "Timestamp": "2026-01-01T00:00:00Z"})
        );
        assert_eq!(c["headers"]["Host"], "127.0.0.1:8000");
        assert_eq!(c["body_hash"], hex::encode(Sha256::digest(b"{}")));
        assert_eq!(creds("/v1/signal/x?AWSAccessKeyId=ak").unwrap_err(), CfnFault::incomplete_signature());
        assert_eq!(creds("/v1/signal/x?Signature=s").unwrap_err(), CfnFault::missing_authentication_token());
        assert_eq!(webob_path("/v1/a b/c:d"), "/v1/a%20b/c:d");
    }
}
