//! The crate's Lua scripts as the seam sends them: [`Script`] (the code and its SHA1) and
//! [`ScriptInvocation`] (one call's keys and arguments), with redis-rs's builder API
//! (`prepare_invoke()`, `.key(..)`, `.arg(..)`).
//!
//! Why not redis-rs's own: its invocation keeps every key and argument in a vector of its own
//! (an allocation each, freed one by one), copies them into the `EVALSHA` command on every
//! send, and keeps the script's code to itself, so that loading it in a transaction needed a
//! recording connection. Here the code is at hand for `SCRIPT LOAD`, and a call is written
//! once: a script's calls have the same number of keys (but for batches), so once one call was
//! built, the next ones write `EVALSHA <sha1> <that number>` and then their keys and arguments
//! straight into the command that is sent. A call that differs (another number of keys, or an
//! argument before a key) falls back to one buffer of its keys and arguments, the command
//! built from it at send, as every call was before: that took about 1,100 instructions and
//! two allocations more per lock pair (callgrind). The SHA1 is redis-rs's, so the scripts Redis
//! caches are the same.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};

use redis::{Arg, Cmd, RedisWrite, ToRedisArgs};

/// A Lua script: its code and the SHA1 `EVALSHA` names it by.
#[derive(Debug)]
pub(crate) struct Script {
    code: &'static str,
    hash: String,
    /// How many keys the last call built had ([`UNKNOWN`] before the first): the next call
    /// builds its command as its keys and arguments come, on the guess that it has as many.
    keys: AtomicU32,
}

/// No call of the script was built yet.
const UNKNOWN: u32 = u32::MAX;

impl Script {
    pub(crate) fn new(code: &'static str) -> Self {
        Self {
            code,
            hash: redis::Script::new(code).get_hash().to_owned(),
            keys: AtomicU32::new(UNKNOWN),
        }
    }

    /// A call of this script, with no keys or arguments yet.
    pub(crate) fn prepare_invoke(&self) -> ScriptInvocation<'_> {
        let built = match self.keys.load(Ordering::Relaxed) {
            UNKNOWN => Built::buffered(),
            guess => {
                // Room for a lock's keys, holder field and numbers without growing.
                let mut cmd = Cmd::with_capacity(3 + INLINE, INLINE_BYTES);
                cmd.arg("EVALSHA").arg(&self.hash).arg(guess);
                Built::Direct {
                    cmd,
                    keys: 0,
                    guess: guess as usize,
                    args: false,
                }
            }
        };
        ScriptInvocation {
            script: self,
            built,
        }
    }

    /// `SCRIPT LOAD <code>`.
    pub(crate) fn load_cmd(&self) -> Cmd {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.code);
        cmd
    }
}

/// How many keys and arguments an invocation keeps without an allocation of their own: every
/// script of the crate but the batches (renewals, permit ids) takes fewer.
const INLINE: usize = 8;

/// The bytes an invocation's buffer starts with: a lock's name, channel, holder field and
/// numbers fit (a buffer grown by reallocations costs more than the call saves).
const INLINE_BYTES: usize = 256;

/// Where each key or argument ends in an invocation's buffer, and whether it is a key.
#[derive(Default)]
struct Parts {
    inline: [(u32, bool); INLINE],
    len: usize,
    more: Vec<(u32, bool)>,
}

impl Parts {
    fn push(&mut self, part: (u32, bool)) {
        if self.len < INLINE {
            self.inline[self.len] = part;
            self.len += 1;
        } else {
            self.more.push(part);
        }
    }

    fn iter(&self) -> impl Iterator<Item = (u32, bool)> + Clone + '_ {
        self.inline[..self.len]
            .iter()
            .chain(self.more.iter())
            .copied()
    }
}

/// One call of a [`Script`]: its keys (`KEYS[i]`) and arguments (`ARGV[i]`), each in the order
/// added, in any interleaving.
pub(crate) struct ScriptInvocation<'a> {
    script: &'a Script,
    built: Built,
}

/// An invocation's keys and arguments so far.
enum Built {
    /// `EVALSHA <hash> <guess>`, then the keys and arguments as they come: the command itself,
    /// sent as it is when they came keys first and `guess` keys. Any other order or count
    /// turns it into [`Built::Buffered`].
    Direct {
        cmd: Cmd,
        /// Keys written.
        keys: usize,
        guess: usize,
        /// An argument was written (a key now would come after it).
        args: bool,
    },
    /// The bytes of every key and argument, one after another, and where each ends; the
    /// command is built at send.
    Buffered { data: Vec<u8>, parts: Parts },
}

impl Built {
    fn buffered() -> Self {
        Self::Buffered {
            data: Vec::with_capacity(INLINE_BYTES),
            parts: Parts::default(),
        }
    }

    /// Every key and argument so far, in the order added, and whether each is a key (read in
    /// place: the buffered path allocates nothing more than it did).
    fn parts(&self) -> impl Iterator<Item = (&[u8], bool)> + Clone + '_ {
        let (direct, buffered) = match self {
            Self::Direct { cmd, keys, .. } => (Some((cmd, *keys)), None),
            Self::Buffered { data, parts } => (None, Some((data, parts))),
        };
        let direct = direct.into_iter().flat_map(|(cmd, keys)| {
            cmd.args_iter()
                .skip(3)
                .enumerate()
                .map(move |(i, arg)| (simple(arg), i < keys))
        });
        let buffered = buffered.into_iter().flat_map(|(data, parts)| {
            let mut start = 0;
            parts.iter().map(move |(end, key)| {
                let part = &data[start..end as usize];
                start = end as usize;
                (part, key)
            })
        });
        direct.chain(buffered)
    }
}

/// The bytes of an argument of a command built here (never a cursor).
fn simple(arg: Arg<&[u8]>) -> &[u8] {
    match arg {
        Arg::Simple(bytes) => bytes,
        _ => &[],
    }
}

impl std::fmt::Debug for ScriptInvocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys and arguments may carry secrets (a token lock's value): only their count.
        let keys = self.built.parts().filter(|(_, key)| *key).count();
        f.debug_struct("ScriptInvocation")
            .field("hash", &self.script.hash)
            .field("keys", &keys)
            .field("args", &(self.built.parts().count() - keys))
            .finish()
    }
}

/// Writes what a `ToRedisArgs` value serialises into a buffered invocation, as keys or as
/// arguments.
struct Writer<'w> {
    data: &'w mut Vec<u8>,
    parts: &'w mut Parts,
    key: bool,
}

impl Writer<'_> {
    fn end(&mut self) {
        let end = u32::try_from(self.data.len()).expect("a script call under 4 GiB");
        self.parts.push((end, self.key));
    }
}

impl RedisWrite for Writer<'_> {
    fn write_arg(&mut self, arg: &[u8]) {
        self.data.extend_from_slice(arg);
        self.end();
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        PartWriter(self)
    }
}

/// One key or argument written through `std::io::Write`; it ends when dropped.
struct PartWriter<'p, 'w>(&'p mut Writer<'w>);

impl std::io::Write for PartWriter<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for PartWriter<'_, '_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A script the server does not know (`NOSCRIPT`): it ran nothing.
pub(super) fn is_noscript_reply(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

impl<'a> ScriptInvocation<'a> {
    /// Adds an argument: `ARGV[i]` in the script.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        match &mut self.built {
            Built::Direct {
                cmd,
                keys,
                guess,
                args,
            } if keys == guess => {
                arg.write_redis_args(cmd);
                *args = true;
                return self;
            }
            // An argument before the last key: the order differs from the guess.
            Built::Direct { .. } => self.buffer(),
            Built::Buffered { .. } => {}
        }
        self.write(arg, false);
        self
    }

    /// Adds a key: `KEYS[i]` in the script.
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        match &mut self.built {
            Built::Direct {
                cmd,
                keys,
                guess,
                args,
            } if !*args => {
                let before = cmd.args_iter().len();
                key.write_redis_args(cmd);
                *keys += cmd.args_iter().len() - before;
                // More keys than guessed: the header's count is wrong.
                if *keys > *guess {
                    self.buffer();
                }
                return self;
            }
            // A key after an argument.
            Built::Direct { .. } => self.buffer(),
            Built::Buffered { .. } => {}
        }
        self.write(key, true);
        self
    }

    /// Writes `value` into the buffer (the invocation is buffered).
    fn write<T: ToRedisArgs>(&mut self, value: T, key: bool) {
        if let Built::Buffered { data, parts } = &mut self.built {
            value.write_redis_args(&mut Writer { data, parts, key });
        }
    }

    /// Turns a direct invocation into a buffered one, its keys and arguments kept.
    fn buffer(&mut self) {
        if let Built::Direct { .. } = self.built {
            let (mut data, mut parts) = (Vec::with_capacity(INLINE_BYTES), Parts::default());
            for (part, key) in self.built.parts() {
                data.extend_from_slice(part);
                Writer {
                    data: &mut data,
                    parts: &mut parts,
                    key,
                }
                .end();
            }
            self.built = Built::Buffered { data, parts };
        }
    }

    /// The script called.
    pub(crate) fn script(&self) -> &'a Script {
        self.script
    }

    /// Sends the call on `conn` as `EVALSHA`; a script the server does not know (`NOSCRIPT`:
    /// it ran nothing) is loaded and sent once more, as redis-rs's `invoke_async` does.
    pub(crate) async fn invoke<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> redis::RedisResult<redis::Value> {
        match self.eval_cmd().query_async(conn).await {
            Err(e) if is_noscript_reply(&e) => self.load_and_invoke(conn).await,
            other => other,
        }
    }

    /// After a `NOSCRIPT` reply (the script ran nothing): loads the script, then sends the
    /// call once more.
    pub(crate) async fn load_and_invoke<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> redis::RedisResult<redis::Value> {
        self.script.load_cmd().query_async::<()>(conn).await?;
        self.eval_cmd().query_async(conn).await
    }

    /// `EVALSHA <hash> <number of keys> <keys> <arguments>`: the command built as the keys
    /// and arguments came when they came as guessed, otherwise built now (and the number of
    /// keys is the script's next guess).
    pub(crate) fn eval_cmd(&self) -> Cow<'_, Cmd> {
        if let Built::Direct {
            cmd, keys, guess, ..
        } = &self.built
            && keys == guess
        {
            return Cow::Borrowed(cmd);
        }
        let parts = self.built.parts();
        let (mut keys, mut count, mut bytes) = (0, 0, 0);
        for (part, key) in parts.clone() {
            keys += usize::from(key);
            count += 1;
            bytes += part.len();
        }
        self.script
            .keys
            .store(u32::try_from(keys).unwrap_or(UNKNOWN), Ordering::Relaxed);
        let mut cmd = Cmd::with_capacity(
            3 + count,
            "EVALSHA".len() + self.script.hash.len() + 4 + bytes,
        );
        cmd.arg("EVALSHA").arg(&self.script.hash).arg(keys);
        for wanted in [true, false] {
            for (part, key) in parts.clone() {
                if key == wanted {
                    cmd.arg(part);
                }
            }
        }
        Cow::Owned(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(cmd: &Cmd) -> String {
        String::from_utf8_lossy(&cmd.get_packed_command()).into_owned()
    }

    /// The same command redis-rs's own invocation sends, keys and arguments interleaved or not,
    /// beyond the inline parts too, with numbers, empty values and byte strings.
    #[test]
    fn the_command_is_redis_rs_own() {
        static CODE: &str = "return {KEYS[1], ARGV[1]}";
        let ours = Script::new(CODE);
        let theirs = redis::Script::new(CODE);
        let mut a = ours.prepare_invoke();
        let mut b = theirs.prepare_invoke();
        a.arg(30_000u64)
            .key("k1")
            .arg("field")
            .arg(7u32)
            .key("")
            .arg(&b"\x00\xff"[..]);
        b.arg(30_000u64)
            .key("k1")
            .arg("field")
            .arg(7u32)
            .key("")
            .arg(&b"\x00\xff"[..]);
        for i in 0..20 {
            a.key(format!("batch:{i}")).arg(i);
            b.key(format!("batch:{i}")).arg(i);
        }
        let mut pipe = redis::pipe();
        pipe.invoke_script(&b);
        let expected = packed(pipe.cmd_iter().next().unwrap());
        assert_eq!(packed(&a.eval_cmd()), expected);
        assert_eq!(
            a.eval_cmd().get_packed_command(),
            pipe.cmd_iter().next().unwrap().get_packed_command()
        );
        assert_eq!(ours.hash, theirs.get_hash());
        assert_eq!(
            packed(&ours.load_cmd()),
            format!(
                "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n${}\r\n{CODE}\r\n",
                CODE.len()
            )
        );
        assert_eq!(
            format!("{a:?}"),
            format!(
                "ScriptInvocation {{ hash: {:?}, keys: 22, args: 24 }}",
                ours.hash
            )
        );
    }

    /// Once a call was built, the next ones are built as they come, on the guess of as many
    /// keys; every other order or count still sends redis-rs's command, and the guess follows
    /// the last call built.
    #[test]
    fn calls_after_the_first_are_built_as_they_come() {
        static CODE: &str = "return {KEYS[1], KEYS[2], ARGV[1]}";
        type Part = (bool, &'static [u8]);
        let ours = Script::new(CODE);
        let theirs = redis::Script::new(CODE);
        let same = |parts: &[Part], direct: bool| {
            let mut a = ours.prepare_invoke();
            let mut b = theirs.prepare_invoke();
            for &(key, part) in parts {
                if key {
                    a.key(part);
                    b.key(part);
                } else {
                    a.arg(part);
                    b.arg(part);
                }
            }
            let mut pipe = redis::pipe();
            pipe.invoke_script(&b);
            let cmd = a.eval_cmd();
            assert_eq!(
                packed(&cmd),
                packed(pipe.cmd_iter().next().unwrap()),
                "{parts:?}"
            );
            assert_eq!(matches!(cmd, Cow::Borrowed(_)), direct, "{parts:?}");
            let keys = parts.iter().filter(|(key, _)| *key).count();
            assert_eq!(
                format!("{a:?}"),
                format!(
                    "ScriptInvocation {{ hash: {:?}, keys: {keys}, args: {} }}",
                    ours.hash,
                    parts.len() - keys
                )
            );
        };
        let usual: &[Part] = &[(true, b"lock"), (true, b"channel"), (false, b"30000")];
        // The first call is buffered; it teaches the guess of two keys.
        same(usual, false);
        same(usual, true);
        same(
            &[(true, b"a"), (true, b""), (false, b""), (false, b"x")],
            true,
        );
        // An argument before the last key, a key after an argument, a third key, one key only.
        same(&[(true, b"a"), (false, b"1"), (true, b"b")], false);
        same(&[(false, b"1"), (true, b"a"), (true, b"b")], false);
        same(
            &[(true, b"a"), (true, b"b"), (true, b"c"), (false, b"1")],
            false,
        );
        // The guess is three keys now: two are built again.
        same(usual, false);
        same(usual, true);
        same(&[(true, b"only")], false);
        same(&[(true, b"only"), (false, b"1")], true);
    }

    #[test]
    fn no_keys_and_no_arguments() {
        let script = Script::new("return 1");
        let invocation = script.prepare_invoke();
        assert_eq!(
            packed(&invocation.eval_cmd()),
            format!(
                "*3\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n0\r\n",
                script.hash
            )
        );
    }
}
