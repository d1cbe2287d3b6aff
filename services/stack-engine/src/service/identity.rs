//! Stack identities (`heat/common/identifier.py`) and the path-relative
//! hrefs built from them: `/v1/{tenant}/stacks/{name}/{id}[path]`. The
//! gateway prefixes `scheme://host`.

use serde_json::{json, Value};

/// A stack as Heat identifies it; `path` is "" for the stack itself and
/// e.g. "/resources/a" for something inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackIdentity {
    pub tenant: String,
    pub stack_name: String,
    pub stack_id: String,
    pub path: String,
}

impl StackIdentity {
    pub fn new(tenant: &str, stack_name: &str, stack_id: &str) -> Self {
        StackIdentity {
            tenant: tenant.to_string(),
            stack_name: stack_name.to_string(),
            stack_id: stack_id.to_string(),
            path: String::new(),
        }
    }

    /// The canonical stack URL path, without `path`.
    pub fn stack_href(&self) -> String {
        format!("/v1/{}/stacks/{}/{}", quote(&self.tenant), quote(&self.stack_name), quote(&self.stack_id))
    }

    pub fn resource_href(&self, resource_name: &str) -> String {
        format!("{}/resources/{}", self.stack_href(), quote(resource_name))
    }

    pub fn event_href(&self, resource_name: &str, event_id: &str) -> String {
        format!("{}/events/{}", self.resource_href(resource_name), quote(event_id))
    }

    /// `{"tenant","stack_name","stack_id","path"}` as the engine's
    /// identity dicts (resource previews carry them).
    pub fn to_value(&self, path: &str) -> Value {
        json!({"tenant": self.tenant, "stack_name": self.stack_name, "stack_id": self.stack_id, "path": path})
    }
}

/// `{"href": .., "rel": ..}`.
pub fn link(href: String, rel: &str) -> Value {
    json!({"href": href, "rel": rel})
}

/// Parses Heat's ARN form `arn:openstack:heat::{tenant}:stacks/{name}/{id}`
/// (what `HeatIdentifier.from_arn` accepts; a trailing path is ignored).
pub fn parse_arn(text: &str) -> Option<StackIdentity> {
    let rest = text.strip_prefix("arn:openstack:heat::")?;
    let (tenant, rest) = rest.split_once(':')?;
    let rest = rest.strip_prefix("stacks/")?;
    let mut parts = rest.splitn(3, '/');
    let name = unquote(parts.next()?);
    let id = unquote(parts.next()?);
    if tenant.is_empty() || name.is_empty() || id.is_empty() {
        return None;
    }
    Some(StackIdentity::new(&unquote(tenant), &name, &id))
}

/// Percent-encodes a path segment the way `urllib.parse.quote(s, safe='')`
/// would for the characters names can hold.
pub fn quote(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `application/x-www-form-urlencoded` encoding of a query value
/// (`urlencode` uses `quote_plus`).
pub fn quote_plus(value: &str) -> String {
    quote(value).replace("%20", "+")
}

fn unquote(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(hi * 16 + lo);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Heat's `uuidutils.is_uuid_like`.
pub fn is_uuid_like(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_are_path_relative_and_quoted() {
        let id = StackIdentity::new("admin", "s", "42");
        assert_eq!(id.stack_href(), "/v1/admin/stacks/s/42");
        assert_eq!(id.resource_href("a b"), "/v1/admin/stacks/s/42/resources/a%20b");
        assert_eq!(id.event_href("a", "e"), "/v1/admin/stacks/s/42/resources/a/events/e");
    }

    #[test]
    fn arn_form_parses() {
        let id = parse_arn("arn:openstack:heat::admin:stacks/s/42").unwrap();
        assert_eq!((id.tenant.as_str(), id.stack_name.as_str(), id.stack_id.as_str()), ("admin", "s", "42"));
        assert!(parse_arn("s").is_none());
    }
}
