//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "keelson", version, about = "OpenStack Placement and Orchestration, as a mesh of small Rust services")]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// oslo.config INI file; repeat for more (a later file wins). The
    /// PLACEMENT_CONFIG_FILE environment variable adds one too.
    #[arg(long = "config-file", global = true)]
    pub config_files: Vec<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every service in one process on embedded defaults (SQLite under
    /// ./keelson-data, noauth2, Placement on 127.0.0.1:8778, Orchestration
    /// on 127.0.0.1:8004).
    AllInOne,
    /// The REST gateway (Placement and Orchestration APIs).
    Gateway,
    /// The inventory service (gRPC).
    Inventory,
    /// The allocation-candidates service (gRPC).
    Candidates,
    /// Database schema management (placement-manage db).
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Upgrade readiness checks (placement-status).
    Status {
        #[command(subcommand)]
        command: StatusCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Create the schema, or upgrade it to the head revision.
    Sync,
    /// Print the schema revision.
    Version,
    /// Record a revision without migrating.
    Stamp { revision: String },
    /// Run the online data migrations (none are needed for databases at
    /// this release's schema; old data is refused by `db sync`).
    #[command(name = "online_data_migrations")]
    OnlineDataMigrations {
        #[arg(long = "max-count")]
        max_count: Option<u64>,
    },
}

#[derive(Subcommand, Debug)]
pub enum StatusCommand {
    Upgrade {
        #[command(subcommand)]
        command: UpgradeCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum UpgradeCommand {
    /// Check that the database is ready for this release.
    Check,
}

impl Command {
    /// The subcommand's name, for logs and trace service names.
    pub fn name(&self) -> &'static str {
        match self {
            Command::AllInOne => "all-in-one",
            Command::Gateway => "gateway",
            Command::Inventory => "inventory",
            Command::Candidates => "candidates",
            Command::Db { .. } => "db",
            Command::Status { .. } => "status",
        }
    }
}
