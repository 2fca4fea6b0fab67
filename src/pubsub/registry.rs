//! The registry of waiters: which channels have local waiters, and how a message wakes them.
//!
//! It knows nothing of connections: the transport asks it which channels to subscribe and
//! hands it every message ([`Registry::dispatch`]); a topology with several subscriber
//! connections (one per cluster shard) feeds the same registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, mpsc};

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

/// What an observer of a channel is told ([`Registry::observe`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Observed {
    /// A message received on the channel.
    Message { channel: String, payload: Vec<u8> },
    /// The subscription was (re)established or interrupted: messages may have been lost.
    Gap,
}

#[derive(Debug)]
struct Entry {
    waiters: usize,
    channel: Arc<Channel>,
    /// Those told of every message, besides the waiters: (observer id, its queue).
    observers: Vec<(u64, mpsc::UnboundedSender<Observed>)>,
}

impl Entry {
    fn tell(&self, what: &Observed) {
        for (_, tx) in &self.observers {
            let _ = tx.send(what.clone());
        }
    }
}

/// Channels with local waiters, reference-counted by waiter.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    channels: Mutex<HashMap<String, Entry>>,
    /// Waiters registered on any channel (observers aside): read without the lock, so that an
    /// acquire of a client with no waiter at all asks nothing more.
    waiters: AtomicUsize,
}

impl Registry {
    fn channels(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Nothing panics while holding the lock; stay usable even if something did.
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one more waiter on `name`; the first one creates the channel with `policy`.
    pub(crate) fn register(&self, name: &str, policy: WakePolicy) -> Arc<Channel> {
        let mut channels = self.channels();
        let entry = Self::entry(&mut channels, name, policy);
        entry.waiters += 1;
        self.waiters.fetch_add(1, Ordering::Relaxed);
        entry.channel.clone()
    }

    /// `true` when some waiter is registered on any channel.
    pub(crate) fn any_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) > 0
    }

    /// How many waiters are registered on `name`.
    pub(crate) fn waiters_on(&self, name: &str) -> usize {
        self.channels().get(name).map_or(0, |entry| entry.waiters)
    }

    /// Adds an observer of `name`, told of every message on it (and of gaps) through `tx`;
    /// it wakes and is woken by nothing. It keeps the channel subscribed as a waiter does.
    pub(crate) fn observe(
        &self,
        name: &str,
        policy: WakePolicy,
        id: u64,
        tx: mpsc::UnboundedSender<Observed>,
    ) -> Arc<Channel> {
        let mut channels = self.channels();
        let entry = Self::entry(&mut channels, name, policy);
        entry.observers.push((id, tx));
        entry.channel.clone()
    }

    fn entry<'m>(
        channels: &'m mut HashMap<String, Entry>,
        name: &str,
        policy: WakePolicy,
    ) -> &'m mut Entry {
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
            observers: Vec::new(),
        });
        debug_assert_eq!(entry.channel.policy, policy, "two policies on {name}");
        entry
    }

    /// Removes observer `id` of `channel`; `true` when the channel has no waiter and no
    /// observer left (it is then gone from the registry).
    pub(crate) fn unobserve(&self, channel: &Arc<Channel>, id: u64) -> bool {
        let mut channels = self.channels();
        let last = match channels.get_mut(&channel.name) {
            Some(entry) if Arc::ptr_eq(&entry.channel, channel) => {
                entry.observers.retain(|(o, _)| *o != id);
                entry.waiters == 0 && entry.observers.is_empty()
            }
            _ => false,
        };
        if last {
            channels.remove(&channel.name);
        }
        last
    }

    /// Counts one waiter less on `channel`; `true` when it was the last one (the channel is
    /// then gone from the registry).
    pub(crate) fn unregister(&self, channel: &Arc<Channel>) -> bool {
        let mut channels = self.channels();
        let last = match channels.get_mut(&channel.name) {
            Some(entry) if Arc::ptr_eq(&entry.channel, channel) => {
                entry.waiters -= 1;
                self.waiters.fetch_sub(1, Ordering::Relaxed);
                entry.waiters == 0 && entry.observers.is_empty()
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
        if !entry.observers.is_empty() {
            entry.tell(&Observed::Message {
                channel: name.to_owned(),
                payload: payload.to_vec(),
            });
        }
        let wake = entry.channel.policy.wake(payload);
        if wake == Wake::Nothing && entry.observers.is_empty() {
            tracing::debug!(channel = name, ?payload, "ignoring pub/sub message");
        }
        entry.channel.apply(wake, entry.waiters);
    }

    /// Wakes every waiter of every channel to re-check: messages may have been lost while the
    /// subscription was down.
    pub(crate) fn wake_everyone(&self) {
        for entry in self.channels().values() {
            entry.channel.wake_all();
            entry.tell(&Observed::Gap);
        }
    }

    /// Wakes every waiter of channel `name` to re-check (its subscription was interrupted).
    pub(crate) fn wake_channel(&self, name: &str) {
        if let Some(entry) = self.channels().get(name) {
            entry.channel.wake_all();
            entry.tell(&Observed::Gap);
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

    /// Channels, waiters and observers registered now.
    pub(crate) fn sizes(&self) -> (usize, usize, usize) {
        let channels = self.channels();
        let observers = channels.values().map(|e| e.observers.len()).sum();
        (
            channels.len(),
            self.waiters.load(Ordering::Relaxed),
            observers,
        )
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

    #[test]
    fn observers_get_every_message_and_gaps_and_keep_the_channel() {
        let registry = Registry::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let observed = registry.observe("c", WakePolicy::Lock, 7, tx);
        let waiter = registry.register("c", WakePolicy::Lock);
        registry.dispatch("c", b"0");
        registry.dispatch("c", b"junk");
        registry.wake_channel("c");
        let message = |p: &[u8]| Observed::Message {
            channel: "c".into(),
            payload: p.to_vec(),
        };
        assert_eq!(rx.try_recv(), Ok(message(b"0")));
        assert_eq!(rx.try_recv(), Ok(message(b"junk")));
        assert_eq!(rx.try_recv(), Ok(Observed::Gap));
        assert!(rx.try_recv().is_err());
        // The waiter leaving keeps the channel for the observer, and the other way round.
        assert!(!registry.unregister(&waiter));
        assert!(registry.contains("c"));
        assert!(registry.unobserve(&observed, 7));
        assert!(registry.is_empty());
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
