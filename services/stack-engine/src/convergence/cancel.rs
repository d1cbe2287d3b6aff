//! Cancellation of a stack's running actions on one engine.
//!
//! Invariant: whoever cancels a stack's actions has first stopped the
//! traversal they belong to in the database (`stop_traversal`, a settled
//! stack's `retire_traversal`, abandon), and a check subscribes to its
//! stack's cancel signal *before* it reads the stack. So a cancel sent before the subscription is seen by the read
//! (the traversal is no longer current and the check stops), and one sent
//! after it reaches the subscription. A check that subscribed only when its
//! action began could miss a cancel sent between its read and its action,
//! and then hold the resource's lock forever (a DELETE of a stack whose
//! resource waits without end would never finish).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

/// Entries the map may hold before it first drops those nobody watches.
const SWEEP_FLOOR: usize = 64;

tokio::task_local! {
    /// The stack of the check running on this task and the receiver it
    /// took before reading the stack: its actions watch that one.
    static CHECK_CANCEL: (String, watch::Receiver<bool>);
}

#[derive(Default)]
struct Signals {
    by_stack: HashMap<String, watch::Sender<bool>>,
    /// The size at which unwatched signals are dropped next: twice the
    /// watched ones at the last sweep, so sweeps cost O(1) per subscription
    /// and the map stays within twice the stacks with running checks.
    sweep_at: usize,
}

/// Per stack, the cancel signal this engine's running actions watch.
#[derive(Default)]
pub(super) struct Cancellations(Mutex<Signals>);

impl Cancellations {
    /// A receiver of the stack's signal that turns true when the stack's
    /// actions are cancelled; a check takes it before reading the stack
    /// (see the module's invariant).
    fn subscribe(&self, stack_id: &str) -> watch::Receiver<bool> {
        let Ok(mut signals) = self.0.lock() else {
            // A poisoned map: a receiver nobody can cancel, as one whose
            // sender went away.
            return watch::channel(false).1;
        };
        if signals.by_stack.len() >= signals.sweep_at.max(SWEEP_FLOOR) {
            signals.by_stack.retain(|_, sender| sender.receiver_count() > 0);
            signals.sweep_at = signals.by_stack.len() * 2;
        }
        signals.by_stack.entry(stack_id.to_string()).or_insert_with(|| watch::channel(false).0).subscribe()
    }

    /// Runs a check of the stack: its subscription is taken now, before
    /// `check` reads the stack, and is what [`Self::receiver`] answers
    /// for the stack within it.
    pub(super) async fn scope_check<F: std::future::Future>(&self, stack_id: &str, check: F) -> F::Output {
        let receiver = self.subscribe(stack_id);
        CHECK_CANCEL.scope((stack_id.to_string(), receiver), check).await
    }

    /// The receiver an action of the stack watches: within a check of that
    /// stack the check's own, else a new subscription.
    pub(super) fn receiver(&self, stack_id: &str) -> watch::Receiver<bool> {
        CHECK_CANCEL
            .try_with(|(id, receiver)| (id == stack_id).then(|| receiver.clone()))
            .ok()
            .flatten()
            .unwrap_or_else(|| self.subscribe(stack_id))
    }

    /// Signals every receiver of the stack to stop; later subscribers get
    /// a new signal.
    pub(super) fn cancel(&self, stack_id: &str) {
        if let Ok(mut signals) = self.0.lock() {
            if let Some(sender) = signals.by_stack.remove(stack_id) {
                let _ = sender.send(true);
            }
        }
    }

    #[cfg(test)]
    fn stacks(&self) -> usize {
        self.0.lock().map(|s| s.by_stack.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_reaches_receivers_taken_before_it_and_not_after() {
        let c = Cancellations::default();
        let before = c.subscribe("s");
        c.cancel("s");
        assert!(*before.borrow());
        let after = c.subscribe("s");
        assert!(!*after.borrow());
        assert!(*before.borrow());
    }

    /// The race a check subscribing at its action would lose: the cancel
    /// comes after the check read its stack but before its action asked
    /// for a receiver.
    #[tokio::test]
    async fn an_action_sees_a_cancel_sent_after_its_check_began() {
        let c = Cancellations::default();
        c.scope_check("s", async {
            c.cancel("s");
            assert!(*c.receiver("s").borrow());
            // Another stack's action (a nested stack's) has its own signal.
            assert!(!*c.receiver("nested").borrow());
        })
        .await;
        assert!(!*c.receiver("s").borrow());
    }

    #[test]
    fn signals_nobody_watches_are_dropped() {
        let c = Cancellations::default();
        let watched = c.subscribe("watched");
        for i in 0..10 * SWEEP_FLOOR {
            drop(c.subscribe(&format!("s{i}")));
        }
        assert!(c.stacks() <= SWEEP_FLOOR, "{}", c.stacks());
        // The watched one survives every sweep and still cancels.
        c.cancel("watched");
        assert!(*watched.borrow());
    }
}
