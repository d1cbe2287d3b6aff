//! Logging set-up shared by every entry point.

use tracing_subscriber::EnvFilter;

/// Installs the global `tracing` subscriber. `RUST_LOG` wins over the
/// configured filter so an operator can raise verbosity without editing
/// files.
pub fn init_logging(default_filter: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // A second initialisation (tests, all-in-one) is harmless.
    // stderr keeps command output (`db version`, `ctl --json`) clean on
    // stdout; colours only for a terminal, so log files stay greppable.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}
