//! `keelson stack-db …`: heat-manage's maintenance of the orchestration
//! database.

use std::process::ExitCode;

use keelson_runtime::Config;

use crate::cli::{Granularity, StackDbCommand};

pub async fn run(config: Config, command: StackDbCommand) -> anyhow::Result<ExitCode> {
    let db = super::engine::open_orchestration_database(&config).await?;
    match command {
        StackDbCommand::PurgeDeleted { age, granularity, project_id } => {
            let unit = match granularity {
                Granularity::Days => 86_400,
                Granularity::Hours => 3_600,
                Granularity::Minutes => 60,
                Granularity::Seconds => 1,
            };
            let seconds = i64::try_from(age.saturating_mul(unit)).unwrap_or(i64::MAX);
            let purged =
                keelson_stack_engine::store::stacks::purge_deleted(&db, seconds, project_id.as_deref()).await?;
            println!("Purged {purged} deleted stacks");
        }
    }
    db.close().await;
    Ok(ExitCode::SUCCESS)
}
