//! `keelson status upgrade check`: placement-status's checks, with its
//! exit codes (0 success, 1 warning, 2 failure).

use std::process::ExitCode;

use keelson_common::db::schema;
use keelson_common::{Config, Db};

use crate::cli::{StatusCommand, UpgradeCommand};
use crate::settings;

pub async fn run(config: Config, command: StatusCommand) -> anyhow::Result<ExitCode> {
    let StatusCommand::Upgrade { command: UpgradeCommand::Check } = command;
    let mut results: Vec<(&str, Result<(), String>)> = Vec::new();
    let db = match settings::database_url(&config) {
        Ok(url) => Db::connect(&url, &settings::pool_settings(&config)).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match db {
        Ok(db) => {
            results.push(("Database schema", schema::check_current(&db).await.map_err(|e| e.to_string())));
            let missing_root = db
                .fetch_all("SELECT COUNT(*) FROM resource_providers WHERE root_provider_id IS NULL", &[])
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.first().map(|r| r.i64(0).map_err(|e| e.to_string())).unwrap_or(Ok(0)));
            results.push((
                "Root Provider IDs",
                match missing_root {
                    Ok(0) => Ok(()),
                    Ok(n) => Err(format!("{n} resource providers have no root provider id")),
                    Err(e) => Err(e),
                },
            ));
            let missing_consumers = db
                .fetch_all(
                    "SELECT COUNT(*) FROM allocations LEFT OUTER JOIN consumers ON allocations.consumer_id = consumers.uuid WHERE consumers.id IS NULL",
                    &[],
                )
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.first().map(|r| r.i64(0).map_err(|e| e.to_string())).unwrap_or(Ok(0)));
            results.push((
                "Incomplete Consumers",
                match missing_consumers {
                    Ok(0) => Ok(()),
                    Ok(n) => Err(format!("{n} allocations have no consumer record")),
                    Err(e) => Err(e),
                },
            ));
            db.close().await;
        }
        Err(e) => results.push(("Database connection", Err(e))),
    }
    let mut failed = false;
    println!("+----------------------------------------+");
    println!("| Upgrade Check Results                  |");
    println!("+----------------------------------------+");
    for (name, r) in &results {
        println!("| Check: {name}");
        match r {
            Ok(()) => println!("| Result: Success"),
            Err(e) => {
                failed = true;
                println!("| Result: Failure");
                println!("| Details: {e}");
            }
        }
        println!("+----------------------------------------+");
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}
