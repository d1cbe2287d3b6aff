//! oslo.config-compatible configuration.
//!
//! Deployment tools (devstack, kolla, OpenStack-Ansible, charms) write
//! Placement's INI files; keelson reads the same files with the same group
//! and option names and defaults, so an operator can point keelson at an
//! existing `placement.conf`. Several files may be given; a later file wins
//! option by option, as in oslo.config.
//!
//! Every option is declared in a registry (Placement's options come from
//! `data/config-options.json`, keelson's own from [`KEELSON_OPTIONS`]). An
//! option that is not declared is reported as a warning; a declared option
//! whose value does not parse refuses the start with an error that names
//! the option and the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: cannot parse line: {text:?}")]
    Syntax { path: PathBuf, line: usize, text: String },
    #[error("invalid value {value:?} for option [{group}] {name} in {path}: {reason}")]
    InvalidValue { group: String, name: String, value: String, path: String, reason: String },
}

/// The type of an option's value, as oslo.config knows it.
#[derive(Debug, Clone, PartialEq)]
pub enum OptType {
    Str { choices: Option<Vec<String>> },
    Int { min: Option<i64>, max: Option<i64> },
    Float,
    Bool,
    List,
    MultiStr,
}

/// A declared option with its default (as oslo.config would render it).
#[derive(Debug, Clone)]
pub struct OptionSpec {
    pub group: String,
    pub name: String,
    pub opt_type: OptType,
    pub default: Option<String>,
}

/// keelson's own options, beside Placement's: where the services listen and
/// how they find each other, the controller and etcd, and telemetry.
/// (group, name, type, default)
const KEELSON_OPTIONS: &[(&str, &str, &str, Option<&str>)] = &[
    // Where each service listens (gRPC) and where the others reach it.
    ("keelson", "inventory_listen", "str", Some("127.0.0.1:50051")),
    ("keelson", "candidates_listen", "str", Some("127.0.0.1:50052")),
    ("keelson", "engine_listen", "str", Some("127.0.0.1:50053")),
    ("keelson", "inventory_endpoint", "str", Some("http://127.0.0.1:50051")),
    ("keelson", "candidates_endpoint", "str", Some("http://127.0.0.1:50052")),
    ("keelson", "engine_endpoints", "list", Some("http://127.0.0.1:50053")),
    // How other engines reach this one (default: its listen address).
    ("keelson", "engine_advertise", "str", None),
    // How long the gateway holds and redials a call to a service whose
    // port refuses connections (a restart), in seconds; 0: answer 503 at
    // once.
    ("keelson", "redial_timeout", "float", Some("10")),
    ("keelson", "placement_listen", "str", Some("0.0.0.0:8778")),
    ("keelson", "orchestration_listen", "str", Some("0.0.0.0:8004")),
    ("keelson", "data_dir", "str", Some("./keelson-data")),
    // Mutual TLS between the mesh's processes (gRPC and the controller's
    // RPC): on when the three files are set. PEM: this process's
    // certificate chain and key, and the CA its peers' chain to.
    ("keelson", "tls_cert_file", "str", None),
    ("keelson", "tls_key_file", "str", None),
    ("keelson", "tls_ca_file", "str", None),
    // The name clients check servers' certificates against (default: the
    // host of the address they dial), for meshes that dial pod IPs.
    ("keelson", "tls_server_name", "str", None),
    ("telemetry", "otlp_endpoint", "str", None),
    ("telemetry", "service_name", "str", Some("keelson")),
    ("telemetry", "log_filter", "str", Some("info")),
    ("controller", "name", "str", Some("c1")),
    ("controller", "listen", "str", Some("127.0.0.1:7001")),
    ("controller", "peers", "list", None),
    ("controller", "cluster_name", "str", Some("keelson")),
    ("controller", "lease_ttl", "int", Some("5")),
    ("etcd", "endpoints", "list", None),
    ("orchestration", "auth_strategy", "str", Some("keystone")),
    ("orchestration", "num_engine_workers", "int", Some("2")),
    // Heat's own [DEFAULT] options, kept under [orchestration] with Heat's
    // names and defaults so that they do not mix with Placement's.
    ("orchestration", "max_json_body_size", "int", Some("1048576")),
    ("orchestration", "max_template_size", "int", Some("524288")),
    ("orchestration", "max_resources_per_stack", "int", Some("1000")),
    ("orchestration", "max_stacks_per_tenant", "int", Some("512")),
    ("orchestration", "max_nested_stack_depth", "int", Some("5")),
    ("orchestration", "max_events_per_stack", "int", Some("1000")),
    ("orchestration", "enable_stack_abandon", "bool", Some("false")),
    ("orchestration", "enable_stack_adopt", "bool", Some("false")),
    ("orchestration", "hidden_stack_tags", "list", Some("data-processing-cluster")),
    ("orchestration", "engine_life_check_timeout", "int", Some("2")),
    ("orchestration", "periodic_interval", "int", Some("5")),
    ("orchestration", "stall_timeout", "int", Some("30")),
    ("orchestration", "action_retry_limit", "int", Some("5")),
    ("orchestration", "client_retry_limit", "int", Some("2")),
    ("orchestration", "max_concurrent_checks", "int", Some("64")),
    // Signals and software deployments (Heat's names where Heat has them):
    // the public URLs embedded in what instances receive (default: the
    // gateway's own Orchestration endpoint), the pre-signed URLs' lifetime
    // in seconds (0: no expiry) and key (default: generated, stored in the
    // database), the default transports.
    ("orchestration", "heat_waitcondition_server_url", "str", None),
    ("orchestration", "heat_metadata_server_url", "str", None),
    ("orchestration", "public_endpoint", "str", None),
    ("orchestration", "signal_url_lifetime", "int", Some("86400")),
    ("orchestration", "signal_signing_key", "str", None),
    ("orchestration", "default_deployment_signal_transport", "str", Some("CFN_SIGNAL")),
    ("orchestration", "default_software_config_transport", "str", Some("POLL_SERVER_HEAT")),
    ("clients_heat", "url", "str", None),
    // Heat's notifications (oslo.messaging's options): off unless `driver`
    // is messagingv2 or messaging; the broker from `transport_url` here or
    // in [DEFAULT].
    ("oslo_messaging_notifications", "driver", "list", None),
    ("oslo_messaging_notifications", "transport_url", "str", None),
    ("oslo_messaging_notifications", "topics", "list", Some("notifications")),
    ("DEFAULT", "transport_url", "str", None),
    // The publisher's connection (oslo.messaging's rabbit driver options):
    // the heartbeat timeout asked of the broker, and the reconnection
    // back-off (doubling from the interval up to the maximum).
    ("oslo_messaging_rabbit", "heartbeat_timeout_threshold", "int", Some("60")),
    ("oslo_messaging_rabbit", "rabbit_retry_interval", "int", Some("1")),
    ("oslo_messaging_rabbit", "rabbit_interval_max", "int", Some("30")),
    ("DEFAULT", "control_exchange", "str", Some("heat")),
    ("database", "connection", "str", None),
    // keystoneauth's password plugin options, which keystonemiddleware
    // registers only at run time (auth_type = password).
    ("keystone_authtoken", "auth_url", "str", None),
    ("keystone_authtoken", "username", "str", None),
    ("keystone_authtoken", "password", "str", None),
    ("keystone_authtoken", "project_name", "str", None),
    ("keystone_authtoken", "project_id", "str", None),
    ("keystone_authtoken", "user_domain_name", "str", None),
    ("keystone_authtoken", "user_domain_id", "str", None),
    ("keystone_authtoken", "project_domain_name", "str", None),
    ("keystone_authtoken", "project_domain_id", "str", None),
    // Issue 15, connection limits of the REST listeners (Placement and
    // Orchestration alike, each listener on its own): seconds a client may
    // take to send a request head; seconds a connection may stay open with
    // no request in progress; connections served at once (more wait in
    // the accept backlog).
    ("api", "header_read_timeout", "int", Some("30")),
    ("api", "idle_timeout", "int", Some("75")),
    ("api", "max_connections", "int", Some("1000")),
];

#[derive(Deserialize)]
struct ContractOptions {
    options: Vec<ContractOption>,
}

#[derive(Deserialize)]
struct ContractOption {
    group: String,
    name: String,
    #[serde(rename = "type")]
    opt_type: String,
    default: serde_json::Value,
    choices: Option<Vec<serde_json::Value>>,
}

/// Every option keelson understands.
pub fn registry() -> &'static BTreeMap<(String, String), OptionSpec> {
    static REGISTRY: std::sync::OnceLock<BTreeMap<(String, String), OptionSpec>> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(build_registry)
}

fn build_registry() -> BTreeMap<(String, String), OptionSpec> {
    let mut out = BTreeMap::new();
    // The file is compiled in; a parse failure is a build defect caught by
    // the unit tests, so fall back to an empty list rather than panic.
    let contract: ContractOptions = serde_json::from_str(include_str!("../data/config-options.json"))
        .unwrap_or(ContractOptions { options: Vec::new() });
    for o in contract.options {
        let choices = o.choices.map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect());
        let opt_type = if o.opt_type.starts_with("IntOpt") || o.opt_type.starts_with("PortOpt") {
            OptType::Int { min: None, max: None }
        } else if o.opt_type.starts_with("BoolOpt") {
            OptType::Bool
        } else if o.opt_type.starts_with("FloatOpt") {
            OptType::Float
        } else if o.opt_type.starts_with("ListOpt") {
            OptType::List
        } else if o.opt_type.starts_with("MultiStrOpt") {
            OptType::MultiStr
        } else {
            OptType::Str { choices }
        };
        let default = render_default(&o.default);
        out.insert((o.group.clone(), o.name.clone()), OptionSpec { group: o.group, name: o.name, opt_type, default });
    }
    for (group, name, ty, default) in KEELSON_OPTIONS {
        let opt_type = match *ty {
            "int" => OptType::Int { min: None, max: None },
            "float" => OptType::Float,
            "bool" => OptType::Bool,
            "list" => OptType::List,
            _ => OptType::Str { choices: None },
        };
        out.insert(
            (group.to_string(), name.to_string()),
            OptionSpec {
                group: group.to_string(),
                name: name.to_string(),
                opt_type,
                default: default.map(str::to_owned),
            },
        );
    }
    // Placement's option has choices; keelson's orchestration twin too.
    if let Some(spec) = out.get_mut(&("orchestration".to_string(), "auth_strategy".to_string())) {
        spec.opt_type = OptType::Str { choices: Some(vec!["keystone".into(), "noauth".into()]) };
    }
    out
}

fn render_default(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) => Some(
            items
                .iter()
                .map(|i| i.as_str().map(str::to_owned).unwrap_or_else(|| i.to_string()))
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => Some(other.to_string()),
    }
}

/// One value as read, with where it came from (for error messages).
#[derive(Debug, Clone)]
struct Setting {
    values: Vec<String>,
    source: String,
}

/// The merged configuration of one process.
#[derive(Debug, Clone, Default)]
pub struct Config {
    settings: BTreeMap<(String, String), Setting>,
    /// Options found in the files but not declared anywhere.
    pub unknown: Vec<String>,
    /// Files read, in order.
    pub files: Vec<PathBuf>,
}

impl Config {
    /// Reads the given files in order (later files win) and validates every
    /// declared option's value.
    pub fn load(files: &[PathBuf]) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        for path in files {
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            cfg.merge_text(&text, path)?;
            cfg.files.push(path.clone());
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parses INI text as if it came from `path` and merges it in.
    pub fn merge_text(&mut self, text: &str, path: &Path) -> Result<(), ConfigError> {
        let source = path.display().to_string();
        let mut group = "DEFAULT".to_string();
        let mut in_file: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        let mut last_key: Option<(String, String)> = None;
        for (index, raw) in text.lines().enumerate() {
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            // oslo.config (like iniparser) continues a value on indented lines.
            if raw.starts_with([' ', '\t']) {
                if let Some(key) = &last_key {
                    if let Some(last) = in_file.get_mut(key).and_then(|v| v.last_mut()) {
                        last.push('\n');
                        last.push_str(trimmed);
                        continue;
                    }
                }
            }
            if let Some(name) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                group = name.trim().to_string();
                last_key = None;
                continue;
            }
            let Some((key, value)) = trimmed.split_once(['=', ':']) else {
                return Err(ConfigError::Syntax { path: path.to_path_buf(), line: index + 1, text: raw.to_string() });
            };
            let key = (group.clone(), key.trim().to_string());
            let value = if KEELSON_GROUPS.contains(&group.as_str()) { strip_inline_comment(value) } else { value };
            in_file.entry(key.clone()).or_default().push(unquote(value.trim()).to_string());
            last_key = Some(key);
        }
        for (key, values) in in_file {
            self.settings.insert(key, Setting { values, source: source.clone() });
        }
        Ok(())
    }

    /// Sets one option programmatically (command-line overrides, tests).
    pub fn set(&mut self, group: &str, name: &str, value: &str) {
        self.settings.insert(
            (group.to_string(), name.to_string()),
            Setting { values: vec![value.to_string()], source: "<override>".to_string() },
        );
    }

    /// Checks every declared option's value and records the undeclared ones.
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        let registry = registry();
        self.unknown.clear();
        for ((group, name), setting) in &self.settings {
            let Some(spec) = registry.get(&(group.clone(), name.clone())) else {
                // The DEFAULT group holds oslo.log and friends' options.
                if group != "DEFAULT" {
                    self.unknown.push(format!("[{group}] {name} (in {})", setting.source));
                }
                continue;
            };
            for value in &setting.values {
                check_value(spec, value).map_err(|reason| ConfigError::InvalidValue {
                    group: group.clone(),
                    name: name.clone(),
                    value: value.clone(),
                    path: setting.source.clone(),
                    reason,
                })?;
            }
        }
        Ok(())
    }

    fn raw(&self, group: &str, name: &str) -> Option<&str> {
        if let Some(s) = self.settings.get(&(group.to_string(), name.to_string())) {
            return s.values.last().map(String::as_str);
        }
        registry().get(&(group.to_string(), name.to_string())).and_then(|spec| spec.default.as_deref())
    }

    /// Whether the option was set in a file or override (not defaulted).
    pub fn is_set(&self, group: &str, name: &str) -> bool {
        self.settings.contains_key(&(group.to_string(), name.to_string()))
    }

    /// A string option; `None` when unset and without a default, or empty.
    pub fn get_str(&self, group: &str, name: &str) -> Option<String> {
        self.raw(group, name).filter(|v| !v.is_empty()).map(str::to_owned)
    }

    pub fn get_bool(&self, group: &str, name: &str) -> bool {
        self.raw(group, name).and_then(parse_bool).unwrap_or(false)
    }

    pub fn get_int(&self, group: &str, name: &str) -> Option<i64> {
        self.raw(group, name).and_then(|v| v.trim().parse().ok())
    }

    pub fn get_float(&self, group: &str, name: &str) -> Option<f64> {
        self.raw(group, name).and_then(|v| v.trim().parse().ok())
    }

    /// A comma-separated list option (empty items dropped, as oslo does).
    pub fn get_list(&self, group: &str, name: &str) -> Vec<String> {
        self.raw(group, name)
            .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The file an option was read from, for messages.
    pub fn source_of(&self, group: &str, name: &str) -> String {
        self.settings
            .get(&(group.to_string(), name.to_string()))
            .map(|s| s.source.clone())
            .unwrap_or_else(|| "<default>".to_string())
    }
}

/// keelson's own groups, whose values may carry a trailing `# comment`
/// (the controller's documented configuration does). Placement's groups
/// keep oslo.config's rule (no inline comments), so a `#` inside a
/// password or URL is never cut.
const KEELSON_GROUPS: &[&str] = &["keelson", "controller", "etcd", "telemetry", "orchestration"];

fn strip_inline_comment(v: &str) -> &str {
    let bytes = v.as_bytes();
    for i in 1..bytes.len() {
        if (bytes[i] == b'#' || bytes[i] == b';') && bytes[i - 1].is_ascii_whitespace() {
            return &v[..i];
        }
    }
    v
}

fn unquote(v: &str) -> &str {
    if v.len() >= 2 && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\''))) {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn check_value(spec: &OptionSpec, value: &str) -> Result<(), String> {
    match &spec.opt_type {
        OptType::Bool => parse_bool(value).map(|_| ()).ok_or_else(|| "expected a boolean".to_string()),
        OptType::Int { min, max } => {
            if value.trim().is_empty() {
                return Ok(());
            }
            let n: i64 = value.trim().parse().map_err(|_| "expected an integer".to_string())?;
            if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                return Err("out of range".to_string());
            }
            Ok(())
        }
        OptType::Float => {
            if value.trim().is_empty() {
                return Ok(());
            }
            value.trim().parse::<f64>().map(|_| ()).map_err(|_| "expected a number".to_string())
        }
        OptType::Str { choices: Some(choices) } if !choices.is_empty() => {
            if choices.iter().any(|c| c == value) {
                Ok(())
            } else {
                Err(format!("must be one of {}", choices.join(", ")))
            }
        }
        _ => Ok(()),
    }
}

/// An integer option as a count: a negative one reads as 0, one past the
/// type's range as its largest value (the options set no upper bound).
pub fn clamp_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// As [`clamp_u32`], for sizes and limits held in usize.
pub fn clamp_usize(n: i64) -> usize {
    usize::try_from(n.max(0)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_clamp_into_their_type() {
        use super::{clamp_u32, clamp_usize};
        assert_eq!((clamp_u32(-5), clamp_u32(7), clamp_u32(i64::MAX)), (0, 7, u32::MAX));
        assert_eq!((clamp_usize(-1), clamp_usize(1 << 40)), (0, 1 << 40));
    }

    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        c.merge_text(text, Path::new("test.conf"))?;
        c.validate()?;
        Ok(c)
    }

    #[test]
    fn registry_has_placement_and_keelson_options() {
        let r = registry();
        assert!(r.contains_key(&("placement_database".into(), "connection".into())));
        assert!(r.contains_key(&("placement".into(), "allocation_conflict_retry_count".into())));
        assert!(r.contains_key(&("controller".into(), "lease_ttl".into())));
    }

    #[test]
    fn defaults_come_from_the_contract() {
        let c = parse("").unwrap();
        assert_eq!(c.get_str("api", "auth_strategy").as_deref(), Some("keystone"));
        assert_eq!(c.get_int("placement", "allocation_conflict_retry_count"), Some(10));
        assert_eq!(c.get_int("placement", "max_allocation_candidates"), Some(-1));
        assert!(!c.get_bool("workarounds", "optimize_for_wide_provider_trees"));
        assert!(c.get_bool("oslo_policy", "enforce_new_defaults"));
        assert_eq!(c.get_str("placement", "allocation_candidates_generation_strategy").as_deref(), Some("depth-first"));
    }

    #[test]
    fn later_file_wins_and_lists_split() {
        let mut c = Config::default();
        c.merge_text("[api]\nauth_strategy = keystone\n[cors]\nallowed_origin = a, b\n", Path::new("one")).unwrap();
        c.merge_text("[api]\nauth_strategy = noauth2\n", Path::new("two")).unwrap();
        c.validate().unwrap();
        assert_eq!(c.get_str("api", "auth_strategy").as_deref(), Some("noauth2"));
        assert_eq!(c.get_list("cors", "allowed_origin"), vec!["a", "b"]);
        assert_eq!(c.source_of("api", "auth_strategy"), "two");
    }

    #[test]
    fn unknown_option_is_a_warning() {
        let c = parse("[api]\nno_such_option = 1\n").unwrap();
        assert_eq!(c.unknown.len(), 1);
        assert!(c.unknown[0].contains("no_such_option"));
    }

    #[test]
    fn invalid_value_names_option_and_file() {
        let err = parse("[placement]\nallocation_conflict_retry_count = many\n").unwrap_err().to_string();
        assert!(err.contains("allocation_conflict_retry_count"), "{err}");
        assert!(err.contains("test.conf"), "{err}");
        let err = parse("[api]\nauth_strategy = basic\n").unwrap_err().to_string();
        assert!(err.contains("auth_strategy"), "{err}");
    }

    #[test]
    fn comments_quotes_and_continuations() {
        let c = parse("# c\n; c\n[DEFAULT]\ndebug = true\n[placement_database]\nconnection = \"sqlite:///x.db\"\n[cors]\nallow_headers = a,\n  b\n").unwrap();
        assert_eq!(c.get_str("placement_database", "connection").as_deref(), Some("sqlite:///x.db"));
        assert_eq!(c.get_list("cors", "allow_headers"), vec!["a", "b"]);
    }

    #[test]
    fn inline_comments_only_in_keelson_groups() {
        let c = parse("[controller]\nlease_ttl = 5   # seconds\nname = c1 # this node\n[keystone_authtoken]\npassword = se #cret\n").unwrap();
        assert_eq!(c.get_int("controller", "lease_ttl"), Some(5));
        assert_eq!(c.get_str("controller", "name").as_deref(), Some("c1"));
        assert_eq!(c.get_str("keystone_authtoken", "password").as_deref(), Some("se #cret"));
    }

    #[test]
    fn garbage_line_is_a_syntax_error() {
        assert!(matches!(parse("[api]\njust words\n"), Err(ConfigError::Syntax { .. })));
    }
}
