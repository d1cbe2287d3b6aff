//! Single-node mode (no `[etcd] endpoints`, e.g. all-in-one): the node is
//! the primary of term 1 and keeps the replicated state itself.
//!
//! The state is a small JSON file under the data directory rather than the
//! Placement database: it is a handful of bytes (the committed LSN and the
//! configuration document), the controller must not depend on the Placement
//! schema and its migrations, and an atomic rename gives the durability a
//! single node needs. Registrations are leases, which do not survive a
//! restart in etcd either: they live in memory and services re-register
//! when a heartbeat answers "not found".

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config_doc::CommittedConfig;
use crate::model::Registration;
use crate::term::write_atomically;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read the controller state {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the controller state {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot write the controller state {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StateFile {
    lsn: u64,
    term: u64,
    config: Option<serde_json::Value>,
}

/// What the file held.
pub struct LocalState {
    pub lsn: u64,
    pub config: Option<CommittedConfig>,
}

/// The single node's storage.
pub struct LocalBackend {
    path: Option<PathBuf>,
    registry: Mutex<BTreeMap<(String, String), (Registration, Instant)>>,
}

impl LocalBackend {
    /// `None`: nothing persisted (ephemeral instances, tests).
    pub fn new(path: Option<PathBuf>) -> LocalBackend {
        LocalBackend { path, registry: Mutex::new(BTreeMap::new()) }
    }

    pub fn load(&self) -> Result<LocalState, LocalError> {
        let Some(path) = &self.path else {
            return Ok(LocalState { lsn: 0, config: None });
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LocalState { lsn: 0, config: None }),
            Err(source) => return Err(LocalError::Read { path: path.clone(), source }),
        };
        let file: StateFile = serde_json::from_slice(&bytes)
            .map_err(|e| LocalError::Corrupt { path: path.clone(), reason: e.to_string() })?;
        let config = file
            .config
            .map(CommittedConfig::from_value)
            .transpose()
            .map_err(|e| LocalError::Corrupt { path: path.clone(), reason: e.to_string() })?;
        Ok(LocalState { lsn: file.lsn, config })
    }

    /// Persists the state after a commit (before it is acknowledged).
    pub fn persist(&self, lsn: u64, term: u64, config: Option<&CommittedConfig>) -> Result<(), LocalError> {
        let Some(path) = &self.path else { return Ok(()) };
        let file = StateFile { lsn, term, config: config.map(CommittedConfig::value) };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|e| LocalError::Corrupt { path: path.clone(), reason: e.to_string() })?;
        write_atomically(path, &bytes).map_err(|source| LocalError::Write { path: path.clone(), source })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), (Registration, Instant)>> {
        // A panic while holding this lock leaves a consistent map (every
        // update is a single insert/remove), so a poisoned lock is usable.
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn register(&self, r: Registration) {
        let deadline = Instant::now() + Duration::from_secs(u64::from(r.ttl_seconds));
        self.lock().insert((r.service.clone(), r.instance.clone()), (r, deadline));
    }

    /// Refreshes a registration; `false` when it does not exist (or expired).
    pub fn heartbeat(&self, service: &str, instance: &str) -> bool {
        let mut reg = self.lock();
        let now = Instant::now();
        reg.retain(|_, (_, deadline)| *deadline > now);
        match reg.get_mut(&(service.to_string(), instance.to_string())) {
            Some((r, deadline)) => {
                *deadline = now + Duration::from_secs(u64::from(r.ttl_seconds));
                true
            }
            None => false,
        }
    }

    pub fn exists(&self, service: &str, instance: &str) -> bool {
        let now = Instant::now();
        self.lock().get(&(service.to_string(), instance.to_string())).is_some_and(|(_, d)| *d > now)
    }

    pub fn deregister(&self, service: &str, instance: &str) -> bool {
        self.lock().remove(&(service.to_string(), instance.to_string())).is_some()
    }

    pub fn list(&self, service: &str) -> Vec<Registration> {
        let mut reg = self.lock();
        let now = Instant::now();
        reg.retain(|_, (_, deadline)| *deadline > now);
        reg.values().filter(|(r, _)| service.is_empty() || r.service == service).map(|(r, _)| r.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controller-c1.json");
        let b = LocalBackend::new(Some(path.clone()));
        assert_eq!(b.load().unwrap().lsn, 0);
        let conf = CommittedConfig::bootstrap("keelson", &[]);
        b.persist(3, 1, Some(&conf)).unwrap();
        let again = LocalBackend::new(Some(path)).load().unwrap();
        assert_eq!(again.lsn, 3);
        assert_eq!(again.config.as_ref().map(|c| *c.checksum()), Some(*conf.checksum()));
    }

    #[test]
    fn registrations_expire() {
        let b = LocalBackend::new(None);
        let r = Registration { service: "s".into(), instance: "i".into(), address: "a".into(), ttl_seconds: 0 };
        b.register(r.clone());
        assert!(b.list("s").is_empty(), "TTL 0 expires at once");
        b.register(Registration { ttl_seconds: 60, ..r });
        assert_eq!(b.list("s").len(), 1);
        assert_eq!(b.list("").len(), 1);
        assert!(b.list("other").is_empty());
        assert!(b.heartbeat("s", "i"));
        assert!(b.deregister("s", "i"));
        assert!(!b.heartbeat("s", "i"));
    }
}
