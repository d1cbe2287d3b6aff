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
    /// One Heat stack engine (gRPC on [keelson] engine_listen): the
    /// Orchestration API operations and a convergence worker; engines
    /// sharing [database] connection spread stacks' work among them.
    Engine,
    /// Database schema management (placement-manage db).
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Operator tools for Placement's data (keelson's own, beside the
    /// upstream-compatible API).
    Placement {
        #[command(subcommand)]
        command: PlacementCommand,
    },
    /// Orchestration database maintenance (heat-manage).
    StackDb {
        #[command(subcommand)]
        command: StackDbCommand,
    },
    /// Upgrade readiness checks (placement-status).
    Status {
        #[command(subcommand)]
        command: StatusCommand,
    },
    /// One HA controller node: Cap'n Proto RPC on [controller] listen,
    /// elected through etcd ([etcd] endpoints), else single-node.
    Controller,
    /// Controller client: ctrlstatus, wait-primary, clusterconf, setconf.
    Ctl(CtlArgs),
    /// Templates as the engine reads them (parse).
    Template(crate::commands::template::TemplateArgs),
    /// Every option keelson accepts (Placement's contract and keelson's
    /// declarations): group, name, type, default, help.
    Options(OptionsArgs),
}

#[derive(Args, Debug)]
pub struct OptionsArgs {
    /// One JSON array of {group, name, type, default, choices, help}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CtlArgs {
    /// Controller addresses, HOST:PORT,HOST:PORT… (default: [controller]
    /// peers of --config-file, else [controller] listen).
    #[arg(long, value_delimiter = ',')]
    pub controllers: Vec<String>,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Subcommand, Debug)]
pub enum CtlCommand {
    /// Who is the primary, who answered, peers, term, log positions,
    /// fenced, cluster name, configuration version and checksum.
    Ctrlstatus {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Polls ctrlstatus until a node reports a known primary; prints it.
    WaitPrimary {
        /// Give up after this long (e.g. 30s, 500ms, 2m).
        #[arg(long, default_value = "30s")]
        timeout: String,
        /// Time between two probes.
        #[arg(long, default_value = "500ms")]
        interval: String,
        /// Only a primary of at least this term counts (after killing the
        /// primary of term N, wait for N+1).
        #[arg(long, default_value_t = 0)]
        min_term: u64,
    },
    /// Prints the committed cluster configuration (JSON).
    Clusterconf {
        /// The document with its version, checksum, LSN and term.
        #[arg(long)]
        json: bool,
    },
    /// Commits FILE (JSON) as the cluster configuration.
    Setconf { file: PathBuf },
    /// ctrlstatus round trips through the client library, for
    /// tests/bench/controller.py: prints one JSON object with the rate and
    /// latency percentiles.
    #[command(hide = true)]
    BenchStatus {
        #[arg(long, default_value_t = 10000)]
        requests: usize,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
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
    /// Run the online data migrations: root provider ids and consumer
    /// records that older releases left out (`db sync` refuses to upgrade
    /// past them).
    #[command(name = "online_data_migrations")]
    OnlineDataMigrations {
        /// Maximum number of objects to consider (one batch); without it,
        /// batches of 50 until complete.
        #[arg(long = "max-count", value_name = "<number>", allow_negative_numbers = true)]
        max_count: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum PlacementCommand {
    /// Check the database for what the API never writes: allocations over
    /// capacity or without inventory, consumers without allocations or
    /// without records, broken provider trees. Exit status as `nova-manage
    /// placement audit`: 0 nothing found, 3 found, 4 found and all
    /// repaired, 1 error.
    Audit {
        /// Repair what is safe (consumer records, roots, generations, and
        /// with --nova-endpoint the allocations Nova does not know), each
        /// repair in a transaction of its own.
        #[arg(long)]
        fix: bool,
        /// One JSON object (counts, findings, repairs) instead of text.
        #[arg(long)]
        json: bool,
        /// Nova's compute API (`http://nova:8774/v2.1`): also find the
        /// allocations Nova does not account for, as `nova-manage placement
        /// audit` does. Credentials from OS_AUTH_URL with OS_TOKEN, or with
        /// OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME (an admin).
        #[arg(long, value_name = "URL")]
        nova_endpoint: Option<String>,
    },
    /// Why `GET /allocation_candidates?QUERY` answers as it does: per
    /// request group, how many providers each rule excluded; per tree, why
    /// it is not in the answer. Asks the gateway's
    /// `/keelson/v1/placement/explain` (admin only), which runs the real
    /// request's code.
    Explain {
        /// The query string, as Nova sends it (e.g.
        /// 'resources=VCPU:8,MEMORY_MB:2048&required=!COMPUTE_STATUS_DISABLED').
        query: String,
        /// The Placement microversion to parse the query at.
        #[arg(long, default_value = "latest")]
        microversion: String,
        /// The Placement API (http only); default: the local gateway at
        /// `[keelson] placement_listen`.
        #[arg(long)]
        url: Option<String>,
        /// The JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum StackDbCommand {
    /// Remove for good the stacks deleted more than AGE units ago, with
    /// their resources, events and templates (heat-manage purge_deleted).
    #[command(name = "purge-deleted", alias = "purge_deleted")]
    PurgeDeleted {
        /// How long ago, in GRANULARITY units.
        #[arg(default_value_t = 90)]
        age: u64,
        #[arg(short = 'g', long, value_enum, default_value_t = Granularity::Days)]
        granularity: Granularity,
        /// Only this project's stacks.
        #[arg(short = 'p', long = "project-id")]
        project_id: Option<String>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Granularity {
    Days,
    Hours,
    Minutes,
    Seconds,
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
    Check {
        /// Output the results in JSON format (oslo.upgradecheck's).
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// The subcommand's name, for logs and trace service names.
    pub fn name(&self) -> &'static str {
        match self {
            Command::AllInOne => "all-in-one",
            Command::Gateway => "gateway",
            Command::Inventory => "inventory",
            Command::Candidates => "candidates",
            Command::Engine => "engine",
            Command::Db { .. } => "db",
            Command::Placement { .. } => "placement",
            Command::StackDb { .. } => "stack-db",
            Command::Status { .. } => "status",
            Command::Controller => "controller",
            Command::Ctl(_) => "ctl",
            Command::Template(_) => "template",
            Command::Options(_) => "options",
        }
    }

    /// Whether the subcommand serves until it is stopped (rather than
    /// running one operator command).
    pub fn is_long_running(&self) -> bool {
        matches!(
            self,
            Command::AllInOne
                | Command::Gateway
                | Command::Inventory
                | Command::Candidates
                | Command::Engine
                | Command::Controller
        )
    }
}
