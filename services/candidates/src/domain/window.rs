//! When the fleet may be read a window of roots at a time, and how the
//! window grows: a request whose answer is cut at a count (`limit` from
//! 1.29 on, or `max_allocation_candidates`) needs only the trees its first
//! candidates come from, and on a large fleet those are a small part of
//! it.
//!
//! Why a window is exact. Generation visits anchors in the order of the
//! first group's candidates, and the first group lists them by ascending
//! root id when it is searched as trees (an unnumbered group on a fleet
//! with trees or sharing providers) or when every provider is its own
//! root and serves only itself (no trees, no sharing providers). A
//! candidate uses only its anchor's tree and sharing providers. So with
//! every tree whose root is at most `upto` loaded, and every sharing
//! provider's tree, the candidates anchored at most at `upto` are the
//! whole fleet's, in the whole fleet's order, and they come before every
//! other: once there are `cap` of them, they are the answer's first `cap`.
//! Depth-first generation keeps an anchor's candidates together; a
//! breadth-first or random answer is not a prefix, so it is never
//! windowed.

use super::fleet::ProviderId;
use super::request::Request;
use super::{Settings, Strategy};

/// The count a windowed read must reach (the generation's cut), or None
/// when this request's answer is not a prefix by roots. `has_trees` and
/// `has_sharing`: whether the fleet has nested providers and sharing
/// providers.
pub fn cap(req: &Request, settings: &Settings, has_trees: bool, has_sharing: bool) -> Option<usize> {
    let cut = settings.max_candidates?;
    let first = req.groups.first()?;
    let ascending = !first.use_same_provider || (!has_trees && !has_sharing);
    // A resourceless group may use any provider; same_subtree reads the
    // trees of every provider in play before generating.
    let whole_fleet = req.groups.iter().any(|g| g.resources.is_empty()) || !req.same_subtrees.is_empty();
    (ascending && !whole_fleet && !settings.randomize && settings.strategy == Strategy::DepthFirst).then_some(cut)
}

/// The ids a first window spans: a root per candidate and a quarter more
/// on a flat fleet (most computes of a cloud have room for one more
/// server), twice that with trees (a tree's providers take ids between its
/// root's and the next root's). Where that is short, the next window is
/// sized from what this one found.
pub fn first_span(cap: usize, has_trees: bool) -> i64 {
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    let flat = cap.saturating_add(cap / 4).max(1);
    if has_trees {
        flat.saturating_mul(2)
    } else {
        flat
    }
}

/// The next window's span, after `span` ids gave `found` of the `cap`
/// candidates: sized from the candidates per id seen so far (a quarter
/// more), at least twice and at most sixteen times the last.
pub fn next_span(span: i64, found: usize, cap: usize) -> i64 {
    let (least, most) = (span.saturating_mul(2), span.saturating_mul(16));
    if found == 0 {
        return most;
    }
    let wanted = i128::from(span) * cap as i128 * 5 / (found as i128 * 4);
    i64::try_from(wanted).unwrap_or(i64::MAX).clamp(least, most)
}

/// The last root id of a window starting at `first` and spanning `span`
/// ids, or None when that reaches `last` (the window is the whole fleet).
pub fn upto(first: ProviderId, span: i64, last: ProviderId) -> Option<ProviderId> {
    let upto = first.saturating_add(span.saturating_sub(1));
    (upto < last).then_some(upto)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::request::RequestGroup;

    fn nova_default() -> Request {
        Request {
            groups: vec![RequestGroup::unsuffixed(&[("VCPU", 2), ("MEMORY_MB", 2048), ("DISK_GB", 20)])],
            root_forbidden: vec!["COMPUTE_STATUS_DISABLED".into()],
            limit: Some(1000),
            nested_aware: true,
            ..Request::default()
        }
    }

    #[test]
    fn only_an_answer_cut_in_root_order_is_windowed() {
        let req = nova_default();
        let limited = Settings::default().stopping_at_limit(&req, true);
        assert_eq!(cap(&req, &limited, true, true), Some(1000));
        assert_eq!(cap(&req, &Settings::default(), true, false), None, "no cut");
        let random = Settings { randomize: true, ..Settings::default() }.stopping_at_limit(&req, false);
        assert_eq!(cap(&req, &random, false, false), None);
        let breadth = Settings { strategy: Strategy::BreadthFirst, ..limited.clone() };
        assert_eq!(cap(&req, &breadth, true, false), None);

        // A granular first group lists providers, not roots, in order.
        let granular = Request { groups: vec![RequestGroup::granular("1", &[("VCPU", 1)])], ..nova_default() };
        assert_eq!(cap(&granular, &limited, false, false), Some(1000));
        assert_eq!(cap(&granular, &limited, true, false), None);
        assert_eq!(cap(&granular, &limited, false, true), None);

        let subtree = Request {
            groups: vec![RequestGroup::granular("1", &[("VCPU", 1)]), RequestGroup::granular("2", &[])],
            same_subtrees: vec![vec!["1".into(), "2".into()]],
            ..nova_default()
        };
        assert_eq!(cap(&subtree, &limited, false, false), None);
    }

    #[test]
    fn windows_grow_towards_the_cap_and_end_at_the_fleet() {
        assert_eq!(first_span(1000, false), 1250);
        assert_eq!(first_span(1000, true), 2500);
        assert_eq!(first_span(1, false), 1);
        // Half the candidates in 2,000 ids: 5,000 ids next (a quarter more).
        assert_eq!(next_span(2000, 500, 1000), 5000);
        // Nothing found, or nearly enough: sixteen and twice the span.
        assert_eq!(next_span(2000, 0, 1000), 32_000);
        assert_eq!(next_span(2000, 990, 1000), 4000);
        assert_eq!(upto(1, 2000, 100_000), Some(2000));
        assert_eq!(upto(1, 100_000, 100_000), None);
        assert_eq!(upto(i64::MAX - 1, i64::MAX, i64::MAX), None);
    }
}
