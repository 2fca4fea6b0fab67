//! What the server can do for this crate, probed once (at [`ClientBuilder::connect`], or at the
//! first [`Client::capabilities`]) and acted on in one place.
//!
//! Every probe is a harmless command without keys, so an ACL user limited to its own keys
//! can run them: `PUBSUB SHARDNUMSUB` (sharded pub/sub), `CLIENT INFO`, a `CLIENT KILL ID ..
//! ADDR .. SKIPME yes` that matches no connection, `PEXPIRETIME` without arguments (an unknown
//! command is told from a known one by the error), `WAIT 0 0`, and the script `return 1` sent
//! as the crate sends every script (`EVALSHA`, `SCRIPT LOAD` on `NOSCRIPT`). Nothing reads a
//! version: Valkey reports itself as Redis 7.2.4, and a packager may leave Lua out of any
//! build. On a cluster the probes go to the master of slot 0 (a cluster runs one build).
//!
//! What follows from them (see [`Capabilities`]): no scripts (no Lua, or `EVALSHA` / `SCRIPT
//! LOAD` refused by ACL) fails the connect with [`Error::Unsupported`] naming the commands;
//! no `CLIENT INFO` is a warning (a request of unknown outcome is then cut off by `CLIENT ID`,
//! or left to its lease, RELIABILITY.md); no `WAIT` turns replica sync off (as a refused
//! `WAIT` does); the pub/sub flavour of a cluster follows sharded pub/sub ([`sharded_pubsub`]
//! is the one probe of it). At any later moment, a script the server forgot (`NOSCRIPT`: a
//! `SCRIPT FLUSH`, a restart, a failover to a node that never loaded it) is loaded and sent
//! again ([`again_on_noscript`]), and a script the server refuses to run ("non local key",
//! an ACL rule) is [`Error::ScriptRefused`] ([`script_refused`]), never retried.
//!
//! [`ClientBuilder::connect`]: crate::ClientBuilder::connect
//! [`Client::capabilities`]: crate::Client::capabilities

use std::fmt;

use redis::{RedisError, Value};

use crate::error::{Error, Result};
use crate::future::BoxFuture;

/// Whether the server offers one feature to this client, as probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Supported {
    /// The server ran the probe.
    Yes,
    /// The server does not know the command (an older server, or a build without it), or
    /// refused it as it would refuse the crate's use of it.
    No,
    /// The server knows the command but this user may not run it (ACL `NOPERM`).
    Denied,
}

impl Supported {
    /// `true` for [`Supported::Yes`].
    pub fn is_yes(self) -> bool {
        self == Self::Yes
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Yes => "yes",
            Self::No => "no",
            Self::Denied => "denied",
        }
    }
}

impl fmt::Display for Supported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the server (on a cluster: the master of slot 0) offers this client: from
/// [`Client::capabilities`](crate::Client::capabilities), probed at
/// [`ClientBuilder::connect`](crate::ClientBuilder::connect) (or at that first call) and
/// logged there at debug level. See docs/servers.md for what each build offers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// The server's name and version as it reports them in `INFO server` (`valkey 9.1.2`,
    /// `redis 7.0.15`), for logs; `unknown` when `INFO` is not allowed. Nothing depends on it.
    pub server: String,
    /// Sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`; probed with `PUBSUB SHARDNUMSUB`). Without
    /// it a cluster's [`PubSubMode::Auto`](crate::config::PubSubMode::Auto) publishes and subscribes
    /// the classic way, and `Sharded` and `Both` fail at connect.
    pub sharded_pubsub: Supported,
    /// `CLIENT INFO`: how the crate learns a connection's id and address, to cut off a request
    /// of unknown outcome. Without it: `CLIENT ID` (the id alone) or nothing, with a warning
    /// at connect (RELIABILITY.md).
    pub client_info: Supported,
    /// `CLIENT KILL ID .. ADDR ..`: the cut-off itself (probed with filters that match no
    /// connection).
    pub client_kill: Supported,
    /// `PEXPIRETIME` (Redis and Valkey 7+; probed as a known or unknown command). The crate
    /// reads TTLs with `PTTL` and does not need it; reported for the inspection tools.
    pub pexpiretime: Supported,
    /// `WAIT`: replica sync ([`Config::sync_replicas`](crate::Config::sync_replicas)). Without
    /// it replica sync is off for the client, with a warning.
    pub wait: Supported,
    /// Lua scripts as the crate runs them: `EVALSHA`, and `SCRIPT LOAD` when the server does
    /// not know a script. [`Supported::No`]: the server has no Lua (e.g. Valkey 9.1 built
    /// without its Lua module); [`Supported::Denied`]: the user may not run scripts. Either
    /// way [`connect`](crate::ClientBuilder::connect) fails: every lock operation is a
    /// script.
    pub scripts: Supported,
}

impl Capabilities {
    /// `true` when the server has Lua (whether or not this user may use it).
    pub fn lua(&self) -> bool {
        self.scripts != Supported::No
    }

    /// `true` when this user may run the crate's scripts.
    pub fn scripts_allowed(&self) -> bool {
        self.scripts.is_yes()
    }
}

impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: scripts {}, sharded pub/sub {}, CLIENT INFO {}, CLIENT KILL {}, PEXPIRETIME {}, WAIT {}",
            self.server,
            self.scripts,
            self.sharded_pubsub,
            self.client_info,
            self.client_kill,
            self.pexpiretime,
            self.wait
        )
    }
}

/// The commands every lock operation needs, named in [`Error::Unsupported`].
pub(crate) const SCRIPT_COMMANDS: &str = "EVALSHA and SCRIPT LOAD";

/// Sends one probe command (no keys) and says what its reply means.
pub(super) type Send<'a> = dyn Fn(redis::Cmd) -> BoxFuture<'a, Result<Value>> + Sync + 'a;

/// Runs every probe through `send` (the seam's call path).
pub(super) async fn probe(
    send: &Send<'_>,
    script: impl std::future::Future<Output = Result<Value>>,
) -> Result<Capabilities> {
    let server = match send(redis::cmd("INFO").arg("server").clone()).await {
        Ok(info) => server_name(&redis::from_redis_value::<String>(info).unwrap_or_default()),
        Err(e) if e.is_transient() => return Err(e),
        Err(_) => "unknown".to_owned(),
    };
    let sharded_pubsub = classify(send(redis::cmd("PUBSUB").arg("SHARDNUMSUB").clone()).await)?;
    let client_info = classify(send(redis::cmd("CLIENT").arg("INFO").clone()).await)?;
    // Filters that match no connection: an id no server hands out and an address no client has.
    let mut kill = redis::cmd("CLIENT");
    kill.arg("KILL")
        .arg("ID")
        .arg(i64::MAX)
        .arg("ADDR")
        .arg("0.0.0.0:0")
        .arg("SKIPME")
        .arg("yes");
    let client_kill = classify(send(kill).await)?;
    // Without arguments: an arity error from a known command, "unknown command" otherwise.
    let pexpiretime = match send(redis::cmd("PEXPIRETIME")).await {
        Err(Error::Redis(e)) if arity_error(&e) => Supported::Yes,
        other => classify(other)?,
    };
    let wait = classify(send(redis::cmd("WAIT").arg(0).arg(0).clone()).await)?;
    let scripts = classify(script.await)?;
    Ok(Capabilities {
        server,
        sharded_pubsub,
        client_info,
        client_kill,
        pexpiretime,
        wait,
        scripts,
    })
}

/// The one probe of sharded pub/sub, for the cluster's pub/sub flavour (Redisson's
/// `checkShardingSupport`) and for [`Capabilities::sharded_pubsub`].
pub(super) async fn sharded_pubsub<C: redis::aio::ConnectionLike + std::marker::Send>(
    conn: &mut C,
) -> Result<Supported> {
    let probe: redis::RedisResult<Value> = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .query_async(conn)
        .await;
    classify(probe.map_err(Error::Redis))
}

/// What a probe's reply says: ran, unknown, or denied; an I/O failure or timeout is an error
/// (the probe says nothing then).
fn classify(reply: Result<Value>) -> Result<Supported> {
    match reply {
        Ok(_) => Ok(Supported::Yes),
        Err(Error::Redis(e)) if e.code() == Some("NOPERM") => Ok(Supported::Denied),
        // The probe script, refused as the seam reports it.
        Err(Error::ScriptRefused { message, .. }) if message.starts_with("NOPERM") => {
            Ok(Supported::Denied)
        }
        Err(e) if e.is_transient() || e.is_shutdown() => Err(e),
        Err(_) => Ok(Supported::No),
    }
}

fn arity_error(e: &RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("wrong number of arguments")
}

/// `<server_name> <version>` from `INFO server`: Valkey names itself (`server_name:valkey`,
/// `valkey_version:`), Redis does not.
fn server_name(info: &str) -> String {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    match (field("server_name:"), field("valkey_version:")) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => format!("{name} {}", field("redis_version:").unwrap_or_default()),
        _ => match field("redis_version:") {
            Some(version) => format!("redis {version}"),
            None => "unknown".to_owned(),
        },
    }
}

/// Acts on what was probed, once, at connect: the error that makes the connect fail, or
/// warnings.
pub(super) fn check(caps: &Capabilities, user: Option<&str>) -> Result<()> {
    let user = user.map_or_else(|| "this user".to_owned(), |u| format!("user {u:?}"));
    match caps.scripts {
        Supported::Yes => {}
        Supported::No => {
            return Err(Error::Unsupported(format!(
                "the server ({}) cannot run Lua scripts (EVALSHA is an unknown command: a build \
                 without Lua, such as Valkey 9.1 without its Lua module); every lock operation \
                 of this crate is a script, sent with {SCRIPT_COMMANDS}: use a server build \
                 with Lua (docs/servers.md)",
                caps.server
            )));
        }
        Supported::Denied => {
            return Err(Error::Unsupported(format!(
                "{user} may not run Lua scripts on the server ({}): an ACL rule refuses \
                 {SCRIPT_COMMANDS}, which every lock operation of this crate uses; grant \
                 +evalsha +script|load (and the other commands docs/servers.md lists)",
                caps.server
            )));
        }
    }
    if !caps.client_info.is_yes() {
        tracing::warn!(
            server = %caps.server,
            client_info = %caps.client_info,
            "the server does not answer CLIENT INFO to this client: a request of unknown outcome \
             (a timeout, a dropped connection) is cut off by CLIENT ID where the server allows \
             it, else it is left to its lease and may still take effect later (RELIABILITY.md)"
        );
    } else if !caps.client_kill.is_yes() {
        tracing::warn!(
            server = %caps.server,
            client_kill = %caps.client_kill,
            "the server does not let this client run CLIENT KILL: a request of unknown outcome \
             cannot be cut off and may still take effect later (RELIABILITY.md)"
        );
    }
    Ok(())
}

/// `true` for a `NOSCRIPT` reply: the server did not know the script, which did not run.
pub(super) fn is_noscript(e: &Error) -> bool {
    matches!(e, Error::Redis(e) if super::script::is_noscript_reply(e))
}

/// How many more times a script is sent after the server answered `NOSCRIPT` again, each time
/// loaded and run in one transaction ([`load_and_run`]), where no `SCRIPT FLUSH` can come
/// between the two: once is enough; the bound is for a server that loses scripts otherwise.
pub(super) const NOSCRIPT_RESENDS: usize = 2;

/// `result`, or, while it is `NOSCRIPT` (the server forgot the script between the load that
/// followed the first `NOSCRIPT` and the run: a `SCRIPT FLUSH` at that moment; the script did
/// not run, so sending it again cannot run it twice), the result of `atomic`: the script
/// loaded and run in one `MULTI` ([`load_and_run`]), at most [`NOSCRIPT_RESENDS`] times.
pub(super) async fn again_on_noscript<'a, T>(
    op: &'static str,
    mut result: Result<T>,
    atomic: impl Fn() -> BoxFuture<'a, Result<T>>,
) -> Result<T> {
    for _ in 0..NOSCRIPT_RESENDS {
        match &result {
            Err(e) if is_noscript(e) => {
                tracing::debug!(op, error = %e, "the server forgot the script again after loading it; loading and running it in one transaction");
                result = atomic().await;
            }
            _ => break,
        }
    }
    result
}

/// Runs `invocation` as `MULTI`, `SCRIPT LOAD <its code>`, `EVALSHA ..`, `EXEC` on `conn`: the
/// server runs the three at once, so the script is known when it runs. The script's reply,
/// or its error.
pub(super) async fn load_and_run<C: redis::aio::ConnectionLike + std::marker::Send>(
    conn: &mut C,
    invocation: &super::ScriptInvocation<'_>,
) -> redis::RedisResult<Value> {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .add_command(invocation.script().load_cmd())
        .ignore()
        .add_command(invocation.eval_cmd().into_owned());
    let (value,): (Value,) = pipe.query_async(conn).await?;
    match value {
        Value::ServerError(e) => Err(e.into()),
        value => Ok(value),
    }
}

/// `e`, or a replica's refusal of a write as `READONLY`: before 7.0 a script whose first write a
/// replica refused is reported as `ERR Error running script (..): .. -READONLY You can't write
/// against a read only replica.` (7.0+ replies `READONLY` itself). A replica refuses every
/// write, so the script changed nothing: it is as safe to send again as a plain `READONLY`.
pub(super) fn as_readonly(e: RedisError) -> RedisError {
    let wrapped = e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.contains("-READONLY ") && d.contains("read only replica"));
    if wrapped {
        let detail = e.detail().map(str::to_owned);
        redis::make_extension_error("READONLY".to_owned(), detail)
    } else {
        e
    }
}

/// The server's refusal to run a script at all, as [`Error::ScriptRefused`]: a script touching
/// a key of another slot or node ("non local key", as some serverless endpoints and proxies
/// say), an undeclared key (Dragonfly), a command scripts may not call, an ACL refusal.
/// `None` for any other error.
pub(super) fn script_refused(e: &Error, op: &'static str, key: &str) -> Option<Error> {
    let Error::Redis(redis) = e else {
        return None;
    };
    // As the server said it: "NOPERM No permissions to access a key".
    let text = match (redis.code(), redis.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => redis.to_string(),
    };
    let lower = text.to_ascii_lowercase();
    let refused = redis.code() == Some("NOPERM")
        || [
            "non local key",
            "script attempted to access",
            "undeclared key",
            "not allowed from script",
            "unknown command",
            "unknown redis command",
        ]
        .iter()
        .any(|pattern| lower.contains(pattern));
    refused.then(|| Error::ScriptRefused {
        operation: op,
        key: key.to_owned(),
        message: text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(code: &str, detail: &str) -> Error {
        let reply = format!("-{code} {detail}\r\n");
        match redis::parse_redis_value(reply.as_bytes()).unwrap() {
            Value::ServerError(e) => Error::Redis(RedisError::from(e)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn replies_are_classified() {
        assert_eq!(classify(Ok(Value::Int(0))).unwrap(), Supported::Yes);
        let denied = server_error(
            "NOPERM",
            "User u has no permissions to run the 'wait' command",
        );
        assert_eq!(classify(Err(denied)).unwrap(), Supported::Denied);
        let unknown = server_error(
            "ERR",
            "unknown command 'PEXPIRETIME', with args beginning with:",
        );
        assert_eq!(classify(Err(unknown)).unwrap(), Supported::No);
        let io = Error::Redis(RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(classify(Err(io)).is_err());
    }

    #[test]
    fn a_script_refused_by_a_replica_before_7_is_readonly() {
        let Error::Redis(wrapped) = server_error(
            "ERR",
            "Error running script (call to f_0123): @user_script:3: @user_script: 3: -READONLY You can't write against a read only replica.",
        ) else {
            unreachable!()
        };
        assert_eq!(as_readonly(wrapped).code(), Some("READONLY"));
        let Error::Redis(other) = server_error("ERR", "Error running script: oops") else {
            unreachable!()
        };
        assert_eq!(as_readonly(other).code(), Some("ERR"));
    }

    #[test]
    fn the_server_names_itself() {
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        assert_eq!(server_name(valkey), "valkey 9.1.2");
        assert_eq!(server_name("redis_version:6.2.14\r\n"), "redis 6.2.14");
        assert_eq!(server_name(""), "unknown");
    }

    #[test]
    fn refusals_of_a_script_are_named_and_others_are_not() {
        for (code, detail) in [
            (
                "ERR",
                "Script attempted to access a non local key in a cluster node script: x",
            ),
            ("NOPERM", "No permissions to access a key"),
            ("ERR", "script tried accessing undeclared key, key: x"),
            ("ERR", "This Redis command is not allowed from script"),
        ] {
            let e = server_error(code, detail);
            let refused = script_refused(&e, "acquire", "k").expect(detail);
            assert!(
                matches!(refused, Error::ScriptRefused { operation: "acquire", ref key, .. } if key == "k")
            );
            assert!(refused.to_string().contains("refused to run"), "{refused}");
        }
        let busy = server_error("BUSY", "Redis is busy running a script");
        assert!(script_refused(&busy, "acquire", "k").is_none());
        assert!(script_refused(&Error::Shutdown, "acquire", "k").is_none());
    }

    #[test]
    fn scripts_missing_or_denied_fail_the_connect_naming_the_commands() {
        let mut caps = Capabilities {
            server: "valkey 9.1.2".into(),
            sharded_pubsub: Supported::Yes,
            client_info: Supported::Yes,
            client_kill: Supported::Yes,
            pexpiretime: Supported::Yes,
            wait: Supported::Yes,
            scripts: Supported::Yes,
        };
        assert!(check(&caps, None).is_ok());
        caps.client_info = Supported::No;
        assert!(check(&caps, None).is_ok(), "a warning only");
        for scripts in [Supported::No, Supported::Denied] {
            caps.scripts = scripts;
            let e = check(&caps, Some("app")).unwrap_err();
            assert!(matches!(e, Error::Unsupported(_)));
            let text = e.to_string();
            assert!(text.contains("EVALSHA and SCRIPT LOAD"), "{text}");
            assert!(!caps.scripts_allowed());
        }
        assert!(caps.lua());
        caps.scripts = Supported::No;
        assert!(!caps.lua());
    }

    #[tokio::test]
    async fn noscript_is_sent_again_a_bounded_number_of_times() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let noscript = || server_error("NOSCRIPT", "No matching script. Please use EVAL.");
        let sends = AtomicUsize::new(0);
        let again = || -> BoxFuture<'_, Result<()>> {
            sends.fetch_add(1, Ordering::Relaxed);
            Box::pin(async { Err(noscript()) })
        };
        let result = again_on_noscript("acquire", Err(noscript()), again).await;
        assert!(result.as_ref().is_err_and(is_noscript));
        assert_eq!(sends.load(Ordering::Relaxed), NOSCRIPT_RESENDS);
        let ok = again_on_noscript("acquire", Ok(7), || -> BoxFuture<'_, Result<i32>> {
            unreachable!()
        })
        .await;
        assert_eq!(ok.unwrap(), 7);
    }
}
