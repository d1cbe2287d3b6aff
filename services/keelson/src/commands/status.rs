//! `keelson status upgrade check [--json]`: placement-status's checks
//! (placement 16.0.0 on oslo.upgradecheck), in its order, with its names,
//! results, details, table and exit codes (0 success, 1 warning, 2 failure,
//! 255 when a check could not run). Keelson's own schema check comes last,
//! so the rows upstream's parsers count on keep their places. The details
//! name keelson's command where upstream names placement-manage.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use keelson_db::Db;
use keelson_placement_schema::{online_migrations, schema};
use keelson_runtime::options::POLICY_FILE;
use keelson_runtime::Config;

use crate::cli::{StatusCommand, UpgradeCommand};
use crate::settings;

/// oslo.upgradecheck's result codes, which are also the exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Code {
    Success,
    Warning,
    Failure,
}

impl Code {
    fn exit_code(self) -> u8 {
        match self {
            Code::Success => 0,
            Code::Warning => 1,
            Code::Failure => 2,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Warning => "Warning",
            Code::Failure => "Failure",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CheckResult {
    code: Code,
    details: Option<String>,
}

impl CheckResult {
    fn success() -> Self {
        CheckResult { code: Code::Success, details: None }
    }

    fn with(code: Code, details: impl Into<String>) -> Self {
        CheckResult { code, details: Some(details.into()) }
    }
}

/// oslo.upgradecheck's exit code for a check that raised.
const ERROR_EXIT: u8 = 255;
const TITLE: &str = "Upgrade Check Results";
const ONLINE_MIGRATIONS: &str = "\"keelson db online_data_migrations\"";

pub async fn run(config: Config, command: StatusCommand) -> anyhow::Result<ExitCode> {
    let StatusCommand::Upgrade { command: UpgradeCommand::Check { json } } = command;
    let results = match run_checks(&config).await {
        Ok(results) => results,
        Err(error) => {
            // As oslo.upgradecheck prints a check's exception.
            println!("Error:\n{error}");
            return Ok(ExitCode::from(ERROR_EXIT));
        }
    };
    if json {
        println!("{}", json_report(&results));
    } else {
        print!("{}", table_report(&results));
    }
    let worst = results.iter().map(|(_, r)| r.code).max().unwrap_or(Code::Success);
    Ok(ExitCode::from(worst.exit_code()))
}

async fn run_checks(config: &Config) -> anyhow::Result<Vec<(&'static str, CheckResult)>> {
    let url = settings::database_url(config)?;
    let db = Db::connect(&url, &settings::pool_settings(config)).await?;
    let results = database_checks(&db, config).await;
    db.close().await;
    results
}

async fn database_checks(db: &Db, config: &Config) -> anyhow::Result<Vec<(&'static str, CheckResult)>> {
    let schema_result = schema_check(db).await?;
    // A database without Placement's tables cannot answer upstream's
    // queries; say why rather than only how the query failed.
    let hint = |e: keelson_db::DbError| match &schema_result.details {
        Some(d) if schema_result.code == Code::Failure => anyhow::anyhow!("{e}\n{d}"),
        _ => anyhow::anyhow!("{e}"),
    };
    let missing_roots = online_migrations::count_missing_root_provider_ids(db).await.map_err(hint)?;
    let incomplete = online_migrations::count_incomplete_consumers(db).await.map_err(hint)?;
    Ok(vec![
        ("Missing Root Provider IDs", root_provider_ids_check(missing_roots)),
        ("Incomplete Consumers", incomplete_consumers_check(incomplete)),
        ("Policy File JSON to YAML Migration", policy_json_check(config)?),
        ("Keelson Database Schema", schema_result),
    ])
}

fn root_provider_ids_check(missing: i64) -> CheckResult {
    if missing == 0 {
        return CheckResult::success();
    }
    CheckResult::with(
        Code::Failure,
        format!(
            "There is at least one resource provider table record which misses its root provider id. \
             Run the {ONLINE_MIGRATIONS} command."
        ),
    )
}

fn incomplete_consumers_check(missing: i64) -> CheckResult {
    if missing == 0 {
        return CheckResult::success();
    }
    CheckResult::with(
        Code::Warning,
        format!(
            "There are {missing} incomplete consumers table records for existing allocations. \
             Run the {ONLINE_MIGRATIONS} command."
        ),
    )
}

/// oslo.upgradecheck's common policy check: a `[oslo_policy] policy_file`
/// (default `policy.yaml`) that exists and parses as JSON is a failure.
fn policy_json_check(config: &Config) -> anyhow::Result<CheckResult> {
    // Set but empty: the default name.
    let name = config.get(&POLICY_FILE).or_else(|| POLICY_FILE.default_value()).unwrap_or_default();
    let Some(path) = find_config_file(Path::new(&name), config) else {
        return Ok(CheckResult::success());
    };
    let text = std::fs::read_to_string(&path)?;
    if serde_json::from_str::<serde_json::Value>(&text).is_err() {
        return Ok(CheckResult::success());
    }
    Ok(CheckResult::with(
        Code::Failure,
        "Your policy file is JSON-formatted which is deprecated. You need to switch to YAML-formatted file. \
         Use the ``oslopolicy-convert-json-to-yaml`` tool to convert the existing JSON-formatted files to \
         YAML in a backwards-compatible manner: \
         https://docs.openstack.org/oslo.policy/latest/cli/oslopolicy-convert-json-to-yaml.html.",
    ))
}

/// oslo.config's `find_file` for project `placement`: the directories of
/// the configuration files (the last first), then `~/.placement`, `~`,
/// `/etc/placement` and `/etc`; an absolute name stands for itself.
fn find_config_file(name: &Path, config: &Config) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        config.files.iter().rev().map(|f| f.parent().map(Path::to_path_buf).unwrap_or_default()).collect();
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        dirs.push(home.join(".placement"));
        dirs.push(home);
    }
    dirs.push(PathBuf::from("/etc/placement"));
    dirs.push(PathBuf::from("/etc"));
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.exists())
}

/// Keelson's own check: the schema revision is this release's head with
/// every table present. An older known revision is a warning (the check
/// may run before `db sync`, as upgrade automation does); anything else is
/// a failure.
async fn schema_check(db: &Db) -> anyhow::Result<CheckResult> {
    let result = match schema::current_revision(db).await? {
        None => CheckResult::with(Code::Failure, "The database has no Placement schema. Run \"keelson db sync\"."),
        Some(rev) if rev == schema::HEAD => match schema::check_current(db).await {
            Ok(()) => CheckResult::success(),
            Err(e) => CheckResult::with(Code::Failure, format!("{e}.")),
        },
        Some(rev) if schema::REVISIONS.contains(&rev.as_str()) => CheckResult::with(
            Code::Warning,
            format!("The schema is at revision {rev}, behind {}. Run \"keelson db sync\".", schema::HEAD),
        ),
        Some(rev) => CheckResult::with(
            Code::Failure,
            format!("The schema is at revision {rev}, which this release does not know (newer than keelson?)."),
        ),
    };
    Ok(result)
}

/// The prettytable placement-status prints: one left-aligned column, a
/// rule after every row, details wrapped at 60 columns.
fn table_report(results: &[(&str, CheckResult)]) -> String {
    let cells: Vec<String> = results
        .iter()
        .map(|(name, r)| {
            let details = r.details.as_deref().map(|d| python_wrap(d, 60, "  ").join("\n"));
            format!("Check: {name}\nResult: {}\nDetails: {}", r.code.label(), details.as_deref().unwrap_or("None"))
        })
        .collect();
    let width = cells.iter().flat_map(|c| c.lines()).chain([TITLE]).map(|l| l.chars().count()).max().unwrap_or(0);
    let rule = format!("+{}+\n", "-".repeat(width + 2));
    let line = |text: &str| format!("| {text}{} |\n", " ".repeat(width - text.chars().count()));
    let mut out = rule.clone();
    out.push_str(&line(TITLE));
    out.push_str(&rule);
    for cell in &cells {
        for l in cell.lines() {
            out.push_str(&line(l));
        }
        out.push_str(&rule);
    }
    out
}

/// oslo.upgradecheck's `--json` document (Python's `json.dumps` spacing).
fn json_report(results: &[(&str, CheckResult)]) -> String {
    let quote = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let checks: Vec<String> = results
        .iter()
        .map(|(name, r)| {
            let details = r.details.as_deref().map(quote).unwrap_or_else(|| "null".into());
            format!("{{\"check\": {}, \"result\": {}, \"details\": {details}}}", quote(name), r.code.exit_code())
        })
        .collect();
    format!("{{\"name\": {}, \"checks\": [{}]}}", quote(TITLE), checks.join(", "))
}

/// Python's `textwrap.wrap(text, width, subsequent_indent=indent)` with its
/// defaults: words (split after hyphens inside words) fill each line; a
/// word longer than a line is cut, at its last hyphen that fits if any.
fn python_wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let mut chunks = split_chunks(text);
    chunks.reverse();
    let mut lines: Vec<String> = Vec::new();
    while !chunks.is_empty() {
        let prefix = if lines.is_empty() { "" } else { indent };
        let room = width.saturating_sub(prefix.chars().count());
        if !lines.is_empty() && chunks.last().is_some_and(|c| c.trim().is_empty()) {
            chunks.pop();
        }
        let mut line: Vec<String> = Vec::new();
        let mut used = 0;
        while let Some(chunk) = chunks.last() {
            let len = chunk.chars().count();
            if used + len > room {
                break;
            }
            used += len;
            line.extend(chunks.pop());
        }
        if let Some(long) = chunks.last_mut() {
            if long.chars().count() > room {
                let space = if room < 1 { 1 } else { room - used };
                let chars: Vec<char> = long.chars().collect();
                let mut end = space.min(chars.len());
                if chars.len() > space {
                    if let Some(h) = chars[..space.min(chars.len())].iter().rposition(|c| *c == '-') {
                        if h > 0 && chars[..h].iter().any(|c| *c != '-') {
                            end = h + 1;
                        }
                    }
                }
                line.push(chars[..end].iter().collect());
                *long = chars[end..].iter().collect();
            }
        }
        if line.last().is_some_and(|c| c.trim().is_empty()) {
            line.pop();
        }
        if !line.is_empty() {
            lines.push(format!("{prefix}{}", line.concat()));
        }
        chunks.retain(|c| !c.is_empty());
    }
    lines
}

/// textwrap's chunks: runs of whitespace (each a space); words, cut after
/// a hyphen that has two letters (or letter-hyphen-letter) before it and a
/// letter, an optional hyphen and a letter after it; and em-dashes (two or
/// more hyphens between a word character or punctuation and a word
/// character) on their own.
fn split_chunks(text: &str) -> Vec<String> {
    let chars = expand_tabs(text);
    let at = |k: Option<usize>| k.and_then(|k| chars.get(k)).copied();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let letter = |c: Option<char>| c.is_some_and(|c| (c.is_alphanumeric() && !c.is_numeric()) || c == '_');
    let punct = |c: Option<char>| word(c) || c.is_some_and(|c| "!\"'&.,?".contains(c));
    // Hyphens from `k` on, when there are two or more and a word
    // character follows them.
    let em_dash_at = |k: usize| {
        let run = chars[k.min(chars.len())..].iter().take_while(|c| **c == '-').count();
        (run >= 2 && word(at(Some(k + run)))).then_some(run)
    };
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        if chars[start] == ' ' {
            let run = chars[start..].iter().take_while(|c| **c == ' ').count();
            chunks.push(chars[start..start + run].iter().collect());
            start += run;
            continue;
        }
        if let Some(run) = em_dash_at(start).filter(|_| punct(at(start.checked_sub(1)))) {
            chunks.push(chars[start..start + run].iter().collect());
            start += run;
            continue;
        }
        let mut end = start + 1;
        loop {
            let here = at(Some(end));
            let back = |n: usize| at(end.checked_sub(n));
            let hyphenated = here == Some('-')
                && ((letter(back(2)) && letter(back(1)))
                    || (letter(back(3)) && back(2) == Some('-') && letter(back(1))))
                && letter(at(Some(end + 1)))
                && (letter(at(Some(end + 2))) || (at(Some(end + 2)) == Some('-') && letter(at(Some(end + 3)))));
            if hyphenated {
                end += 1;
                break;
            }
            if here.is_none() || here == Some(' ') || (punct(back(1)) && em_dash_at(end).is_some()) {
                break;
            }
            end += 1;
        }
        chunks.push(chars[start..end].iter().collect());
        start = end;
    }
    chunks
}

/// `str.expandtabs()` (stops every 8 columns, a line break restarts the
/// count), then every whitespace character as a space, as textwrap reads.
fn expand_tabs(text: &str) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let pad = 8 - column % 8;
                out.extend(std::iter::repeat_n(' ', pad));
                column += pad;
            }
            '\n' | '\r' => {
                out.push(' ');
                column = 0;
            }
            c => {
                out.push(if c.is_whitespace() { ' ' } else { c });
                column += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_like_python_textwrap() {
        // Expected lines from Python 3.11's textwrap.wrap(text, 60,
        // subsequent_indent='  ').
        let policy = policy_json_check_text();
        assert_eq!(
            python_wrap(&policy, 60, "  "),
            [
                "Your policy file is JSON-formatted which is deprecated. You",
                "  need to switch to YAML-formatted file. Use the",
                "  ``oslopolicy-convert-json-to-yaml`` tool to convert the",
                "  existing JSON-formatted files to YAML in a backwards-",
                "  compatible manner: https://docs.openstack.org/oslo.policy/",
                "  latest/cli/oslopolicy-convert-json-to-yaml.html.",
            ]
        );
        let upstream = "There are 2 incomplete consumers table records for existing allocations. \
                        Run the \"placement-manage db online_data_migrations\" command.";
        assert_eq!(
            python_wrap(upstream, 60, "  "),
            [
                "There are 2 incomplete consumers table records for existing",
                "  allocations. Run the \"placement-manage db",
                "  online_data_migrations\" command.",
            ]
        );
        assert_eq!(
            split_chunks("a-b ab-cd x--y -- z"),
            ["a-b", " ", "ab-", "cd", " ", "x", "--", "y", " ", "--", " ", "z"]
        );
    }

    fn policy_json_check_text() -> String {
        let dir = std::env::temp_dir().join(format!("keelson-status-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("placement.conf");
        std::fs::write(&conf, "[oslo_policy]\npolicy_file = policy.json\n").unwrap();
        std::fs::write(dir.join("policy.json"), "{}").unwrap();
        let config = Config::load(&[conf], &crate::options::registry()).unwrap();
        let result = policy_json_check(&config).unwrap();
        std::fs::write(dir.join("policy.json"), "admin_api: role:admin\n").unwrap();
        assert_eq!(policy_json_check(&config).unwrap(), CheckResult::success());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(result.code, Code::Failure);
        result.details.unwrap()
    }

    #[test]
    fn table_and_json_like_oslo() {
        let results = [
            ("Missing Root Provider IDs", CheckResult::success()),
            ("Incomplete Consumers", CheckResult::with(Code::Warning, "short")),
        ];
        assert_eq!(
            table_report(&results),
            "+----------------------------------+\n\
             | Upgrade Check Results            |\n\
             +----------------------------------+\n\
             | Check: Missing Root Provider IDs |\n\
             | Result: Success                  |\n\
             | Details: None                    |\n\
             +----------------------------------+\n\
             | Check: Incomplete Consumers      |\n\
             | Result: Warning                  |\n\
             | Details: short                   |\n\
             +----------------------------------+\n"
        );
        assert_eq!(
            json_report(&results),
            "{\"name\": \"Upgrade Check Results\", \"checks\": [{\"check\": \"Missing Root Provider IDs\", \
             \"result\": 0, \"details\": null}, {\"check\": \"Incomplete Consumers\", \"result\": 1, \"details\": \"short\"}]}"
        );
    }
}
