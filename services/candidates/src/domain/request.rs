//! What a client asks for, and the rules a request must follow before any
//! search (upstream's `placement/lib.py` checks, with its texts).

use std::collections::BTreeSet;

use crate::error::{Error, Result, QUERY_BAD_VALUE, QUERY_MISSING_VALUE};

/// How granular groups may share providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    None,
    /// Every granular group on its own provider.
    Isolate,
}

/// One request group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestGroup {
    /// `""` for the unsuffixed group.
    pub suffix: String,
    /// Class name → amount, in the order given.
    pub resources: Vec<(String, i64)>,
    /// Each inner list is an any-of set; all sets must match.
    pub required: Vec<Vec<String>>,
    pub forbidden: Vec<String>,
    /// Each inner list is an any-of set of aggregate uuids.
    pub member_of: Vec<Vec<String>>,
    pub forbidden_aggregates: Vec<String>,
    pub in_tree: Option<String>,
    /// One provider for the whole group (granular groups).
    pub use_same_provider: bool,
}

impl RequestGroup {
    /// The unsuffixed group, whose resources may come from a whole tree.
    pub fn unsuffixed(resources: &[(&str, i64)]) -> Self {
        RequestGroup { resources: resources.iter().map(|(c, a)| (c.to_string(), *a)).collect(), ..Default::default() }
    }

    /// A granular group (one provider).
    pub fn granular(suffix: &str, resources: &[(&str, i64)]) -> Self {
        RequestGroup {
            suffix: suffix.to_string(),
            resources: resources.iter().map(|(c, a)| (c.to_string(), *a)).collect(),
            use_same_provider: true,
            ..Default::default()
        }
    }
}

/// A whole `GET /allocation_candidates` request, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    /// In the client's order (which decides generation order, and so which
    /// candidates a `max_allocation_candidates` cut keeps).
    pub groups: Vec<RequestGroup>,
    pub group_policy: Option<GroupPolicy>,
    pub root_required: Vec<String>,
    pub root_forbidden: Vec<String>,
    pub same_subtrees: Vec<Vec<String>>,
    pub limit: Option<usize>,
    /// 1.29: candidates may use several providers of one tree.
    pub nested_aware: bool,
    /// 1.36: groups named in `same_subtree` may have no resources.
    pub allow_resourceless_groups: bool,
    /// 1.27: summaries show every class, not only the requested ones.
    pub all_classes_in_summaries: bool,
    /// 1.17: summaries carry traits.
    pub traits_in_summaries: bool,
}

impl Request {
    /// Every class name any group asks for.
    pub fn requested_classes(&self) -> BTreeSet<&str> {
        self.groups.iter().flat_map(|g| g.resources.iter().map(|(c, _)| c.as_str())).collect()
    }

    /// Checks the rules upstream applies after parsing, in its order; the
    /// first broken one answers 400 with upstream's text.
    pub fn validate(&self) -> Result<()> {
        let mut seen = BTreeSet::new();
        for g in &self.groups {
            if !seen.insert(g.suffix.as_str()) {
                return Err(Error::BadRequest(format!(
                    "Request group suffix {} is given more than once.",
                    py_repr(&g.suffix)
                )));
            }
            if let Some((class, amount)) = g.resources.iter().find(|(_, a)| *a < 1) {
                return Err(Error::BadRequest(format!(
                    "Requested resource {class} requires amount >= 1. Got: {amount}."
                )));
            }
        }
        if self.same_subtrees.iter().any(|s| s.iter().any(String::is_empty)) {
            return Err(Error::BadRequestCode(
                QUERY_BAD_VALUE,
                "Empty string (unsuffixed group) can not be specified in `same_subtree` ".into(),
            ));
        }
        let conflicts: Vec<&str> =
            self.root_required.iter().filter(|t| self.root_forbidden.contains(t)).map(String::as_str).collect();
        if !conflicts.is_empty() {
            return Err(Error::BadRequestCode(
                QUERY_BAD_VALUE,
                format!("Conflicting required and forbidden traits found in root_required: {}", conflicts.join(", ")),
            ));
        }
        if self.allow_resourceless_groups {
            self.check_resourceless_groups()?;
        } else {
            self.check_orphans()?;
        }
        self.check_forbidden_conflicts()?;
        if self.group_policy.is_none() && self.groups.iter().filter(|g| g.use_same_provider).count() > 1 {
            return Err(Error::BadRequest(
                "The \"group_policy\" parameter is required when specifying more than one \"resources{N}\" parameter."
                    .into(),
            ));
        }
        Ok(())
    }

    /// From 1.36: resourceless groups are allowed only in `same_subtree`,
    /// and `same_subtree` names only existing groups.
    fn check_resourceless_groups(&self) -> Result<()> {
        let resourceless: Vec<&str> =
            self.groups.iter().filter(|g| g.resources.is_empty()).map(|g| g.suffix.as_str()).collect();
        if resourceless.len() == self.groups.len() {
            return Err(Error::BadRequestCode(
                QUERY_MISSING_VALUE,
                "There must be at least one resources or resources[$S] parameter.".into(),
            ));
        }
        let in_subtrees: BTreeSet<&str> = self.same_subtrees.iter().flatten().map(String::as_str).collect();
        let mut bad: Vec<&str> = resourceless.iter().copied().filter(|s| !in_subtrees.contains(s)).collect();
        if !bad.is_empty() {
            bad.sort_unstable();
            return Err(Error::BadRequestCode(
                QUERY_BAD_VALUE,
                format!(
                    "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - {}.",
                    py_list(&bad)
                ),
            ));
        }
        let known: Vec<&str> = self.groups.iter().map(|g| g.suffix.as_str()).collect();
        let bad: Vec<&str> = in_subtrees.iter().copied().filter(|s| !known.contains(s)).collect();
        if !bad.is_empty() {
            return Err(Error::BadRequestCode(
                QUERY_BAD_VALUE,
                format!(
                    "Real suffixes should be specified in `same_subtree`: {} not found in {}.",
                    py_list(&bad),
                    py_list(&known)
                ),
            ));
        }
        Ok(())
    }

    /// Before 1.36: every group needs resources.
    fn check_orphans(&self) -> Result<()> {
        let orphans: Vec<String> = self
            .groups
            .iter()
            .filter(|g| !g.required.is_empty() && g.resources.is_empty())
            .map(|g| format!("required{}", g.suffix))
            .collect();
        if !orphans.is_empty() {
            return Err(Error::BadRequest(format!(
                "All traits parameters must be associated with resources.  Found the following orphaned traits keys: {}",
                orphans.join(", ")
            )));
        }
        let orphans: Vec<String> = self
            .groups
            .iter()
            .filter(|g| g.resources.is_empty() && !(g.member_of.is_empty() && g.forbidden_aggregates.is_empty()))
            .map(|g| format!("member_of{}", g.suffix))
            .collect();
        if !orphans.is_empty() {
            return Err(Error::BadRequest(format!(
                "All member_of parameters must be associated with resources. Found the following orphaned member_of keys: {}",
                orphans.join(", ")
            )));
        }
        if self.groups.iter().any(|g| g.resources.is_empty()) {
            return Err(Error::BadRequest("All request groups must specify resources.".into()));
        }
        if self.groups.is_empty() {
            return Err(Error::BadRequest(
                "At least one request group (`resources` or `resources{$S}`) is required.".into(),
            ));
        }
        Ok(())
    }

    /// An any-of set whose every trait is also forbidden can never match.
    fn check_forbidden_conflicts(&self) -> Result<()> {
        let mut conflicts = Vec::new();
        for g in &self.groups {
            for any in &g.required {
                if !any.is_empty() && any.iter().all(|t| g.forbidden.contains(t)) {
                    let mut names: Vec<&str> = any.iter().map(String::as_str).collect();
                    names.sort_unstable();
                    names.dedup();
                    conflicts.push(format!("required{}: ({})", g.suffix, names.join(", ")));
                }
            }
        }
        if conflicts.is_empty() {
            return Ok(());
        }
        conflicts.sort();
        Err(Error::BadRequest(format!(
            "Conflicting required and forbidden traits found in the following traits keys: {}",
            conflicts.join(", ")
        )))
    }
}

/// Python's `repr()` of a string and of a list of strings, as upstream's
/// messages print them.
pub use keelson_pyfmt::{repr_str as py_repr, repr_str_list as py_list};

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<()>) -> String {
        match r {
            Err(Error::BadRequest(m)) | Err(Error::BadRequestCode(_, m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn group_policy_needed_with_two_granular_groups() {
        let r = Request {
            groups: vec![RequestGroup::granular("1", &[("VCPU", 1)]), RequestGroup::granular("2", &[("VCPU", 1)])],
            ..Default::default()
        };
        assert!(message(r.validate()).contains("\"group_policy\" parameter is required"));
        let ok = Request { group_policy: Some(GroupPolicy::None), ..r };
        assert!(ok.validate().is_ok());
    }

    #[test]
    fn orphans_before_1_36() {
        let r = Request {
            groups: vec![
                RequestGroup { required: vec![vec!["FOO".into()]], ..Default::default() },
                RequestGroup {
                    suffix: "1".into(),
                    required: vec![vec!["BAR".into()]],
                    use_same_provider: true,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            message(r.validate()),
            "All traits parameters must be associated with resources.  Found the following orphaned traits keys: required, required1"
        );
        assert!(message(Request::default().validate()).starts_with("At least one request group"));
    }

    #[test]
    fn resourceless_rules_from_1_36() {
        let mut r = Request {
            groups: vec![
                RequestGroup::unsuffixed(&[("VCPU", 1)]),
                RequestGroup { suffix: "X".into(), use_same_provider: true, ..Default::default() },
            ],
            allow_resourceless_groups: true,
            ..Default::default()
        };
        assert_eq!(
            message(r.validate()),
            "Resourceless suffixed group request should be specified in `same_subtree` query param: bad group(s) - ['X']."
        );
        r.same_subtrees = vec![vec!["X".into(), "Y".into()]];
        assert_eq!(
            message(r.validate()),
            "Real suffixes should be specified in `same_subtree`: ['Y'] not found in ['', 'X']."
        );
        r.same_subtrees = vec![vec!["X".into()]];
        assert!(r.validate().is_ok());
    }

    #[test]
    fn conflicting_traits() {
        let r = Request {
            groups: vec![RequestGroup {
                resources: vec![("VCPU".into(), 1)],
                required: vec![vec!["B".into(), "A".into()], vec!["C".into()]],
                forbidden: vec!["A".into(), "B".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            message(r.validate()),
            "Conflicting required and forbidden traits found in the following traits keys: required: (A, B)"
        );
    }

    #[test]
    fn python_repr() {
        assert_eq!(py_list(&["", "a'b", "x"]), r#"['', "a'b", 'x']"#);
    }
}
