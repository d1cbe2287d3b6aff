//! etcd access: the key layout and every read and transaction the
//! controller makes. No role logic here; the election driver and the node
//! decide what to do with the answers.
//!
//! Keys, under `/keelson/<cluster>/controller/`:
//!
//! | key                     | value                                   | lease            |
//! |-------------------------|-----------------------------------------|------------------|
//! | `leader`                | JSON {name, address, term}              | the primary's    |
//! | `term`                  | the last term issued (decimal)          |                  |
//! | `lsn`                   | the committed LSN (decimal)             |                  |
//! | `log/<lsn, 20 digits>`  | JSON log entry {lsn, term, op}          |                  |
//! | `config`                | canonical bytes of the committed config |                  |
//! | `registry/<svc>/<inst>` | JSON registration                       | the instance's   |
//!
//! Every write is one transaction that compares the leader key's creation
//! revision and lease (this leadership, still alive), the term key (this
//! term), and the LSN key (no entry slipped in), then appends the entry,
//! moves the LSN and applies the effect. A primary that lost its lease or
//! was replaced cannot commit anything: the compare fails.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse, WatchOptions,
};

use crate::config_doc::CommittedConfig;
use crate::log::{Entry, Op};
use crate::model::{PrimaryRef, Registration};

/// How many log entries stay in etcd behind the committed LSN. A node
/// further behind than this recovers from a snapshot (and is fenced while
/// it does).
pub const LOG_RETENTION: u64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("etcd did not answer within {0:?}")]
    Timeout(Duration),
    #[error("unexpected value at {key}: {reason}")]
    Corrupt { key: String, reason: String },
}

/// The leader key's content and identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInfo {
    pub name: String,
    pub address: String,
    pub term: u64,
    pub lease: i64,
    /// Identifies one leadership: a re-created key has a new revision.
    pub create_revision: i64,
}

impl LeaderInfo {
    pub fn primary_ref(&self) -> PrimaryRef {
        PrimaryRef { name: self.name.clone(), address: self.address.clone() }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct LeaderValue {
    name: String,
    address: String,
    term: u64,
}

/// What a campaign attempt got.
#[derive(Debug)]
pub enum Campaign {
    /// This node holds the leader key with the given identity.
    Won(LeaderInfo),
    /// Someone else holds it.
    Lost(LeaderInfo),
    /// The term moved under us (another campaign); try again.
    Raced,
}

/// What a fenced commit got.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed,
    /// The leader key is not ours any more (or the term moved): nothing was written.
    Deposed,
    /// The committed LSN is not the one we built on: nothing was written.
    LsnMoved(u64),
}

/// A snapshot of the replicated state at one etcd revision.
#[derive(Debug)]
pub struct Snapshot {
    pub lsn: u64,
    pub term: u64,
    pub config: Option<CommittedConfig>,
}

#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(cluster: &str) -> Keys {
        Keys { prefix: format!("/keelson/{cluster}/controller/") }
    }
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    pub fn leader(&self) -> String {
        format!("{}leader", self.prefix)
    }
    pub fn term(&self) -> String {
        format!("{}term", self.prefix)
    }
    pub fn lsn(&self) -> String {
        format!("{}lsn", self.prefix)
    }
    pub fn config(&self) -> String {
        format!("{}config", self.prefix)
    }
    pub fn log(&self, lsn: u64) -> String {
        format!("{}log/{lsn:020}", self.prefix)
    }
    pub fn registry(&self, service: &str, instance: &str) -> String {
        format!("{}registry/{service}/{instance}", self.prefix)
    }
    pub fn registry_prefix(&self, service: &str) -> String {
        if service.is_empty() {
            format!("{}registry/", self.prefix)
        } else {
            format!("{}registry/{service}/", self.prefix)
        }
    }
}

/// The controller's etcd handle. Cheap to clone.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    keys: Keys,
    /// Bound on every unary call, so that a partitioned etcd turns into an
    /// error in time for the quorum and lease logic.
    op_timeout: Duration,
}

impl EtcdStore {
    pub async fn connect(endpoints: &[String], cluster: &str, op_timeout: Duration) -> Result<EtcdStore, StoreError> {
        let options = ConnectOptions::new()
            .with_connect_timeout(op_timeout.max(Duration::from_millis(500)))
            // HTTP/2 pings notice a dead or frozen member.
            .with_keep_alive(Duration::from_secs(1), op_timeout.max(Duration::from_millis(500)))
            .with_keep_alive_while_idle(true)
            // A member that lost its leader refuses requests instead of
            // answering from a minority (and ends watches), which is what
            // makes quorum loss visible.
            .with_require_leader(true);
        let client = Client::connect(endpoints, Some(options)).await?;
        Ok(EtcdStore { client, keys: Keys::new(cluster), op_timeout })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.op_timeout, fut).await {
            Ok(r) => r.map_err(StoreError::from),
            Err(_) => Err(StoreError::Timeout(self.op_timeout)),
        }
    }

    pub async fn grant_lease(&self, ttl: Duration) -> Result<i64, StoreError> {
        let mut c = self.client.clone();
        let r = self.bounded(c.lease_grant(ttl.as_secs().max(1) as i64, None)).await?;
        Ok(r.id())
    }

    /// Revokes a lease; a lease that is already gone is not an error.
    pub async fn revoke_lease(&self, id: i64) -> Result<(), StoreError> {
        let mut c = self.client.clone();
        match self.bounded(c.lease_revoke(id)).await {
            Ok(_) => Ok(()),
            Err(StoreError::Etcd(e)) if is_lease_not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One keep-alive round trip. `Ok(false)`: the lease no longer exists.
    pub async fn keep_alive(&self, id: i64) -> Result<bool, StoreError> {
        let mut c = self.client.clone();
        // Opening the stream sends one keep-alive and waits for its answer
        // (etcd-client refuses a lease whose TTL came back as 0).
        match self.bounded(c.lease_keep_alive(id)).await {
            Ok(_) => Ok(true),
            Err(StoreError::Etcd(e)) if is_lease_not_found(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The current leader, if any.
    pub async fn leader(&self) -> Result<Option<LeaderInfo>, StoreError> {
        let mut c = self.client.clone();
        let key = self.keys.leader();
        let r = self.bounded(c.get(key.clone(), None)).await?;
        r.kvs().first().map(|kv| leader_info(&key, kv)).transpose()
    }

    /// The last term issued, with the term key's mod revision (0: absent).
    pub async fn cluster_term(&self) -> Result<(u64, i64), StoreError> {
        let mut c = self.client.clone();
        let key = self.keys.term();
        let r = self.bounded(c.get(key.clone(), None)).await?;
        match r.kvs().first() {
            None => Ok((0, 0)),
            Some(kv) => Ok((parse_u64(&key, kv.value())?, kv.mod_revision())),
        }
    }

    /// Tries to take the leader key for `term` with `lease`, bumping the term
    /// key in the same transaction (so a term is never issued twice and
    /// never without a leader). `term_rev` is the term key's mod revision
    /// the term was computed from.
    pub async fn campaign(
        &self,
        name: &str,
        address: &str,
        term: u64,
        term_rev: i64,
        lease: i64,
    ) -> Result<Campaign, StoreError> {
        let leader_key = self.keys.leader();
        let value = serde_json::to_vec(&LeaderValue { name: name.to_string(), address: address.to_string(), term })
            .map_err(|e| StoreError::Corrupt { key: leader_key.clone(), reason: e.to_string() })?;
        let txn = Txn::new()
            .when([
                Compare::version(leader_key.clone(), CompareOp::Equal, 0),
                Compare::mod_revision(self.keys.term(), CompareOp::Equal, term_rev),
            ])
            .and_then([
                TxnOp::put(leader_key.clone(), value, Some(PutOptions::new().with_lease(lease))),
                TxnOp::put(self.keys.term(), term.to_string(), None),
            ])
            .or_else([TxnOp::get(leader_key.clone(), None)]);
        let mut c = self.client.clone();
        let r = self.bounded(c.txn(txn)).await?;
        if r.succeeded() {
            let revision = r.header().map(|h| h.revision()).unwrap_or(0);
            return Ok(Campaign::Won(LeaderInfo {
                name: name.to_string(),
                address: address.to_string(),
                term,
                lease,
                create_revision: revision,
            }));
        }
        for op in r.op_responses() {
            if let TxnOpResponse::Get(g) = op {
                if let Some(kv) = g.kvs().first() {
                    return Ok(Campaign::Lost(leader_info(&leader_key, kv)?));
                }
            }
        }
        Ok(Campaign::Raced)
    }

    /// The committed LSN.
    pub async fn committed_lsn(&self) -> Result<u64, StoreError> {
        let mut c = self.client.clone();
        let key = self.keys.lsn();
        let r = self.bounded(c.get(key.clone(), None)).await?;
        match r.kvs().first() {
            None => Ok(0),
            Some(kv) => parse_u64(&key, kv.value()),
        }
    }

    /// Log entries from `from` to `to` inclusive, at most `limit`, in order.
    pub async fn read_log(&self, from: u64, to: u64, limit: i64) -> Result<Vec<Entry>, StoreError> {
        if from > to {
            return Ok(Vec::new());
        }
        let mut c = self.client.clone();
        let options = GetOptions::new()
            .with_range(self.keys.log(to.saturating_add(1)))
            .with_sort(SortTarget::Key, SortOrder::Ascend)
            .with_limit(limit);
        let r = self.bounded(c.get(self.keys.log(from), Some(options))).await?;
        r.kvs()
            .iter()
            .map(|kv| {
                serde_json::from_slice::<Entry>(kv.value()).map_err(|e| StoreError::Corrupt {
                    key: String::from_utf8_lossy(kv.key()).into_owned(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// The committed LSN, term and configuration, read at one revision.
    pub async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let txn = Txn::new().and_then([
            TxnOp::get(self.keys.lsn(), None),
            TxnOp::get(self.keys.term(), None),
            TxnOp::get(self.keys.config(), None),
        ]);
        let mut c = self.client.clone();
        let r = self.bounded(c.txn(txn)).await?;
        let mut values: Vec<Option<Vec<u8>>> = Vec::new();
        for op in r.op_responses() {
            if let TxnOpResponse::Get(g) = op {
                values.push(g.kvs().first().map(|kv| kv.value().to_vec()));
            }
        }
        let get = |i: usize| values.get(i).cloned().flatten();
        let lsn = get(0).map(|v| parse_u64(&self.keys.lsn(), &v)).transpose()?.unwrap_or(0);
        let term = get(1).map(|v| parse_u64(&self.keys.term(), &v)).transpose()?.unwrap_or(0);
        let config = get(2)
            .map(|v| CommittedConfig::from_json(&v))
            .transpose()
            .map_err(|e| StoreError::Corrupt { key: self.keys.config(), reason: e.to_string() })?;
        Ok(Snapshot { lsn, term, config })
    }

    /// Appends `entry` (whose LSN must be `committed + 1`) under the fence
    /// of `leadership`, with the entry's effect on the state keys.
    /// `registration_lease` attaches a registered instance's key to its lease.
    pub async fn commit(
        &self,
        leadership: &LeaderInfo,
        committed: u64,
        entry: &Entry,
        registration_lease: Option<i64>,
    ) -> Result<CommitOutcome, StoreError> {
        let keys = &self.keys;
        let entry_bytes = serde_json::to_vec(entry)
            .map_err(|e| StoreError::Corrupt { key: keys.log(entry.lsn), reason: e.to_string() })?;
        let lsn_compare = if committed == 0 {
            Compare::version(keys.lsn(), CompareOp::Equal, 0)
        } else {
            Compare::value(keys.lsn(), CompareOp::Equal, committed.to_string())
        };
        let mut ops = vec![
            TxnOp::put(keys.log(entry.lsn), entry_bytes, None),
            TxnOp::put(keys.lsn(), entry.lsn.to_string(), None),
        ];
        match &entry.op {
            Op::SetConf { document } => {
                ops.push(TxnOp::put(keys.config(), crate::config_doc::canonical_bytes(document), None));
            }
            Op::Register { registration } => {
                let value = serde_json::to_vec(registration).map_err(|e| StoreError::Corrupt {
                    key: keys.registry(&registration.service, &registration.instance),
                    reason: e.to_string(),
                })?;
                let options = registration_lease.map(|l| PutOptions::new().with_lease(l));
                ops.push(TxnOp::put(keys.registry(&registration.service, &registration.instance), value, options));
            }
            Op::Deregister { service, instance } => {
                ops.push(TxnOp::delete(keys.registry(service, instance), None));
            }
        }
        if entry.lsn > LOG_RETENTION {
            ops.push(TxnOp::delete(keys.log(entry.lsn - LOG_RETENTION), None));
        }
        let txn = Txn::new()
            .when([
                Compare::create_revision(keys.leader(), CompareOp::Equal, leadership.create_revision),
                Compare::lease(keys.leader(), CompareOp::Equal, leadership.lease),
                Compare::value(keys.term(), CompareOp::Equal, leadership.term.to_string()),
                lsn_compare,
            ])
            .and_then(ops)
            .or_else([TxnOp::get(keys.leader(), None), TxnOp::get(keys.term(), None), TxnOp::get(keys.lsn(), None)]);
        let mut c = self.client.clone();
        let r = self.bounded(c.txn(txn)).await?;
        if r.succeeded() {
            return Ok(CommitOutcome::Committed);
        }
        // Find out which compare failed.
        let mut leader_ok = false;
        let mut term_ok = false;
        let mut lsn_now = 0;
        for (i, op) in r.op_responses().into_iter().enumerate() {
            let TxnOpResponse::Get(g) = op else { continue };
            let kv = g.kvs().first();
            match i {
                0 => {
                    leader_ok = kv.is_some_and(|kv| {
                        kv.create_revision() == leadership.create_revision && kv.lease() == leadership.lease
                    })
                }
                1 => term_ok = kv.is_some_and(|kv| kv.value() == leadership.term.to_string().as_bytes()),
                _ => lsn_now = kv.map(|kv| parse_u64(&keys.lsn(), kv.value())).transpose()?.unwrap_or(0),
            }
        }
        if leader_ok && term_ok {
            Ok(CommitOutcome::LsnMoved(lsn_now))
        } else {
            Ok(CommitOutcome::Deposed)
        }
    }

    /// A registration and its lease.
    pub async fn registration(&self, service: &str, instance: &str) -> Result<Option<(Registration, i64)>, StoreError> {
        let mut c = self.client.clone();
        let key = self.keys.registry(service, instance);
        let r = self.bounded(c.get(key.clone(), None)).await?;
        r.kvs()
            .first()
            .map(|kv| {
                serde_json::from_slice::<Registration>(kv.value())
                    .map(|reg| (reg, kv.lease()))
                    .map_err(|e| StoreError::Corrupt { key: key.clone(), reason: e.to_string() })
            })
            .transpose()
    }

    /// The live registrations of a service (all services when empty).
    pub async fn registrations(&self, service: &str) -> Result<Vec<Registration>, StoreError> {
        let mut c = self.client.clone();
        let r = self.bounded(c.get(self.keys.registry_prefix(service), Some(GetOptions::new().with_prefix()))).await?;
        r.kvs()
            .iter()
            .map(|kv| {
                serde_json::from_slice::<Registration>(kv.value()).map_err(|e| StoreError::Corrupt {
                    key: String::from_utf8_lossy(kv.key()).into_owned(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Rings `bell` on every change under the controller's prefix until the
    /// stream ends or fails (the caller reconnects). The watch is a doorbell
    /// only: whoever wakes up re-reads what it needs, so a missed or
    /// duplicated event cannot make a node wrong, only slower.
    pub async fn watch_prefix(&self, bell: &tokio::sync::watch::Sender<u64>) -> Result<(), StoreError> {
        let mut c = self.client.clone();
        let mut stream =
            self.bounded(c.watch(self.keys.prefix().to_string(), Some(WatchOptions::new().with_prefix()))).await?;
        loop {
            match stream.message().await? {
                Some(resp) if resp.canceled() => return Ok(()),
                Some(_) => bell.send_modify(|n| *n = n.wrapping_add(1)),
                None => return Ok(()),
            }
        }
    }
}

fn is_lease_not_found(e: &etcd_client::Error) -> bool {
    let s = e.to_string();
    s.contains("lease not found") || s.contains("requested lease not found")
}

fn parse_u64(key: &str, v: &[u8]) -> Result<u64, StoreError> {
    std::str::from_utf8(v).ok().and_then(|s| s.trim().parse().ok()).ok_or_else(|| StoreError::Corrupt {
        key: key.to_string(),
        reason: format!("not a number: {:?}", String::from_utf8_lossy(v)),
    })
}

fn leader_info(key: &str, kv: &etcd_client::KeyValue) -> Result<LeaderInfo, StoreError> {
    let v: LeaderValue = serde_json::from_slice(kv.value())
        .map_err(|e| StoreError::Corrupt { key: key.to_string(), reason: e.to_string() })?;
    Ok(LeaderInfo {
        name: v.name,
        address: v.address,
        term: v.term,
        lease: kv.lease(),
        create_revision: kv.create_revision(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_sort_numerically() {
        let k = Keys::new("keelson");
        assert!(k.log(9) < k.log(10));
        assert!(k.log(99_999) < k.log(100_000));
        assert_eq!(k.leader(), "/keelson/keelson/controller/leader");
        assert_eq!(k.registry_prefix(""), "/keelson/keelson/controller/registry/");
        assert_eq!(k.registry_prefix("stack-engine"), "/keelson/keelson/controller/registry/stack-engine/");
    }
}
