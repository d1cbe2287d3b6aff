//! One module per subcommand.

mod all_in_one;
mod controller;
mod controller_view;
mod ctl;
mod db;
mod engine;
mod explain;
mod nova_view;
mod options;
mod placement;
mod services;
mod stack_db;
mod status;
pub(crate) mod template;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    use crate::options::{LOG_FILTER, OTLP_ENDPOINT, SERVICE_NAME};
    if let Command::Options(args) = &cli.command {
        // The declarations alone: no configuration is read.
        return options::run(args);
    }
    let mut config = crate::settings::load(&cli.common)?;
    let service = format!("{}-{}", config.get(&SERVICE_NAME), cli.command.name());
    let telemetry =
        keelson_runtime::telemetry::init(&config.get(&LOG_FILTER), config.get(&OTLP_ENDPOINT).as_deref(), &service);
    for unknown in &config.unknown {
        tracing::warn!(target: "keelson::config", "unknown option {unknown} ignored");
    }
    if cli.command.is_long_running() {
        crate::memory::spawn_trimmer();
    }
    // Every gRPC server and client of this process sizes its messages and
    // headers from the REST edge's limits, read once here.
    keelson_runtime::grpc::WireLimits::from_config(&config).install();
    let outcome = match cli.command {
        Command::AllInOne => {
            crate::settings::apply_all_in_one_defaults(&mut config)?;
            all_in_one::run(config).await
        }
        Command::Gateway => services::gateway(config).await,
        Command::Inventory => services::inventory(config).await,
        Command::Candidates => services::candidates(config).await,
        Command::Engine => engine::run(config).await,
        Command::Db { command } => db::run(config, command).await,
        Command::Placement { command } => placement::run(config, command).await,
        Command::StackDb { command } => stack_db::run(config, command).await,
        Command::Status { command } => status::run(config, command).await,
        Command::Controller => controller::run(config).await,
        Command::Ctl(args) => ctl::run(config, args).await,
        Command::Template(args) => template::run(config, args),
        // Answered above, before any configuration is read.
        Command::Options(args) => options::run(&args),
    };
    telemetry.shutdown();
    outcome
}
