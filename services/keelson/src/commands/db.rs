//! `keelson db …`: placement-manage's database commands.

use std::process::ExitCode;

use anyhow::Context as _;
use keelson_common::db::schema;
use keelson_common::{Config, Db};

use crate::cli::DbCommand;
use crate::settings;

pub async fn run(config: Config, command: DbCommand) -> anyhow::Result<ExitCode> {
    let url = settings::database_url(&config)?;
    let db = Db::connect(&url, &settings::pool_settings(&config))
        .await
        .with_context(|| format!("connecting to {}", url.display))?;
    match command {
        DbCommand::Sync => {
            let outcome = schema::sync(&db).await?;
            let seeded = keelson_common::db::seed::seed_standard(&db).await?;
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
        DbCommand::OnlineDataMigrations { max_count: _ } => {
            // Databases this release accepts need no online migration
            // (db sync refuses older data with a message), so there is
            // nothing to run; report like placement-manage does.
            println!("Running batches of 50 until complete");
            println!("+-----------+--------------+-----------+");
            println!("| Migration | Total Needed | Completed |");
            println!("+-----------+--------------+-----------+");
            println!("+-----------+--------------+-----------+");
        }
    }
    db.close().await;
    Ok(ExitCode::SUCCESS)
}
