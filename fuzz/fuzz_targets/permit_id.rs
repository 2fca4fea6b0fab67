//! `PermitId::parse` of any bytes: exactly 32 ASCII hex digits parse, to the id that prints
//! as their lower case; anything else is `InvalidArgument`, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redisson_sync::{Error, PermitId};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let valid = text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit());
    match PermitId::parse(text) {
        Ok(id) => {
            assert!(valid, "{text:?} parsed");
            assert_eq!(id.to_string(), text.to_ascii_lowercase());
        }
        Err(Error::InvalidArgument(message)) => {
            assert!(!valid, "{text:?} refused: {message}");
            assert!(message.len() <= 1_000, "{} bytes", message.len());
        }
        Err(other) => panic!("{text:?}: {other:?}"),
    }
});
