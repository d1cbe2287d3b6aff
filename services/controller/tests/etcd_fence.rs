//! The term fence against a real etcd (skipped when the `etcd` binary is
//! not installed): a primary that lost its leadership cannot commit, not
//! with its old term and not with a forged one; terms are never reissued.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keelson_controller::etcd::{Campaign, CommitOutcome, EtcdStore, LeaderInfo};
use keelson_controller::log::{Entry, Op};
use keelson_controller::Registration;

struct Etcd {
    child: Child,
    _dir: tempfile::TempDir,
    endpoint: String,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

fn start_etcd() -> Option<Etcd> {
    let found =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).any(|d| d.join("etcd").is_file())).unwrap_or(false);
    if !found {
        eprintln!("etcd not installed: skipping");
        return None;
    }
    let dir = tempfile::tempdir().ok()?;
    let (client, peer) = (free_port(), free_port());
    let child = Command::new("etcd")
        .args(["--name", "fence", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &format!("http://127.0.0.1:{client}")])
        .args(["--advertise-client-urls", &format!("http://127.0.0.1:{client}")])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args(["--initial-cluster", &format!("fence=http://127.0.0.1:{peer}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    Some(Etcd { child, _dir: dir, endpoint: format!("http://127.0.0.1:{client}") })
}

async fn connect(etcd: &Etcd) -> EtcdStore {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(store) =
            EtcdStore::connect(std::slice::from_ref(&etcd.endpoint), "fence", Duration::from_secs(1)).await
        {
            if store.committed_lsn().await.is_ok() {
                return store;
            }
        }
        assert!(Instant::now() < deadline, "etcd did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn conf(n: u64) -> Op {
    Op::SetConf { document: serde_json::json!({"clusterName": "fence", "settings": {"n": n}}) }
}

async fn win(store: &EtcdStore, name: &str) -> LeaderInfo {
    let (term, rev) = store.cluster_term().await.unwrap();
    let lease = store.grant_lease(Duration::from_secs(10)).await.unwrap();
    match store.campaign(name, &format!("{name}:1"), term + 1, rev, lease).await.unwrap() {
        Campaign::Won(l) => l,
        other => panic!("{name} did not win: {other:?}"),
    }
}

#[tokio::test]
async fn no_write_is_committed_under_an_old_term() {
    let Some(etcd) = start_etcd() else { return };
    let store = connect(&etcd).await;

    let a = win(&store, "a").await;
    assert_eq!(a.term, 1);
    let e1 = Entry { lsn: 1, term: 1, op: conf(1) };
    assert_eq!(store.commit(&a, 0, &e1, None).await.unwrap(), CommitOutcome::Committed);

    // While a holds the key, nobody else can campaign, and a stale term
    // revision cannot be reused.
    let lease = store.grant_lease(Duration::from_secs(10)).await.unwrap();
    assert!(matches!(store.campaign("b", "b:1", 2, 0, lease).await.unwrap(), Campaign::Lost(l) if l.name == "a"));
    store.revoke_lease(lease).await.unwrap();

    // a's lease ends (expiry, here a revoke); b takes over with term 2.
    store.revoke_lease(a.lease).await.unwrap();
    let b = win(&store, "b").await;
    assert_eq!(b.term, 2);

    // a still believes it is primary: its write is refused by the fence.
    let stale = Entry { lsn: 2, term: 1, op: conf(99) };
    assert_eq!(store.commit(&a, 1, &stale, None).await.unwrap(), CommitOutcome::Deposed);
    // Not even with b's leadership identity and a's old term.
    let forged = LeaderInfo { term: 1, ..b.clone() };
    assert_eq!(store.commit(&forged, 1, &stale, None).await.unwrap(), CommitOutcome::Deposed);
    // Nor with a's term bumped but a's (dead) leadership.
    let bumped = LeaderInfo { term: 2, ..a.clone() };
    assert_eq!(store.commit(&bumped, 1, &stale, None).await.unwrap(), CommitOutcome::Deposed);

    // b builds on the wrong LSN: refused without writing; then commits.
    let e2 = Entry { lsn: 2, term: 2, op: conf(2) };
    assert_eq!(store.commit(&b, 0, &Entry { lsn: 1, ..e2.clone() }, None).await.unwrap(), CommitOutcome::LsnMoved(1));
    assert_eq!(store.commit(&b, 1, &e2, None).await.unwrap(), CommitOutcome::Committed);

    // The log: 1 (term 1), 2 (term 2), nothing from the stale primary.
    let log = store.read_log(1, 100, 100).await.unwrap();
    assert_eq!(log.iter().map(|e| (e.lsn, e.term)).collect::<Vec<_>>(), vec![(1, 1), (2, 2)]);
    assert_eq!(store.committed_lsn().await.unwrap(), 2);
    let snap = store.snapshot().await.unwrap();
    assert_eq!((snap.lsn, snap.term), (2, 2));
    assert_eq!(snap.config.map(|c| c.value()["settings"]["n"].as_u64()), Some(Some(2)));

    // Terms only grow: the next primary gets 3.
    store.revoke_lease(b.lease).await.unwrap();
    let c = win(&store, "c").await;
    assert_eq!(c.term, 3);
}

#[tokio::test]
async fn registrations_live_as_long_as_their_lease() {
    let Some(etcd) = start_etcd() else { return };
    let store = connect(&etcd).await;
    let p = win(&store, "p").await;
    let r = Registration {
        service: "stack-engine".into(),
        instance: "e1".into(),
        address: "http://e1".into(),
        ttl_seconds: 10,
    };
    let lease = store.grant_lease(Duration::from_secs(10)).await.unwrap();
    let entry = Entry { lsn: 1, term: p.term, op: Op::Register { registration: r.clone() } };
    assert_eq!(store.commit(&p, 0, &entry, Some(lease)).await.unwrap(), CommitOutcome::Committed);
    assert_eq!(store.registrations("stack-engine").await.unwrap(), vec![r.clone()]);
    assert_eq!(store.registration("stack-engine", "e1").await.unwrap(), Some((r, lease)));
    assert!(store.keep_alive(lease).await.unwrap());
    // The lease ends (the instance stopped heartbeating): the entry is gone.
    store.revoke_lease(lease).await.unwrap();
    assert!(store.registrations("").await.unwrap().is_empty());
    assert!(!store.keep_alive(lease).await.unwrap());
}
