//! A fast hasher for the client's small in-process maps (holds, renewals), keyed by lock names
//! and holder fields: the multiply-rotate hash of rustc's `FxHasher`, with a random seed per
//! map so that chosen names cannot collide on purpose.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Arc;

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

/// Builds [`FastHasher`]s from a random seed.
#[derive(Clone, Debug)]
pub(crate) struct FastState(u64);

impl Default for FastState {
    fn default() -> Self {
        Self(RandomState::new().hash_one(0x5eed_u64))
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

/// Whether two shared names are equal, without reading their bytes when they are one (a map's
/// key compared with the key it was built from).
pub(crate) fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_alike_and_the_seed_differs_per_map() {
        let a = FastState::default();
        assert_eq!(a.hash_one("lock:1"), a.hash_one("lock:1"));
        assert_ne!(a.hash_one("lock:1"), a.hash_one("lock:2"));
        assert_ne!(a.hash_one("abcdefgh"), a.hash_one("abcdefgh\0"));
        let mut m: FastMap<String, u32> = FastMap::default();
        m.insert("x".into(), 1);
        assert_eq!(m.get("x"), Some(&1));
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
