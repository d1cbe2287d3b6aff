//! Choosing the one error to report, as `jsonschema.exceptions.best_match`.
//!
//! `jsonschema.validate` raises `best_match(iter_errors(instance))`, so when
//! several keywords fail the reported text depends on this heuristic:
//!
//! * the maximum by *relevance* wins, earliest first on ties. Relevance
//!   prefers a shorter instance path, then the greater path (compared step by
//!   step), then keywords other than `anyOf`/`oneOf`, then errors whose
//!   schema's `type` the instance does *not* match;
//! * if the winner is an `anyOf`/`oneOf` failure, descend into its sub-errors
//!   and take the *least* relevant one (deepest, weak, type-matching), unless
//!   the two least relevant tie, in which case the parent itself is reported.

use std::cmp::Ordering;

use crate::compile::Compiled;
use crate::error::{Details, PathElement, ValidationError};
use crate::validate::RawError;

/// The relevance tuple of Python's `by_relevance()`, in comparison order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Relevance {
    /// `-len(error.path)`: shorter paths rank higher.
    neg_path_len: isize,
    /// `error.path` itself, for siblings at the same depth.
    path: Vec<PathElement>,
    /// `validator not in WEAK_MATCHES` (`anyOf`, `oneOf`).
    not_weak: bool,
    /// `not error._matches_type()`.
    type_mismatch: bool,
}

fn relevance(compiled: &Compiled, error: &RawError<'_>) -> Relevance {
    let path = error.path();
    let not_weak = !matches!(error.keyword, Some("anyOf") | Some("oneOf"));
    let matches_type =
        compiled.nodes[error.node].types.as_ref().is_some_and(|types| types.iter().any(|t| t.matches(&error.instance)));
    Relevance { neg_path_len: -(path.len() as isize), path, not_weak, type_mismatch: !matches_type }
}

/// Pick the error Python would raise; `None` when there are no errors.
pub(crate) fn best_match(compiled: &Compiled, errors: Vec<RawError<'_>>) -> Option<ValidationError> {
    let mut best: Option<(RawError<'_>, Relevance)> = None;
    for error in errors {
        let key = relevance(compiled, &error);
        let better = match &best {
            None => true,
            Some((_, best_key)) => key.cmp(best_key) == Ordering::Greater,
        };
        if better {
            best = Some((error, key));
        }
    }
    let (mut best, _) = best?;
    let mut path_prefix: Vec<PathElement> = Vec::new();
    let mut schema_prefix: Vec<PathElement> = Vec::new();
    while !best.context.is_empty() {
        let mut ranked: Vec<(Relevance, usize)> =
            best.context.iter().enumerate().map(|(i, e)| (relevance(compiled, e), i)).collect();
        // Stable: among equals the earliest comes first, like heapq.nsmallest.
        ranked.sort_by(|a, b| a.0.cmp(&b.0));
        if ranked.len() >= 2 && ranked[0].0 == ranked[1].0 {
            break;
        }
        let chosen = ranked[0].1;
        path_prefix.extend(best.path());
        schema_prefix.extend(best.schema_path());
        let mut context = std::mem::take(&mut best.context);
        best = context.swap_remove(chosen);
    }
    Some(into_public(compiled, best, path_prefix, schema_prefix))
}

/// Convert a top-level or chosen sub-error into the public, owned form.
pub(crate) fn into_public(
    compiled: &Compiled,
    error: RawError<'_>,
    mut path_prefix: Vec<PathElement>,
    mut schema_prefix: Vec<PathElement>,
) -> ValidationError {
    let relative_path = error.path();
    let relative_schema_path = error.schema_path();
    path_prefix.extend(relative_path.iter().cloned());
    schema_prefix.extend(relative_schema_path.iter().cloned());
    ValidationError::from(Details {
        message: error.message,
        keyword: error.keyword.map(str::to_owned),
        schema: compiled.nodes[error.node].schema.clone(),
        instance: error.instance.into_owned(),
        relative_path,
        absolute_path: path_prefix,
        relative_schema_path,
        absolute_schema_path: schema_prefix,
    })
}
