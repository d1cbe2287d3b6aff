//! The `[placement]` options of Placement's that change how the inventory
//! service writes.

use keelson_runtime::config::{Declaration, Opt};

/// Server-side retries of an allocation write that lost a
/// provider-generation race.
pub const ALLOCATION_CONFLICT_RETRY_COUNT: Opt<i64> = Opt::int(
    "placement",
    "allocation_conflict_retry_count",
    10,
    "retries of an allocation write that lost a generation race",
);
/// Project and user recorded for consumers created without them.
pub const INCOMPLETE_CONSUMER_PROJECT_ID: Opt<String> = Opt::str(
    "placement",
    "incomplete_consumer_project_id",
    "00000000-0000-0000-0000-000000000000",
    "project recorded for consumers created without one",
);
pub const INCOMPLETE_CONSUMER_USER_ID: Opt<String> = Opt::str(
    "placement",
    "incomplete_consumer_user_id",
    "00000000-0000-0000-0000-000000000000",
    "user recorded for consumers created without one",
);

pub const OPTIONS: &[&dyn Declaration] =
    &[&ALLOCATION_CONFLICT_RETRY_COUNT, &INCOMPLETE_CONSUMER_PROJECT_ID, &INCOMPLETE_CONSUMER_USER_ID];

#[cfg(test)]
mod tests {
    #[test]
    fn declarations_match_the_contract() {
        assert_eq!(keelson_runtime::config::contract_check(super::OPTIONS), Default::default());
    }
}
