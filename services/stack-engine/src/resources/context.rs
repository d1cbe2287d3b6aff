//! What a plugin sees while it runs an action: the stack and resource it
//! acts for, the new properties, the resource's state, and the cancel
//! signal that pre-empts long waits.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use uuid::Uuid;

use super::{Properties, ResourceFailure, ResourceState};

/// Resource data key of [`ActionContext::stable_physical_name`].
pub const PHYSICAL_NAME_DATA: &str = "physical_name";

/// Heat's limit for generated physical names (`physical_resource_name_limit`).
const PHYSICAL_NAME_LIMIT: usize = 255;

pub struct ActionContext {
    pub stack_id: String,
    pub stack_name: String,
    pub resource_name: String,
    /// The resource's row id in the store (upstream `Resource.id`): the
    /// physical id of the types that stand for no object of their own.
    pub resource_id: i64,
    /// The properties the action runs with (validated, coerced).
    pub properties: Properties,
    pub state: ResourceState,
    /// Turns true when the engine cancels this action.
    pub cancel: watch::Receiver<bool>,
    /// Stack ADOPT of a resource that runs a nested stack: the adopt data
    /// of its nested resources (`{"resources": {...}}`), which the nested
    /// stack adopts instead of creating them.
    pub adopt: Option<Value>,
    /// The resource's `update_policy` section, resolved, for the plugins
    /// that [`ResourceType::takes_update_policy`] (groups batch by it).
    ///
    /// [`ResourceType::takes_update_policy`]: super::ResourceType::takes_update_policy
    pub update_policy: Option<Value>,
    /// The stack's `timeout_mins` (None: no timeout of its own).
    pub timeout_mins: Option<i64>,
    /// Heat's `action_retry_limit`: how often a delete the service
    /// refuses for now is tried again.
    pub action_retry_limit: u32,
}

impl ActionContext {
    /// Sleeps `secs` seconds, or forever when negative, NaN, or longer
    /// than the clock can reach; returns [`ResourceFailure::Cancelled`] as
    /// soon as `cancel` turns true.
    pub async fn sleep(&self, secs: f64) -> Result<(), ResourceFailure> {
        let mut cancel = self.cancel.clone();
        if *cancel.borrow_and_update() {
            return Err(ResourceFailure::Cancelled);
        }
        // No wait at all: a zero sleep still goes through the timer wheel
        // and costs up to a millisecond per action (every TestResource
        // without wait_secs).
        if secs == 0.0 {
            return Ok(());
        }
        let deadline = deadline_after(secs);
        let mut cancel_open = true;
        loop {
            let sleep_until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => futures::future::pending::<()>().await,
                }
            };
            let changed = async {
                if cancel_open {
                    cancel.changed().await.is_ok()
                } else {
                    // The sender is gone: nobody can cancel any more.
                    futures::future::pending::<bool>().await
                }
            };
            tokio::select! {
                _ = sleep_until => return Ok(()),
                open = changed => {
                    if !open {
                        cancel_open = false;
                    } else if *cancel.borrow_and_update() {
                        return Err(ResourceFailure::Cancelled);
                    }
                }
            }
        }
    }

    /// A fresh `<stack>-<resource>-<short id>` name (upstream
    /// `physical_resource_name` with a new random short id).
    pub fn physical_name(&self) -> String {
        physical_resource_name(&self.stack_name, &self.resource_name, &short_id(&Uuid::new_v4()))
    }

    /// The physical name generated once for this resource and then kept
    /// in its data ([`PHYSICAL_NAME_DATA`]): Heat's `physical_resource_name()`
    /// is stable, so an update that clears a `name` property gets the same
    /// name back.
    pub fn stable_physical_name(&mut self) -> String {
        if let Some(name) = self.state.data.get(PHYSICAL_NAME_DATA) {
            return name.clone();
        }
        let name = self.physical_name();
        self.state.data.insert(PHYSICAL_NAME_DATA.into(), name.clone());
        name
    }

    /// Waits for `work`, or answers [`ResourceFailure::Cancelled`] as soon
    /// as the engine cancels this action (`work` is dropped then).
    pub async fn unless_cancelled<T>(&self, work: impl std::future::Future<Output = T>) -> Result<T, ResourceFailure> {
        tokio::select! {
            out = work => Ok(out),
            Err(cancelled) = self.sleep(-1.0) => Err(cancelled),
        }
    }

    /// Whether the engine has asked this action to stop.
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }
}

/// The instant `secs` (a template's number) from now; None, a wait that
/// never ends by itself, when `secs` is negative, NaN, infinite or past
/// what a `Duration` or the clock holds (a template's 1e20 must not panic).
pub fn deadline_after(secs: f64) -> Option<tokio::time::Instant> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    let wait = Duration::try_from_secs_f64(secs).ok()?;
    tokio::time::Instant::now().checked_add(wait)
}

/// Heat's short id: the 60 random "time" bits of a v4 UUID, base32
/// encoded, 12 lower-case characters from `[a-z2-7]`.
pub fn short_id(uuid: &Uuid) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let b = uuid.as_bytes();
    // RFC 4122 fields: time_low (0..4), time_mid (4..6), time_hi (6..8,
    // minus the 4 version bits).
    let time_low = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let time_mid = u64::from(u16::from_be_bytes([b[4], b[5]]));
    let time_hi = u64::from(u16::from_be_bytes([b[6], b[7]]) & 0x0fff);
    let time = (time_hi << 48) | (time_mid << 32) | time_low;
    // 60 bits = 12 groups of 5 bits, most significant first.
    (0..12)
        .map(|i| {
            let shift = 55 - 5 * i;
            ALPHABET[((time >> shift) & 0x1f) as usize] as char
        })
        .collect()
}

/// `<stack>-<resource>-<short id>` with the stack name's trailing `*`
/// stripped, reduced to Heat's 255-character limit by keeping the first two
/// characters, a hyphen and the tail.
pub fn physical_resource_name(stack_name: &str, resource_name: &str, short_id: &str) -> String {
    let name = format!("{}-{}-{}", stack_name.trim_end_matches('*'), resource_name, short_id);
    reduce_physical_name(&name, PHYSICAL_NAME_LIMIT)
}

/// Heat's `reduce_physical_resource_name`: a name longer than `limit`
/// (at least 3) keeps its first two characters, a hyphen and its tail.
pub fn reduce_physical_name(name: &str, limit: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= limit || limit < 3 {
        return name.to_string();
    }
    let tail_len = limit - 3;
    let head: String = chars[..2].iter().collect();
    let tail: String = chars[chars.len() - tail_len..].iter().collect();
    format!("{head}-{tail}")
}

/// A context for stack `st`, resource `r`, and its cancel switch.
#[cfg(test)]
pub(crate) fn test_context(props: Properties) -> (ActionContext, watch::Sender<bool>) {
    let (tx, rx) = watch::channel(false);
    let ctx = ActionContext {
        stack_id: "sid".into(),
        stack_name: "st".into(),
        resource_name: "r".into(),
        resource_id: 1,
        properties: props,
        state: ResourceState::default(),
        cancel: rx,
        adopt: None,
        update_policy: None,
        timeout_mins: None,
        action_retry_limit: 5,
    };
    (ctx, tx)
}

#[cfg(test)]
mod tests {
    use super::test_context as context;
    use super::*;

    #[test]
    fn short_id_matches_heat() {
        // heat/tests/test_short_id.py: get_id('ffffffff-ffff-4fff-8fff-ffffffffffff') == '777777777777'
        let u = Uuid::parse_str("ffffffff-ffff-4fff-8fff-ffffffffffff").unwrap();
        assert_eq!(short_id(&u), "777777777777");
        // ...and a known value: 5a5d2d4f-... style ids are lower-case base32
        let u = Uuid::parse_str("23abcdef-0123-4567-89ab-cdef01234567").unwrap();
        let s = short_id(&u);
        assert_eq!(s.len(), 12);
        assert!(s.chars().all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c)));
    }

    #[test]
    fn physical_name_shape_and_truncation() {
        assert_eq!(physical_resource_name("st*", "r", "abcdefghijkl"), "st-r-abcdefghijkl");
        let long = "x".repeat(300);
        let n = physical_resource_name("stack", &long, "abcdefghijkl");
        assert_eq!(n.chars().count(), 255);
        assert!(n.starts_with("st-"));
        assert!(n.ends_with("-abcdefghijkl"));
        let (ctx, _tx) = context(Properties::new());
        let p = ctx.physical_name();
        assert!(p.starts_with("st-r-") && p.len() == "st-r-".len() + 12);
    }

    #[tokio::test]
    async fn sleep_completes_and_is_cancellable() {
        let (ctx, tx) = context(Properties::new());
        let started = std::time::Instant::now();
        assert_eq!(ctx.sleep(0.05).await, Ok(()));
        assert!(started.elapsed() >= Duration::from_millis(50));
        let waiter = tokio::spawn(async move { ctx.sleep(-1.0).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished());
        tx.send(true).unwrap();
        assert_eq!(waiter.await.unwrap(), Err(ResourceFailure::Cancelled));
    }

    #[tokio::test]
    async fn sleeps_past_the_clock_wait_until_cancelled() {
        for secs in [1e20, f64::MAX, f64::INFINITY, f64::NAN, -1e300] {
            assert_eq!(deadline_after(secs), None, "{secs}");
            let (ctx, tx) = context(Properties::new());
            let waiter = tokio::spawn(async move { ctx.sleep(secs).await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(!waiter.is_finished(), "{secs}");
            tx.send(true).unwrap();
            assert_eq!(waiter.await.unwrap(), Err(ResourceFailure::Cancelled));
        }
        assert!(deadline_after(1.5).is_some());
    }

    #[tokio::test]
    async fn sleep_after_cancel_returns_at_once_and_survives_dropped_sender() {
        let (ctx, tx) = context(Properties::new());
        tx.send(true).unwrap();
        assert_eq!(ctx.sleep(100.0).await, Err(ResourceFailure::Cancelled));
        let (ctx, tx) = context(Properties::new());
        drop(tx);
        assert_eq!(ctx.sleep(0.02).await, Ok(()));
    }
}
