//! Who a request comes from: the service layer authorizes with it, the
//! resource registry filters types by it, plugins act with its token.

/// Who is calling, as the gateway authenticated them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    pub project_id: String,
    pub user_id: String,
    pub user_name: String,
    pub roles: Vec<String>,
    pub is_admin: bool,
    pub auth_token: String,
    /// The project named in the request path (`/v1/{tenant_id}`); used for
    /// links that echo the request path (the `next` link of a list).
    pub path_project_id: String,
}

impl Caller {
    /// The tenant segment of paths that echo the request (collection links).
    pub(crate) fn path_tenant(&self) -> &str {
        if self.path_project_id.is_empty() {
            &self.project_id
        } else {
            &self.path_project_id
        }
    }

    /// The project a lookup of a stack by id is confined to: none for an
    /// admin, who (Heat's `context_is_admin`, as its `stack_get`) reaches
    /// any project's stack by id; by name, everyone sees their own.
    pub(crate) fn id_scope(&self) -> Option<&str> {
        (!self.is_admin).then_some(self.project_id.as_str())
    }
}

/// An admin of project `p` (user `u`): the caller of the engine's tests.
#[cfg(test)]
pub(crate) fn test_admin() -> Caller {
    Caller {
        project_id: "p".into(),
        user_id: "u".into(),
        roles: vec!["admin".into()],
        is_admin: true,
        ..Caller::default()
    }
}
