//! The etcd driver: moves a node through INIT → ELECTING → PRIMARY or
//! STANDBY, keeps the primary's lease alive, and tails the log.
//!
//! Three tasks per node:
//! - the role loop: observe the leader key; campaign when there is none;
//!   as primary renew the lease every TTL/3 and step down when it expires;
//!   as standby follow the leader key;
//! - the apply loop: read the committed LSN and apply the entries this
//!   node has not applied (snapshot recovery when the log was trimmed);
//! - the watcher: an etcd watch on the controller's prefix used as a
//!   doorbell, so that the two loops react at once instead of at their
//!   next poll.
//!
//! Timing (TTL = `[controller] lease_ttl`): a primary that cannot renew its
//! lease reports no quorum at the first failed renewal and steps down at
//! `last successful renewal sent + TTL`, which is never later than etcd's
//! own expiry of the lease (etcd starts the TTL when it receives the
//! renewal). Standbys see the leader key vanish when etcd expires the
//! lease and campaign at once, so a killed primary is replaced within TTL
//! plus etcd's expiry granularity (≤ 0.5 s) plus one campaign.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keelson_runtime::shutdown::Shutdown;
use tokio::sync::watch;

use crate::etcd::{Campaign, EtcdStore, LeaderInfo, StoreError};
use crate::log::ApplyError;
use crate::model::Role;
use crate::node::Controller;

const TARGET: &str = "keelson::controller";

/// Test-only fault injection: a delay before applying each log entry, so
/// that an integration test can observe a restarted node catching up
/// (fenced, applied < committed). Unset in production.
pub const APPLY_DELAY_ENV: &str = "KEELSON_CONTROLLER_APPLY_DELAY_MS";

struct Timing {
    ttl: Duration,
    renew_every: Duration,
    retry_renew: Duration,
    poll: Duration,
    apply_delay: Duration,
}

impl Timing {
    fn new(ttl: Duration) -> Timing {
        let apply_delay = std::env::var(APPLY_DELAY_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_default();
        Timing {
            ttl,
            renew_every: ttl / 3,
            retry_renew: (ttl / 10).clamp(Duration::from_millis(100), Duration::from_millis(500)),
            poll: (ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(1)),
            apply_delay,
        }
    }
}

/// The per-call etcd deadline for a lease TTL: short enough that a
/// partition is noticed well within the lease.
pub fn op_timeout(ttl: Duration) -> Duration {
    (ttl / 3).clamp(Duration::from_millis(250), Duration::from_secs(2))
}

/// Runs the node until shutdown. A primary that shuts down revokes its
/// lease, so that the others elect a successor at once.
pub async fn run(ctl: Arc<Controller>, store: EtcdStore, shutdown: Shutdown) {
    let timing = Arc::new(Timing::new(ctl.settings.lease_ttl));
    let (bell, bell_rx) = watch::channel(0u64);
    let bell = Arc::new(bell);
    let watcher = tokio::spawn(watch_loop(store.clone(), bell.clone(), shutdown.clone()));
    let applier =
        tokio::spawn(apply_loop(ctl.clone(), store.clone(), bell_rx.clone(), timing.clone(), shutdown.clone()));
    role_loop(&ctl, &store, &bell, bell_rx, &timing, &shutdown).await;
    watcher.abort();
    applier.abort();
}

async fn pause(d: Duration, shutdown: &Shutdown) -> bool {
    tokio::select! {
        _ = shutdown.clone().wait() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

fn lost_contact(ctl: &Controller, why: &dyn std::fmt::Display) {
    tracing::debug!(target: TARGET, "etcd unreachable: {why}");
    ctl.update(|s| {
        s.quorum = false;
        if s.role == Role::Standby {
            // Kept STANDBY with its primary until the TTL has passed (see
            // run_standby); anything else has no primary to report.
            return;
        }
        if s.role != Role::Init {
            s.role = Role::Electing;
            s.primary = None;
        }
    });
}

async fn role_loop(
    ctl: &Arc<Controller>,
    store: &EtcdStore,
    bell: &Arc<watch::Sender<u64>>,
    bell_rx: watch::Receiver<u64>,
    timing: &Timing,
    shutdown: &Shutdown,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let leader = tokio::select! {
            _ = shutdown.clone().wait() => return,
            l = store.leader() => l,
        };
        let leader = match leader {
            Ok(l) => {
                backoff = Duration::from_millis(100);
                l
            }
            Err(e) => {
                lost_contact(ctl, &e);
                if !pause(backoff, shutdown).await {
                    return;
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        match leader {
            Some(l) if l.name == ctl.name() => {
                // A leader key in this node's name that this process does
                // not hold: left by a previous incarnation (a crash, then a
                // restart within the TTL, or a step-down while etcd was
                // unreachable). It is ours to clear.
                tracing::info!(target: TARGET, "clearing the stale leader key of a previous incarnation (term {})", l.term);
                if let Err(e) = store.revoke_lease(l.lease).await {
                    lost_contact(ctl, &e);
                    if !pause(backoff, shutdown).await {
                        return;
                    }
                }
            }
            Some(l) => run_standby(ctl, store, l, bell_rx.clone(), timing, shutdown).await,
            None => {
                ctl.update(|s| {
                    s.role = Role::Electing;
                    s.primary = None;
                    s.quorum = true;
                });
                match campaign(ctl, store, timing).await {
                    Ok(Some((leadership, granted_at))) => {
                        run_primary(ctl, store, leadership, granted_at, bell, timing, shutdown).await;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        lost_contact(ctl, &e);
                        if !pause(backoff, shutdown).await {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// One campaign: grant a lease, then take the leader key and the next term
/// in one transaction. `Ok(None)`: someone else won (or raced us).
async fn campaign(
    ctl: &Controller,
    store: &EtcdStore,
    timing: &Timing,
) -> Result<Option<(LeaderInfo, Instant)>, StoreError> {
    let (cluster_term, term_rev) = store.cluster_term().await?;
    let term = ctl.terms.lock().unwrap_or_else(|p| p.into_inner()).next_after(cluster_term);
    let granted_at = Instant::now();
    let lease = store.grant_lease(timing.ttl).await?;
    let me = ctl.me();
    let outcome = store.campaign(&me.name, &me.address, term, term_rev, lease).await;
    match outcome {
        Ok(Campaign::Won(l)) => Ok(Some((l, granted_at))),
        other => {
            // The lease was not used: give it back (best effort; it expires anyway).
            let s = store.clone();
            tokio::spawn(async move { s.revoke_lease(lease).await });
            match other {
                Ok(Campaign::Lost(l)) => {
                    tracing::debug!(target: TARGET, "campaign for term {term} lost to {} (term {})", l.name, l.term);
                    Ok(None)
                }
                Ok(_) => Ok(None),
                Err(e) => Err(e),
            }
        }
    }
}

async fn run_primary(
    ctl: &Arc<Controller>,
    store: &EtcdStore,
    lead: LeaderInfo,
    granted_at: Instant,
    bell: &Arc<watch::Sender<u64>>,
    timing: &Timing,
    shutdown: &Shutdown,
) {
    ctl.observe_term(lead.term);
    let me = ctl.me();
    ctl.update(|s| {
        s.role = Role::Primary;
        s.primary = Some(me);
        s.term = s.term.max(lead.term);
        s.quorum = true;
        s.leadership = Some(lead.clone());
        // Fenced until the apply loop has read the committed LSN again:
        // now that the leader key is ours nobody else can commit, so that
        // read is final and everything up to it must be applied before
        // this node serves reads or appends.
        s.replicated.positions.synced = false;
    });
    bell.send_modify(|n| *n = n.wrapping_add(1));
    tracing::info!(target: TARGET, "{} is PRIMARY (term {})", ctl.name(), lead.term);

    let mut changes = ctl.subscribe_changes();
    let mut lease_deadline = granted_at + timing.ttl;
    let mut next_renew = Instant::now() + timing.renew_every;
    let mut bootstrapped = false;
    let mut quorum_lost_at: Option<Instant> = None;
    loop {
        if !bootstrapped && ctl.role_view().serving {
            match ctl.bootstrap_config().await {
                Ok(()) => bootstrapped = true,
                Err(e) => tracing::warn!(target: TARGET, "initial configuration: {e}"),
            }
        }
        tokio::select! {
            _ = shutdown.clone().wait() => {
                ctl.step_down(&lead);
                // Hand over at once instead of after the TTL.
                let _ = store.revoke_lease(lead.lease).await;
                tracing::info!(target: TARGET, "stepped down (shutdown), lease revoked");
                return;
            }
            _ = tokio::time::sleep_until(lease_deadline.into()) => {
                tracing::warn!(target: TARGET, "lease expired without renewal: stepping down (term {})", lead.term);
                ctl.step_down(&lead);
                return;
            }
            _ = tokio::time::sleep_until(next_renew.into()) => {
                let sent = Instant::now();
                // Bounded by the lease deadline too, so that a renewal
                // hanging on a partitioned etcd cannot delay the step-down.
                let renewed = match tokio::time::timeout_at(lease_deadline.into(), store.keep_alive(lead.lease)).await {
                    Ok(r) => r,
                    Err(_) => Err(StoreError::Timeout(lease_deadline.saturating_duration_since(sent))),
                };
                match renewed {
                    Ok(true) => {
                        lease_deadline = sent + timing.ttl;
                        next_renew = sent + timing.renew_every;
                        if let Some(at) = quorum_lost_at.take() {
                            tracing::info!(target: TARGET, "quorum regained after {:?}", at.elapsed());
                        }
                        ctl.update(|s| s.quorum = true);
                    }
                    Ok(false) => {
                        tracing::warn!(target: TARGET, "the lease is gone: stepping down (term {})", lead.term);
                        ctl.step_down(&lead);
                        return;
                    }
                    Err(e) => {
                        if quorum_lost_at.is_none() {
                            tracing::warn!(target: TARGET, "lease renewal failed, no quorum: {e}");
                            quorum_lost_at = Some(Instant::now());
                        }
                        ctl.update(|s| s.quorum = false);
                        next_renew = Instant::now() + timing.retry_renew;
                    }
                }
            }
            r = changes.changed() => {
                if r.is_err() {
                    return;
                }
                // The write path steps down when the fence refuses a write.
                let still = ctl.read(|s| s.leadership.as_ref().is_some_and(|l| l.create_revision == lead.create_revision));
                if !still {
                    tracing::warn!(target: TARGET, "deposed (term {})", lead.term);
                    let s = store.clone();
                    let lease = lead.lease;
                    tokio::spawn(async move { s.revoke_lease(lease).await });
                    return;
                }
            }
        }
    }
}

async fn run_standby(
    ctl: &Arc<Controller>,
    store: &EtcdStore,
    leader: LeaderInfo,
    mut bell: watch::Receiver<u64>,
    timing: &Timing,
    shutdown: &Shutdown,
) {
    ctl.observe_term(leader.term);
    ctl.update(|s| {
        s.role = Role::Standby;
        s.primary = Some(leader.primary_ref());
        s.term = s.term.max(leader.term);
        s.quorum = true;
        s.leadership = None;
    });
    tracing::info!(target: TARGET, "{} is STANDBY (primary {}, term {})", ctl.name(), leader.name, leader.term);
    let mut last_contact = Instant::now();
    loop {
        tokio::select! {
            _ = shutdown.clone().wait() => return,
            r = bell.changed() => {
                if r.is_err() {
                    return;
                }
            }
            _ = tokio::time::sleep(timing.poll) => {}
        }
        match store.leader().await {
            Ok(Some(now)) if now.create_revision == leader.create_revision => {
                last_contact = Instant::now();
                ctl.update(|s| s.quorum = true);
            }
            // Gone or replaced: the role loop observes again.
            Ok(_) => return,
            Err(e) => {
                ctl.update(|s| s.quorum = false);
                if last_contact.elapsed() >= timing.ttl {
                    // The primary's lease has run out by now unless it
                    // reached etcd when we could not; either way this node
                    // no longer knows a primary.
                    tracing::warn!(target: TARGET, "etcd unreachable for {:?}: primary unknown ({e})", timing.ttl);
                    ctl.update(|s| {
                        s.role = Role::Electing;
                        s.primary = None;
                    });
                    return;
                }
            }
        }
    }
}

async fn apply_loop(
    ctl: Arc<Controller>,
    store: EtcdStore,
    mut bell: watch::Receiver<u64>,
    timing: Arc<Timing>,
    shutdown: Shutdown,
) {
    loop {
        if let Err(e) = catch_up(&ctl, &store, &timing).await {
            tracing::debug!(target: TARGET, "catching up: {e}");
        }
        tokio::select! {
            _ = shutdown.clone().wait() => return,
            r = bell.changed() => {
                if r.is_err() {
                    return;
                }
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Applies every committed entry this node has not applied yet.
async fn catch_up(ctl: &Controller, store: &EtcdStore, timing: &Timing) -> Result<(), StoreError> {
    let committed = store.committed_lsn().await?;
    ctl.update(|s| s.replicated.positions.observe_committed(committed));
    loop {
        let (applied, committed) = ctl.read(|s| (s.replicated.positions.applied, s.replicated.positions.committed));
        if applied >= committed {
            return Ok(());
        }
        let entries = store.read_log(applied + 1, committed, 64).await?;
        if entries.first().map(|e| e.lsn) != Some(applied + 1) {
            recover(ctl, store, applied).await?;
            continue;
        }
        for entry in entries {
            if !timing.apply_delay.is_zero() {
                tokio::time::sleep(timing.apply_delay).await;
            }
            match ctl.update(|s| s.replicated.apply(&entry)) {
                Ok(_) => {}
                Err(ApplyError::Gap { .. }) => break,
                Err(e) => {
                    tracing::error!(target: TARGET, "cannot apply entry {}: {e}; recovering from a snapshot", entry.lsn);
                    recover(ctl, store, entry.lsn).await?;
                    break;
                }
            }
        }
    }
}

/// The log this node needs is gone (trimmed) or unusable: fenced, then
/// restored from a snapshot of the state keys.
async fn recover(ctl: &Controller, store: &EtcdStore, applied: u64) -> Result<(), StoreError> {
    tracing::warn!(target: TARGET, "the log after entry {applied} is not available: recovering from a snapshot");
    ctl.update(|s| s.replicated.positions.unrecoverable = true);
    let snap = store.snapshot().await?;
    ctl.update(|s| s.replicated.restore(snap.lsn, snap.term, snap.config));
    Ok(())
}

async fn watch_loop(store: EtcdStore, bell: Arc<watch::Sender<u64>>, shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = shutdown.clone().wait() => return,
            r = store.watch_prefix(&bell) => {
                if let Err(e) = r {
                    tracing::debug!(target: TARGET, "watch ended: {e}");
                }
            }
        }
        // Whatever happened while the watch was down, re-read.
        bell.send_modify(|n| *n = n.wrapping_add(1));
        if !pause(Duration::from_millis(500), &shutdown).await {
            return;
        }
    }
}
