//! The options the binary reads itself (where each service listens, the
//! databases, telemetry), and the registry it assembles from Placement's
//! contract and every linked crate's declarations: the one the files are
//! validated against and `keelson options` prints.

use keelson_runtime::config::{Declaration, Opt, Registry};

// Where each service listens (gRPC) and how the gateway reaches the stack
// engines (it fails over between them).
pub const INVENTORY_LISTEN: Opt<String> =
    Opt::str("keelson", "inventory_listen", "127.0.0.1:50051", "where the inventory service listens");
pub const CANDIDATES_LISTEN: Opt<String> =
    Opt::str("keelson", "candidates_listen", "127.0.0.1:50052", "where the candidates service listens");
pub const ENGINE_LISTEN: Opt<String> =
    Opt::str("keelson", "engine_listen", "127.0.0.1:50053", "where the stack engine listens");
pub const PLACEMENT_LISTEN: Opt<String> =
    Opt::str("keelson", "placement_listen", "0.0.0.0:8778", "where the Placement API listens");
pub const ENGINE_ENDPOINTS: Opt<Vec<String>> = Opt::list(
    "keelson",
    "engine_endpoints",
    &["http://127.0.0.1:50053"],
    "where the gateway reaches the stack engines",
);
/// How other engines reach this one (default: its listen address).
pub const ENGINE_ADVERTISE: Opt<Option<String>> = Opt::optional_str(
    "keelson",
    "engine_advertise",
    None,
    "how other engines reach this one (default: its listen address)",
);

pub const OTLP_ENDPOINT: Opt<Option<String>> =
    Opt::optional_str("telemetry", "otlp_endpoint", None, "OpenTelemetry collector for traces (unset: none)");
/// The process's service name is this and the subcommand's.
pub const SERVICE_NAME: Opt<String> =
    Opt::str("telemetry", "service_name", "keelson", "prefix of the service name in traces");
pub const LOG_FILTER: Opt<String> = Opt::str("telemetry", "log_filter", "info", "tracing filter of the log");

pub const PLACEMENT_CONNECTION: Opt<Option<String>> =
    Opt::optional_str("placement_database", "connection", None, "the Placement database's URL");
pub const MAX_POOL_SIZE: Opt<Option<i64>> =
    Opt::optional_int("placement_database", "max_pool_size", None, "connections kept open (unset or below 1: 16)");
/// Unset: no overflow.
pub const MAX_OVERFLOW: Opt<Option<i64>> =
    Opt::optional_int("placement_database", "max_overflow", None, "connections beyond max_pool_size");
pub const POOL_TIMEOUT: Opt<Option<i64>> =
    Opt::optional_int("placement_database", "pool_timeout", None, "seconds to wait for a connection (unset: 30)");
/// oslo.db's rule: an empty value leaves the server's SQL mode alone.
pub const MYSQL_SQL_MODE: Opt<Option<String>> = Opt::optional_str(
    "placement_database",
    "mysql_sql_mode",
    Some("TRADITIONAL"),
    "SQL mode of MySQL sessions (empty: the server's)",
);
pub const SYNC_ON_STARTUP: Opt<bool> =
    Opt::bool("placement_database", "sync_on_startup", false, "create or upgrade the schema when inventory starts");
/// Heat's option: the stack engine's own database, apart from Placement's.
pub const ORCHESTRATION_CONNECTION: Opt<Option<String>> =
    Opt::optional_str("database", "connection", None, "the orchestration database's URL");

pub const OPTIONS: &[&dyn Declaration] = &[
    &INVENTORY_LISTEN,
    &CANDIDATES_LISTEN,
    &ENGINE_LISTEN,
    &PLACEMENT_LISTEN,
    &ENGINE_ENDPOINTS,
    &ENGINE_ADVERTISE,
    &OTLP_ENDPOINT,
    &SERVICE_NAME,
    &LOG_FILTER,
    &PLACEMENT_CONNECTION,
    &MAX_POOL_SIZE,
    &MAX_OVERFLOW,
    &POOL_TIMEOUT,
    &MYSQL_SQL_MODE,
    &SYNC_ON_STARTUP,
    &ORCHESTRATION_CONNECTION,
];

/// Every crate's declarations, in dependency order.
fn declarations() -> [&'static [&'static dyn Declaration]; 7] {
    [
        keelson_runtime::options::OPTIONS,
        keelson_inventory::options::OPTIONS,
        keelson_candidates::options::OPTIONS,
        keelson_controller::options::OPTIONS,
        keelson_stack_engine::options::OPTIONS,
        keelson_gateway::options::OPTIONS,
        OPTIONS,
    ]
}

/// The registry every subcommand validates its configuration against.
pub fn registry() -> Registry {
    Registry::assemble(&declarations())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use keelson_runtime::config::{contract_check, OptionSpec};

    use super::*;

    #[test]
    fn no_option_is_declared_twice_differently() {
        let mut seen: BTreeMap<(String, String), OptionSpec> = BTreeMap::new();
        for spec in declarations().iter().flat_map(|list| list.iter()).map(|d| d.spec()) {
            let key = (spec.group.clone(), spec.name.clone());
            if let Some(earlier) = seen.get(&key) {
                assert_eq!(
                    (&earlier.opt_type, &earlier.default),
                    (&spec.opt_type, &spec.default),
                    "[{}] {}",
                    spec.group,
                    spec.name
                );
            }
            seen.insert(key, spec);
        }
    }

    #[test]
    fn every_declaration_is_in_the_registry() {
        let registry = registry();
        for spec in declarations().iter().flat_map(|list| list.iter()).map(|d| d.spec()) {
            assert_eq!(registry.get(&spec.group, &spec.name), Some(&spec));
        }
    }

    #[test]
    fn placement_database_options_match_the_contract() {
        let check = contract_check(OPTIONS);
        assert_eq!(check.mismatches, Vec::<String>::new());
        assert_eq!(check.not_in_contract, Vec::<String>::new());
    }

    // Moved from keelson-runtime's config.rs with the registry it tested.
    #[test]
    fn registry_has_placement_and_keelson_options() {
        let r = registry();
        assert!(r.contains_key(&("placement_database".into(), "connection".into())));
        assert!(r.contains_key(&("placement".into(), "allocation_conflict_retry_count".into())));
        assert!(r.contains_key(&("controller".into(), "lease_ttl".into())));
    }

    #[test]
    fn the_orchestration_auth_strategy_keeps_its_choices() {
        let spec = registry().get("orchestration", "auth_strategy").cloned();
        assert_eq!(
            spec.map(|s| s.opt_type),
            Some(keelson_runtime::config::OptType::Str { choices: Some(vec!["keystone".into(), "noauth".into()]) })
        );
    }
}
