//! `keelson placement explain QUERY`: asks the gateway's
//! `GET /keelson/v1/placement/explain` (the candidates service's own
//! algorithm, watched) and prints its answer as a short report, or as JSON.

use std::process::ExitCode;

use anyhow::{bail, Context as _};
use http_body_util::BodyExt as _;
use keelson_runtime::Config;
use serde_json::{Map, Value};

use crate::settings;

/// The path of keelson's explain extension on the Placement listener.
const PATH: &str = "/keelson/v1/placement/explain";

pub async fn run(
    config: &Config,
    query: &str,
    microversion: &str,
    url: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let base = match url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => {
            let listen = settings::placement_listen(config, false)?;
            let host = if listen.ip().is_unspecified() { "127.0.0.1".to_string() } else { listen.ip().to_string() };
            format!("http://{host}:{}", listen.port())
        }
    };
    let target = format!("{base}{PATH}?{}", encode_query(query.trim_start_matches('?')));
    // noauth2's admin when no token is given (all-in-one, tests).
    let token = std::env::var("OS_TOKEN").ok().filter(|t| !t.is_empty()).unwrap_or_else(|| "admin".into());
    let (status, body) = get(&target, &token, microversion).await?;
    let doc: Value = serde_json::from_slice(&body)
        .with_context(|| format!("{target} answered {status} with no JSON: {}", String::from_utf8_lossy(&body)))?;
    if !status.is_success() {
        let detail = doc.pointer("/errors/0/detail").and_then(Value::as_str).map(str::to_string);
        bail!("{target} answered {status}: {}", detail.unwrap_or_else(|| doc.to_string()));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", report(&doc));
    }
    Ok(ExitCode::SUCCESS)
}

async fn get(target: &str, token: &str, microversion: &str) -> anyhow::Result<(http::StatusCode, bytes::Bytes)> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let request = http::Request::get(target)
        .header("x-auth-token", token)
        .header("openstack-api-version", format!("placement {microversion}"))
        .header(http::header::ACCEPT, "application/json")
        .body(http_body_util::Empty::new())
        .with_context(|| format!("bad URL {target}"))?;
    let response = client.request(request).await.with_context(|| format!("GET {target}"))?;
    let status = response.status();
    let body = response.into_body().collect().await.with_context(|| format!("reading {target}"))?.to_bytes();
    Ok((status, body))
}

/// Percent-encodes what may not stand in a query as typed (spaces and the
/// like), leaving Placement's syntax (`=&:,!`) and existing escapes alone.
fn encode_query(q: &str) -> String {
    let mut out = String::with_capacity(q.len());
    for b in q.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~=&:,!%+/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn text<'a>(rule: &'a Map<String, Value>, key: &str) -> &'a str {
    rule.get(key).and_then(Value::as_str).unwrap_or("")
}

fn int(rule: &Map<String, Value>, key: &str) -> i64 {
    rule.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn traits(rule: &Map<String, Value>) -> String {
    let names: Vec<&str> =
        rule.get("traits").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    names.join(", ")
}

fn group_name(suffix: &str) -> String {
    if suffix.is_empty() {
        "the unsuffixed group".into()
    } else {
        format!("group '{suffix}'")
    }
}

/// What a provider rule says, after the count of providers it excluded.
fn provider_rule(rule: &Map<String, Value>) -> String {
    let asked = format!("{}:{}", text(rule, "resource_class"), int(rule, "amount"));
    match text(rule, "rule") {
        "no_inventory" => format!("have no {} inventory", text(rule, "resource_class")),
        "step_size" => format!("cannot give {asked} (not a multiple of step_size)"),
        "min_unit" => format!("cannot give {asked} (below min_unit)"),
        "max_unit" => format!("cannot give {asked} (above max_unit)"),
        "capacity" => match rule.get("largest_free").and_then(Value::as_i64) {
            Some(free) => format!("lack {asked} (largest free {free})"),
            None => format!("lack {asked}"),
        },
        "in_tree" => "are outside the in_tree tree".into(),
        "in_tree_unknown" => "excluded: in_tree names no provider".into(),
        "member_of_unknown" => "excluded: member_of names no existing aggregate".into(),
        "member_of" => "are not in the member_of aggregates".into(),
        "forbidden_aggregate" => "are in a forbidden aggregate".into(),
        "required_traits" if rule.get("traits").and_then(Value::as_array).is_some_and(|t| t.len() > 1) => {
            format!("have none of {}", traits(rule))
        }
        "required_traits" => format!("lack {}", traits(rule)),
        "forbidden_trait" => format!("have {}", traits(rule)),
        "root_required" => format!("are in a tree whose root lacks {}", traits(rule)),
        "root_forbidden" => format!("are in a tree whose root has {}", traits(rule)),
        "incomplete_tree" => "are in trees lacking one of the group's classes".into(),
        "resourceless_without_filter" => "excluded: a resourceless group needs required traits or member_of".into(),
        other => other.to_string(),
    }
}

/// Why a tree is not in the answer.
fn tree_rule(rule: &Map<String, Value>) -> String {
    match text(rule, "rule") {
        "group_missing" => format!("nothing for {}", group_name(text(rule, "group"))),
        "overall_capacity" => format!(
            "not enough {} for all groups together ({} asked, {} free)",
            text(rule, "resource_class"),
            int(rule, "amount"),
            int(rule, "room")
        ),
        "group_policy_isolate" => {
            format!("group_policy=isolate: {} would share a provider", group_name(text(rule, "group")))
        }
        "combined_capacity" => {
            format!("the groups together exceed {}'s {}", text(rule, "provider"), text(rule, "resource_class"))
        }
        "same_subtree" => format!("same_subtree #{} does not hold", int(rule, "same_subtree") + 1),
        "duplicate" => "only duplicates of earlier candidates".into(),
        "max_allocation_candidates" => "cut by [placement] max_allocation_candidates".into(),
        "one_provider_per_tree" => "uses several providers of one tree (before microversion 1.29)".into(),
        "limit" => "cut by limit".into(),
        other => other.to_string(),
    }
}

/// The explanation as a few lines per group and for the trees.
fn report(doc: &Value) -> String {
    let mut out = String::new();
    let count = |v: Option<&Value>| thousands(v.and_then(Value::as_u64).unwrap_or(0));
    for g in doc.get("groups").and_then(Value::as_array).into_iter().flatten() {
        let name = group_name(g.get("suffix").and_then(Value::as_str).unwrap_or(""));
        if g.get("searched").and_then(Value::as_bool) != Some(true) {
            out.push_str(&format!("{name}: not searched (an earlier group found nothing)\n"));
            continue;
        }
        let fit = g.get("survivors").and_then(Value::as_array).map_or(0, Vec::len);
        out.push_str(&format!(
            "{name}: {} providers, {} fit\n",
            count(g.get("providers")),
            thousands(u64::try_from(fit).unwrap_or(u64::MAX))
        ));
        for t in g.get("tallies").and_then(Value::as_array).into_iter().flatten() {
            if let Some(rule) = t.as_object() {
                out.push_str(&format!("  {} {}\n", count(rule.get("providers")), provider_rule(rule)));
            }
        }
    }
    let trees: Vec<&Value> = doc.get("trees").and_then(Value::as_array).into_iter().flatten().collect();
    let kept = trees.iter().filter(|t| t.get("in_answer").and_then(Value::as_bool) == Some(true)).count();
    if !trees.is_empty() {
        out.push_str(&format!("trees: {} considered, {} in the answer\n", trees.len(), kept));
        let mut why: Vec<(String, usize)> = Vec::new();
        for t in &trees {
            if let Some(rule) = t.get("dropped").and_then(Value::as_object) {
                let line = tree_rule(rule);
                match why.iter_mut().find(|(l, _)| *l == line) {
                    Some((_, n)) => *n += 1,
                    None => why.push((line, 1)),
                }
            }
        }
        for (line, n) in why {
            out.push_str(&format!("  {} {line}\n", thousands(u64::try_from(n).unwrap_or(u64::MAX))));
        }
    }
    out.push_str(&format!("allocation requests: {}\n", count(doc.get("allocation_requests"))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_queries() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1986), "1,986");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(encode_query("resources=VCPU:8&required=!A B"), "resources=VCPU:8&required=!A%20B");
    }

    #[test]
    fn report_reads_like_the_example() {
        let doc = serde_json::json!({
            "groups": [{"suffix": "", "searched": true, "providers": 2000, "survivors": ["a", "b"],
                "tallies": [
                    {"rule": "capacity", "resource_class": "VCPU", "amount": 8, "providers": 1986, "largest_free": 6},
                    {"rule": "forbidden_trait", "traits": ["COMPUTE_STATUS_DISABLED"], "providers": 12}
                ]},
                {"suffix": "1", "searched": false}],
            "trees": [{"root": "a", "in_answer": true}, {"root": "b", "in_answer": false, "dropped": {"rule": "limit"}}],
            "allocation_requests": 1
        });
        assert_eq!(
            report(&doc),
            "the unsuffixed group: 2,000 providers, 2 fit\n  1,986 lack VCPU:8 (largest free 6)\n  12 have COMPUTE_STATUS_DISABLED\n\
             group '1': not searched (an earlier group found nothing)\ntrees: 2 considered, 1 in the answer\n  1 cut by limit\n\
             allocation requests: 1\n"
        );
    }
}
