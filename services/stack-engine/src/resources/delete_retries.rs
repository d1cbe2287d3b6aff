//! Heat's `Resource.delete` retries, for every type that calls a
//! service: a delete that meets a conflict (409) or finds the object still
//! there is run again, 2^n seconds later, at most `action_retry_limit`
//! times ([`ActionContext::action_retry_limit`]); then it fails with what
//! it met last.

use std::future::Future;

use keelson_openstack::OsError;

use super::client_errors::ClientErrors;
use super::{ActionContext, ResourceFailure};

/// What one delete attempt met that Heat retries.
pub(crate) enum Retryable {
    /// The service answered 409 (the failure names it as the type's
    /// client library does).
    Conflict(ResourceFailure),
    /// The service still has the object.
    StillThere,
}

impl ClientErrors {
    /// A delete call's answer: a 404 is success and a 409 retried.
    pub fn conflict_retryable(&self, result: Result<(), OsError>) -> Result<Option<Retryable>, ResourceFailure> {
        match result {
            Ok(()) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => self.retryable_conflict(e).map(Some),
        }
    }

    /// A 409 as [`Retryable::Conflict`]; any other error fails the
    /// attempt for good.
    pub fn retryable_conflict(&self, e: OsError) -> Result<Retryable, ResourceFailure> {
        match e {
            OsError::Conflict(_) => Ok(Retryable::Conflict(self.failure(e))),
            e => Err(self.failure(e)),
        }
    }
}

/// Runs `attempt` until it meets nothing Heat retries, sleeping 2^n
/// seconds between attempts (the stack's cancel and timeout apply).
pub(crate) async fn with_delete_retries<F, Fut>(ctx: &mut ActionContext, mut attempt: F) -> Result<(), ResourceFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<Retryable>, ResourceFailure>>,
{
    let mut retries = 0;
    loop {
        let retry = match attempt().await? {
            None => return Ok(()),
            Some(retry) => retry,
        };
        if retries >= ctx.action_retry_limit {
            return Err(match retry {
                Retryable::Conflict(failure) => failure,
                Retryable::StillThere => ResourceFailure::error(
                    "PhysicalResourceExists",
                    format!("The physical resource for ({}) exists.", ctx.stable_physical_name()),
                ),
            });
        }
        retries += 1;
        ctx.sleep(f64::from(2u32.saturating_pow(retries))).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::super::client_errors::CINDERCLIENT;
    use super::super::context::test_context;
    use super::super::Properties;
    use super::*;

    /// With `action_retry_limit` 0 the first refusal is the answer: the
    /// service's conflict as its client names it, or Heat's
    /// PhysicalResourceExists for an object still there.
    #[tokio::test]
    async fn the_configured_limit_bounds_the_attempts() {
        let (mut ctx, _tx) = test_context(Properties::new());
        ctx.action_retry_limit = 0;
        let mut attempts = 0;
        let refused = with_delete_retries(&mut ctx, || {
            attempts += 1;
            async { CINDERCLIENT.conflict_retryable(Err(OsError::Conflict("busy".into()))) }
        })
        .await;
        assert_eq!(refused, Err(ResourceFailure::error("ClientException", "busy (HTTP 409)")));
        assert_eq!(attempts, 1);
        let still_there = with_delete_retries(&mut ctx, || async { Ok(Some(Retryable::StillThere)) }).await;
        assert!(
            matches!(still_there, Err(ResourceFailure::Error { type_name, .. }) if type_name == "PhysicalResourceExists")
        );
        // One retry, 2 s later, then done.
        ctx.action_retry_limit = 1;
        let mut attempts = 0;
        let done = with_delete_retries(&mut ctx, || {
            attempts += 1;
            let first = attempts == 1;
            async move {
                if first {
                    Ok(Some(Retryable::StillThere))
                } else {
                    Ok(None)
                }
            }
        })
        .await;
        assert_eq!((done, attempts), (Ok(()), 2));
    }
}
