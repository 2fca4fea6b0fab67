//! Fuzz tests of the parsers that read what a user hands over, without a server (issue 29,
//! item 8): `PermitId::parse`, the configuration (the builder, `Config` from JSON, the
//! topology URLs and their credentials, the modes' names) and the name mapping. Each property
//! runs a short, fixed-seed count in CI (`common::fuzz`); `REDISSON_FUZZ_CASES` and
//! `REDISSON_FUZZ_SEED` choose a longer or another run. The plain `#[test]`s are the inputs
//! the properties found, kept as regressions.

mod common;

use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use redisson_sync::config::{NameMapper, PubSubMode, SyncReplicas};
use redisson_sync::{BuildError, Client, Config, Error, PermitId};

/// A permit id's text, near or far from the 32 hex characters it must be: exact ones in
/// either case, wrong lengths, one character swapped for any other, any text.
fn permit_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-fA-F]{32}",
        "[0-9a-fA-F]{0,40}",
        ("[0-9a-f]{32}", any::<Index>(), any::<char>()).prop_map(|(hex, at, c)| {
            let at = at.index(hex.len());
            format!("{}{c}{}", &hex[..at], &hex[at + 1..])
        }),
        "[0-9a-f]{30}[^0-9a-fA-F]{1,2}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(common::fuzz::config(2_000))]

    /// Exactly 32 ASCII hex digits parse, to the id that prints as their lower case and
    /// parses back to itself; anything else is `InvalidArgument` saying what an id is.
    #[test]
    fn permit_ids_parse_exactly_32_hex_digits(text in permit_text()) {
        let valid = text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit());
        match PermitId::parse(&text) {
            Ok(id) => {
                prop_assert!(valid, "{text:?} parsed");
                prop_assert_eq!(id.to_string(), text.to_ascii_lowercase());
                prop_assert_eq!(PermitId::parse(&id.to_string()).unwrap(), id);
                prop_assert_eq!(text.parse::<PermitId>().unwrap(), id);
                let bytes: String = id.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
                prop_assert_eq!(bytes, id.to_string());
            }
            Err(Error::InvalidArgument(message)) => {
                prop_assert!(!valid, "{text:?} was refused: {message}");
                prop_assert!(message.contains("32 hex characters"), "{message}");
                prop_assert!(message.len() <= 1_000, "a long message: {message}");
            }
            Err(other) => prop_assert!(false, "{text:?}: {other:?}"),
        }
    }

    /// Any 16 bytes print as 32 lowercase hex digits that parse back to the same bytes.
    #[test]
    fn permit_ids_round_trip(bytes in any::<[u8; 16]>()) {
        let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
        let id = PermitId::parse(&hex).unwrap();
        prop_assert_eq!(id.as_bytes(), &bytes);
        prop_assert_eq!(id.to_string(), hex.to_ascii_lowercase());
    }

    /// The modes' names parse exactly and print back; anything else is an error naming the
    /// choices.
    #[test]
    fn mode_names_parse_exactly(text in prop_oneof![
        Just("auto".to_owned()), Just("on".to_owned()), Just("off".to_owned()),
        Just("classic".to_owned()), Just("sharded".to_owned()), Just("both".to_owned()),
        "[a-zA-Z ]{0,8}", any::<String>(),
    ]) {
        match text.parse::<SyncReplicas>() {
            Ok(mode) => prop_assert_eq!(mode.as_str(), text.as_str()),
            Err(e) => {
                prop_assert!(!["auto", "on", "off"].contains(&text.as_str()));
                prop_assert!(e.contains("auto, on or off"), "{e}");
            }
        }
        match text.parse::<PubSubMode>() {
            Ok(mode) => prop_assert_eq!(mode.as_str(), text.as_str()),
            Err(e) => {
                prop_assert!(!["auto", "classic", "sharded", "both"].contains(&text.as_str()));
                prop_assert!(e.contains("auto, classic, sharded or both"), "{e}");
            }
        }
    }

    /// A prefix is put before every name, byte for byte, and an empty one maps nothing.
    #[test]
    fn a_prefix_is_put_before_any_name(prefix in any::<String>(), name in any::<String>()) {
        prop_assert_eq!(NameMapper::prefix(prefix.as_str()).map(&name), format!("{prefix}{name}"));
        prop_assert_eq!(&NameMapper::prefix("").map(&name), &name);
        prop_assert_eq!(&NameMapper::identity().map(&name), &name);
    }
}

/// The password every generated URL carries: no other part of a generated URL contains
/// `%` twice in a row, so finding it in a message means the password leaked.
const PASSWORD: &str = "pw%%Secret";

/// A URL as a user might write one, right or wrong: a scheme (Redis's, others, none), an
/// optional `user:password@` (always with [`PASSWORD`] when present), a host (names,
/// addresses, brackets, any text), a port (numbers in and out of range, text), a database and
/// query parameters; or any text at all.
fn url() -> impl Strategy<Value = String> {
    let scheme = prop_oneof![
        Just("redis://"),
        Just("rediss://"),
        Just("valkey://"),
        Just("unix://"),
        Just("redis+unix://"),
        Just("http://"),
        Just(""),
    ];
    let auth = prop_oneof![
        Just(String::new()),
        "[a-z]{0,6}".prop_map(|user| format!("{user}:{PASSWORD}@")),
        Just(format!(":{PASSWORD}@")),
    ];
    let host = prop_oneof![
        Just("127.0.0.1".to_owned()),
        Just("localhost".to_owned()),
        Just("[::1]".to_owned()),
        Just(String::new()),
        "[a-z0-9.-]{1,20}",
        "[^/@%]{0,12}",
    ];
    let port = prop_oneof![
        Just(String::new()),
        (0u32..70_000).prop_map(|p| format!(":{p}")),
        "[^/@%]{0,6}".prop_map(|p| format!(":{p}")),
    ];
    let path = prop_oneof![
        Just(String::new()),
        (0u32..20).prop_map(|db| format!("/{db}")),
        "[^@%]{0,10}".prop_map(|p| format!("/{p}")),
    ];
    let query = prop_oneof![
        Just(String::new()),
        Just("?protocol=resp3".to_owned()),
        Just("?protocol=resp9".to_owned()),
        "[^@%]{0,12}".prop_map(|q| format!("?{q}")),
    ];
    prop_oneof![
        4 => (scheme, auth, host, port, path, query)
            .prop_map(|(s, a, h, p, d, q)| format!("{s}{a}{h}{p}{d}{q}")),
        1 => "[^%]{0,30}",
    ]
}

/// A duration from nothing to far past what Redis takes (2^62 ms).
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_nanos(1)),
        Just(Duration::from_micros(999)),
        (1u64..100_000).prop_map(Duration::from_millis),
        Just(Duration::from_millis(1 << 62)),
        Just(Duration::from_millis((1 << 62) + 1)),
        Just(Duration::MAX),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// A whole configuration from the generators above: a single server, a cluster or Sentinels
/// (or both, which is wrong), and every setting from valid to out of range.
fn config() -> impl Strategy<Value = Config> {
    let topology = (
        url(),
        prop::collection::vec(url(), 0..3),
        prop::collection::vec(url(), 0..3),
        prop_oneof![Just(String::new()), "[a-z]{1,8}"],
    );
    let sizes = (0usize..4, 0usize..4);
    let durations = prop::collection::vec(duration(), 7);
    let rest = (
        any::<bool>(),
        prop_oneof![Just(None), Just(Some(PASSWORD.to_owned()))],
        prop_oneof![Just(String::new()), any::<String>()],
        prop_oneof![Just(None), Just(Some("no/such/ca.pem".to_owned()))],
    );
    (topology, sizes, durations, rest).prop_map(
        |((url, cluster, sentinel, master), (pool, batch), d, (sync, password, prefix, ca))| {
            let mut c = Config::from_url(url);
            c.cluster_nodes = cluster;
            c.sentinel_nodes = sentinel;
            c.sentinel_master = master;
            c.pool_size = pool;
            c.watchdog_batch_size = batch;
            c.watchdog_timeout = d[0];
            c.recheck_interval = d[1];
            c.fair_wait_timeout = d[2];
            c.command_timeout = d[3];
            c.connect_timeout = d[4];
            c.ping_interval = d[5];
            c.replica_sync_timeout = d[6];
            c.sync_replicas = if sync {
                SyncReplicas::On
            } else {
                SyncReplicas::Auto
            };
            c.password = password;
            c.key_prefix = prefix;
            c.tls_ca_cert = ca;
            c
        },
    )
}

/// Builds a client from `config` inside a runtime of its own (building does no I/O) and
/// shuts it down again; the error when it was refused.
fn build(config: Config) -> Result<(), BuildError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = rt.enter();
    let client = Client::builder().config(config).build()?;
    rt.block_on(client.shutdown());
    Ok(())
}

/// What must hold of any configuration: building it does not panic, a refusal is an error a
/// person can read (`invalid configuration: ...` naming the setting, or `invalid Redis URL`),
/// and neither the `Debug` of the configuration nor the error shows the password.
fn check_config(config: Config) -> Result<(), TestCaseError> {
    let shown = format!("{config:?}");
    prop_assert!(
        !shown.contains(PASSWORD),
        "Debug shows the password: {shown}"
    );
    match build(config) {
        Ok(()) => {}
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                message.starts_with("invalid configuration: ")
                    || message.starts_with("invalid Redis URL: "),
                "{message}"
            );
            prop_assert!(
                !message.contains(PASSWORD),
                "the error shows the password: {message}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::fuzz::config(300))]

    /// Any configuration builds or is refused with a clear error, and no password shows.
    #[test]
    fn any_configuration_builds_or_is_refused_clearly(config in config()) {
        check_config(config)?;
    }
}

/// JSON values for `Config`'s fields: the right types, the wrong ones, out of range.
#[cfg(feature = "serde")]
fn json_config() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let keys = prop_oneof![
        Just("url"),
        Just("cluster_nodes"),
        Just("sentinel_nodes"),
        Just("sentinel_master"),
        Just("password"),
        Just("pubsub"),
        Just("pool_size"),
        Just("watchdog_timeout"),
        Just("recheck_interval"),
        Just("command_timeout"),
        Just("key_prefix"),
        Just("sync_replicas"),
        Just("replica_sync_timeout"),
        Just("unknown_field"),
    ];
    let value = prop_oneof![
        url().prop_map(Value::from),
        prop::collection::vec(url(), 0..3).prop_map(|v| json!(v)),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![Just("auto"), Just("on"), Just("both"), Just("sometimes")]
            .prop_map(Value::from),
        Just(json!({"nested": [1, 2]})),
    ];
    prop::collection::btree_map(keys, value, 0..8)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

#[cfg(feature = "serde")]
proptest! {
    #![proptest_config(common::fuzz::config(300))]

    /// Any JSON object is a `Config` or a serde error (never a panic), and a `Config` read
    /// from JSON builds or is refused clearly, as one made in code.
    #[test]
    fn any_json_is_a_configuration_or_an_error(value in json_config()) {
        if let Ok(config) = serde_json::from_value::<Config>(value) {
            check_config(config)?;
        }
    }
}

/// Regression (found by `any_configuration_builds_or_is_refused_clearly`): a cluster seed
/// or Sentinel URL that is not a Redis URL was refused with the URL as given, password and
/// all; the error shows it with the password as `***`.
#[test]
fn a_refused_node_url_does_not_show_its_password() {
    for (mut config, what) in [
        (
            Config::from_cluster([format!("redis://u:{PASSWORD}@host:port")]),
            "cluster node",
        ),
        (
            Config::from_sentinel([format!("redis://:{PASSWORD}@[::1:99999")], "m"),
            "sentinel node",
        ),
    ] {
        config.url = format!("redis://u:{PASSWORD}@127.0.0.1:1");
        let message = build(config).unwrap_err().to_string();
        assert!(message.contains(what), "{message}");
        assert!(message.contains("***"), "{message}");
        assert!(!message.contains(PASSWORD), "{message}");
    }
}

/// Regression: a permit id of a megabyte is refused with its length, not echoed whole.
#[test]
fn a_huge_permit_id_is_refused_by_its_length() {
    let huge = "ab".repeat(1 << 19);
    let Err(Error::InvalidArgument(message)) = PermitId::parse(&huge) else {
        panic!("a 1 MiB id parsed");
    };
    assert!(message.contains("1048576 characters"), "{message}");
    assert!(message.len() <= 200, "{} bytes", message.len());
}
