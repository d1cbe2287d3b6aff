//! `keelson db …`: placement-manage's database commands.

use std::process::ExitCode;

use anyhow::Context as _;
use keelson_db::Db;
use keelson_placement_schema::online_migrations::{self, IncompleteConsumerOwner, OnlineMigration};
use keelson_placement_schema::schema;
use keelson_runtime::Config;

use crate::cli::DbCommand;
use crate::settings;

/// placement-manage's batch size when `--max-count` is not given.
const DEFAULT_BATCH: u64 = 50;

pub async fn run(config: Config, command: DbCommand) -> anyhow::Result<ExitCode> {
    let url = settings::database_url(&config)?;
    let db = Db::connect(&url, &settings::pool_settings(&config))
        .await
        .with_context(|| format!("connecting to {}", url.display))?;
    match command {
        DbCommand::Sync => {
            let outcome = schema::sync(&db).await?;
            let seeded = keelson_placement_schema::seed::seed_standard(&db).await?;
            match outcome {
                schema::SyncOutcome::Created => println!("created schema at revision {}", schema::HEAD),
                schema::SyncOutcome::Upgraded { from } => println!("upgraded schema from {from} to {}", schema::HEAD),
                schema::SyncOutcome::AlreadyCurrent => println!("schema already at revision {}", schema::HEAD),
            }
            if seeded.resource_classes + seeded.traits > 0 {
                println!(
                    "inserted {} standard resource classes and {} standard traits",
                    seeded.resource_classes, seeded.traits
                );
            }
        }
        DbCommand::Version => match schema::current_revision(&db).await? {
            Some(rev) => println!("{rev}"),
            None => println!("None"),
        },
        DbCommand::Stamp { revision } => {
            schema::stamp(&db, &revision).await?;
            println!("stamped {revision}");
        }
        DbCommand::OnlineDataMigrations { max_count } => {
            let owner = incomplete_consumer_owner(&config);
            let code = online_data_migrations(&db, max_count.as_deref(), &owner).await;
            db.close().await;
            return Ok(code);
        }
    }
    db.close().await;
    Ok(ExitCode::SUCCESS)
}

fn incomplete_consumer_owner(config: &Config) -> IncompleteConsumerOwner {
    let store = keelson_inventory::StoreSettings::from_config(config);
    IncompleteConsumerOwner { project: store.incomplete_consumer_project_id, user: store.incomplete_consumer_user_id }
}

/// `db online_data_migrations [--max-count N]` as placement-manage runs it:
/// without a limit, batches of 50 until a batch migrates nothing (exit 0);
/// with one, a single batch of at most N rows across the migrations (exit 1
/// when it migrated something, 0 when nothing was left); 2 when a
/// migration failed and (with a limit) nothing else moved; 127 for a
/// limit that is not a positive integer.
async fn online_data_migrations(db: &Db, max_count: Option<&str>, owner: &IncompleteConsumerOwner) -> ExitCode {
    let (batch, limited) = match max_count {
        Some(text) => match parse_python_int(text) {
            Some(n) if n >= 1 => (n.unsigned_abs(), true),
            _ => {
                println!("Must supply a positive value for max_count");
                return ExitCode::from(127);
            }
        },
        None => {
            println!("Running batches of {DEFAULT_BATCH} until complete");
            (DEFAULT_BATCH, false)
        }
    };
    // Totals per migration, in the order they first ran.
    let mut totals: Vec<(OnlineMigration, u64, u64)> = Vec::new();
    let (mut ran, mut failed);
    loop {
        ran = 0u64;
        failed = false;
        for migration in OnlineMigration::ALL {
            let outcome = match online_migrations::run_batch(db, migration, batch - ran, owner).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    println!("Error attempting to run {}", migration.name());
                    tracing::error!(target: "keelson::db", "online data migration {} failed: {e}", migration.name());
                    failed = true;
                    Default::default()
                }
            };
            if outcome.found > 0 {
                println!("{} rows matched query {}, {} migrated", outcome.found, migration.name(), outcome.done);
            }
            match totals.iter_mut().find(|(m, _, _)| *m == migration) {
                Some(entry) => {
                    entry.1 += outcome.found;
                    entry.2 += outcome.done;
                }
                None => totals.push((migration, outcome.found, outcome.done)),
            }
            ran += outcome.done;
            if ran >= batch {
                break;
            }
        }
        if limited || ran == 0 {
            break;
        }
    }
    print!(
        "{}",
        centered_table(
            &["Migration", "Total Found", "Completed"],
            &totals
                .iter()
                .map(|(m, found, done)| [m.name().to_string(), found.to_string(), done.to_string()])
                .collect::<Vec<_>>(),
        )
    );
    // With a limit, a failure is not final while other rows still moved:
    // their migration may be what the failing one waits for.
    if failed && !(limited && ran > 0) {
        println!("Some migrations failed unexpectedly. Check log for details.");
        return ExitCode::from(2);
    }
    if ran > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// An integer as Python's `int()` reads one from text: surrounding
/// whitespace, an optional sign, digits with single underscores between
/// them.
fn parse_python_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let plain: String = digits.chars().filter(|c| *c != '_').collect();
    if !plain.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Python's integers do not overflow: a huge limit is still positive.
    let n = plain.parse::<i64>().unwrap_or(i64::MAX);
    Some(if negative { -n } else { n })
}

/// A prettytable with its default style, as placement-manage prints its
/// summary: every cell centred the way Python's `str.center` does.
fn centered_table<const N: usize>(headers: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = headers.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let border = {
        let mut line = String::from("+");
        for w in &widths {
            line.push_str(&"-".repeat(w + 2));
            line.push('+');
        }
        line.push('\n');
        line
    };
    let render = |cells: &mut dyn Iterator<Item = &str>| {
        let mut line = String::from("|");
        for (cell, w) in cells.zip(&widths) {
            line.push(' ');
            line.push_str(&python_center(cell, *w));
            line.push_str(" |");
        }
        line.push('\n');
        line
    };
    let mut out = border.clone();
    out.push_str(&render(&mut headers.iter().copied()));
    out.push_str(&border);
    for row in rows {
        out.push_str(&render(&mut row.iter().map(String::as_str)));
    }
    out.push_str(&border);
    out
}

/// `str.center`: an odd margin puts the extra space on the left when the
/// width is odd, on the right when it is even.
fn python_center(text: &str, width: usize) -> String {
    let len = text.chars().count();
    if len >= width {
        return text.to_string();
    }
    let margin = width - len;
    let left = margin / 2 + (margin & width & 1);
    format!("{}{text}{}", " ".repeat(left), " ".repeat(margin - left))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_int_and_center() {
        assert_eq!(parse_python_int(" 5 "), Some(5));
        assert_eq!(parse_python_int("+1_0"), Some(10));
        assert_eq!(parse_python_int("-3"), Some(-3));
        assert_eq!(parse_python_int("1__0"), None);
        assert_eq!(parse_python_int("x"), None);
        assert_eq!(parse_python_int(""), None);
        assert_eq!(python_center("ab", 9), "    ab   ");
        assert_eq!(python_center("12", 11), "     12    ");
        assert_eq!(python_center("1", 9), "    1    ");
    }

    #[test]
    fn summary_table_matches_prettytable() {
        let rows = [
            ["set_root_provider_ids".to_string(), "3".into(), "3".into()],
            ["create_incomplete_consumers".to_string(), "0".into(), "0".into()],
        ];
        assert_eq!(
            centered_table(&["Migration", "Total Found", "Completed"], &rows),
            "+-----------------------------+-------------+-----------+\n\
             |          Migration          | Total Found | Completed |\n\
             +-----------------------------+-------------+-----------+\n\
             |    set_root_provider_ids    |      3      |     3     |\n\
             | create_incomplete_consumers |      0      |     0     |\n\
             +-----------------------------+-------------+-----------+\n"
        );
        assert_eq!(
            centered_table(&["Migration", "Total Found", "Completed"], &[]),
            "+-----------+-------------+-----------+\n\
             | Migration | Total Found | Completed |\n\
             +-----------+-------------+-----------+\n\
             +-----------+-------------+-----------+\n"
        );
    }
}
