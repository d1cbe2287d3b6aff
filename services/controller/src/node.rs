//! One controller node: its state (role, known primary, term, quorum, log
//! positions, committed configuration), the dispatch of requests through
//! the gate, and the write path. The role transitions are driven by the
//! election driver (etcd) or fixed (single node); the transport calls
//! [`Controller::handle`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::config_doc::CommittedConfig;
use crate::etcd::{CommitOutcome, EtcdStore, LeaderInfo};
use crate::gate::{self, GateRole, Verdict};
use crate::local::LocalBackend;
use crate::log::{Entry, Op, Replicated};
use crate::model::{
    ClusterConf, CtrlError, CtrlStatus, Opcode, PrimaryRef, Registration, Request, Response, Role, WriteAck,
};
use crate::settings::ControllerSettings;
use crate::term::TermStore;

/// Why a node cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Local(#[from] crate::local::LocalError),
    #[error(transparent)]
    Term(#[from] crate::term::TermError),
    #[error("cannot set up the etcd client: {0}")]
    Etcd(#[from] crate::etcd::StoreError),
    #[error("cannot commit the initial configuration: {0}")]
    Bootstrap(CtrlError),
}

/// What changes subscribers (singleton duties, tests) see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleView {
    pub role: Role,
    pub term: u64,
    /// Primary with quorum and caught up: singleton duties may run.
    pub serving: bool,
}

pub(crate) struct NodeState {
    pub role: Role,
    pub primary: Option<PrimaryRef>,
    pub term: u64,
    pub quorum: bool,
    pub replicated: Replicated,
    /// Set while this node is the etcd primary: the fence of its writes.
    pub leadership: Option<LeaderInfo>,
}

impl NodeState {
    fn gate_role(&self) -> GateRole {
        GateRole::of(self.role, self.quorum, self.replicated.positions.fenced())
    }

    fn view(&self) -> RoleView {
        RoleView { role: self.role, term: self.term, serving: self.gate_role() == GateRole::PrimaryServing }
    }
}

pub(crate) enum Backend {
    Local(LocalBackend),
    // Boxed: the etcd client is a few KiB.
    Etcd(Box<EtcdStore>),
}

/// One controller node.
pub struct Controller {
    pub(crate) settings: ControllerSettings,
    state: Mutex<NodeState>,
    /// Bumped on every state change (drivers wait on it).
    changes: watch::Sender<u64>,
    roles: watch::Sender<RoleView>,
    pub(crate) backend: Backend,
    pub(crate) terms: Mutex<TermStore>,
    /// Serialises writes: each builds on the committed LSN it read.
    writes: tokio::sync::Mutex<()>,
}

impl Controller {
    fn new(settings: ControllerSettings, backend: Backend, terms: TermStore, role: Role) -> Controller {
        let term = terms.highest();
        let state =
            NodeState { role, primary: None, term, quorum: false, replicated: Replicated::default(), leadership: None };
        let view = state.view();
        Controller {
            settings,
            state: Mutex::new(state),
            changes: watch::channel(0).0,
            roles: watch::channel(view).0,
            backend,
            terms: Mutex::new(terms),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// A single-node controller: PRIMARY of term 1, state in `state_file`
    /// (`None`: in memory). Commits the initial configuration if there is
    /// none.
    pub async fn single_node(
        settings: ControllerSettings,
        state_file: Option<PathBuf>,
    ) -> Result<Arc<Controller>, StartError> {
        let local = LocalBackend::new(state_file);
        let loaded = local.load()?;
        let ctl = Arc::new(Controller::new(settings, Backend::Local(local), TermStore::open(None)?, Role::Primary));
        let me = ctl.me();
        ctl.update(|s| {
            s.primary = Some(me);
            s.term = 1;
            s.quorum = true;
            s.replicated.restore(loaded.lsn, 1, loaded.config);
        });
        ctl.bootstrap_config().await.map_err(StartError::Bootstrap)?;
        Ok(ctl)
    }

    /// An etcd-backed controller in INIT; the election driver
    /// ([`crate::election::run`]) moves it on.
    pub(crate) async fn with_etcd(settings: ControllerSettings, store: EtcdStore, terms: TermStore) -> Arc<Controller> {
        Arc::new(Controller::new(settings, Backend::Etcd(Box::new(store)), terms, Role::Init))
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &ControllerSettings {
        &self.settings
    }

    pub(crate) fn me(&self) -> PrimaryRef {
        PrimaryRef { name: self.settings.name.clone(), address: self.settings.advertised_address() }
    }

    fn lock(&self) -> MutexGuard<'_, NodeState> {
        // Every update is a short, panic-free closure over plain data; a
        // poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state and tells the waiters.
    pub(crate) fn update<T>(&self, f: impl FnOnce(&mut NodeState) -> T) -> T {
        let (out, view) = {
            let mut s = self.lock();
            let out = f(&mut s);
            (out, s.view())
        };
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
        self.roles.send_if_modified(|v| {
            let changed = *v != view;
            *v = view;
            changed
        });
        out
    }

    pub(crate) fn read<T>(&self, f: impl FnOnce(&NodeState) -> T) -> T {
        f(&self.lock())
    }

    pub(crate) fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Role changes, for singleton duties: run them while `serving`.
    pub fn subscribe_roles(&self) -> watch::Receiver<RoleView> {
        self.roles.subscribe()
    }

    pub fn role_view(&self) -> RoleView {
        self.read(NodeState::view)
    }

    /// Records a term seen in the cluster (persisted; never goes back).
    pub(crate) fn observe_term(&self, term: u64) {
        let highest = {
            let mut t = self.terms.lock().unwrap_or_else(|p| p.into_inner());
            match t.observe(term) {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(target: "keelson::controller", "{e}");
                    t.highest().max(term)
                }
            }
        };
        self.update(|s| s.term = s.term.max(highest));
    }

    /// The `ctrlstatus` answer: a snapshot of the local view. Read-only.
    pub fn status(&self) -> CtrlStatus {
        let s = self.lock();
        let config = s.replicated.config.as_ref();
        let peers = config
            .map(|c| c.peers().to_vec())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| self.settings.effective_peers());
        CtrlStatus {
            cluster_name: config
                .map(|c| c.cluster_name().to_string())
                .unwrap_or_else(|| self.settings.cluster_name.clone()),
            primary: s.primary.clone(),
            responder_name: self.settings.name.clone(),
            responder_role: s.role,
            term: s.term,
            config_version: config.map(CommittedConfig::version).unwrap_or(0),
            config_checksum: config.map(|c| c.checksum().to_vec()).unwrap_or_default(),
            committed_lsn: s.replicated.positions.committed,
            applied_lsn: s.replicated.positions.applied,
            fenced: s.replicated.positions.fenced(),
            peers,
            quorum: s.quorum,
        }
    }

    fn refusal(verdict: Verdict, s: &NodeState) -> CtrlError {
        match verdict {
            Verdict::Allow => CtrlError::Internal("refusal of an allowed request".into()),
            Verdict::Standby => CtrlError::Standby { primary: s.primary.clone() },
            Verdict::NoQuorum => CtrlError::NoQuorum,
            Verdict::NotReady => CtrlError::NotReady(match s.gate_role() {
                GateRole::Init => "the controller is starting".into(),
                GateRole::Electing => "no primary is elected yet".into(),
                GateRole::PrimaryFenced => {
                    let p = s.replicated.positions;
                    format!("the primary is catching up (applied {} of {})", p.applied, p.committed)
                }
                other => format!("not ready ({other:?})"),
            }),
        }
    }

    /// Passes a request through the gate.
    fn admit(&self, op: Opcode) -> Result<(), CtrlError> {
        let s = self.lock();
        match gate::decide(op, s.gate_role()) {
            Verdict::Allow => Ok(()),
            v => Err(Controller::refusal(v, &s)),
        }
    }

    /// Serves one request: the gate, then the handler.
    pub async fn handle(&self, request: Request) -> Result<Response, CtrlError> {
        self.admit(request.opcode())?;
        match request {
            Request::CtrlStatus => Ok(Response::CtrlStatus(Box::new(self.status()))),
            Request::ClusterConf => self.clusterconf().map(Response::ClusterConf),
            Request::SetConf { document } => self.setconf(&document).await.map(Response::Write),
            Request::Register(r) => self.register(r).await.map(Response::Write),
            Request::Heartbeat { service, instance } => self.heartbeat(&service, &instance).await.map(Response::Write),
            Request::Deregister { service, instance } => {
                self.deregister(&service, &instance).await.map(Response::Write)
            }
            Request::List { service } => self.list(&service).await.map(Response::List),
        }
    }

    fn clusterconf(&self) -> Result<ClusterConf, CtrlError> {
        let s = self.lock();
        let Some(config) = &s.replicated.config else {
            return Err(CtrlError::NotReady("no configuration has been committed yet".into()));
        };
        Ok(ClusterConf {
            document: config.canonical().to_vec(),
            version: config.version(),
            checksum: config.checksum().to_vec(),
            lsn: s.replicated.positions.applied,
            term: s.term,
        })
    }

    async fn setconf(&self, document: &[u8]) -> Result<WriteAck, CtrlError> {
        let config = CommittedConfig::from_json(document).map_err(|e| CtrlError::Invalid(e.to_string()))?;
        if config.cluster_name() != self.settings.cluster_name {
            // The cluster name keys the replicated state in etcd; renaming
            // it would orphan it.
            return Err(CtrlError::Invalid(format!(
                "clusterName must stay {:?} (got {:?})",
                self.settings.cluster_name,
                config.cluster_name()
            )));
        }
        self.write(Opcode::SetConf, Op::SetConf { document: config.value() }, None).await
    }

    /// Commits the initial configuration when the cluster has none (the
    /// first primary ever). Idempotent.
    pub(crate) async fn bootstrap_config(&self) -> Result<(), CtrlError> {
        let needed = self.read(|s| s.replicated.config.is_none() && s.replicated.positions.committed == 0);
        if !needed {
            return Ok(());
        }
        let config = CommittedConfig::bootstrap(&self.settings.cluster_name, &self.settings.effective_peers());
        tracing::info!(target: "keelson::controller", "committing the initial configuration (version {:016x})", config.version());
        self.write(Opcode::SetConf, Op::SetConf { document: config.value() }, None).await.map(|_| ())
    }

    async fn register(&self, r: Registration) -> Result<WriteAck, CtrlError> {
        validate_registration(&r)?;
        match &self.backend {
            Backend::Local(local) => {
                let ack = self.write(Opcode::Register, Op::Register { registration: r.clone() }, None).await?;
                local.register(r);
                Ok(ack)
            }
            Backend::Etcd(store) => {
                let lease = store
                    .grant_lease(std::time::Duration::from_secs(u64::from(r.ttl_seconds)))
                    .await
                    .map_err(internal)?;
                let result = self.write(Opcode::Register, Op::Register { registration: r }, Some(lease)).await;
                if result.is_err() {
                    let store = store.clone();
                    tokio::spawn(async move { store.revoke_lease(lease).await });
                }
                result
            }
        }
    }

    async fn heartbeat(&self, service: &str, instance: &str) -> Result<WriteAck, CtrlError> {
        let alive = match &self.backend {
            Backend::Local(local) => local.heartbeat(service, instance),
            Backend::Etcd(store) => match store.registration(service, instance).await.map_err(internal)? {
                None => false,
                Some((_, lease)) => store.keep_alive(lease).await.map_err(internal)?,
            },
        };
        if !alive {
            return Err(CtrlError::NotFound(format!("{service}/{instance} is not registered (expired?)")));
        }
        Ok(self.read(|s| WriteAck { term: s.term, lsn: s.replicated.positions.committed }))
    }

    async fn deregister(&self, service: &str, instance: &str) -> Result<WriteAck, CtrlError> {
        let op = Op::Deregister { service: service.to_string(), instance: instance.to_string() };
        match &self.backend {
            Backend::Local(local) => {
                if !local.exists(service, instance) {
                    return Err(CtrlError::NotFound(format!("{service}/{instance} is not registered")));
                }
                let ack = self.write(Opcode::Deregister, op, None).await?;
                local.deregister(service, instance);
                Ok(ack)
            }
            Backend::Etcd(store) => {
                let Some((_, lease)) = store.registration(service, instance).await.map_err(internal)? else {
                    return Err(CtrlError::NotFound(format!("{service}/{instance} is not registered")));
                };
                let ack = self.write(Opcode::Deregister, op, None).await?;
                // The key is gone; its lease would expire anyway.
                let store = store.clone();
                tokio::spawn(async move { store.revoke_lease(lease).await });
                Ok(ack)
            }
        }
    }

    async fn list(&self, service: &str) -> Result<Vec<Registration>, CtrlError> {
        match &self.backend {
            Backend::Local(local) => Ok(local.list(service)),
            Backend::Etcd(store) => store.registrations(service).await.map_err(internal),
        }
    }

    /// The write path: re-checks the gate under the write lock, appends the
    /// entry at committed + 1 under the current term, and applies it.
    async fn write(&self, op_code: Opcode, op: Op, registration_lease: Option<i64>) -> Result<WriteAck, CtrlError> {
        let _serial = self.writes.lock().await;
        let (leadership, committed, term, before) = {
            let s = self.lock();
            match gate::decide(op_code, s.gate_role()) {
                Verdict::Allow => {}
                v => return Err(Controller::refusal(v, &s)),
            }
            (s.leadership.clone(), s.replicated.positions.committed, s.term, s.replicated.clone())
        };
        // An etcd primary writes under the term of its leadership (the one
        // the fence compares); a single node under its fixed term.
        let term = leadership.as_ref().map(|l| l.term).unwrap_or(term);
        let entry = Entry { lsn: committed + 1, term, op };
        match &self.backend {
            Backend::Local(local) => {
                let mut next = before;
                next.apply(&entry).map_err(internal)?;
                // Durable before acknowledged; the file write happens
                // outside the state lock so ctrlstatus never waits on it.
                local.persist(entry.lsn, term, next.config.as_ref()).map_err(internal)?;
                self.update(|s| s.replicated = next);
                Ok(WriteAck { term, lsn: entry.lsn })
            }
            Backend::Etcd(store) => {
                let Some(leadership) = leadership else {
                    return Err(CtrlError::NotReady("this node holds no leadership".into()));
                };
                match store.commit(&leadership, committed, &entry, registration_lease).await {
                    Ok(CommitOutcome::Committed) => {
                        let applied = self.update(|s| s.replicated.apply(&entry));
                        if let Err(e) = applied {
                            // Committed but not applicable here: the apply
                            // loop will recover from a snapshot.
                            tracing::error!(target: "keelson::controller", "entry {} committed but not applied: {e}", entry.lsn);
                            self.update(|s| s.replicated.positions.unrecoverable = true);
                        }
                        Ok(WriteAck { term, lsn: entry.lsn })
                    }
                    Ok(CommitOutcome::Deposed) => {
                        tracing::warn!(target: "keelson::controller", "write refused by the term fence: stepping down (term {term})");
                        self.step_down(&leadership);
                        Err(CtrlError::Deposed)
                    }
                    Ok(CommitOutcome::LsnMoved(now)) => {
                        self.update(|s| s.replicated.positions.observe_committed(now));
                        Err(CtrlError::NotReady(format!("the log moved to {now}; catching up")))
                    }
                    // The outcome is unknown (it may have committed): the
                    // apply loop will find the entry if it did.
                    Err(e) => Err(CtrlError::Internal(format!("commit outcome unknown: {e}"))),
                }
            }
        }
    }

    /// Leaves the primary role held under `leadership` (if still held).
    pub(crate) fn step_down(&self, leadership: &LeaderInfo) {
        self.update(|s| {
            if s.leadership.as_ref().is_some_and(|l| l.create_revision == leadership.create_revision) {
                s.leadership = None;
                s.role = Role::Electing;
                s.primary = None;
            }
        });
    }
}

fn internal(e: impl std::fmt::Display) -> CtrlError {
    CtrlError::Internal(e.to_string())
}

fn valid_part(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && !s.contains('/') && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn validate_registration(r: &Registration) -> Result<(), CtrlError> {
    if !valid_part(&r.service) || !valid_part(&r.instance) {
        return Err(CtrlError::Invalid("service and instance must be 1-128 characters without '/' or spaces".into()));
    }
    if !(1..=3600).contains(&r.ttl_seconds) {
        return Err(CtrlError::Invalid(format!("ttlSeconds must be between 1 and 3600 (got {})", r.ttl_seconds)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ControllerSettings {
        ControllerSettings::single_node("c1", "127.0.0.1:7001".parse().unwrap())
    }

    #[tokio::test]
    async fn single_node_is_primary_of_term_one_with_a_config() {
        let ctl = Controller::single_node(settings(), None).await.unwrap();
        let s = ctl.status();
        assert_eq!(s.responder_role, Role::Primary);
        assert_eq!(s.term, 1);
        assert_eq!(s.primary.as_ref().map(|p| p.name.as_str()), Some("c1"));
        assert_eq!(s.committed_lsn, 1);
        assert_eq!(s.applied_lsn, 1);
        assert!(!s.fenced);
        assert!(s.quorum);
        assert_eq!(s.config_checksum.len(), 32);
        assert_eq!(s.peers.len(), 1);
        assert!(ctl.role_view().serving);
    }

    #[tokio::test]
    async fn setconf_and_registry_on_a_single_node() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c1.json");
        let ctl = Controller::single_node(settings(), Some(file.clone())).await.unwrap();
        let before = ctl.status().config_version;
        let doc = br#"{"clusterName":"keelson","settings":{"candidates":{"max":10}}}"#.to_vec();
        let ack = match ctl.handle(Request::SetConf { document: doc.clone() }).await.unwrap() {
            Response::Write(a) => a,
            other => panic!("{other:?}"),
        };
        assert_eq!(ack, WriteAck { term: 1, lsn: 2 });
        assert_ne!(ctl.status().config_version, before);
        let bad = ctl.handle(Request::SetConf { document: b"{".to_vec() }).await;
        assert!(matches!(bad, Err(CtrlError::Invalid(_))));
        let renamed = ctl.handle(Request::SetConf { document: br#"{"clusterName":"other"}"#.to_vec() }).await;
        assert!(matches!(renamed, Err(CtrlError::Invalid(_))));

        let r = Registration {
            service: "stack-engine".into(),
            instance: "e1".into(),
            address: "x".into(),
            ttl_seconds: 30,
        };
        ctl.handle(Request::Register(r.clone())).await.unwrap();
        ctl.handle(Request::Heartbeat { service: "stack-engine".into(), instance: "e1".into() }).await.unwrap();
        match ctl.handle(Request::List { service: "stack-engine".into() }).await.unwrap() {
            Response::List(l) => assert_eq!(l, vec![r]),
            other => panic!("{other:?}"),
        }
        ctl.handle(Request::Deregister { service: "stack-engine".into(), instance: "e1".into() }).await.unwrap();
        assert!(matches!(
            ctl.handle(Request::Heartbeat { service: "stack-engine".into(), instance: "e1".into() }).await,
            Err(CtrlError::NotFound(_))
        ));

        // Restart: the committed configuration and LSN come back.
        let status = ctl.status();
        drop(ctl);
        let again = Controller::single_node(settings(), Some(file)).await.unwrap().status();
        assert_eq!(again.committed_lsn, status.committed_lsn);
        assert_eq!(again.config_checksum, status.config_checksum);
        assert_eq!(again.term, 1);
    }

    #[tokio::test]
    async fn the_gate_guards_handle() {
        let ctl = Controller::single_node(settings(), None).await.unwrap();
        // Standby knowing the primary.
        let primary = PrimaryRef { name: "c2".into(), address: "127.0.0.1:7002".into() };
        ctl.update(|s| {
            s.role = Role::Standby;
            s.primary = Some(primary.clone());
        });
        assert!(matches!(ctl.handle(Request::CtrlStatus).await, Ok(Response::CtrlStatus(_))));
        assert_eq!(ctl.handle(Request::ClusterConf).await, Err(CtrlError::Standby { primary: Some(primary) }));
        // A primary without quorum answers ctrlstatus and clusterconf, refuses writes.
        ctl.update(|s| {
            s.role = Role::Primary;
            s.quorum = false;
        });
        assert!(ctl.handle(Request::CtrlStatus).await.is_ok());
        assert!(ctl.handle(Request::ClusterConf).await.is_ok());
        assert_eq!(ctl.handle(Request::SetConf { document: b"{}".to_vec() }).await, Err(CtrlError::NoQuorum));
        // ELECTING: not ready.
        ctl.update(|s| s.role = Role::Electing);
        assert!(matches!(ctl.handle(Request::List { service: String::new() }).await, Err(CtrlError::NotReady(_))));
        assert!(ctl.handle(Request::CtrlStatus).await.is_ok());
    }
}
