//! `keelson options`: the assembled option registry, for operators and
//! for the chart's tooling (tests/deploy/registry.py reads `--json`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use keelson_runtime::config::OptType;
use serde_json::{json, Value};

use crate::cli::OptionsArgs;

pub fn run(args: &OptionsArgs) -> anyhow::Result<ExitCode> {
    let registry = crate::options::registry();
    let mut out = String::new();
    if args.json {
        let rows: Vec<Value> = registry
            .iter()
            .map(|spec| {
                let choices = match &spec.opt_type {
                    OptType::Str { choices } => choices.clone(),
                    _ => None,
                };
                json!({
                    "group": spec.group,
                    "name": spec.name,
                    "type": spec.opt_type.name(),
                    "default": spec.default,
                    "choices": choices,
                    "help": spec.help,
                })
            })
            .collect();
        writeln!(out, "{}", Value::Array(rows))?;
    } else {
        for spec in registry.iter() {
            let default = spec.default.as_deref().map(|d| format!(" = {d}")).unwrap_or_default();
            writeln!(out, "[{}] {} ({}){default}", spec.group, spec.name, spec.opt_type.name())?;
            if !spec.help.is_empty() {
                writeln!(out, "    {}", spec.help)?;
            }
        }
    }
    // Written once, so that a reader that stops early (`| head`) ends
    // the command with an error rather than a panic.
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
