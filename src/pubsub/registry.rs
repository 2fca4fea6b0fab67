//! The registry of waiters: which channels have local waiters, and how a message wakes them.
//!
//! It knows nothing of connections: the transport asks it which channels to subscribe and
//! hands it every message ([`Registry::dispatch`]); a topology with several subscriber
//! connections (one per cluster shard) feeds the same registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::policy::{Wake, WakePolicy};

/// One channel with local waiters.
#[derive(Debug)]
pub(crate) struct Channel {
    name: String,
    policy: WakePolicy,
    /// Woken by messages (per the policy) and after a reconnection.
    notify: Notify,
    /// A latch channel's state: open after `0`, closed after `1` (or before any message).
    open: AtomicBool,
    /// The waiter holding the re-checker role (0: nobody).
    rechecker: AtomicU64,
    /// Offers the role to one parked waiter when its holder leaves.
    role: Notify,
}

impl Channel {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Woken by a message, or after a reconnection.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// `true` once a latch channel got `0` (and no `1` after it).
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Takes the re-checker role for `waiter` if it is free; `true` if `waiter` holds it.
    pub(crate) fn claim_recheck(&self, waiter: u64) -> bool {
        match self
            .rechecker
            .compare_exchange(0, waiter, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(holder) => holder == waiter,
        }
    }

    /// Gives the role up if `waiter` holds it, offering it to a parked waiter.
    pub(crate) fn release_recheck(&self, waiter: u64) {
        if self
            .rechecker
            .compare_exchange(waiter, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.role.notify_one();
        }
    }

    /// Resolves when the re-checker role was given up, so that a parked waiter can take it.
    pub(crate) fn role_offer(&self) -> &Notify {
        &self.role
    }

    fn apply(&self, wake: Wake, waiters: usize) {
        match wake {
            Wake::One => self.notify.notify_one(),
            Wake::All => self.wake_all(),
            Wake::Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX).min(waiters);
                for _ in 0..n {
                    self.notify.notify_one();
                }
            }
            Wake::Open => {
                self.open.store(true, Ordering::Release);
                self.wake_all();
            }
            Wake::Close => self.open.store(false, Ordering::Release),
            Wake::Nothing => {}
        }
    }

    /// Wakes every waiter: those parked now, and (one stored permit) the next to park.
    fn wake_all(&self) {
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

#[derive(Debug)]
struct Entry {
    waiters: usize,
    channel: Arc<Channel>,
}

/// Channels with local waiters, reference-counted by waiter.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    channels: Mutex<HashMap<String, Entry>>,
}

impl Registry {
    fn channels(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Nothing panics while holding the lock; stay usable even if something did.
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more waiter on `name`; the first one creates the channel with `policy`.
    pub(crate) fn register(&self, name: &str, policy: WakePolicy) -> Arc<Channel> {
        let mut channels = self.channels();
        let entry = channels.entry(name.to_owned()).or_insert_with(|| Entry {
            waiters: 0,
            channel: Arc::new(Channel {
                name: name.to_owned(),
                policy,
                notify: Notify::new(),
                open: AtomicBool::new(false),
                rechecker: AtomicU64::new(0),
                role: Notify::new(),
            }),
        });
        debug_assert_eq!(entry.channel.policy, policy, "two policies on {name}");
        entry.waiters += 1;
        entry.channel.clone()
    }

    /// Counts one waiter less on `channel`; `true` when it was the last one (the channel is
    /// then gone from the registry).
    pub(crate) fn unregister(&self, channel: &Arc<Channel>) -> bool {
        let mut channels = self.channels();
        let last = match channels.get_mut(&channel.name) {
            Some(entry) if Arc::ptr_eq(&entry.channel, channel) => {
                entry.waiters -= 1;
                entry.waiters == 0
            }
            _ => false,
        };
        if last {
            channels.remove(&channel.name);
        }
        last
    }

    /// Applies a message received on `name` to its waiters, per the channel's policy.
    pub(crate) fn dispatch(&self, name: &str, payload: &[u8]) {
        let channels = self.channels();
        let Some(entry) = channels.get(name) else {
            return;
        };
        let wake = entry.channel.policy.wake(payload);
        if wake == Wake::Nothing {
            tracing::debug!(channel = name, ?payload, "ignoring pub/sub message");
        }
        entry.channel.apply(wake, entry.waiters);
    }

    /// Wakes every waiter of every channel to re-check: messages may have been lost while the
    /// subscription was down.
    pub(crate) fn wake_everyone(&self) {
        for entry in self.channels().values() {
            entry.channel.wake_all();
        }
    }

    /// Wakes every waiter of channel `name` to re-check (its subscription was interrupted).
    pub(crate) fn wake_channel(&self, name: &str) {
        if let Some(entry) = self.channels().get(name) {
            entry.channel.wake_all();
        }
    }

    /// Every channel with waiters.
    pub(crate) fn names(&self) -> Vec<String> {
        self.channels().keys().cloned().collect()
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.channels().contains_key(name)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.channels().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_count_their_waiters() {
        let registry = Registry::default();
        let a = registry.register("c", WakePolicy::Lock);
        let b = registry.register("c", WakePolicy::Lock);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(registry.names(), ["c"]);
        assert!(!registry.unregister(&a));
        assert!(registry.contains("c"));
        assert!(registry.unregister(&b));
        assert!(registry.is_empty());
    }

    #[test]
    fn the_recheck_role_has_one_holder_and_is_offered_on_release() {
        let registry = Registry::default();
        let c = registry.register("c", WakePolicy::Lock);
        assert!(c.claim_recheck(1));
        assert!(c.claim_recheck(1));
        assert!(!c.claim_recheck(2));
        c.release_recheck(2); // not the holder: nothing happens
        assert!(!c.claim_recheck(2));
        c.release_recheck(1);
        assert!(c.claim_recheck(2));
    }

    #[tokio::test]
    async fn latch_messages_open_and_close_the_channel() {
        let registry = Registry::default();
        let c = registry.register("l", WakePolicy::Latch);
        assert!(!c.is_open());
        registry.dispatch("l", b"0");
        assert!(c.is_open());
        // the stored wake-up lets the next waiter through at once
        tokio::time::timeout(std::time::Duration::from_millis(100), c.notify().notified())
            .await
            .unwrap();
        registry.dispatch("l", b"1");
        assert!(!c.is_open());
    }
}
