//! The `[placement]` and `[workarounds]` options of Placement's that shape
//! the allocation-candidates algorithm.

use keelson_runtime::config::{Declaration, Opt};

pub const GENERATION_STRATEGY: Opt<String> = Opt::str(
    "placement",
    "allocation_candidates_generation_strategy",
    "depth-first",
    "the order candidates are generated in when their number is limited",
)
.choices(&["depth-first", "breadth-first"]);
pub const OPTIMIZE_FOR_WIDE_PROVIDER_TREES: Opt<bool> = Opt::bool(
    "workarounds",
    "optimize_for_wide_provider_trees",
    false,
    "search trees with many providers in fewer queries",
);
/// -1: no limit.
pub const MAX_ALLOCATION_CANDIDATES: Opt<i64> =
    Opt::int("placement", "max_allocation_candidates", -1, "most candidates generated per request (-1: no limit)");
pub const RANDOMIZE_ALLOCATION_CANDIDATES: Opt<bool> =
    Opt::bool("placement", "randomize_allocation_candidates", false, "shuffle candidates before a limit applies");

pub const OPTIONS: &[&dyn Declaration] = &[
    &GENERATION_STRATEGY,
    &OPTIMIZE_FOR_WIDE_PROVIDER_TREES,
    &MAX_ALLOCATION_CANDIDATES,
    &RANDOMIZE_ALLOCATION_CANDIDATES,
];

#[cfg(test)]
mod tests {
    #[test]
    fn declarations_match_the_contract() {
        assert_eq!(keelson_runtime::config::contract_check(super::OPTIONS), Default::default());
    }
}
