//! Compile-time checks of the auto traits of the public types and futures (like tokio's
//! `tests/async_send_sync.rs`): handles, guards and errors are `Send + Sync + 'static`,
//! and every future a user may want to `tokio::spawn` is `Send`.
//!
//! Nothing here talks to Redis: the checks are type checks, done when this file compiles. The
//! one `#[test]` only makes sure the checking functions are referenced (so they cannot be
//! dead-code-eliminated from the check by a later `cfg` or `allow`).

use std::time::Duration;

use redisson_sync::{
    BuildError, Client, ClientBuilder, Config, Error, Lock, LockGuard, LockOptions, Owner, Ttl,
};

fn require_send_sync_static<T: Send + Sync + 'static>() {}
fn require_clone<T: Clone>() {}
fn require_send<T: Send>(_: &T) {}
fn require_error<T: std::error::Error + Send + Sync + 'static>() {}

/// Handles, guards, options and errors can be shared between tasks and threads and stored in
/// `'static` places (a `tokio::spawn`ed task, a struct field).
fn types_are_send_sync_static() {
    require_send_sync_static::<Client>();
    require_send_sync_static::<ClientBuilder>();
    require_send_sync_static::<Lock>();
    require_send_sync_static::<LockGuard>();
    require_send_sync_static::<Error>();
    require_send_sync_static::<BuildError>();
    require_send_sync_static::<Config>();
    require_send_sync_static::<Owner>();
    require_send_sync_static::<LockOptions>();
    require_send_sync_static::<Ttl>();

    require_clone::<Client>();
    require_clone::<Lock>();
    require_clone::<Config>();
    require_clone::<LockOptions>();
    require_clone::<Owner>();

    // `?` into `Box<dyn Error + Send + Sync>` / anyhow works for both error types.
    require_error::<Error>();
    require_error::<BuildError>();
}

/// Every future returned by the API is `Send`, so it can be `tokio::spawn`ed. Type-checked
/// only: the futures are created (futures are lazy, nothing runs) and dropped.
fn futures_are_send(client: &Client, lock: &Lock, guard: LockGuard) {
    let opts = LockOptions::new()
        .lease(Duration::from_secs(1))
        .owner(Owner::new(1));
    require_send(&lock.lock());
    require_send(&lock.lock_with_options(&opts));
    require_send(&lock.try_lock());
    require_send(&lock.try_lock_for(Duration::from_secs(1)));
    require_send(&lock.try_lock_with_options(Duration::from_secs(1), &opts));
    require_send(&lock.force_unlock());
    require_send(&lock.is_locked());
    require_send(&lock.is_held_by(Owner::new(1)));
    require_send(&lock.hold_count(Owner::new(1)));
    require_send(&lock.remaining_ttl());
    require_send(&guard.lost());
    require_send(&client.shutdown());
    // `unlock` consumes the guard: its future owns it.
    require_send(&guard.unlock());
}

/// Futures that own their handles (a cloned `Lock` moved into an `async move` block) are
/// `'static` as well as `Send`, which is what `tokio::spawn` needs.
fn spawnable_futures(lock: Lock, client: Client) {
    fn require_spawnable<F: std::future::Future + Send + 'static>(_: &F)
    where
        F::Output: Send + 'static,
    {
    }
    let l = lock.clone();
    require_spawnable(&async move { l.lock().await });
    let l = lock.clone();
    require_spawnable(&async move { l.try_lock_for(Duration::from_secs(1)).await });
    let l = lock;
    require_spawnable(&async move {
        let guard = l.lock().await?;
        guard.unlock().await
    });
    require_spawnable(&async move { client.shutdown().await });
}

#[test]
fn public_types_and_futures_have_the_documented_auto_traits() {
    // Function-pointer coercions force the generic bounds above to be checked at compile time
    // even though the functions that need a live client are never called.
    let _: fn() = types_are_send_sync_static;
    let _: fn(&Client, &Lock, LockGuard) = futures_are_send;
    let _: fn(Lock, Client) = spawnable_futures;
    types_are_send_sync_static();
}
