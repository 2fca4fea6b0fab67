//! Model-based test: random sequences of lock operations by several
//! owners on two clients, run against a real Redis and against a model of Redisson's hash
//! semantics (one holder field `<client id>:<owner>` with a hold count, force unlock deletes),
//! compared step by step. Seeds are fixed and printed, so a failure replays exactly.

mod common;

use std::time::Duration;

use common::{RedisServer, client_with, exists, unique_name};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::AsyncCommands;
use redisson_sync::{Client, Error, LockGuard, LockOptions, Owner, Ttl};

const OWNERS: u64 = 3;
const STEPS: usize = 250;

/// Who holds the lock and how many times, as Redisson's scripts define it.
#[derive(Debug, Default)]
struct Model {
    holder: Option<(usize, u64)>,
    count: u64,
}

struct Held {
    client: usize,
    owner: u64,
    guard: LockGuard,
}

async fn run(seed: u64) {
    let server = RedisServer::start();
    let mut raw = server.conn().await;
    let clients: Vec<Client> = (0..2)
        .map(|_| {
            client_with(
                &server,
                Duration::from_millis(300),
                Duration::from_millis(20),
            )
        })
        .collect();
    let name = unique_name("model");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::default();
    let mut guards: Vec<Held> = Vec::new();

    for step in 0..STEPS {
        let c = rng.gen_range(0..clients.len());
        let o = rng.gen_range(1..=OWNERS);
        let lock = clients[c].lock(&name);
        let ctx = format!("seed {seed} step {step} client {c} owner {o} model {model:?}");
        match rng.gen_range(0..100) {
            // try_lock: owner 2 relies on the watchdog, the others on a long explicit lease (one
            // owner never mixes both: a partial release re-applies the releasing hold's lease)
            0..=34 => {
                let mut opts = LockOptions::new().owner(Owner::new(o));
                if o != 2 {
                    opts = opts.lease(Duration::from_secs(60));
                }
                let got = lock
                    .try_lock_with_options(Duration::ZERO, &opts)
                    .await
                    .unwrap();
                let free = model.holder.is_none() || model.holder == Some((c, o));
                assert_eq!(got.is_some(), free, "try_lock: {ctx}");
                if let Some(guard) = got {
                    model.holder = Some((c, o));
                    model.count += 1;
                    guards.push(Held {
                        client: c,
                        owner: o,
                        guard,
                    });
                }
            }
            // unlock one of the guards
            35..=64 if !guards.is_empty() => {
                let i = rng.gen_range(0..guards.len());
                let Held {
                    client,
                    owner,
                    guard,
                } = guards.swap_remove(i);
                let lost = guard.is_lost();
                let result = guard.unlock().await;
                let ctx = format!("{ctx} unlocking guard of client {client} owner {owner}");
                if lost {
                    assert!(
                        matches!(result, Err(Error::LeaseLost { .. })),
                        "{ctx}: {result:?}"
                    );
                } else if model.holder == Some((client, owner)) {
                    assert!(result.is_ok(), "{ctx}: {result:?}");
                    model.count -= 1;
                    if model.count == 0 {
                        model.holder = None;
                    }
                } else {
                    assert!(
                        matches!(result, Err(Error::NotHeld { .. })),
                        "{ctx}: {result:?}"
                    );
                }
            }
            65..=69 => {
                let released = lock.force_unlock().await.unwrap();
                assert_eq!(released, model.holder.is_some(), "force_unlock: {ctx}");
                model = Model::default();
            }
            70..=79 => {
                let n = lock.hold_count(Owner::new(o)).await.unwrap();
                let expected = if model.holder == Some((c, o)) {
                    model.count
                } else {
                    0
                };
                assert_eq!(n, expected, "hold_count: {ctx}");
                let held = lock.is_held_by(Owner::new(o)).await.unwrap();
                assert_eq!(held, expected > 0, "is_held_by: {ctx}");
            }
            80..=89 => {
                assert_eq!(
                    lock.is_locked().await.unwrap(),
                    model.holder.is_some(),
                    "is_locked: {ctx}"
                );
                let ttl = lock.remaining_ttl().await.unwrap();
                match model.holder {
                    None => assert_eq!(ttl, Ttl::Absent, "{ctx}"),
                    Some(_) => assert!(matches!(ttl, Ttl::Remaining(_)), "{ctx}: {ttl:?}"),
                }
            }
            // let the watchdog tick now and then (renewals and lost detection interleave)
            _ => tokio::time::sleep(Duration::from_millis(rng.gen_range(0..120))).await,
        }
        // The raw hash always matches the model.
        let hash: Vec<(String, u64)> = raw.hgetall(&name).await.unwrap();
        let expected: Vec<(String, u64)> = model
            .holder
            .map(|(c, o)| (format!("{}:{o}", clients[c].id()), model.count))
            .into_iter()
            .collect();
        assert_eq!(hash, expected, "hash after: {ctx}");
    }

    // Releasing every remaining guard leaves nothing behind.
    for held in guards {
        let _ = held.guard.unlock().await;
    }
    let _ = clients[0].lock(&name).force_unlock().await;
    for client in &clients {
        client.shutdown().await;
    }
    assert!(!exists(&mut raw, &name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operation_sequences_match_the_model() {
    for seed in [1, 2, 42] {
        run(seed).await;
    }
}
