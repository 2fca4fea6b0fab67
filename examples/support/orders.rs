//! The idempotent request pattern: a request carrying an idempotency key (here, an order
//! submission) is processed exactly once, however many times it is submitted, concurrently, by
//! however many processes. Used by `examples/idempotent_orders.rs` and proved by
//! `tests/idempotent.rs` (both include this file).
//!
//! Per key, Redis holds:
//!
//! - `order:<key>`: the lock (a Redisson `RLock`: a Java service locking the same name takes
//!   part in the same exclusion);
//! - `order:<key>:result`: the result record, written once by the request that processed the
//!   order, read by every duplicate;
//! - `order:<key>:processed`: how many times the order was processed (the proof: 1).
//!
//! A request:
//!
//! 1. reads the result record: if it is there, the order was processed; return that result
//!    (the fast path of every late duplicate, no lock taken);
//! 2. otherwise takes the lock (`with_lock`, which always releases it) and reads the record
//!    again: a duplicate that waited for the lock finds the result of the one that held it;
//! 3. only if it is still absent processes the order and writes the record (`SET NX`, before
//!    the lock is released), so the next holder finds it.
//!
//! The lock makes the check-process-record sequence exclusive; the record makes the outcome
//! durable, so duplicates arriving after the release (or after a crash that released the lock
//! by lease expiry, if the record was written) are answered from it. Caveats: the owner of a
//! lock is the Tokio task, so each request must run in its own task (as a server's requests
//! do), or take the lock with its own `Owner`; and effects outside Redis that must never
//! happen twice even when a lock is lost (a stalled process past its lease) need the
//! fencing token of a `FencedLock` checked by the system they change.

#![allow(dead_code)]

use std::time::Duration;

use redisson_sync::redis::{self, AsyncCommands};
use redisson_sync::{Client, WithLockOptions};

/// The error of the requests: any error, the lock's included.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a result record is kept: a duplicate arriving later is processed anew.
pub(crate) const RESULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The lock of the order with idempotency key `key`.
pub(crate) fn lock_name(key: &str) -> String {
    format!("order:{key}")
}

/// The result record of the order with idempotency key `key`.
pub(crate) fn result_key(key: &str) -> String {
    format!("order:{key}:result")
}

/// How many times the order with idempotency key `key` was processed.
pub(crate) fn processed_key(key: &str) -> String {
    format!("order:{key}:processed")
}

/// One service instance taking order submissions: its lock client and its data connection.
#[derive(Clone)]
pub(crate) struct Orders {
    /// The instance's name, written into the receipts it makes.
    pub(crate) instance: String,
    client: Client,
    data: redis::aio::MultiplexedConnection,
    /// How long processing takes (charging a card, calling a supplier...).
    work: Duration,
}

impl Orders {
    /// An instance called `instance` on the Redis at `url`.
    pub(crate) async fn connect(
        instance: &str,
        url: &str,
        work: Duration,
    ) -> Result<Self, BoxError> {
        let data = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Self {
            instance: instance.to_owned(),
            client: Client::open(url)?,
            data,
            work,
        })
    }

    /// The instance's lock client (to shut it down before the process exits).
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Handles one submission of the order with idempotency key `key`: its result, the same
    /// for every submission of the key.
    pub(crate) async fn submit(&self, key: &str, order: &str) -> Result<String, BoxError> {
        let mut data = self.data.clone();
        // 1. The fast path: processed already.
        if let Some(result) = data.get::<_, Option<String>>(result_key(key)).await? {
            return Ok(result);
        }
        // 2. Exclusive from here on. Stop at once if the lock is lost mid-way (a stall past the
        //    lease), rather than process alongside the next holder.
        let opts = WithLockOptions::new().stop_on_lost(true);
        let lock = self.client.lock(lock_name(key));
        lock.with_lock_options(&opts, || async move {
            if let Some(result) = data.get::<_, Option<String>>(result_key(key)).await? {
                return Ok(result);
            }
            // 3. Process once, record the result before the lock is released.
            let result = self.process(&mut data, key, order).await?;
            let written: Option<String> = redis::cmd("SET")
                .arg(result_key(key))
                .arg(&result)
                .arg("NX")
                .arg("PX")
                .arg(RESULT_TTL.as_millis() as u64)
                .query_async(&mut data)
                .await?;
            if written.is_none() {
                // Cannot happen while the lock is exclusive; if it does, the record wins.
                let recorded: String = data.get(result_key(key)).await?;
                return Ok(recorded);
            }
            Ok(result)
        })
        .await
    }

    /// The processing itself: counted, so that a test can tell how many times it ran.
    pub(crate) async fn process(
        &self,
        data: &mut redis::aio::MultiplexedConnection,
        key: &str,
        order: &str,
    ) -> Result<String, BoxError> {
        let run: u64 = data.incr(processed_key(key), 1).await?;
        let _: bool = data
            .expire(processed_key(key), RESULT_TTL.as_secs() as i64)
            .await?;
        tokio::time::sleep(self.work).await;
        Ok(format!(
            "receipt for {order} (key {key}): processed by {}, run #{run}",
            self.instance
        ))
    }
}

/// How many times the order with idempotency key `key` was processed.
pub(crate) async fn processed(
    data: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> Result<u64, BoxError> {
    Ok(data
        .get::<_, Option<u64>>(processed_key(key))
        .await?
        .unwrap_or(0))
}
