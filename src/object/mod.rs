//! The object and expiry methods every primitive has (Redisson's `RObject` and `RExpirable`):
//! [`Expirable`], written once over what a primitive says of its keys ([`Object`]), and the
//! macro that gives each primitive type the same documented methods ([`object_methods!`]).
//!
//! An object is its name and the keys that go with it (docs/LAYOUT.md): a fair lock's queue and
//! deadlines, a fenced lock's token counter, a permit-expirable semaphore's `{name}:timeout`.
//! As in Redisson, `is_exists`, `remaining_ttl` and `expire_time` read the name alone, while
//! `expire`, `expire_at`, `clear_expire` and the plain `delete` act on every key (true when any
//! changed); the locks and the latch delete as Redisson's do (a lock is force-unlocked).

use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;

use crate::conn::{Call, Script};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::options::{Ttl, millis};
use crate::reply::{bool_reply, int_reply, unexpected};
use crate::shared::Shared;

/// `lua/object/expire.lua`: `PEXPIRE` or `PEXPIREAT` on every key of an object, with an
/// optional condition (Redisson's `RedissonExpirable` script).
static EXPIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/object/expire.lua")));

/// `lua/object/clear_expire.lua`: `PERSIST` on every key of an object.
static CLEAR_EXPIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/object/clear_expire.lua")));

/// What a primitive says of its keys, for the object methods.
pub(crate) trait Object: Send + Sync {
    /// The client the object belongs to.
    fn shared(&self) -> &Arc<Shared>;

    /// The object's keys: its name first, then the keys that expire and are deleted with it.
    fn keys(&self) -> &[Arc<str>];

    /// Deletes the object as Redisson's `delete()` does: by default `DEL` of every key;
    /// `true` when something was deleted.
    fn delete(&self) -> impl Future<Output = Result<bool>> + Send {
        delete_keys(self.shared(), self.keys())
    }
}

impl<T: Object> Object for Arc<T> {
    fn shared(&self) -> &Arc<Shared> {
        (**self).shared()
    }

    fn keys(&self) -> &[Arc<str>] {
        (**self).keys()
    }

    fn delete(&self) -> impl Future<Output = Result<bool>> + Send {
        (**self).delete()
    }
}

/// `DEL` of every key: `true` when something was deleted.
pub(crate) async fn delete_keys(shared: &Shared, keys: &[Arc<str>]) -> Result<bool> {
    shared.ensure_open()?;
    let mut cmd = redis::cmd("DEL");
    for key in keys {
        cmd.arg(&**key);
    }
    let call = Call::write_command("delete", &keys[0], &cmd).idempotent();
    Ok(int_reply("DEL", shared.conn.call(call).await?)? > 0)
}

/// The condition of a conditional expire (Redis 7.0's `PEXPIRE` options; Redisson's
/// `expireIfSet`, `expireIfNotSet`, `expireIfGreater`, `expireIfLess`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    Always,
    /// `XX`: only a key that has an expiry.
    Set,
    /// `NX`: only a key without one.
    NotSet,
    /// `GT`: only when later than the key's expiry (a key without one counts as infinite).
    Greater,
    /// `LT`: only when earlier (a key without one counts as infinite).
    Less,
}

impl When {
    fn flag(self) -> &'static str {
        match self {
            Self::Always => "",
            Self::Set => "XX",
            Self::NotSet => "NX",
            Self::Greater => "GT",
            Self::Less => "LT",
        }
    }
}

/// Sets every key's time to live to `ttl` (or, with `at`, its expiry to that instant), when
/// `when` allows it: `true` when any key's changed.
pub(crate) async fn expire(object: &impl Object, expiry: Expiry, when: When) -> Result<bool> {
    let shared = object.shared();
    shared.ensure_open()?;
    let (command, ms) = match expiry {
        Expiry::In(ttl) => ("pexpire", millis("time to live", ttl)?),
        Expiry::At(at) => {
            let ms = at
                .duration_since(UNIX_EPOCH)
                .map_err(|_| Error::InvalidArgument(format!("an expiry time before 1970: {at:?}")))?
                .as_millis();
            let ms = u64::try_from(ms)
                .ok()
                .filter(|ms| *ms <= crate::config::MAX_LEASE_MS);
            let ms = ms.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "an expiry time must be at most 2^62 ms after 1970, got {at:?}"
                ))
            })?;
            ("pexpireat", ms)
        }
    };
    let keys = object.keys();
    let mut invocation = EXPIRE.prepare_invoke();
    for key in keys {
        invocation.key(&**key);
    }
    invocation.arg(command).arg(ms).arg(when.flag());
    let call = Call::write("expire", &keys[0], &invocation).idempotent();
    match shared.conn.call(call).await {
        Ok(reply) => bool_reply("object/expire.lua", reply),
        Err(Error::Redis(e)) if when != When::Always && refused_option(&e) => {
            Err(Error::Unsupported(format!(
                "{command} with the {flag} option (a conditional expire) needs Redis 7.0 or later \
                 (or Valkey); this server refused it: {e}",
                flag = when.flag()
            )))
        }
        Err(e) => Err(e),
    }
}

/// A server before Redis 7.0 answering `PEXPIRE key ms NX`.
fn refused_option(e: &redis::RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("wrong number of arguments")
        || text.contains("unsupported option")
        || text.contains("syntax error")
}

/// What an expire sets: a time to live from now, or an instant.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expiry {
    In(Duration),
    At(SystemTime),
}

/// Removes every key's expiry: `true` when any had one.
pub(crate) async fn clear_expire(object: &impl Object) -> Result<bool> {
    let shared = object.shared();
    shared.ensure_open()?;
    let keys = object.keys();
    let mut invocation = CLEAR_EXPIRE.prepare_invoke();
    for key in keys {
        invocation.key(&**key);
    }
    let call = Call::write("clear_expire", &keys[0], &invocation).idempotent();
    bool_reply("object/clear_expire.lua", shared.conn.call(call).await?)
}

/// `true` when the object's name exists (`EXISTS`).
pub(crate) async fn is_exists(object: &impl Object) -> Result<bool> {
    let reply = read(object, "is_exists", "EXISTS").await?;
    Ok(int_reply("EXISTS", reply)? > 0)
}

/// The name's time to live (`PTTL`).
pub(crate) async fn remaining_ttl(object: &impl Object) -> Result<Ttl> {
    match read(object, "remaining_ttl", "PTTL").await? {
        Value::Int(ms) => Ok(Ttl::from_pttl(ms)),
        other => Err(unexpected("PTTL", &other)),
    }
}

/// The name's expiry (`PEXPIRETIME`, Redis 7.0+; before that, now plus `PTTL` by this host's
/// clock).
pub(crate) async fn expire_time(object: &impl Object) -> Result<ExpireTime> {
    match read(object, "expire_time", "PEXPIRETIME").await {
        Ok(Value::Int(ms)) => Ok(ExpireTime::from_millis(ms)),
        Ok(other) => Err(unexpected("PEXPIRETIME", &other)),
        Err(Error::Redis(e))
            if e.to_string()
                .to_ascii_lowercase()
                .contains("unknown command") =>
        {
            // A server before 7.0: the time to live, read now, from now.
            let now = SystemTime::now();
            Ok(match remaining_ttl(object).await? {
                Ttl::Absent => ExpireTime::Absent,
                Ttl::Persistent => ExpireTime::Persistent,
                Ttl::Remaining(left) => ExpireTime::At(now + left),
            })
        }
        Err(e) => Err(e),
    }
}

/// A read-only command on the object's name.
async fn read(object: &impl Object, op: &'static str, command: &str) -> Result<Value> {
    let shared = object.shared();
    shared.ensure_open()?;
    let name = &object.keys()[0];
    let mut cmd = redis::cmd(command);
    cmd.arg(&**name);
    shared.conn.call(Call::read(op, name, &cmd)).await
}

/// When a key expires, as `PEXPIRETIME` says (Redisson's `getExpireTime()`: -2, -1 or epoch
/// milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireTime {
    /// The key does not exist.
    Absent,
    /// The key exists without expiry.
    Persistent,
    /// The key expires at this instant.
    At(SystemTime),
}

impl ExpireTime {
    fn from_millis(ms: i64) -> Self {
        match ms {
            -1 => Self::Persistent,
            ms if ms < 0 => Self::Absent,
            ms => Self::At(UNIX_EPOCH + Duration::from_millis(ms.unsigned_abs())),
        }
    }

    /// The value as Redis and Redisson's `getExpireTime()` report it: -2, -1 or epoch ms.
    pub fn as_redis_millis(self) -> i64 {
        match self {
            Self::Absent => -2,
            Self::Persistent => -1,
            Self::At(at) => at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        }
    }
}

pub(crate) mod sealed {
    /// Only this crate's primitives implement [`Expirable`](super::Expirable).
    pub trait Sealed {}
}

/// The object and expiry methods of every primitive (Redisson's `RObject` and `RExpirable`):
/// every lock kind, [`Semaphore`](crate::Semaphore),
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) and
/// [`CountDownLatch`](crate::CountDownLatch) implement it, each method behaving as the type's
/// inherent method of the same name; for code that takes "a Redis object, whatever its kind"
/// (`&dyn Expirable`, `Box<dyn Expirable>`). Sealed.
///
/// Which keys each primitive's methods act on, and how it deletes, is told on the type (and in
/// the Java-name table of the guide); the names are Redisson's without `get`/`is` where Rust
/// drops them (`remainTimeToLive` → `remaining_ttl`, `getExpireTime` → `expire_time`).
pub trait Expirable: sealed::Sealed + std::fmt::Debug + Send + Sync {
    /// The object's name.
    fn name(&self) -> &str;

    /// Deletes the object (Redisson's `delete()`); `true` when something was deleted.
    ///
    /// # Errors
    ///
    /// As the type's `delete`.
    fn delete(&self) -> BoxFuture<'_, Result<bool>>;

    /// `true` when the object's name exists (Redisson's `isExists()`).
    ///
    /// # Errors
    ///
    /// As the type's `is_exists`.
    fn is_exists(&self) -> BoxFuture<'_, Result<bool>>;

    /// Sets the object's time to live (Redisson's `expire(Duration)`); `true` when set.
    ///
    /// # Errors
    ///
    /// As the type's `expire`.
    fn expire(&self, ttl: Duration) -> BoxFuture<'_, Result<bool>>;

    /// [`expire`](Self::expire) only where the keys have an expiry (Redisson's
    /// `expireIfSet`; Redis 7.0+).
    ///
    /// # Errors
    ///
    /// As the type's `expire_if_set`.
    fn expire_if_set(&self, ttl: Duration) -> BoxFuture<'_, Result<bool>>;

    /// [`expire`](Self::expire) only where the keys have none (Redisson's `expireIfNotSet`;
    /// Redis 7.0+).
    ///
    /// # Errors
    ///
    /// As the type's `expire_if_not_set`.
    fn expire_if_not_set(&self, ttl: Duration) -> BoxFuture<'_, Result<bool>>;

    /// [`expire`](Self::expire) only where it makes the expiry later (Redisson's
    /// `expireIfGreater`; Redis 7.0+).
    ///
    /// # Errors
    ///
    /// As the type's `expire_if_greater`.
    fn expire_if_greater(&self, ttl: Duration) -> BoxFuture<'_, Result<bool>>;

    /// [`expire`](Self::expire) only where it makes the expiry earlier (Redisson's
    /// `expireIfLess`; Redis 7.0+).
    ///
    /// # Errors
    ///
    /// As the type's `expire_if_less`.
    fn expire_if_less(&self, ttl: Duration) -> BoxFuture<'_, Result<bool>>;

    /// Sets the object's expiry to an instant (Redisson's `expire(Instant)`, `expireAt`).
    ///
    /// # Errors
    ///
    /// As the type's `expire_at`.
    fn expire_at(&self, at: SystemTime) -> BoxFuture<'_, Result<bool>>;

    /// Removes the object's expiry (Redisson's `clearExpire()`); `true` when it had one.
    ///
    /// # Errors
    ///
    /// As the type's `clear_expire`.
    fn clear_expire(&self) -> BoxFuture<'_, Result<bool>>;

    /// The name's time to live (Redisson's `remainTimeToLive()`).
    ///
    /// # Errors
    ///
    /// As the type's `remaining_ttl`.
    fn remaining_ttl(&self) -> BoxFuture<'_, Result<Ttl>>;

    /// When the name expires (Redisson's `getExpireTime()`).
    ///
    /// # Errors
    ///
    /// As the type's `expire_time`.
    fn expire_time(&self) -> BoxFuture<'_, Result<ExpireTime>>;
}

/// Gives a primitive type the object and expiry methods, documented once, and implements
/// [`Expirable`] for it. `$field` is the struct's field whose type implements [`Object`];
/// `make` makes such a primitive in the examples from a `client`; `keys` says which keys the
/// methods act on and `delete` how the type deletes (the first lines of those docs); `watchdog`
/// adds what a lock held under the watchdog does with an expiry ("" for the others).
macro_rules! object_methods {
    (
        $ty:ident,
        field: $field:ident,
        make: $make:literal,
        keys: $keys:literal,
        delete: $delete:literal,
        watchdog: $watchdog:literal $(,)?
    ) => {
        impl $ty {
            #[doc = $delete]
            /// Returns `true` when something was deleted.
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Not cancel safe in the sense that a dropped call may or may not have deleted
            /// the object.
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            #[doc = concat!("let deleted = ", $make, ".delete().await?;")]
            /// # let _ = deleted;
            /// # Ok(())
            /// # }
            /// ```
            pub async fn delete(&self) -> $crate::error::Result<bool> {
                $crate::object::Object::delete(&self.$field).await
            }

            /// `true` when the object's name exists (Redisson's `isExists()`: `EXISTS` of the
            /// name alone).
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            pub async fn is_exists(&self) -> $crate::error::Result<bool> {
                $crate::object::is_exists(&self.$field).await
            }

            /// Sets the time to live of the object's keys to `ttl` (Redisson's
            /// `expire(Duration)`): `true` when it was set (on any key).
            ///
            #[doc = $keys]
            ///
            #[doc = $watchdog]
            ///
            /// # Errors
            ///
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a `ttl` under 1 ms
            /// or over 2^62 ms (nothing sent); [`Error::Redis`](crate::Error::Redis),
            /// [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// A dropped call may or may not have set the expiry.
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use std::time::Duration;
            ///
            #[doc = concat!("let object = ", $make, ";")]
            /// if object.expire(Duration::from_secs(60)).await? {
            ///     println!("{:?} left", object.remaining_ttl().await?);
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn expire(&self, ttl: std::time::Duration) -> $crate::error::Result<bool> {
                $crate::object::expire(
                    &self.$field,
                    $crate::object::Expiry::In(ttl),
                    $crate::object::When::Always,
                )
                .await
            }

            /// [`expire`](Self::expire) only on keys that have an expiry already (Redisson's
            /// `expireIfSet`, `PEXPIRE .. XX`).
            ///
            /// # Errors
            ///
            /// As [`expire`](Self::expire), and
            /// [`Error::Unsupported`](crate::Error::Unsupported) on a server before Redis 7.0
            /// (it refuses the option; nothing changed).
            ///
            /// # Cancel safety
            ///
            /// As [`expire`](Self::expire).
            pub async fn expire_if_set(
                &self,
                ttl: std::time::Duration,
            ) -> $crate::error::Result<bool> {
                $crate::object::expire(
                    &self.$field,
                    $crate::object::Expiry::In(ttl),
                    $crate::object::When::Set,
                )
                .await
            }

            /// [`expire`](Self::expire) only on keys without an expiry (Redisson's
            /// `expireIfNotSet`, `PEXPIRE .. NX`).
            ///
            /// # Errors
            ///
            /// As [`expire_if_set`](Self::expire_if_set).
            ///
            /// # Cancel safety
            ///
            /// As [`expire`](Self::expire).
            pub async fn expire_if_not_set(
                &self,
                ttl: std::time::Duration,
            ) -> $crate::error::Result<bool> {
                $crate::object::expire(
                    &self.$field,
                    $crate::object::Expiry::In(ttl),
                    $crate::object::When::NotSet,
                )
                .await
            }

            /// [`expire`](Self::expire) only where it makes the expiry later (Redisson's
            /// `expireIfGreater`, `PEXPIRE .. GT`; a key without expiry counts as never
            /// expiring, so it is left alone).
            ///
            /// # Errors
            ///
            /// As [`expire_if_set`](Self::expire_if_set).
            ///
            /// # Cancel safety
            ///
            /// As [`expire`](Self::expire).
            pub async fn expire_if_greater(
                &self,
                ttl: std::time::Duration,
            ) -> $crate::error::Result<bool> {
                $crate::object::expire(
                    &self.$field,
                    $crate::object::Expiry::In(ttl),
                    $crate::object::When::Greater,
                )
                .await
            }

            /// [`expire`](Self::expire) only where it makes the expiry earlier (Redisson's
            /// `expireIfLess`, `PEXPIRE .. LT`; a key without expiry counts as never
            /// expiring, so it gets one).
            ///
            /// # Errors
            ///
            /// As [`expire_if_set`](Self::expire_if_set).
            ///
            /// # Cancel safety
            ///
            /// As [`expire`](Self::expire).
            pub async fn expire_if_less(
                &self,
                ttl: std::time::Duration,
            ) -> $crate::error::Result<bool> {
                $crate::object::expire(
                    &self.$field,
                    $crate::object::Expiry::In(ttl),
                    $crate::object::When::Less,
                )
                .await
            }

            /// Sets the expiry of the object's keys to the instant `at` (Redisson's
            /// `expire(Instant)` / `expireAt`, `PEXPIREAT`): `true` when it was set. An instant
            /// in the past deletes the keys, as Redis does.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an instant before
            /// 1970 or after 2^62 ms from it; otherwise as [`expire`](Self::expire).
            ///
            /// # Cancel safety
            ///
            /// As [`expire`](Self::expire).
            pub async fn expire_at(
                &self,
                at: std::time::SystemTime,
            ) -> $crate::error::Result<bool> {
                $crate::object::expire(
                    &self.$field,
                    $crate::object::Expiry::At(at),
                    $crate::object::When::Always,
                )
                .await
            }

            /// Removes the expiry of the object's keys (Redisson's `clearExpire()`, `PERSIST`):
            /// `true` when any had one.
            ///
            #[doc = $keys]
            ///
            #[doc = $watchdog]
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// A dropped call may or may not have removed the expiry.
            pub async fn clear_expire(&self) -> $crate::error::Result<bool> {
                $crate::object::clear_expire(&self.$field).await
            }

            /// The time to live of the object's name (`PTTL`, Redisson's
            /// `remainTimeToLive()`).
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            ///
            /// # Examples
            ///
            /// ```rust,no_run
            /// # #[tokio::main(flavor = "current_thread")]
            /// # async fn main() -> Result<(), redisson_sync::Error> {
            /// # let client = redisson_sync::Client::open("redis://127.0.0.1:6379").unwrap();
            /// use redisson_sync::Ttl;
            #[doc = concat!("if let Ttl::Remaining(left) = ", $make, ".remaining_ttl().await? {")]
            ///     println!("{left:?} left");
            /// }
            /// # Ok(())
            /// # }
            /// ```
            pub async fn remaining_ttl(&self) -> $crate::error::Result<$crate::options::Ttl> {
                $crate::object::remaining_ttl(&self.$field).await
            }

            /// When the object's name expires (`PEXPIRETIME`, Redisson's `getExpireTime()`; on
            /// a server before Redis 7.0, now plus `PTTL` by this host's clock).
            ///
            /// # Errors
            ///
            /// [`Error::Redis`](crate::Error::Redis), [`Error::Timeout`](crate::Error::Timeout),
            /// [`Error::Shutdown`](crate::Error::Shutdown).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe (read only).
            pub async fn expire_time(&self) -> $crate::error::Result<$crate::object::ExpireTime> {
                $crate::object::expire_time(&self.$field).await
            }
        }

        impl $crate::object::sealed::Sealed for $ty {}

        impl $crate::object::Expirable for $ty {
            fn name(&self) -> &str {
                &$crate::object::Object::keys(&self.$field)[0]
            }

            fn delete(&self) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.delete())
            }

            fn is_exists(
                &self,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.is_exists())
            }

            fn expire(
                &self,
                ttl: std::time::Duration,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.expire(ttl))
            }

            fn expire_if_set(
                &self,
                ttl: std::time::Duration,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.expire_if_set(ttl))
            }

            fn expire_if_not_set(
                &self,
                ttl: std::time::Duration,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.expire_if_not_set(ttl))
            }

            fn expire_if_greater(
                &self,
                ttl: std::time::Duration,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.expire_if_greater(ttl))
            }

            fn expire_if_less(
                &self,
                ttl: std::time::Duration,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.expire_if_less(ttl))
            }

            fn expire_at(
                &self,
                at: std::time::SystemTime,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.expire_at(at))
            }

            fn clear_expire(
                &self,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<bool>> {
                Box::pin(self.clear_expire())
            }

            fn remaining_ttl(
                &self,
            ) -> futures_util::future::BoxFuture<'_, $crate::error::Result<$crate::options::Ttl>>
            {
                Box::pin(self.remaining_ttl())
            }

            fn expire_time(
                &self,
            ) -> futures_util::future::BoxFuture<
                '_,
                $crate::error::Result<$crate::object::ExpireTime>,
            > {
                Box::pin(self.expire_time())
            }
        }
    };
}
pub(crate) use object_methods;
