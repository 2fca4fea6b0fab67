//! A `Config` read from any JSON, then built: a serde error, a `BuildError` naming the
//! setting, or a client (shut down again), never a panic.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use redisson_sync::{Client, Config};

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
});

fuzz_target!(|data: &[u8]| {
    let Ok(config) = serde_json::from_slice::<Config>(data) else {
        return;
    };
    let _ = format!("{config:?}");
    let _entered = RUNTIME.enter();
    match Client::builder().config(config).build() {
        Ok(client) => RUNTIME.block_on(client.shutdown()),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.starts_with("invalid configuration: ")
                    || message.starts_with("invalid Redis URL: "),
                "{message}"
            );
        }
    }
});
