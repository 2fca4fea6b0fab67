//! A fast hasher for the client's small in-process maps (holds, renewals), keyed by lock names
//! and holder fields: the multiply-rotate hash of rustc's `FxHasher`, with a random seed per
//! process so that chosen names cannot collide on purpose; and [`NameField`], the key of the
//! maps of holds, hashed once per hold for all of them.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::{Arc, OnceLock};

const K: u64 = 0x517c_c1b7_2722_0a95;

/// The hasher.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastHasher {
    hash: u64,
}

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        // The last 1 to 7 bytes as one word, read in at most three loads (a `copy_from_slice`
        // of a variable length is a call to `memcpy`).
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let (mut word, mut at) = (0u64, 0);
            if rest.len() >= 4 {
                word = u64::from(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]));
                at = 4;
            }
            if rest.len() - at >= 2 {
                word |= u64::from(u16::from_le_bytes([rest[at], rest[at + 1]])) << (8 * at);
                at += 2;
            }
            if at < rest.len() {
                word |= u64::from(rest[at]) << (8 * at);
            }
            self.add(word);
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the low bits, which pick the bucket, poorly mixed: rotate the
        // well-mixed high bits down (as rustc-hash 2 does).
        self.hash.rotate_left(26)
    }
}

/// Builds [`FastHasher`]s from the process's random seed: every map hashes a key alike, so a
/// hash computed once ([`NameField`]) serves each of them.
#[derive(Clone, Debug)]
pub(crate) struct FastState(u64);

impl Default for FastState {
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        Self(*SEED.get_or_init(|| RandomState::new().hash_one(0x5eed_u64)))
    }
}

impl BuildHasher for FastState {
    type Hasher = FastHasher;

    fn build_hasher(&self) -> FastHasher {
        FastHasher { hash: self.0 }
    }
}

/// A `HashMap` with [`FastState`].
pub(crate) type FastMap<K, V> = HashMap<K, V, FastState>;

/// A lock name and a holder field, the key of the client's maps of holds (its record of them,
/// the watchdog's renewals), with their hash computed once: a hold is looked up in them six
/// times from its acquire to its release, and hashing the two strings each time cost more than
/// the look-ups.
#[derive(Clone, Debug)]
pub(crate) struct NameField {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    hash: u64,
}

impl NameField {
    pub(crate) fn new(name: Arc<str>, field: Arc<str>) -> Self {
        let hash = FastState::default().hash_one((&*name, &*field));
        Self { name, field, hash }
    }

    /// The hash, which [`FastMap`]s of this key use as it is.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }
}

impl PartialEq for NameField {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && same(&self.name, &other.name) && same(&self.field, &other.field)
    }
}

impl Eq for NameField {}

impl std::hash::Hash for NameField {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Whether two shared names are equal, without reading their bytes when they are one (a map's
/// key compared with the key it was built from).
pub(crate) fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_alike() {
        let a = FastState::default();
        assert_eq!(a.hash_one("lock:1"), a.hash_one("lock:1"));
        assert_ne!(a.hash_one("lock:1"), a.hash_one("lock:2"));
        assert_ne!(a.hash_one("abcdefgh"), a.hash_one("abcdefgh\0"));
        assert_eq!(
            FastState::default().hash_one("lock:1"),
            a.hash_one("lock:1"),
            "one seed for the process"
        );
        let mut m: FastMap<String, u32> = FastMap::default();
        m.insert("x".into(), 1);
        assert_eq!(m.get("x"), Some(&1));
    }

    /// Equal names and fields are one key whether or not they share their strings; the name
    /// and the field are not run together (`"ab", "c"` is not `"a", "bc"`).
    #[test]
    fn a_name_field_is_its_two_strings() {
        let a = NameField::new("lock".into(), "client:1".into());
        let b = NameField::new("lock".into(), "client:1".into());
        assert_eq!(a, b);
        assert_eq!(a.hash(), b.hash());
        let mut m: FastMap<NameField, u32> = FastMap::default();
        m.insert(a, 1);
        assert_eq!(m.get(&b), Some(&1));
        assert_ne!(
            NameField::new("ab".into(), "c".into()),
            NameField::new("a".into(), "bc".into())
        );
        assert_ne!(
            NameField::new("ab".into(), "c".into()).hash(),
            NameField::new("a".into(), "bc".into()).hash()
        );
    }

    /// Every length's last partial word is its bytes little-endian, zero-padded: the same
    /// hash as whole-word reads of the bytes padded with zeros.
    #[test]
    fn a_partial_word_is_read_as_zero_padded() {
        let bytes: Vec<u8> = (1..=23).map(|b| b * 11).collect();
        for len in 0..=bytes.len() {
            let mut ours = FastHasher { hash: 7 };
            ours.write(&bytes[..len]);
            let mut expected = FastHasher { hash: 7 };
            for chunk in bytes[..len].chunks(8) {
                let mut word = [0; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                expected.add(u64::from_le_bytes(word));
            }
            assert_eq!(ours.finish(), expected.finish(), "{len} bytes");
        }
    }
}
