//! Who is calling: noauth2 (tests, all-in-one) or Keystone tokens.

use http::HeaderMap;

/// The caller as policy sees it (oslo.context's policy values).
pub type Identity = keelson_policy::ContextValues;

/// noauth2, as upstream's NoAuthMiddleware: the token is `user[:project]`
/// (project defaults to the user), roles come from `X-Roles` when present
/// and are `admin` for the user `admin` otherwise, and a request carrying
/// `OpenStack-System-Scope` is system scoped (no project).
/// `None` when no token was sent.
pub fn noauth2(headers: &HeaderMap) -> Option<Identity> {
    let token = headers.get("x-auth-token")?.to_str().ok()?;
    let (user, project) = match token.split_once(':') {
        Some((u, p)) if !p.is_empty() => (u, p),
        Some((u, _)) => (u, u),
        None => (token, token),
    };
    let roles: Vec<String> = match headers.get("x-roles").and_then(|v| v.to_str().ok()) {
        Some(r) => r.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None if user == "admin" => vec!["admin".to_string()],
        None => Vec::new(),
    };
    // oslo.context prefers an explicit X-Project-Id over the project the
    // token implies (upstream's noauth2 tests send it for personas).
    let explicit_project = headers
        .get("x-project-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let system_scope = headers
        .get("openstack-system-scope")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    Some(Identity {
        user_id: Some(user.to_string()),
        project_id: explicit_project.or_else(|| system_scope.is_none().then(|| project.to_string())),
        system_scope,
        roles,
        ..Identity::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn noauth2_tokens() {
        assert!(noauth2(&headers(&[])).is_none());
        let admin = noauth2(&headers(&[("x-auth-token", "admin")])).unwrap();
        assert_eq!(admin.roles, vec!["admin"]);
        assert_eq!(admin.project_id.as_deref(), Some("admin"));
        let u = noauth2(&headers(&[("x-auth-token", "bob:proj"), ("x-roles", "reader,member")])).unwrap();
        assert_eq!(u.project_id.as_deref(), Some("proj"));
        assert_eq!(u.roles, vec!["reader", "member"]);
        let s = noauth2(&headers(&[("x-auth-token", "admin"), ("openstack-system-scope", "all")])).unwrap();
        assert_eq!(s.project_id, None);
        assert_eq!(s.system_scope.as_deref(), Some("all"));
    }
}
