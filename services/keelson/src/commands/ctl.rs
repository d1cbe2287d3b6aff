//! `keelson ctl`: the controller client commands. Exit 0 on success,
//! 1 with the error on stderr otherwise.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use keelson_controller::config_doc::CommittedConfig;
use keelson_controller::{ClientOptions, ControllerClient, CtrlStatus};
use keelson_runtime::Config;

use crate::cli::{CtlArgs, CtlCommand};

pub async fn run(config: Config, args: CtlArgs) -> anyhow::Result<ExitCode> {
    let addrs = addresses(&config, &args.controllers)?;
    let tls = crate::settings::mesh_tls(&config)?;
    match args.command {
        CtlCommand::Ctrlstatus { json } => {
            let client = ControllerClient::with_tls(addrs, ClientOptions::default(), tls);
            match client.ctrlstatus().await {
                Ok(s) => {
                    if json {
                        println!("{}", serde_json::to_string_pretty(&s.to_json())?);
                    } else {
                        print!("{}", human(&s));
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => fail("ctrlstatus", &e),
            }
        }
        CtlCommand::WaitPrimary { timeout, interval, min_term } => {
            let timeout = parse_duration(&timeout).context("--timeout")?;
            let interval = parse_duration(&interval).context("--interval")?;
            // Each probe is short; the loop owns the overall deadline.
            let probe = ClientOptions {
                deadline: interval.max(Duration::from_secs(1)),
                attempt_timeout: Duration::from_secs(1),
            };
            wait_primary(ControllerClient::with_tls(addrs, probe, tls), timeout, interval, min_term).await
        }
        CtlCommand::Clusterconf { json } => {
            let client = ControllerClient::with_tls(addrs, ClientOptions::default(), tls);
            match client.clusterconf().await {
                Ok(c) => {
                    let document: serde_json::Value =
                        serde_json::from_slice(&c.document).context("the committed document is not JSON")?;
                    if json {
                        let out = serde_json::json!({
                            "configVersion": c.version,
                            "configChecksum": hex(&c.checksum),
                            "lsn": c.lsn,
                            "term": c.term,
                            "document": document,
                        });
                        println!("{}", serde_json::to_string_pretty(&out)?);
                    } else {
                        println!("{}", serde_json::to_string_pretty(&document)?);
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => fail("clusterconf", &e),
            }
        }
        CtlCommand::Setconf { file } => {
            let document = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            // Validated here too, for a clear message before any network.
            let parsed = match CommittedConfig::from_json(&document) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("keelson ctl setconf: {}: {e}", file.display());
                    return Ok(ExitCode::FAILURE);
                }
            };
            let client = ControllerClient::with_tls(
                addrs,
                ClientOptions { deadline: Duration::from_secs(10), ..ClientOptions::default() },
                tls,
            );
            match client.setconf(document).await {
                Ok(ack) => {
                    println!(
                        "Committed config version 0x{:016x} (checksum {}) at LSN {}, term {}",
                        parsed.version(),
                        hex(parsed.checksum()),
                        ack.lsn,
                        ack.term
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => fail("setconf", &e),
            }
        }
        CtlCommand::BenchStatus { requests, concurrency } => {
            bench_status(ControllerClient::with_tls(addrs, ClientOptions::default(), tls), requests, concurrency).await
        }
    }
}

/// `concurrency` tasks share `requests` ctrlstatus calls on one client.
async fn bench_status(client: ControllerClient, requests: usize, concurrency: usize) -> anyhow::Result<ExitCode> {
    let client = std::sync::Arc::new(client);
    // One warm-up call opens the connection.
    if let Err(e) = client.ctrlstatus().await {
        return fail("bench-status", &e);
    }
    let concurrency = concurrency.max(1);
    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let client = client.clone();
        let n = requests / concurrency + usize::from(t < requests % concurrency);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(n);
            for _ in 0..n {
                let one = std::time::Instant::now();
                client.ctrlstatus().await.map_err(|e| anyhow::anyhow!("{e}"))?;
                latencies.push(one.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::with_capacity(requests);
    for t in tasks {
        latencies.extend(t.await??);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    // With p within [0, 1] the index is within the list; `as` saturates an
    // empty list's -1 to 0, which `get` then misses.
    #[allow(clippy::cast_possible_truncation)]
    let index = |p: f64| ((latencies.len() as f64 - 1.0) * p).round() as usize;
    let pct = |p: f64| latencies.get(index(p)).map(|d| d.as_secs_f64() * 1e6).unwrap_or(0.0);
    let out = serde_json::json!({
        "requests": latencies.len(),
        "concurrency": concurrency,
        "seconds": elapsed.as_secs_f64(),
        "rps": latencies.len() as f64 / elapsed.as_secs_f64(),
        "p50_us": pct(0.50),
        "p99_us": pct(0.99),
        "max_us": pct(1.0),
    });
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn fail(what: &str, e: &dyn std::fmt::Display) -> anyhow::Result<ExitCode> {
    eprintln!("keelson ctl {what}: {e}");
    Ok(ExitCode::FAILURE)
}

/// `--controllers`, else `[controller] peers`, else `[controller] listen`.
fn addresses(config: &Config, given: &[String]) -> anyhow::Result<Vec<String>> {
    let given: Vec<String> = given.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if !given.is_empty() {
        return Ok(given);
    }
    let peers = keelson_controller::settings::parse_peers(&config.get(&keelson_controller::options::PEERS))?;
    if !peers.is_empty() {
        return Ok(peers.iter().map(|p| p.address()).collect());
    }
    Ok(vec![config.get(&keelson_controller::options::LISTEN)])
}

/// Polls ctrlstatus until a node reports a known primary (of at least
/// `min_term`), on the monotonic clock.
async fn wait_primary(
    client: ControllerClient,
    timeout: Duration,
    interval: Duration,
    min_term: u64,
) -> anyhow::Result<ExitCode> {
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let mut last = String::from("no answer yet");
    loop {
        let now = tokio::time::Instant::now();
        if now >= deadline {
            eprintln!("keelson ctl wait-primary: no primary reported within {timeout:?} ({last})");
            return Ok(ExitCode::FAILURE);
        }
        let probe = tokio::time::timeout(deadline - now, client.ctrlstatus()).await;
        match probe {
            Ok(Ok(s)) => match &s.primary {
                Some(p) if s.term >= min_term => {
                    println!(
                        "Primary: {} (term {}, answered by {} as {})",
                        p.name, s.term, s.responder_name, s.responder_role
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                Some(p) => {
                    last = format!(
                        "{} reports {} of term {}, waiting for term {min_term}",
                        s.responder_name, p.name, s.term
                    )
                }
                None => last = format!("{} ({}) knows no primary", s.responder_name, s.responder_role),
            },
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => {}
        }
        let now = tokio::time::Instant::now();
        tokio::time::sleep_until((now + interval).min(deadline)).await;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The human-readable status.
fn human(s: &CtrlStatus) -> String {
    let unknown = || "unknown".to_string();
    let mut out = String::new();
    let _ = writeln!(out, "Primary: {}", s.primary.as_ref().map(|p| p.name.clone()).unwrap_or_else(unknown));
    let _ = writeln!(out, "answered by {} ({})", s.responder_name, s.responder_role);
    let peers: Vec<String> = s.peers.iter().map(|p| format!("{}={}", p.name, p.address())).collect();
    let _ = writeln!(out, "Peers ({}): {}", s.peers.len(), peers.join(", "));
    let _ = writeln!(out, "Term: {}", if s.term == 0 { unknown() } else { s.term.to_string() });
    let _ = writeln!(out, "Committed LSN: {}", s.committed_lsn);
    let _ = writeln!(out, "Applied LSN: {}", s.applied_lsn);
    let _ = writeln!(out, "Fenced: {}", if s.fenced { "yes" } else { "no" });
    let _ = writeln!(out, "Quorum: {}", if s.quorum { "yes" } else { "no" });
    let _ = writeln!(out, "Cluster name: {}", s.cluster_name);
    if s.config_checksum.is_empty() {
        let _ = writeln!(out, "Config version: unknown");
        let _ = writeln!(out, "Config checksum: unknown");
    } else {
        let _ = writeln!(out, "Config version: 0x{:016x}", s.config_version);
        let _ = writeln!(out, "Config checksum: {}", hex(&s.config_checksum));
    }
    out
}

/// `30s`, `500ms`, `2m`, `1h`, or bare seconds (`1.5`).
fn parse_duration(v: &str) -> anyhow::Result<Duration> {
    let v = v.trim();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let n: f64 = number.parse().with_context(|| format!("invalid duration {v:?}"))?;
    let seconds = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => bail!("invalid duration unit {other:?} in {v:?} (ms, s, m, h)"),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        bail!("invalid duration {v:?}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keelson_controller::{CtrlPeer, PrimaryRef, Role};

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 days").is_err());
    }

    #[test]
    fn human_format() {
        let mut s = CtrlStatus {
            cluster_name: "keelson".into(),
            primary: Some(PrimaryRef { name: "c1".into(), address: "127.0.0.1:7001".into() }),
            responder_name: "c2".into(),
            responder_role: Role::Standby,
            term: 3,
            config_version: 0x0102_0304_0506_0708,
            config_checksum: vec![0xab; 32],
            committed_lsn: 5,
            applied_lsn: 4,
            fenced: true,
            peers: vec![CtrlPeer { name: "c1".into(), host: "127.0.0.1".into(), port: 7001 }],
            quorum: true,
        };
        let text = human(&s);
        assert!(text.starts_with("Primary: c1\nanswered by c2 (STANDBY)\n"), "{text}");
        assert!(text.contains("Config version: 0x0102030405060708\n"), "{text}");
        assert!(text.contains(&format!("Config checksum: {}\n", "ab".repeat(32))), "{text}");
        assert!(text.contains("Fenced: yes\n"));
        s.primary = None;
        s.term = 0;
        s.config_checksum.clear();
        let text = human(&s);
        assert!(text.starts_with("Primary: unknown\n"), "{text}");
        assert!(text.contains("Term: unknown\n"));
        assert!(text.contains("Config checksum: unknown\n"));
    }

    #[test]
    fn addresses_from_flags_peers_or_listen() {
        let mut c = Config::default();
        assert_eq!(addresses(&c, &[]).unwrap(), vec!["127.0.0.1:7001"]);
        c.set("controller", "peers", "c1=127.0.0.1:7001,c2=127.0.0.1:7002");
        assert_eq!(addresses(&c, &[]).unwrap(), vec!["127.0.0.1:7001", "127.0.0.1:7002"]);
        assert_eq!(addresses(&c, &["h:1".into()]).unwrap(), vec!["h:1"]);
    }
}
