//! `keelson template parse`: how the engine reads a template or environment
//! text (JSON, else YAML as Heat's loader reads it), printed as JSON.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use keelson_runtime::Config;
use serde_json::{json, Value};

#[derive(Args, Debug)]
pub struct TemplateArgs {
    #[command(subcommand)]
    pub command: TemplateCommand,
}

#[derive(Subcommand, Debug)]
pub enum TemplateCommand {
    /// Prints the document FILE (or standard input) holds, as JSON; a text
    /// the engine refuses prints the error and exits 1.
    Parse {
        /// The template or environment; standard input when absent or `-`.
        file: Option<PathBuf>,
        /// Reads one JSON string (a document's text) per line of standard
        /// input and writes one line per document: {"value": ...} or
        /// {"error": {"type": ..., "message": ...}}.
        #[arg(long, conflicts_with = "file")]
        batch: bool,
    },
}

pub fn run(config: Config, args: TemplateArgs) -> anyhow::Result<ExitCode> {
    // The limits the engine reads documents under, from the same options.
    keelson_stack_engine::settings_from_config(&config, String::new()).evaluation_limits.install();
    let TemplateCommand::Parse { file, batch } = args.command;
    if batch {
        return batch_parse();
    }
    let text = match file.filter(|f| f.as_os_str() != "-") {
        Some(path) => {
            std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?
        }
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        }
    };
    match keelson_hot::parse_document(&text) {
        Ok(value) => {
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{}: {}", e.type_name(), e.message);
            Ok(ExitCode::FAILURE)
        }
    }
}

fn batch_parse() -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Value>(&line) {
            Ok(Value::String(text)) => match keelson_hot::parse_document(&text) {
                Ok(value) => json!({ "value": value }),
                Err(e) => json!({ "error": { "type": e.type_name(), "message": e.message } }),
            },
            _ => json!({ "error": { "type": "BadInput", "message": "each line must be a JSON string" } }),
        };
        serde_json::to_writer(&mut out, &answer)?;
        out.write_all(b"\n")?;
        // The caller may wait for each answer before sending the next.
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}
