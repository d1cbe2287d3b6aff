//! The keelson HA controller: several replicas, one primary elected
//! through etcd, a replicated cluster configuration and service registry,
//! and `ctrlstatus` answered by every node in every role.
//!
//! Layers, each in its own module:
//! - domain: [`model`] (requests, answers, typed refusals), [`gate`] (the
//!   opcode × role table), [`log`] (entries and log positions),
//!   [`config_doc`] (canonical bytes, checksum, version), [`term`];
//! - the node: [`node`] (state, dispatch, the write path);
//! - replicated state: [`etcd`] (keys and fenced transactions),
//!   [`election`] (the role driver), [`local`] (single-node mode);
//! - transport: [`server`] and [`client`] (Cap'n Proto RPC over TCP), with
//!   the failover policy in [`failover`].
//!
//! Singleton duties (reclaiming the locks of expired stack engines,
//! re-triggering stalled traversals, the one-time standard traits and
//! classes sync): [`duties`] runs them on the serving primary only,
//! following [`Controller::subscribe_roles`]; the actions belong to the
//! services that own that state and are wired in by the binary.

pub mod client;
pub mod config_doc;
pub mod duties;
pub mod election;
pub mod etcd;
pub mod failover;
pub mod gate;
pub mod local;
pub mod log;
pub mod model;
pub mod node;
pub mod options;
pub mod server;
pub mod settings;
pub mod term;
mod wire;

use std::sync::Arc;

use keelson_runtime::shutdown::Shutdown;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use client::{ClientError, ClientOptions, ControllerClient};
pub use model::{
    ClusterConf, CtrlError, CtrlPeer, CtrlStatus, Opcode, PrimaryRef, Registration, Request, Response, Role, WriteAck,
};
pub use node::{Controller, RoleView, StartError};
pub use server::ServeError;
pub use settings::{ControllerSettings, SettingsError};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Starts a node: single-node (PRIMARY, term 1) without etcd endpoints,
/// else in INIT with the election driver running until shutdown.
pub async fn start(
    settings: ControllerSettings,
    shutdown: Shutdown,
) -> Result<(Arc<Controller>, Option<JoinHandle<()>>), StartError> {
    let file = |ext: &str| settings.data_dir.as_ref().map(|d| d.join(format!("controller-{}.{ext}", settings.name)));
    if settings.etcd_endpoints.is_empty() {
        let state_file = file("json");
        tracing::info!(target: "keelson::controller", "single-node mode (no [etcd] endpoints); state in {}",
            state_file.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "memory".into()));
        return Ok((Controller::single_node(settings, state_file).await?, None));
    }
    let terms = term::TermStore::open(file("term"))?;
    let store = etcd::EtcdStore::connect(
        &settings.etcd_endpoints,
        &settings.cluster_name,
        election::op_timeout(settings.lease_ttl),
    )
    .await?;
    tracing::info!(target: "keelson::controller", "{}: etcd at {} (lease TTL {:?})", settings.name, settings.etcd_endpoints.join(","), settings.lease_ttl);
    let ctl = Controller::with_etcd(settings, store.clone(), terms).await;
    let driver = tokio::spawn(election::run(ctl.clone(), store, shutdown));
    Ok((ctl, Some(driver)))
}

/// Runs one node on `listener` until shutdown (then, as primary, hands
/// over by revoking its lease).
pub async fn run(settings: ControllerSettings, listener: TcpListener, shutdown: Shutdown) -> Result<(), RunError> {
    run_with_duties(settings, listener, None, shutdown).await
}

/// Builds a node's singleton duty actions (they may read the node's own
/// registry).
pub type DutiesFactory = Box<dyn FnOnce(&Arc<Controller>) -> Arc<dyn duties::Duties> + Send>;

/// [`run`], with the singleton duties (`Some((actions, interval))`)
/// running every `interval` while this node is the serving primary.
pub async fn run_with_duties(
    settings: ControllerSettings,
    listener: TcpListener,
    duties: Option<(DutiesFactory, std::time::Duration)>,
    shutdown: Shutdown,
) -> Result<(), RunError> {
    let (ctl, driver) = start(settings, shutdown.clone()).await?;
    let duty_loop = duties.map(|(make, interval)| {
        tokio::spawn(duties::run(ctl.subscribe_roles(), make(&ctl), interval, shutdown.clone()))
    });
    server::serve(ctl, listener, shutdown).await?;
    if let Some(duty_loop) = duty_loop {
        let _ = duty_loop.await;
    }
    if let Some(driver) = driver {
        let _ = driver.await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real transport against a real server: a dead address first, the
    /// client rotates to the live single node.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn capnp_round_trip_with_failover() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A port nothing listens on.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let (trigger, shutdown) = keelson_runtime::shutdown::channel();
        let settings = ControllerSettings::single_node("c1", addr);
        let server = tokio::spawn(run(settings, listener, shutdown));

        let client = ControllerClient::new(vec![dead.to_string(), addr.to_string()], ClientOptions::default());
        let status = client.ctrlstatus().await.unwrap();
        assert_eq!(status.responder_name, "c1");
        assert_eq!(status.responder_role, Role::Primary);
        assert_eq!(status.primary.as_ref().map(|p| p.name.as_str()), Some("c1"));
        assert_eq!(status.term, 1);

        let conf = client.clusterconf().await.unwrap();
        assert_eq!(conf.checksum, status.config_checksum);
        let ack = client.setconf(br#"{"clusterName":"keelson","settings":{"x":1}}"#.to_vec()).await.unwrap();
        assert_eq!(ack.lsn, 2);
        let bad = client.setconf(b"not json".to_vec()).await.unwrap_err();
        assert!(matches!(bad, ClientError::Refused(CtrlError::Invalid(_))), "{bad}");

        let r = Registration {
            service: "stack-engine".into(),
            instance: "e1".into(),
            address: "http://h:1".into(),
            ttl_seconds: 10,
        };
        client.register(r.clone()).await.unwrap();
        client.heartbeat("stack-engine", "e1").await.unwrap();
        assert_eq!(client.list("stack-engine").await.unwrap(), vec![r]);
        client.deregister("stack-engine", "e1").await.unwrap();
        assert!(matches!(
            client.heartbeat("stack-engine", "e1").await,
            Err(ClientError::Refused(CtrlError::NotFound(_)))
        ));

        trigger.trigger();
        server.await.unwrap().unwrap();
        // Nothing answers any more: a typed error, in bounded time.
        let gone = ControllerClient::new(
            vec![addr.to_string()],
            ClientOptions {
                deadline: std::time::Duration::from_millis(500),
                attempt_timeout: std::time::Duration::from_millis(200),
            },
        );
        assert!(matches!(gone.ctrlstatus().await, Err(ClientError::NoController { .. })));
    }
}
