//! oslo.config-compatible configuration.
//!
//! Deployment tools (devstack, kolla, OpenStack-Ansible, charms) write
//! Placement's INI files; keelson reads the same files with the same group
//! and option names and defaults, so an operator can point keelson at an
//! existing `placement.conf`. Several files may be given; a later file wins
//! option by option, as in oslo.config.
//!
//! Options are typed declarations ([`Opt`]), each owned by the crate that
//! reads it (its `options` module) with its default and help beside it;
//! reading is `config.get(&OPT)`, so an undeclared or misspelt option does
//! not compile and a default lives in one place. The binary assembles the
//! [`Registry`] from Placement's contract (`data/config-options.json`,
//! every option a `placement.conf` may hold) and every crate's list, and
//! validates the files against it: an option that is not declared is
//! reported as a warning; a declared option whose value does not parse
//! refuses the start with an error that names the option and the file.

use std::collections::BTreeMap;
use std::marker::PhantomData;
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

impl OptType {
    /// oslo.config's word for the type, as `keelson options` prints it.
    pub fn name(&self) -> &'static str {
        match self {
            OptType::Str { .. } => "str",
            OptType::Int { .. } => "int",
            OptType::Float => "float",
            OptType::Bool => "bool",
            OptType::List => "list",
            OptType::MultiStr => "multistr",
        }
    }
}

/// One option of the registry with its default (as oslo.config would
/// render it).
#[derive(Debug, Clone, PartialEq)]
pub struct OptionSpec {
    pub group: String,
    pub name: String,
    pub opt_type: OptType,
    pub default: Option<String>,
    pub help: String,
}

/// The value kind of a typed declaration (the registry's [`OptType`] in a
/// form a `const` can hold).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Str { choices: &'static [&'static str] },
    Int { min: Option<i64>, max: Option<i64> },
    Float,
    Bool,
    List,
}

/// How a declared option's text reads as a Rust value.
///
/// A type `T` reads an unset or empty option as the declaration's default.
/// `Option<String>` and `Option<i64>` read an unset option as their
/// default (which may be none) and an empty one as `None`, for options
/// where an empty value means something of its own (`[placement_database]
/// mysql_sql_mode`: the server's mode; `[cors] max_age`: no header).
pub trait OptValue: Sized {
    /// The declared default, in a form a `const` can hold.
    type Default: Copy + Send + Sync + 'static;
    /// What a set option's text reads as; `None`: as if unset.
    fn parse(text: &str) -> Option<Self>;
    /// The value of an unset option.
    fn from_default(default: Self::Default) -> Self;
    /// The default as oslo.config renders it (the registry's text).
    fn render(default: Self::Default) -> Option<String>;
}

impl OptValue for String {
    type Default = &'static str;
    fn parse(text: &str) -> Option<Self> {
        (!text.is_empty()).then(|| text.to_owned())
    }
    fn from_default(default: &'static str) -> Self {
        default.to_owned()
    }
    fn render(default: &'static str) -> Option<String> {
        Some(default.to_owned())
    }
}

impl OptValue for Option<String> {
    type Default = Option<&'static str>;
    fn parse(text: &str) -> Option<Self> {
        Some(String::parse(text))
    }
    fn from_default(default: Option<&'static str>) -> Self {
        default.map(str::to_owned)
    }
    fn render(default: Option<&'static str>) -> Option<String> {
        default.map(str::to_owned)
    }
}

impl OptValue for i64 {
    type Default = i64;
    fn parse(text: &str) -> Option<Self> {
        text.trim().parse().ok()
    }
    fn from_default(default: i64) -> Self {
        default
    }
    fn render(default: i64) -> Option<String> {
        Some(default.to_string())
    }
}

impl OptValue for Option<i64> {
    type Default = Option<i64>;
    fn parse(text: &str) -> Option<Self> {
        Some(i64::parse(text))
    }
    fn from_default(default: Option<i64>) -> Self {
        default
    }
    fn render(default: Option<i64>) -> Option<String> {
        default.map(|n| n.to_string())
    }
}

impl OptValue for f64 {
    type Default = f64;
    fn parse(text: &str) -> Option<Self> {
        text.trim().parse().ok()
    }
    fn from_default(default: f64) -> Self {
        default
    }
    fn render(default: f64) -> Option<String> {
        Some(default.to_string())
    }
}

impl OptValue for bool {
    type Default = bool;
    fn parse(text: &str) -> Option<Self> {
        parse_bool(text)
    }
    fn from_default(default: bool) -> Self {
        default
    }
    fn render(default: bool) -> Option<String> {
        Some(default.to_string())
    }
}

/// A comma-separated list: items trimmed, empty items dropped (as oslo
/// does); a set but empty option is the empty list, not the default.
impl OptValue for Vec<String> {
    type Default = &'static [&'static str];
    fn parse(text: &str) -> Option<Self> {
        Some(text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
    }
    fn from_default(default: &'static [&'static str]) -> Self {
        default.iter().map(|s| (*s).to_owned()).collect()
    }
    fn render(default: &'static [&'static str]) -> Option<String> {
        (!default.is_empty()).then(|| default.join(","))
    }
}

/// One declared option: group, name, value type, default and a line of
/// help. Declarations are `const`s in the reading crate's `options`
/// module; read one with [`Config::get`].
pub struct Opt<T: OptValue> {
    pub group: &'static str,
    pub name: &'static str,
    pub help: &'static str,
    kind: Kind,
    default: T::Default,
    value: PhantomData<fn() -> T>,
}

impl<T: OptValue> Opt<T> {
    const fn new(group: &'static str, name: &'static str, kind: Kind, default: T::Default, help: &'static str) -> Self {
        Opt { group, name, help, kind, default, value: PhantomData }
    }

    /// The value the option has when the files leave it unset.
    pub fn default_value(&self) -> T {
        T::from_default(self.default)
    }
}

impl Opt<String> {
    /// A string option with a default.
    pub const fn str(group: &'static str, name: &'static str, default: &'static str, help: &'static str) -> Self {
        Opt::new(group, name, Kind::Str { choices: &[] }, default, help)
    }

    /// Only these values are accepted.
    pub const fn choices(self, choices: &'static [&'static str]) -> Self {
        Opt { kind: Kind::Str { choices }, ..self }
    }
}

impl Opt<Option<String>> {
    /// A string option that may be absent; `default` applies when it is
    /// unset, and an empty value reads as `None`.
    pub const fn optional_str(
        group: &'static str,
        name: &'static str,
        default: Option<&'static str>,
        help: &'static str,
    ) -> Self {
        Opt::new(group, name, Kind::Str { choices: &[] }, default, help)
    }
}

impl Opt<i64> {
    /// An integer option with a default.
    pub const fn int(group: &'static str, name: &'static str, default: i64, help: &'static str) -> Self {
        Opt::new(group, name, Kind::Int { min: None, max: None }, default, help)
    }
}

impl Opt<Option<i64>> {
    /// An integer option that may be absent; `default` applies when it is
    /// unset, and an empty value reads as `None`.
    pub const fn optional_int(
        group: &'static str,
        name: &'static str,
        default: Option<i64>,
        help: &'static str,
    ) -> Self {
        Opt::new(group, name, Kind::Int { min: None, max: None }, default, help)
    }
}

/// Bounds of integer options, checked when the files are validated.
pub trait Integer: OptValue {}
impl Integer for i64 {}
impl Integer for Option<i64> {}

impl<T: Integer> Opt<T> {
    /// Values below `min` refuse the start.
    pub const fn min(self, min: i64) -> Self {
        let max = match self.kind {
            Kind::Int { max, .. } => max,
            _ => None,
        };
        Opt { kind: Kind::Int { min: Some(min), max }, ..self }
    }

    /// Values above `max` refuse the start.
    pub const fn max(self, max: i64) -> Self {
        let min = match self.kind {
            Kind::Int { min, .. } => min,
            _ => None,
        };
        Opt { kind: Kind::Int { min, max: Some(max) }, ..self }
    }
}

impl Opt<f64> {
    /// A floating-point option with a default.
    pub const fn float(group: &'static str, name: &'static str, default: f64, help: &'static str) -> Self {
        Opt::new(group, name, Kind::Float, default, help)
    }
}

impl Opt<bool> {
    /// A boolean option with a default.
    pub const fn bool(group: &'static str, name: &'static str, default: bool, help: &'static str) -> Self {
        Opt::new(group, name, Kind::Bool, default, help)
    }
}

impl Opt<Vec<String>> {
    /// A comma-separated list option (`default` empty: none).
    pub const fn list(
        group: &'static str,
        name: &'static str,
        default: &'static [&'static str],
        help: &'static str,
    ) -> Self {
        Opt::new(group, name, Kind::List, default, help)
    }
}

/// What the registry needs of a declaration, whatever its value type: the
/// lists crates export are `&[&dyn Declaration]`.
pub trait Declaration: Sync {
    fn spec(&self) -> OptionSpec;
}

impl<T: OptValue> Declaration for Opt<T> {
    fn spec(&self) -> OptionSpec {
        let opt_type = match self.kind {
            Kind::Str { choices } => OptType::Str {
                choices: (!choices.is_empty()).then(|| choices.iter().map(|c| (*c).to_owned()).collect()),
            },
            Kind::Int { min, max } => OptType::Int { min, max },
            Kind::Float => OptType::Float,
            Kind::Bool => OptType::Bool,
            Kind::List => OptType::List,
        };
        OptionSpec {
            group: self.group.to_owned(),
            name: self.name.to_owned(),
            opt_type,
            default: T::render(self.default),
            help: self.help.to_owned(),
        }
    }
}

#[derive(Deserialize)]
struct ContractOptions {
    groups: Vec<String>,
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
    #[serde(default)]
    help: String,
}

/// Placement's contract: its groups and every option they hold.
fn contract() -> (Vec<String>, Vec<OptionSpec>) {
    // The file is compiled in; a parse failure is a build defect caught by
    // the unit tests, so fall back to an empty list rather than panic.
    let contract: ContractOptions = serde_json::from_str(include_str!("../data/config-options.json"))
        .unwrap_or(ContractOptions { groups: Vec::new(), options: Vec::new() });
    let specs = contract
        .options
        .into_iter()
        .map(|o| {
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
            OptionSpec { group: o.group, name: o.name, opt_type, default, help: o.help }
        })
        .collect();
    (contract.groups, specs)
}

fn render_default(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::Bool(b) => Some(b.to_string()),
        // As a declaration renders its f64 (60.0 is "60").
        serde_json::Value::Number(n) if n.is_f64() => n.as_f64().map(|f| f.to_string()),
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

/// Every option a process accepts: Placement's contract, then the
/// declarations of the crates it links (a declaration of a contract
/// option replaces the contract's entry; the unit tests keep the two
/// equal).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    specs: BTreeMap<(String, String), OptionSpec>,
}

impl Registry {
    /// The contract plus every list in `lists`, in order.
    pub fn assemble(lists: &[&[&dyn Declaration]]) -> Registry {
        let mut specs = BTreeMap::new();
        for spec in contract().1 {
            specs.insert((spec.group.clone(), spec.name.clone()), spec);
        }
        for declaration in lists.iter().flat_map(|list| list.iter()) {
            let spec = declaration.spec();
            specs.insert((spec.group.clone(), spec.name.clone()), spec);
        }
        Registry { specs }
    }

    pub fn get(&self, group: &str, name: &str) -> Option<&OptionSpec> {
        self.specs.get(&(group.to_string(), name.to_string()))
    }

    pub fn contains_key(&self, key: &(String, String)) -> bool {
        self.specs.contains_key(key)
    }

    /// Every option, by group and name.
    pub fn iter(&self) -> impl Iterator<Item = &OptionSpec> {
        self.specs.values()
    }
}

/// How a crate's declarations of Placement's options compare with the
/// contract (for the crates' unit tests).
#[derive(Debug, Default, PartialEq)]
pub struct ContractCheck {
    /// Declarations whose type or default differ from the contract's.
    pub mismatches: Vec<String>,
    /// Declarations in one of the contract's groups that the contract does
    /// not hold (keelson's additions, or misspelt names).
    pub not_in_contract: Vec<String>,
}

/// Compares `options` with Placement's contract.
pub fn contract_check(options: &[&dyn Declaration]) -> ContractCheck {
    let (groups, specs) = contract();
    let mut check = ContractCheck::default();
    for declared in options.iter().map(|d| d.spec()) {
        let key = format!("[{}] {}", declared.group, declared.name);
        match specs.iter().find(|c| c.group == declared.group && c.name == declared.name) {
            Some(c) if c.opt_type != declared.opt_type || c.default != declared.default => {
                check.mismatches.push(format!(
                    "{key}: declared {:?} = {:?}, contract {:?} = {:?}",
                    declared.opt_type, declared.default, c.opt_type, c.default
                ))
            }
            Some(_) => {}
            None if groups.contains(&declared.group) => check.not_in_contract.push(key),
            None => {}
        }
    }
    check
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
    /// option of `registry`.
    pub fn load(files: &[PathBuf], registry: &Registry) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        for path in files {
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            cfg.merge_text(&text, path)?;
            cfg.files.push(path.clone());
        }
        cfg.validate(registry)?;
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

    /// Checks the value of every option `registry` declares and records
    /// the ones it does not.
    pub fn validate(&mut self, registry: &Registry) -> Result<(), ConfigError> {
        self.unknown.clear();
        for ((group, name), setting) in &self.settings {
            let Some(spec) = registry.get(group, name) else {
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

    /// The last value the files give the option, as written.
    fn text(&self, group: &str, name: &str) -> Option<&str> {
        self.settings.get(&(group.to_string(), name.to_string())).and_then(|s| s.values.last()).map(String::as_str)
    }

    /// The option's value: as the files give it, else its declared default.
    pub fn get<T: OptValue>(&self, opt: &Opt<T>) -> T {
        self.text(opt.group, opt.name).and_then(T::parse).unwrap_or_else(|| opt.default_value())
    }

    /// Whether the option was set in a file or override (not defaulted).
    pub fn is_set<T: OptValue>(&self, opt: &Opt<T>) -> bool {
        self.settings.contains_key(&(opt.group.to_string(), opt.name.to_string()))
    }

    /// The file an option was read from, for messages.
    pub fn source_of<T: OptValue>(&self, opt: &Opt<T>) -> String {
        self.settings
            .get(&(opt.group.to_string(), opt.name.to_string()))
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

    /// The registry of a process linking only this crate.
    fn registry() -> Registry {
        Registry::assemble(&[crate::options::OPTIONS])
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        c.merge_text(text, Path::new("test.conf"))?;
        c.validate(&registry())?;
        Ok(c)
    }

    /// Reading by group and name, as these tests were written before the
    /// options were typed: the value as written, else the registry's
    /// default text, read as the typed declarations read it.
    trait ByName {
        fn by_name(&self, group: &str, name: &str) -> Option<String>;
        fn get_str(&self, group: &str, name: &str) -> Option<String> {
            self.by_name(group, name).and_then(|t| Option::<String>::parse(&t)).flatten()
        }
        fn get_int(&self, group: &str, name: &str) -> Option<i64> {
            self.by_name(group, name).and_then(|t| i64::parse(&t))
        }
        fn get_bool(&self, group: &str, name: &str) -> bool {
            self.by_name(group, name).and_then(|t| bool::parse(&t)).unwrap_or(false)
        }
        fn get_list(&self, group: &str, name: &str) -> Vec<String> {
            self.by_name(group, name).and_then(|t| Vec::<String>::parse(&t)).unwrap_or_default()
        }
        /// By value: `Config`'s own `source_of` takes a declaration, and
        /// an inherent method would win over a trait's taking `&self`.
        fn source_of(self, group: &str, name: &str) -> String;
    }

    impl ByName for Config {
        fn by_name(&self, group: &str, name: &str) -> Option<String> {
            match self.text(group, name) {
                Some(t) => Some(t.to_owned()),
                None => registry().get(group, name).and_then(|spec| spec.default.clone()),
            }
        }
        fn source_of(self, group: &str, name: &str) -> String {
            self.settings.get(&(group.to_string(), name.to_string())).map(|s| s.source.clone()).unwrap_or_default()
        }
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
        c.validate(&registry()).unwrap();
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

    const NAME: Opt<String> = Opt::str("keelson", "t_name", "dflt", "a string with a default");
    const MODE: Opt<Option<String>> = Opt::optional_str("keelson", "t_mode", Some("STRICT"), "empty means none");
    const PATH: Opt<Option<String>> = Opt::optional_str("keelson", "t_path", None, "no default");
    const COUNT: Opt<i64> = Opt::int("keelson", "t_count", 7, "an integer").min(1).max(9);
    const LIMIT: Opt<Option<i64>> = Opt::optional_int("keelson", "t_limit", None, "an integer without a default");
    const AGE: Opt<Option<i64>> = Opt::optional_int("keelson", "t_age", Some(60), "empty means none");
    const RATIO: Opt<f64> = Opt::float("keelson", "t_ratio", 2.5, "a number");
    const FLAG: Opt<bool> = Opt::bool("keelson", "t_flag", true, "a boolean");
    const ITEMS: Opt<Vec<String>> = Opt::list("keelson", "t_items", &["a", "b"], "a list");
    const PICK: Opt<String> = Opt::str("keelson", "t_pick", "x", "one of two").choices(&["x", "y"]);
    const DECLARED: &[&dyn Declaration] = &[&NAME, &MODE, &PATH, &COUNT, &LIMIT, &AGE, &RATIO, &FLAG, &ITEMS, &PICK];

    fn typed(text: &str) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        c.merge_text(text, Path::new("typed.conf"))?;
        c.validate(&Registry::assemble(&[DECLARED]))?;
        Ok(c)
    }

    #[test]
    fn unset_options_read_as_their_declared_defaults() {
        let c = typed("").unwrap();
        assert_eq!(c.get(&NAME), "dflt");
        assert_eq!(c.get(&MODE).as_deref(), Some("STRICT"));
        assert_eq!(c.get(&PATH), None);
        assert_eq!(c.get(&COUNT), 7);
        assert_eq!(c.get(&LIMIT), None);
        assert_eq!(c.get(&AGE), Some(60));
        assert_eq!(c.get(&RATIO), 2.5);
        assert!(c.get(&FLAG));
        assert_eq!(c.get(&ITEMS), vec!["a", "b"]);
        assert!(!c.is_set(&NAME));
        assert_eq!(Config::source_of(&c, &NAME), "<default>");
    }

    #[test]
    fn set_options_read_as_written() {
        let c = typed(
            "[keelson]\nt_name = n\nt_mode = LAX\nt_path = /p\nt_count = 3\nt_limit = -4\nt_ratio = 0.5\n\
             t_flag = off\nt_items = c, ,d\nt_pick = y\n",
        )
        .unwrap();
        assert_eq!(c.get(&NAME), "n");
        assert_eq!(c.get(&MODE).as_deref(), Some("LAX"));
        assert_eq!(c.get(&PATH).as_deref(), Some("/p"));
        assert_eq!(c.get(&COUNT), 3);
        assert_eq!(c.get(&LIMIT), Some(-4));
        assert_eq!(c.get(&RATIO), 0.5);
        assert!(!c.get(&FLAG));
        assert_eq!(c.get(&ITEMS), vec!["c", "d"]);
        assert_eq!(c.get(&PICK), "y");
        assert!(c.is_set(&NAME));
        assert_eq!(Config::source_of(&c, &NAME), "typed.conf");
    }

    #[test]
    fn empty_values_read_as_unset_except_where_empty_means_none() {
        let c = typed("[keelson]\nt_name =\nt_mode =\nt_count =\nt_limit =\nt_age =\nt_ratio =\nt_items =\n").unwrap();
        assert_eq!(c.get(&NAME), "dflt");
        assert_eq!(c.get(&MODE), None);
        assert_eq!(c.get(&COUNT), 7);
        assert_eq!(c.get(&LIMIT), None);
        assert_eq!(c.get(&AGE), None);
        assert_eq!(c.get(&RATIO), 2.5);
        assert_eq!(c.get(&ITEMS), Vec::<String>::new());
    }

    #[test]
    fn declared_bounds_and_choices_refuse_the_start() {
        for text in ["t_count = 0", "t_count = 10", "t_pick = z", "t_flag = maybe", "t_ratio = fast"] {
            let err = typed(&format!("[keelson]\n{text}\n")).unwrap_err();
            assert!(matches!(err, ConfigError::InvalidValue { .. }), "{text}: {err}");
        }
        assert_eq!(
            typed("[keelson]\nt_pick = z\n").unwrap_err().to_string(),
            "invalid value \"z\" for option [keelson] t_pick in typed.conf: must be one of x, y"
        );
    }

    #[test]
    fn declarations_render_as_the_registry_holds_them() {
        let r = Registry::assemble(&[DECLARED]);
        let spec = |name: &str| r.get("keelson", name).cloned().unwrap();
        assert_eq!(spec("t_count").opt_type, OptType::Int { min: Some(1), max: Some(9) });
        assert_eq!(spec("t_count").default.as_deref(), Some("7"));
        assert_eq!(spec("t_path").default, None);
        assert_eq!(spec("t_ratio").default.as_deref(), Some("2.5"));
        assert_eq!(spec("t_flag").default.as_deref(), Some("true"));
        assert_eq!(spec("t_items").default.as_deref(), Some("a,b"));
        assert_eq!(spec("t_pick").opt_type, OptType::Str { choices: Some(vec!["x".into(), "y".into()]) });
        assert_eq!(spec("t_name").help, "a string with a default");
        // The contract is there too.
        assert!(r.get("placement_database", "connection").is_some());
    }

    #[test]
    fn contract_check_finds_differences_and_additions() {
        const RETRIES: Opt<i64> = Opt::int("placement", "allocation_conflict_retry_count", 3, "wrong default");
        const STRATEGY: Opt<String> = Opt::str("api", "auth_strategy", "keystone", "no choices");
        const GOOD: Opt<i64> = Opt::int("placement", "max_allocation_candidates", -1, "as the contract");
        const EXTRA: Opt<i64> = Opt::int("api", "not_upstream", 1, "keelson's own");
        const OWN_GROUP: Opt<i64> = Opt::int("keelson", "whatever", 1, "not a contract group");
        let check = contract_check(&[&RETRIES, &STRATEGY, &GOOD, &EXTRA, &OWN_GROUP]);
        assert_eq!(check.mismatches.len(), 2, "{:?}", check.mismatches);
        assert!(check.mismatches[0].starts_with("[placement] allocation_conflict_retry_count"));
        assert!(check.mismatches[1].starts_with("[api] auth_strategy"));
        assert_eq!(check.not_in_contract, vec!["[api] not_upstream"]);
    }

    #[test]
    fn this_crates_declarations_match_the_contract() {
        let check = contract_check(crate::options::OPTIONS);
        assert_eq!(check.mismatches, Vec::<String>::new());
        assert_eq!(check.not_in_contract, vec!["[oslo_policy] enforce_scope"]);
    }
}
