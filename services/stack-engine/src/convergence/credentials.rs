//! A stack's identity in Keystone (see [`crate::identity`]): the trust
//! made and stored (encrypted) when a root stack is created, the
//! stack-user project made with it, both deleted when the stack's DELETE
//! completes; and the stored context every later action on the user's
//! behalf acts through.

use std::sync::Arc;

use keelson_openstack::Session;

use super::Engine;
use crate::caller::Caller;
use crate::error::EngineError;
use crate::identity::{crypt, Identity, StoredCreds, Trustor};
use crate::store::user_creds::{self, UserCredsRow};
use crate::store::{self, StackRow};

/// What a new root stack gets in Keystone before it is stored.
#[derive(Debug, Default)]
pub(super) struct NewCredentials {
    pub row: Option<UserCredsRow>,
    creds: Option<StoredCreds>,
    pub stack_user_project_id: Option<String>,
}

impl Engine {
    pub(crate) fn identity(&self) -> Option<&Arc<Identity>> {
        self.identity.as_ref()
    }

    /// Heat's `Stack.store` and `create_stack_user_project_id` for a new
    /// root stack: the trust (with `deferred_auth_method = trusts`) and the
    /// stack-user project (with a stack-user domain). Nothing without
    /// Keystone or without a caller token.
    pub(super) async fn prepare_credentials(
        &self,
        stack_id: &str,
        trustor: Option<&Trustor>,
    ) -> Result<NewCredentials, EngineError> {
        let (Some(identity), Some(trustor)) = (&self.identity, trustor) else {
            return Ok(NewCredentials::default());
        };
        if trustor.token.is_empty() {
            return Ok(NewCredentials::default());
        }
        let mut prepared = NewCredentials::default();
        if identity.uses_trusts() {
            let creds = identity.create_trust(trustor).await?;
            let sealed = identity
                .crypt()
                .encrypt(&creds.trust_id)
                .map_err(|e| EngineError::internal(format!("trust encryption: {e}")))?;
            prepared.row = Some(UserCredsRow {
                stack_id: stack_id.to_string(),
                trust_id: sealed,
                trustor_user_id: creds.trustor_user_id.clone(),
                tenant_id: creds.project_id.clone(),
                decrypt_method: crypt::METHOD.to_string(),
            });
            prepared.creds = Some(creds);
        }
        if identity.has_stack_domain() {
            match identity.create_stack_project(&trustor.project_id, stack_id).await {
                Ok(project) => prepared.stack_user_project_id = Some(project),
                Err(e) => {
                    self.discard_credentials(prepared).await;
                    return Err(e);
                }
            }
        }
        Ok(prepared)
    }

    /// Undoes [`Engine::prepare_credentials`] for a stack that was not stored.
    pub(super) async fn discard_credentials(&self, prepared: NewCredentials) {
        let Some(identity) = &self.identity else { return };
        if let Some(creds) = &prepared.creds {
            if let Err(e) = identity.delete_trust(creds).await {
                tracing::warn!(target: "keelson::identity", "trust of a stack not created left behind: {e}");
            }
        }
        if let Some(project) = &prepared.stack_user_project_id {
            if let Err(e) = identity.delete_stack_project(project).await {
                tracing::warn!(target: "keelson::identity", "project of a stack not created left behind: {e}");
            }
        }
    }

    /// The root of `stack`'s tree (itself for a root stack).
    pub(crate) async fn root_stack(&self, stack: &StackRow) -> Result<StackRow, EngineError> {
        let mut current = stack.clone();
        for _ in 0..=self.settings.max_nested_stack_depth.max(0).saturating_add(1) {
            let Some(owner) = current.owner_id.clone() else { return Ok(current) };
            match store::stacks::get(&self.db, &owner).await? {
                Some(parent) => current = parent,
                None => return Ok(current),
            }
        }
        Ok(current)
    }

    /// The stored credentials of `stack`'s tree, decrypted; None without
    /// a trust (noauth, `deferred_auth_method = password`, a stack made
    /// before).
    pub(crate) async fn stored_creds(&self, stack: &StackRow) -> Result<Option<StoredCreds>, EngineError> {
        let Some(identity) = &self.identity else { return Ok(None) };
        let root = self.root_stack(stack).await?;
        let Some(row) = user_creds::get(&self.db, &root.id).await? else { return Ok(None) };
        let trust_id = identity.crypt().decrypt(&row.decrypt_method, &row.trust_id).map_err(|e| {
            tracing::error!(target: "keelson::identity", stack = root.id, "stored credentials: {e}");
            EngineError::InvalidEncryptionKey(
                "Can not decrypt data with the auth_encryption_key in heat config.".into(),
            )
        })?;
        Ok(Some(StoredCreds { trust_id, trustor_user_id: row.trustor_user_id, project_id: row.tenant_id }))
    }

    /// Heat's stored context for stack `stack_id`: a session acting as the
    /// stack's user through its trust, for plugins that call OpenStack
    /// services on the user's behalf. None without a trust.
    pub(crate) async fn stack_session(&self, stack_id: &str) -> Result<Option<Arc<Session>>, EngineError> {
        let (Some(identity), Some(stack)) = (&self.identity, store::stacks::get(&self.db, stack_id).await?) else {
            return Ok(None);
        };
        match self.stored_creds(&stack).await? {
            Some(creds) => Ok(Some(identity.stored_context(&creds)?)),
            None => Ok(None),
        }
    }

    /// Who a deferred action on `stack` acts as: the trustor, with the
    /// roles Keystone gives the trust's token now (Heat's
    /// `StoredContext.roles`). None without a trust.
    pub(crate) async fn stored_caller(&self, stack: &StackRow) -> Result<Option<Caller>, EngineError> {
        let Some(identity) = &self.identity else { return Ok(None) };
        let Some(creds) = self.stored_creds(stack).await? else { return Ok(None) };
        let roles = identity.authenticate_stored(&creds).await?;
        Ok(Some(Caller {
            project_id: creds.project_id.clone(),
            user_id: creds.trustor_user_id.clone(),
            user_name: creds.trustor_user_id.clone(),
            roles,
            // Heat's stored context is never admin (roles are not stored).
            is_admin: false,
            ..Caller::default()
        }))
    }

    /// Heat's `_delete_credentials` when a root stack's DELETE completes:
    /// the trust (through itself; a failure is logged, never blocks the
    /// delete), the stored row, then the stack-user project. Err: the
    /// reason the stack's DELETE fails with.
    pub(super) async fn delete_credentials(&self, stack: &StackRow) -> Result<(), String> {
        let Some(identity) = &self.identity else { return Ok(()) };
        if stack.owner_id.is_some() {
            return Ok(());
        }
        match self.stored_creds(stack).await {
            Ok(Some(creds)) => {
                if let Err(e) = identity.delete_trust(&creds).await {
                    tracing::error!(target: "keelson::identity", stack = stack.id, "Error deleting trust: {e}");
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(target: "keelson::identity", stack = stack.id, "Failed to retrieve user_creds: {e}")
            }
        }
        if let Err(e) = user_creds::delete(&self.db, &stack.id).await {
            tracing::warn!(target: "keelson::identity", stack = stack.id, "user_creds not deleted: {e}");
        }
        if let Some(project) = &stack.stack_user_project_id {
            if identity.has_stack_domain() {
                identity.delete_stack_project(project).await.map_err(|e| {
                    tracing::error!(target: "keelson::identity", stack = stack.id, "Error deleting project: {e}");
                    format!("Error deleting project: {}", e.message())
                })?;
            }
        }
        Ok(())
    }
}

fn failure(e: EngineError) -> crate::resources::ResourceFailure {
    crate::resources::ResourceFailure::from(e)
}

impl Engine {
    fn identity_or_fail(&self) -> Result<&Arc<Identity>, crate::resources::ResourceFailure> {
        self.identity.as_ref().ok_or_else(|| {
            failure(EngineError::AuthorizationFailure(
                "Authorization failed. This engine has no Keystone ([clients_keystone] auth_uri).".into(),
            ))
        })
    }

    /// The stack-user project of stack `stack_id` (Heat makes it with the
    /// root stack; a stack made before Keystone was configured gets one now).
    async fn stack_user_project(&self, stack_id: &str) -> Result<String, EngineError> {
        let Some(stack) = store::stacks::get(&self.db, stack_id).await? else {
            return Err(EngineError::stack_not_found(stack_id));
        };
        if let Some(p) = stack.stack_user_project_id.clone() {
            return Ok(p);
        }
        Err(EngineError::ValueError("Can't get user token, user not yet created".into()))
    }
}

impl crate::resources::host::IdentityHost for Engine {
    fn create_stack_user<'a>(
        &'a self,
        stack_id: &'a str,
        name: &'a str,
        password: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<crate::identity::StackUser, crate::resources::ResourceFailure>> {
        Box::pin(async move {
            let identity = self.identity_or_fail()?;
            let project = self.stack_user_project(stack_id).await.map_err(failure)?;
            identity.create_stack_user(name, &project, password).await.map_err(failure)
        })
    }

    fn delete_stack_user<'a>(
        &'a self,
        user: &'a crate::identity::StackUser,
    ) -> futures::future::BoxFuture<'a, Result<(), crate::resources::ResourceFailure>> {
        Box::pin(async move { self.identity_or_fail()?.delete_stack_user(user).await.map_err(failure) })
    }

    fn create_keypair<'a>(
        &'a self,
        user: &'a crate::identity::StackUser,
    ) -> futures::future::BoxFuture<
        'a,
        Result<keelson_openstack::identity::Ec2Credential, crate::resources::ResourceFailure>,
    > {
        Box::pin(async move { self.identity_or_fail()?.create_keypair(user).await.map_err(failure) })
    }

    fn delete_keypair<'a>(
        &'a self,
        credential_id: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), crate::resources::ResourceFailure>> {
        Box::pin(async move { self.identity_or_fail()?.delete_keypair(credential_id).await.map_err(failure) })
    }

    fn stack_user_token<'a>(
        &'a self,
        user: &'a crate::identity::StackUser,
        password: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<String, crate::resources::ResourceFailure>> {
        Box::pin(async move { self.identity_or_fail()?.stack_user_token(user, password).await.map_err(failure) })
    }

    fn stack_session<'a>(
        &'a self,
        stack_id: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<Arc<Session>>, EngineError>> {
        Box::pin(async move { Engine::stack_session(self, stack_id).await })
    }

    fn seal(&self, text: &str) -> Result<String, crate::resources::ResourceFailure> {
        match &self.identity {
            Some(identity) => {
                identity.crypt().encrypt(text).map_err(|e| failure(EngineError::internal(format!("encryption: {e}"))))
            }
            None => Ok(text.to_string()),
        }
    }

    fn open(&self, sealed: &str) -> Result<String, crate::resources::ResourceFailure> {
        match &self.identity {
            Some(identity) => identity.crypt().decrypt(crypt::METHOD, sealed).map_err(|_| {
                failure(EngineError::InvalidEncryptionKey(
                    "Can not decrypt data with the auth_encryption_key in heat config.".into(),
                ))
            }),
            None => Ok(sealed.to_string()),
        }
    }
}
