//! `keelson placement …`: keelson's own operator tools for Placement's
//! data. The checks and repairs are `keelson_inventory::audit`'s; this
//! module reads Nova's view when asked (`commands::nova_view`), prints the
//! findings and chooses the exit status (`explain` is in
//! `commands::explain`).

use std::collections::BTreeSet;
use std::process::ExitCode;

use anyhow::Context as _;
use keelson_db::Db;
use keelson_inventory::audit::{self, Finding, RepairOutcome, Report};
use keelson_placement_schema::online_migrations::IncompleteConsumerOwner;
use keelson_runtime::Config;

use super::nova_view::Nova;
use crate::cli::PlacementCommand;
use crate::settings;

/// `nova-manage placement audit`'s exit statuses.
const FOUND: u8 = 3;
const FOUND_AND_REPAIRED: u8 = 4;

pub async fn run(config: Config, command: PlacementCommand) -> anyhow::Result<ExitCode> {
    let (fix, json, nova_endpoint) = match command {
        PlacementCommand::Audit { fix, json, nova_endpoint } => (fix, json, nova_endpoint),
        PlacementCommand::Explain { query, microversion, url, json } => {
            return super::explain::run(&config, &query, &microversion, url.as_deref(), json).await;
        }
    };
    let url = settings::database_url(&config)?;
    let db = Db::connect(&url, &settings::pool_settings(&config))
        .await
        .with_context(|| format!("connecting to {}", url.display))?;
    let nova = nova_endpoint.as_deref().map(Nova::from_env).transpose()?;
    let outcome = audit_and_repair(&db, fix, &incomplete_consumer_owner(&config), nova.as_ref()).await;
    db.close().await;
    let (report, repairs) = outcome?;
    if json {
        print_json(&report, repairs.as_deref())?;
    } else {
        print_text(&report, repairs.as_deref());
    }
    Ok(exit_code(&report, repairs.as_deref()))
}

async fn audit_and_repair(
    db: &Db,
    fix: bool,
    owner: &IncompleteConsumerOwner,
    nova: Option<&Nova>,
) -> anyhow::Result<(Report, Option<Vec<RepairOutcome>>)> {
    let mut report = audit::audit(db).await.context("reading the database")?;
    if let Some(nova) = nova {
        // The database first: whatever the audit read that Nova made, Nova
        // knows by the time it is asked.
        let holdings = audit::nova::read_holdings(db).await.context("reading Nova's allocations")?;
        let view = nova.view().await.context("asking Nova")?;
        report.findings.extend(audit::nova::judge(&holdings, &view));
    }
    let repairs = if fix {
        let suspects: BTreeSet<String> = report
            .findings
            .iter()
            .filter_map(|f| match f {
                Finding::AllocationUnknownToNova { consumer, .. } => Some(consumer.clone()),
                _ => None,
            })
            .collect();
        let unknown = match nova {
            Some(nova) => nova.still_unknown(&suspects).await.context("asking Nova again")?,
            None => BTreeSet::new(),
        };
        Some(audit::repair(db, &report.findings, owner, &unknown).await.context("repairing")?)
    } else {
        None
    };
    Ok((report, repairs))
}

fn incomplete_consumer_owner(config: &Config) -> IncompleteConsumerOwner {
    let store = keelson_inventory::StoreSettings::from_config(config);
    IncompleteConsumerOwner { project: store.incomplete_consumer_project_id, user: store.incomplete_consumer_user_id }
}

fn exit_code(report: &Report, repairs: Option<&[RepairOutcome]>) -> ExitCode {
    if report.findings.is_empty() {
        return ExitCode::SUCCESS;
    }
    match repairs {
        Some(r) if r.iter().all(|o| *o == RepairOutcome::Repaired) => ExitCode::from(FOUND_AND_REPAIRED),
        _ => ExitCode::from(FOUND),
    }
}

fn print_text(report: &Report, repairs: Option<&[RepairOutcome]>) {
    for (i, finding) in report.findings.iter().enumerate() {
        let suffix = match repairs.and_then(|r| r.get(i)) {
            Some(RepairOutcome::Repaired) => " [repaired]",
            Some(RepairOutcome::Changed) => " [changed meanwhile, not repaired]",
            Some(RepairOutcome::Left) => " [left: needs an operator's decision]",
            None if finding.is_repairable() => " [repairable with --fix]",
            None => "",
        };
        println!("{finding}{suffix}");
    }
    let repaired = repairs.map_or(0, |r| r.iter().filter(|o| **o == RepairOutcome::Repaired).count());
    println!(
        "Checked {} resource providers, {} allocations, {} consumers: {} problem{} found{}",
        report.providers,
        report.allocations,
        report.consumers,
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" },
        if repairs.is_some() { format!(", {repaired} repaired") } else { String::new() },
    );
}

fn print_json(report: &Report, repairs: Option<&[RepairOutcome]>) -> anyhow::Result<()> {
    let findings: Vec<serde_json::Value> = report
        .findings
        .iter()
        .enumerate()
        .map(|(i, f)| finding_json(f, repairs.and_then(|r| r.get(i)).copied()))
        .collect::<Result<_, _>>()?;
    let doc = serde_json::json!({
        "providers": report.providers,
        "allocations": report.allocations,
        "consumers": report.consumers,
        "findings": findings,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

fn finding_json(finding: &Finding, repair: Option<RepairOutcome>) -> serde_json::Result<serde_json::Value> {
    let mut value = serde_json::to_value(finding)?;
    if let Some(obj) = value.as_object_mut() {
        obj.insert("message".into(), finding.to_string().into());
        obj.insert("repairable".into(), finding.is_repairable().into());
        if let Some(r) = repair {
            obj.insert("repair".into(), serde_json::to_value(r)?);
        }
    }
    Ok(value)
}
