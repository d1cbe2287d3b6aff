//! `keelson placement explain` on the store: scenarios with exact
//! explanations, and the check every explanation must pass against the real
//! answer to the same request (used by the property test too).

use std::collections::BTreeSet;

use super::{request, World};
use crate::domain::explain::{Explained, Rule, TreeRule};
use crate::domain::fleet::Misfit;
use crate::domain::request::{GroupPolicy, Request, RequestGroup};
use crate::domain::{NamedOutcome, Settings};
use crate::store::Store;

impl World {
    pub async fn explain(&self, settings: Settings, req: &Request) -> crate::error::Result<Explained> {
        Store::new(self.db.clone(), settings).explain(req).await
    }

    fn name_of(&self, e: &Explained, p: i64) -> String {
        self.names.get(e.uuid(p)).cloned().unwrap_or_else(|| format!("#{p}"))
    }
}

/// A rule as a short text, with names.
fn rule_text(e: &Explained, r: &Rule) -> String {
    let traits = |ids: &[i64]| ids.iter().map(|t| e.trait_name(*t)).collect::<Vec<_>>().join("|");
    match r {
        Rule::NoInventory { class } => format!("no_inventory {}", e.class_name(*class)),
        Rule::Inventory { class, amount, misfit } => {
            let value = match misfit {
                Misfit::StepSize(v) | Misfit::MinUnit(v) | Misfit::MaxUnit(v) => *v,
                Misfit::Capacity { free } => *free,
            };
            format!("{} {}:{amount} ({value})", r.kind(), e.class_name(*class))
        }
        Rule::RequiredTraits { any_of } => format!("required_traits {}", traits(any_of)),
        Rule::ForbiddenTrait { name } | Rule::RootRequired { name } | Rule::RootForbidden { name } => {
            format!("{} {}", r.kind(), e.trait_name(*name))
        }
        other => other.kind().to_string(),
    }
}

/// Every group's exclusions as `suffix: provider rule`, then every tree as
/// `tree provider: rule` (`in answer` for the kept ones).
fn lines(w: &World, e: &Explained) -> Vec<String> {
    let mut out = Vec::new();
    for g in &e.explanation.groups {
        if !g.searched {
            out.push(format!("{}: not searched", g.suffix));
        }
        for (p, r) in &g.excluded {
            out.push(format!("{}: {} {}", g.suffix, w.name_of(e, *p), rule_text(e, r)));
        }
    }
    for (anchor, rule) in &e.explanation.trees {
        let why = match rule {
            None => "in answer".to_string(),
            Some(TreeRule::OverallCapacity { class, wanted, room }) => {
                format!("overall_capacity {} {wanted}>{room}", e.class_name(*class))
            }
            Some(TreeRule::Isolate { group }) | Some(TreeRule::GroupMissing { group }) => {
                format!("{} {group}", rule.map(|r| r.kind()).unwrap_or_default())
            }
            Some(other) => other.kind().to_string(),
        };
        out.push(format!("tree {}: {why}", w.name_of(e, *anchor)));
    }
    out
}

/// What every explanation must say of the real answer `o` to its request:
/// the same candidates and providers, every loaded provider of a searched
/// group either among its candidates or excluded by exactly one rule, and a
/// rule for every tree left out.
pub fn check_against_answer(e: &Explained, o: &NamedOutcome, context: &str) {
    let x = &e.explanation;
    assert_eq!(x.candidates, o.allocation_requests.len(), "{context}: candidate count");
    let in_answer: BTreeSet<String> = o
        .allocation_requests
        .iter()
        .flat_map(|a| {
            a.allocations.iter().map(|(u, _)| u.clone()).chain(a.mappings.iter().flat_map(|(_, us)| us.clone()))
        })
        .collect();
    let explained: BTreeSet<String> = x.providers_in_answer.iter().map(|p| e.uuid(*p).to_string()).collect();
    assert_eq!(explained, in_answer, "{context}: providers in the answer");
    for (i, g) in x.groups.iter().enumerate() {
        if !g.searched {
            assert!(x.candidates == 0 && g.survivors.is_empty() && g.excluded.is_empty(), "{context}: group {i}");
            continue;
        }
        let excluded: BTreeSet<i64> = g.excluded.iter().map(|(p, _)| *p).collect();
        assert_eq!(excluded.len(), g.excluded.len(), "{context}: group {i}: a provider excluded twice");
        assert!(g.survivors.iter().all(|p| !excluded.contains(p)), "{context}: group {i}: a survivor excluded");
        assert_eq!(g.survivors.len() + excluded.len(), g.providers, "{context}: group {i}: {g:?}");
        // The answer's providers for this group survived its search.
        let survivors: BTreeSet<&str> = g.survivors.iter().map(|p| e.uuid(*p)).collect();
        for a in &o.allocation_requests {
            for u in &a.mappings[i].1 {
                assert!(survivors.contains(u.as_str()), "{context}: group {i}: {u} mapped but not a survivor");
            }
        }
    }
    let kept = x.trees.iter().filter(|(_, r)| r.is_none()).count();
    assert_eq!(kept > 0, x.candidates > 0, "{context}: trees kept {:?}", x.trees);
    if x.candidates == 0 {
        assert!(
            x.trees.iter().all(|(_, r)| r.is_some()) || x.groups.iter().any(|g| g.survivors.is_empty()),
            "{context}: an empty answer unexplained"
        );
    }
}

async fn check(w: &World, settings: Settings, req: &Request) -> Vec<String> {
    let o = w.ask(settings.clone(), req).await.expect("answer");
    let e = w.explain(settings, req).await.expect("explanation");
    check_against_answer(&e, &o, "scenario");
    lines(w, &e)
}

/// "No valid host": one compute disabled, two short of VCPU, one without
/// any, one that fits.
#[tokio::test]
async fn no_valid_host_explained() {
    let mut w = World::new().await;
    for (cn, used) in [("c1", 0), ("c2", 4), ("c3", 2), ("c4", 0)] {
        w.provider(cn, None).await;
        w.inventory(cn, "VCPU", 8).await;
        w.inventory(cn, "MEMORY_MB", 2048).await;
        if used > 0 {
            w.allocate(cn, "VCPU", used).await;
        }
    }
    w.add_trait("c1", "COMPUTE_STATUS_DISABLED").await;
    w.provider("m1", None).await;
    w.inventory("m1", "MEMORY_MB", 4096).await;
    let mut g = RequestGroup::unsuffixed(&[("VCPU", 8), ("MEMORY_MB", 1024)]);
    g.forbidden = vec!["COMPUTE_STATUS_DISABLED".into()];
    let req = request(vec![g], None);
    assert_eq!(
        check(&w, Settings::default(), &req).await,
        vec![
            ": c1 forbidden_trait COMPUTE_STATUS_DISABLED",
            ": c2 capacity VCPU:8 (4)",
            ": c3 capacity VCPU:8 (6)",
            ": m1 no_inventory VCPU",
            "tree c4: in answer",
        ]
    );
    let e = w.explain(Settings::default(), &req).await.unwrap();
    let tallies = e.explanation.groups[0].tallies();
    let counts: Vec<(&str, usize, Option<i64>)> =
        tallies.iter().map(|t| (t.rule.kind(), t.providers, t.largest_free)).collect();
    assert_eq!(counts, vec![("capacity", 2, Some(6)), ("no_inventory", 1, None), ("forbidden_trait", 1, None)]);

    // Nothing fits once c4 is taken too.
    w.allocate("c4", "VCPU", 1).await;
    let lines = check(&w, Settings::default(), &req).await;
    assert_eq!(lines.last().map(String::as_str), Some(": m1 no_inventory VCPU"));
    assert!(lines.contains(&": c4 capacity VCPU:8 (7)".to_string()), "{lines:?}");
}

/// The merge: isolate, the overall capacity pre-check, a group that finds
/// nothing, `limit`.
#[tokio::test]
async fn merge_rules_explained() {
    let mut w = World::new().await;
    w.provider("one", None).await;
    w.provider("one_pf", Some("one")).await;
    w.inventory("one_pf", "SRIOV_NET_VF", 8).await;
    w.provider("two", None).await;
    for pf in ["two_pf1", "two_pf2"] {
        w.provider(pf, Some("two")).await;
        w.inventory(pf, "SRIOV_NET_VF", 1).await;
    }
    let vf = |s: &str| RequestGroup::granular(s, &[("SRIOV_NET_VF", 1)]);
    let isolate = request(vec![vf("1"), vf("2")], Some(GroupPolicy::Isolate));
    assert_eq!(
        check(&w, Settings::default(), &isolate).await,
        vec!["tree one: group_policy_isolate 1", "tree two: in answer"]
    );
    let three = request(vec![vf("1"), vf("2"), vf("3")], Some(GroupPolicy::None));
    assert_eq!(
        check(&w, Settings::default(), &three).await,
        vec!["tree one: in answer", "tree two: overall_capacity SRIOV_NET_VF 3>2"]
    );
    let mut limited = request(vec![vf("1"), vf("2")], Some(GroupPolicy::None));
    limited.limit = Some(1);
    assert_eq!(check(&w, Settings::default(), &limited).await, vec!["tree one: in answer", "tree two: limit"]);
    let capped = super::settings(crate::domain::Strategy::DepthFirst, false, 1);
    let lines = check(&w, capped, &request(vec![vf("1"), vf("2")], Some(GroupPolicy::None))).await;
    assert_eq!(lines, vec!["tree one: in answer", "tree two: max_allocation_candidates"]);

    let empty_first =
        request(vec![RequestGroup::granular("1", &[("SRIOV_NET_VF", 9)]), vf("2")], Some(GroupPolicy::None));
    assert_eq!(
        check(&w, Settings::default(), &empty_first).await,
        vec![
            "1: one_pf max_unit SRIOV_NET_VF:9 (8)",
            "1: two_pf1 max_unit SRIOV_NET_VF:9 (1)",
            "1: two_pf2 max_unit SRIOV_NET_VF:9 (1)",
            "2: not searched",
        ]
    );
}

/// root_required, member_of and a sharing provider under the unsuffixed
/// group's tree search.
#[tokio::test]
async fn tree_search_rules_explained() {
    const AGG: &str = "aaaaaaaa-0000-4000-8000-000000000009";
    let mut w = World::new().await;
    for cn in ["cn1", "cn2"] {
        w.provider(cn, None).await;
        w.inventory(cn, "VCPU", 8).await;
    }
    w.aggregate("cn1", AGG).await;
    w.add_trait("cn2", "CUSTOM_GOLD").await;
    w.provider("ss", None).await;
    w.inventory("ss", "DISK_GB", 100).await;
    w.add_trait("ss", "MISC_SHARES_VIA_AGGREGATE").await;
    w.aggregate("ss", AGG).await;
    let group = RequestGroup::unsuffixed(&[("VCPU", 1), ("DISK_GB", 10)]);
    let req = request(vec![group.clone()], None);
    assert_eq!(check(&w, Settings::default(), &req).await, vec![": cn2 incomplete_tree", "tree cn1: in answer"]);
    let mut gold = req.clone();
    gold.root_required = vec!["CUSTOM_GOLD".into()];
    assert_eq!(
        check(&w, Settings::default(), &gold).await,
        vec![": cn1 root_required CUSTOM_GOLD", ": cn2 incomplete_tree", ": ss root_required CUSTOM_GOLD"]
    );
}
