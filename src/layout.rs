//! Every Redisson name the crate writes: keys, channels, holder fields.
//!
//! Every key and channel name this crate sends to Redis is built here, from the rules of
//! `docs/LAYOUT.md` §1.2 (hash tags) and §1.3 (identities), so a primitive's names sit beside
//! each other and follow one rule. The layout itself (which keys each primitive writes, what its
//! scripts do, which messages it publishes) is specified in `docs/LAYOUT.md`; each script under
//! `lua/` names the Redisson method it mirrors.

use std::fmt::Write as _;

/// Redisson's `RedissonObject.prefixName(prefix, name)`.
///
/// `prefix:{name}`, or `prefix:name` when `name` already contains `{` (the test is literally
/// "contains `{`", not "has a well-formed hash tag"). Either way the result hashes to the same
/// cluster slot as `name`.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Redisson's `RedissonObject.suffixName(name, suffix)`: `{name}:suffix`, or `name:suffix` when
/// `name` already contains `{`.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The channel a reentrant lock publishes its unlock message on:
/// `redisson_lock__channel:{N}` (`RedissonLock.getChannelName`).
pub(crate) fn lock_channel(name: &str) -> String {
    prefix_name("redisson_lock__channel", name)
}

/// The fenced lock's token counter, a string without TTL: `redisson_lock_token:{N}`
/// (`RedissonFencedLock`, docs/LAYOUT.md §6.2).
pub(crate) fn fenced_token(name: &str) -> String {
    prefix_name("redisson_lock_token", name)
}

/// The fair lock's waiter queue, a list of holder fields: `redisson_lock_queue:{N}`.
pub(crate) fn fair_queue(name: &str) -> String {
    prefix_name("redisson_lock_queue", name)
}

/// The fair lock's waiter deadlines, a sorted set of holder fields scored by epoch ms:
/// `redisson_lock_timeout:{N}`.
pub(crate) fn fair_timeouts(name: &str) -> String {
    prefix_name("redisson_lock_timeout", name)
}

/// The wake-up channel of one fair-lock waiter: `redisson_lock__channel:{N}:<field>`
/// (`RedissonFairLock` subscribes to `getChannelName() + ":" + getLockName(threadId)`).
pub(crate) fn fair_waiter_channel(name: &str, field: &str) -> String {
    format!("{}:{field}", lock_channel(name))
}

/// The channel of a read-write lock, shared by both halves: `redisson_rwlock:{N}`.
pub(crate) fn rwlock_channel(name: &str) -> String {
    prefix_name("redisson_rwlock", name)
}

/// The hash field of a write holder: `<client uuid>:<owner id>:write`
/// (`RedissonWriteLock.getLockName`).
pub(crate) fn write_field(client_id: &str, owner_id: u64) -> String {
    let mut field = holder_field(client_id, owner_id);
    field.push_str(":write");
    field
}

/// The prefix of one reader's timeout marker keys, `timeoutPrefix(F)` of §5.1:
/// `{N}:F:rwlock_timeout` (`N:F:rwlock_timeout` when `N` contains `{`). Its k-th outstanding
/// read hold has the key `<prefix>:k`.
pub(crate) fn rwlock_timeout_prefix(name: &str, field: &str) -> String {
    suffix_name(name, &format!("{field}:rwlock_timeout"))
}

/// `keyPrefix` of §5.1, from which the scripts build any reader's marker keys
/// (`keyPrefix:G:rwlock_timeout:k`): `{N}`, or `N` when `N` contains `{`.
pub(crate) fn rwlock_key_prefix(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// The channel of a semaphore, on which permit-increasing writes publish:
/// `redisson_sc:{N}` (`RedissonSemaphore.getChannelName`; the permit-expirable semaphore uses
/// the same one, docs/LAYOUT.md §6.4, §6.5).
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// The grant marker of one semaphore acquisition (this crate's addition, docs/LAYOUT.md §12):
/// `{N}:redisson_sync:grant:<request id>`, set by the acquire script on a grant, deleted by the
/// release of those permits, and otherwise expiring by itself. It tells a client whose reply
/// was lost whether its acquire ran.
pub(crate) fn semaphore_grant_marker(name: &str, request_id: &str) -> String {
    suffix_name(name, &format!("redisson_sync:grant:{request_id}"))
}

/// The permit-expirable semaphore's acquired permits, a sorted set of raw 16-byte permit ids
/// scored by expiry: `{N}:timeout` (`suffixName(N, "timeout")`, §6.5).
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffix_name(name, "timeout")
}

/// The channel of a count-down latch: `redisson_countdownlatch__channel__{N}`, always with
/// braces, even when `N` contains `{` (`RedissonCountDownLatch.getChannelName`, §6.6).
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// The lock hash field of one holder: `<client uuid>:<owner id>` (`RedissonBaseLock.getLockName`).
pub(crate) fn holder_field(client_id: &str, owner_id: u64) -> String {
    let mut field = String::with_capacity(client_id.len() + 21);
    field.push_str(client_id);
    field.push(':');
    let _ = write!(field, "{owner_id}");
    field
}

/// Formats a client id like Java's `UUID.toString()`: 36 lowercase hex characters with hyphens.
pub(crate) fn client_id(uuid: &uuid::Uuid) -> String {
    uuid.hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_name_matches_redisson_examples() {
        // docs/LAYOUT.md §1.2, N = myLock
        assert_eq!(
            prefix_name("redisson_lock__channel", "myLock"),
            "redisson_lock__channel:{myLock}"
        );
        // N = {user1}:lock keeps its own hash tag
        assert_eq!(
            prefix_name("redisson_lock__channel", "{user1}:lock"),
            "redisson_lock__channel:{user1}:lock"
        );
        // the test is "contains {", not a well-formed tag
        assert_eq!(prefix_name("p", "a{b"), "p:a{b");
        assert_eq!(prefix_name("p", "a}b"), "p:{a}b}");
    }

    #[test]
    fn suffix_name_matches_redisson_examples() {
        assert_eq!(suffix_name("myLock", "timeout"), "{myLock}:timeout");
        assert_eq!(
            suffix_name("{user1}:lock", "timeout"),
            "{user1}:lock:timeout"
        );
    }

    #[test]
    fn lock_channel_follows_the_brace_rule() {
        assert_eq!(lock_channel("myLock"), "redisson_lock__channel:{myLock}");
        assert_eq!(
            lock_channel("{user1}:lock"),
            "redisson_lock__channel:{user1}:lock"
        );
        assert_eq!(
            lock_channel("order:42"),
            "redisson_lock__channel:{order:42}"
        );
    }

    #[test]
    fn fair_lock_names_follow_section_4_1() {
        assert_eq!(fair_queue("myLock"), "redisson_lock_queue:{myLock}");
        assert_eq!(fair_timeouts("myLock"), "redisson_lock_timeout:{myLock}");
        assert_eq!(
            fair_queue("{user1}:lock"),
            "redisson_lock_queue:{user1}:lock"
        );
        assert_eq!(
            fair_waiter_channel("myLock", "u:7"),
            "redisson_lock__channel:{myLock}:u:7"
        );
        assert_eq!(
            fair_waiter_channel("{a}b", "u:7"),
            "redisson_lock__channel:{a}b:u:7"
        );
    }

    #[test]
    fn fenced_token_follows_section_6_2() {
        assert_eq!(fenced_token("myLock"), "redisson_lock_token:{myLock}");
        assert_eq!(fenced_token("{a}:l"), "redisson_lock_token:{a}:l");
    }

    #[test]
    fn rwlock_names_follow_section_5_1() {
        let f = "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81:57";
        assert_eq!(rwlock_channel("myLock"), "redisson_rwlock:{myLock}");
        assert_eq!(
            write_field("1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81", 57),
            format!("{f}:write")
        );
        assert_eq!(
            rwlock_timeout_prefix("myLock", f),
            format!("{{myLock}}:{f}:rwlock_timeout")
        );
        assert_eq!(
            rwlock_timeout_prefix("{test}:abc:key", f),
            format!("{{test}}:abc:key:{f}:rwlock_timeout")
        );
        // keyPrefix is timeoutPrefix with everything from ":" + F cut off.
        for name in ["myLock", "{test}:abc:key", "a{b"] {
            let prefix = rwlock_timeout_prefix(name, f);
            let cut = &prefix[..prefix.find(&format!(":{f}")).unwrap()];
            assert_eq!(rwlock_key_prefix(name), cut, "{name}");
        }
    }

    #[test]
    fn semaphore_and_latch_names_follow_sections_6_4_to_6_6() {
        assert_eq!(semaphore_channel("sem"), "redisson_sc:{sem}");
        assert_eq!(semaphore_channel("{a}:sem"), "redisson_sc:{a}:sem");
        assert_eq!(permit_timeouts("sem"), "{sem}:timeout");
        assert_eq!(
            semaphore_grant_marker("sem", "00ff"),
            "{sem}:redisson_sync:grant:00ff"
        );
        assert_eq!(
            semaphore_grant_marker("{a}:sem", "00ff"),
            "{a}:sem:redisson_sync:grant:00ff"
        );
        assert_eq!(permit_timeouts("{a}:sem"), "{a}:sem:timeout");
        assert_eq!(
            latch_channel("latch"),
            "redisson_countdownlatch__channel__{latch}"
        );
        // always braces, unlike prefix_name
        assert_eq!(
            latch_channel("{a}:l"),
            "redisson_countdownlatch__channel__{{a}:l}"
        );
    }

    #[test]
    fn holder_field_is_uuid_colon_decimal() {
        assert_eq!(
            holder_field("1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81", 57),
            "1f6a3c2e-9b1d-4c7a-8e55-0d2f4b6a7c81:57"
        );
        assert_eq!(holder_field("x", u64::MAX), "x:18446744073709551615");
    }

    #[test]
    fn client_id_is_java_uuid_format() {
        let id = client_id(&uuid::Uuid::new_v4());
        assert_eq!(id.len(), 36);
        for (i, c) in id.chars().enumerate() {
            if [8, 13, 18, 23].contains(&i) {
                assert_eq!(c, '-');
            } else {
                assert!(c.is_ascii_hexdigit() && !c.is_ascii_uppercase(), "{id}");
            }
        }
        assert_eq!(&id[14..15], "4", "version 4: {id}");
        assert!("89ab".contains(&id[19..20]), "RFC 4122 variant: {id}");
    }
}
