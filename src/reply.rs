//! Decoding what Redis answers: the reply shapes every primitive's scripts share, and the
//! error for a reply a script's contract does not allow.

use std::fmt::{self, Write as _};

use redis::Value;

use crate::error::{Error, Result};

/// How much of a reply an error shows: a hostile or broken server may answer with a value of
/// any size, and the error must not grow with it.
pub(crate) const SHOWN_MAX: usize = 200;

/// The error for a reply a script's (or command's) contract does not allow.
pub(crate) fn unexpected(script: &'static str, value: &Value) -> Error {
    Error::UnexpectedReply {
        script,
        detail: shown(value),
    }
}

/// A reply's `Debug` text, cut after [`SHOWN_MAX`] bytes (then ending in `...`): the
/// formatting stops there, so a value of any size costs no more.
pub(crate) fn shown(value: &Value) -> String {
    /// Keeps the first `SHOWN_MAX` bytes, then fails the formatting to end it.
    struct Capped(String);
    impl fmt::Write for Capped {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let room = SHOWN_MAX - self.0.len();
            if s.len() <= room {
                self.0.push_str(s);
                return Ok(());
            }
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.0.push_str(&s[..end]);
            Err(fmt::Error)
        }
    }
    let mut out = Capped(String::new());
    if write!(out, "{value:?}").is_err() {
        out.0.push_str("...");
    }
    out.0
}

/// The text of a string or status reply (a Lua string comes back as a bulk string; `OK` as a
/// status).
pub(crate) fn status(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(s) => Some(s),
        Value::SimpleString(s) => Some(s.as_bytes()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes()),
        Value::Okay => Some(b"OK"),
        _ => None,
    }
}

/// An integer reply of a script or command (nil counts as 0, as Redisson's `LongCodec` does).
pub(crate) fn int_reply(script: &'static str, value: Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(n),
        Value::Nil => Ok(0),
        Value::BulkString(ref s) => std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| unexpected(script, &value)),
        other => Err(unexpected(script, &other)),
    }
}

/// A 0/1 reply as a bool (nil counts as 0).
pub(crate) fn bool_reply(script: &'static str, value: Value) -> Result<bool> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) | Value::Nil => Ok(false),
        other => Err(unexpected(script, &other)),
    }
}

/// The reply of a delete (a force unlock, `DEL`): 1 when something was deleted, else 0.
pub(crate) fn deleted_reply(script: &'static str, value: Value) -> Result<bool> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected(script, &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_reply_is_shown_cut() {
        let huge = Value::BulkString(vec![0xff; 1 << 20]);
        let Error::UnexpectedReply { detail, .. } = unexpected("s.lua", &huge) else {
            unreachable!()
        };
        assert!(detail.len() <= SHOWN_MAX + 3, "{} bytes", detail.len());
        assert!(detail.ends_with("..."), "{detail}");
        let nested = (0..1_000).fold(Value::Nil, |v, _| Value::Array(vec![v]));
        assert!(shown(&nested).len() <= SHOWN_MAX + 3);
        assert_eq!(shown(&Value::Int(7)), format!("{:?}", Value::Int(7)));
    }
}

#[cfg(test)]
pub(crate) mod fuzz {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    use super::*;

    /// The unit properties' runner settings, as `tests/common/fuzz.rs`'s for the test
    /// binaries: `cases` unless `REDISSON_FUZZ_CASES` says, seed 29 unless
    /// `REDISSON_FUZZ_SEED` says, no failure files, shrinking bounded in steps and time.
    pub(crate) fn config(cases: u32) -> Config {
        let env = |var: &str, default: u64| {
            std::env::var(var).map_or(default, |v| v.trim().parse().expect(var))
        };
        Config {
            cases: u32::try_from(env("REDISSON_FUZZ_CASES", u64::from(cases))).unwrap(),
            rng_seed: RngSeed::Fixed(env("REDISSON_FUZZ_SEED", 29)),
            failure_persistence: None,
            max_shrink_iters: 2_000,
            max_shrink_time: 30_000,
            ..Config::default()
        }
    }

    /// Any RESP value with bulk strings from `text`, nested a few levels.
    pub(crate) fn value_with(
        text: impl Strategy<Value = Vec<u8>> + 'static,
    ) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            Just(Value::Okay),
            any::<i64>().prop_map(Value::Int),
            (-3i64..5).prop_map(Value::Int),
            any::<f64>().prop_map(Value::Double),
            any::<bool>().prop_map(Value::Boolean),
            text.prop_map(Value::BulkString),
            "[a-z]{0,8}".prop_map(Value::SimpleString),
        ];
        leaf.prop_recursive(3, 40, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec(inner, 0..4).prop_map(Value::Set),
            ]
        })
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::sample::select(vec!["0", "1", "-1", "+2", "9223372036854775808", "x", ""])
                .prop_map(|s| s.as_bytes().to_vec()),
            any::<i64>().prop_map(|n| n.to_string().into_bytes()),
            prop::collection::vec(any::<u8>(), 0..300),
        ]
    }

    /// `UnexpectedReply` naming the script, with a detail of bounded size.
    fn refused<T>(r: Result<T>) -> bool {
        matches!(r, Err(Error::UnexpectedReply { script: "s.lua", detail })
            if detail.len() <= SHOWN_MAX + 3)
    }

    proptest! {
        #![proptest_config(config(500))]

        /// Any reply to a script is its value or a clear, bounded refusal; never a panic.
        #[test]
        fn any_reply_is_decoded_or_refused_clearly(value in value_with(bytes())) {
            let int = match &value {
                Value::Int(n) => Some(*n),
                Value::Nil => Some(0),
                Value::BulkString(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
                _ => None,
            };
            let flag = match value {
                Value::Int(1) => Some(true),
                Value::Int(0) | Value::Nil => Some(false),
                _ => None,
            };
            match int_reply("s.lua", value.clone()) {
                Ok(n) => prop_assert_eq!(Some(n), int),
                e => prop_assert!(int.is_none() && refused(e)),
            }
            match bool_reply("s.lua", value.clone()) {
                Ok(b) => prop_assert_eq!(Some(b), flag),
                e => prop_assert!(flag.is_none() && refused(e)),
            }
            let deleted = if value == Value::Nil { None } else { flag };
            match deleted_reply("s.lua", value) {
                Ok(b) => prop_assert_eq!(Some(b), deleted),
                e => prop_assert!(deleted.is_none() && refused(e)),
            }
        }
    }
}
