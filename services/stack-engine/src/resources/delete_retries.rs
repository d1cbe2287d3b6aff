//! Heat's `Resource.delete` retries, for every type that calls a
//! service: a delete that meets a conflict (409) or finds the object still
//! there is run again, 2^n seconds later, at most [`DELETE_RETRIES`]
//! times; then it fails with what it met last.

use std::future::Future;

use keelson_openstack::OsError;

use super::client_errors::ClientErrors;
use super::{ActionContext, ResourceFailure};

/// Heat's `action_retry_limit` default: retries of a delete.
pub(crate) const DELETE_RETRIES: u32 = 5;

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
        if retries >= DELETE_RETRIES {
            return Err(match retry {
                Retryable::Conflict(failure) => failure,
                Retryable::StillThere => ResourceFailure::error(
                    "PhysicalResourceExists",
                    format!("The physical resource for ({}) exists.", ctx.stable_physical_name()),
                ),
            });
        }
        retries += 1;
        ctx.sleep(f64::from(2u32.pow(retries))).await?;
    }
}
