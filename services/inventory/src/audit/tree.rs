//! The provider tree's own consistency, decided from the rows alone (no
//! database): every parent exists, no provider is its own ancestor, and
//! each provider's recorded root is the top of its parent chain.

use std::collections::HashMap;

use super::{Finding, Provider};

/// One `resource_providers` row, as the audit reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRow {
    pub provider: Provider,
    pub generation: Option<i64>,
    pub root_provider_id: Option<i64>,
    pub parent_provider_id: Option<i64>,
}

/// Where following a provider's parents ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ChainEnd {
    /// At a provider without a parent: the tree's root.
    Root(i64),
    /// At a parent id no provider has, or on a cycle: no root to expect.
    Broken,
}

/// The tree findings of `rows`: missing parents, parent cycles, wrong
/// roots and missing generations. Linear in the number of providers:
/// each chain is walked once and its end remembered for every provider on
/// it.
pub fn check(rows: &[ProviderRow]) -> Vec<Finding> {
    let by_id: HashMap<i64, &ProviderRow> = rows.iter().map(|r| (r.provider.id, r)).collect();
    let mut ends: HashMap<i64, ChainEnd> = HashMap::with_capacity(rows.len());
    let mut findings = Vec::new();

    for row in rows {
        if ends.contains_key(&row.provider.id) {
            continue;
        }
        // Walk up until a provider whose end is known, a root, a missing
        // parent or a provider already on this walk (a cycle).
        let mut walk: Vec<i64> = Vec::new();
        let mut on_walk: HashMap<i64, usize> = HashMap::new();
        let mut current = row;
        let end = loop {
            if let Some(known) = ends.get(&current.provider.id) {
                break *known;
            }
            if let Some(&at) = on_walk.get(&current.provider.id) {
                for id in &walk[at..] {
                    if let Some(r) = by_id.get(id) {
                        findings.push(Finding::ParentCycle { provider: r.provider.clone() });
                    }
                }
                break ChainEnd::Broken;
            }
            on_walk.insert(current.provider.id, walk.len());
            walk.push(current.provider.id);
            match current.parent_provider_id {
                None => break ChainEnd::Root(current.provider.id),
                Some(parent) => match by_id.get(&parent) {
                    Some(p) => current = p,
                    None => {
                        findings.push(Finding::MissingParent { provider: current.provider.clone(), parent_id: parent });
                        break ChainEnd::Broken;
                    }
                },
            }
        };
        for id in walk {
            ends.insert(id, end);
        }
    }

    for row in rows {
        if let Some(ChainEnd::Root(root)) = ends.get(&row.provider.id) {
            if row.root_provider_id != Some(*root) {
                findings.push(Finding::WrongRoot {
                    provider: row.provider.clone(),
                    recorded: row.root_provider_id,
                    expected: *root,
                    parent_id: row.parent_provider_id,
                });
            }
        }
        if row.generation.is_none() {
            findings.push(Finding::MissingGeneration { provider: row.provider.clone() });
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, parent: Option<i64>, root: Option<i64>) -> ProviderRow {
        ProviderRow {
            provider: Provider { id, uuid: format!("uuid-{id}"), name: Some(format!("rp{id}")) },
            generation: Some(1),
            root_provider_id: root,
            parent_provider_id: parent,
        }
    }

    fn kinds(findings: &[Finding]) -> Vec<(&'static str, i64)> {
        let mut k: Vec<_> = findings.iter().map(|f| (f.kind(), f.provider().map_or(0, |p| p.id))).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn a_sound_forest_has_no_findings() {
        let rows = [row(1, None, Some(1)), row(2, Some(1), Some(1)), row(3, Some(2), Some(1)), row(4, None, Some(4))];
        assert!(check(&rows).is_empty());
    }

    #[test]
    fn a_wrong_or_missing_root_expects_the_top_of_the_chain() {
        let rows = [row(1, None, None), row(2, Some(1), Some(2)), row(3, Some(2), Some(1))];
        let findings = check(&rows);
        assert_eq!(kinds(&findings), vec![("wrong-root", 1), ("wrong-root", 2)]);
        for f in &findings {
            match f {
                Finding::WrongRoot { expected, .. } => assert_eq!(*expected, 1),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn a_missing_parent_is_reported_once_and_its_subtree_expects_no_root() {
        let rows = [row(2, Some(99), Some(2)), row(3, Some(2), Some(7))];
        assert_eq!(kinds(&check(&rows)), vec![("missing-parent", 2)]);
    }

    #[test]
    fn every_provider_on_a_cycle_is_reported_and_no_root_is_expected_below_it() {
        let rows =
            [row(1, Some(3), Some(1)), row(2, Some(1), Some(1)), row(3, Some(2), Some(1)), row(4, Some(3), None)];
        assert_eq!(kinds(&check(&rows)), vec![("parent-cycle", 1), ("parent-cycle", 2), ("parent-cycle", 3)]);
    }

    #[test]
    fn a_provider_that_is_its_own_parent_is_a_cycle() {
        assert_eq!(kinds(&check(&[row(5, Some(5), Some(5))])), vec![("parent-cycle", 5)]);
    }

    #[test]
    fn a_missing_generation_is_reported() {
        let mut r = row(1, None, Some(1));
        r.generation = None;
        assert_eq!(kinds(&check(&[r])), vec![("missing-generation", 1)]);
    }
}
