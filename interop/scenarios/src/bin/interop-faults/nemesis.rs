//! The nemesis: a bounded loop that injects one fault at a time, chosen and timed from the
//! seed, heals it, and logs its monotonic start and end.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use interop_scenarios::agent::Agent;
use testkit::history::{Fault, FaultClass};
use testkit::{FaultProxy, Mode, RedisServer};

use crate::rng::Rng;
use crate::{now_ns, reseed};

/// Relative weights of the fault classes, in [`FaultClass::ALL`] order.
const WEIGHTS: [u64; 10] = [3, 2, 2, 1, 2, 2, 2, 3, 1, 1];

/// Everything the nemesis can hit.
pub struct Targets<'a> {
    pub server: &'a Mutex<RedisServer>,
    pub agents: &'a [Agent],
    pub proxies: &'a [FaultProxy],
    /// The `*_try_set` op, name and permits of each semaphore, to set again after a wipe
    /// (as an application would).
    pub semaphores: &'a [(&'static str, String, u32)],
}

/// Runs until `stop` is set (or `deadline`), returns the faults it injected, each healed.
pub fn run(
    targets: &Targets<'_>,
    seed: u64,
    deadline: Instant,
    stop: &AtomicBool,
    log: &mut dyn FnMut(&Fault),
) -> Vec<Fault> {
    let mut rng = Rng::new(seed ^ 0x006e_656d_6573_6973);
    let mut faults = Vec::new();
    // At most one fault every 200 ms: the loop is bounded by the run's length.
    let bound = 1 + deadline
        .saturating_duration_since(Instant::now())
        .as_millis()
        / 200;
    for _ in 0..bound {
        sleep_until_stop(Duration::from_millis(rng.range(200, 800)), stop);
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            break;
        }
        let class = FaultClass::ALL[rng.weighted(&WEIGHTS)];
        match inject(targets, class, &mut rng) {
            Ok(fault) => {
                log(&fault);
                faults.push(fault);
            }
            Err(e) => eprintln!("nemesis: {} failed: {e}", class.name()),
        }
    }
    faults
}

fn sleep_until_stop(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
    }
}

fn inject(targets: &Targets<'_>, class: FaultClass, rng: &mut Rng) -> Result<Fault, String> {
    let ms = |rng: &mut Rng, lo, hi| Duration::from_millis(rng.range(lo, hi));
    let agent = rng.below(targets.agents.len() as u64) as usize;
    let label = targets.agents[agent].label.clone();
    let proxy = &targets.proxies[agent];
    let link = |mode: Mode, d: Duration| -> Fault {
        let start_ns = now_ns();
        proxy.set_mode(mode);
        thread::sleep(d);
        proxy.set_mode(Mode::Pass);
        fault(class, Some(label.clone()), start_ns)
    };
    Ok(match class {
        FaultClass::Pause => {
            let d = ms(rng, 300, 4000);
            let start_ns = now_ns();
            targets.agents[agent].pause()?;
            thread::sleep(d);
            targets.agents[agent].resume()?;
            fault(class, Some(label), start_ns)
        }
        FaultClass::LinkDelay => {
            let mode = Mode::Delay {
                up: ms(rng, 0, 300),
                down: ms(rng, 0, 500),
            };
            link(mode, ms(rng, 500, 3000))
        }
        FaultClass::LinkFreeze => link(Mode::Freeze, ms(rng, 200, 4000)),
        FaultClass::LinkBlackhole => link(Mode::Blackhole, ms(rng, 200, 4000)),
        FaultClass::LinkReset => link(Mode::Reset, ms(rng, 50, 1000)),
        FaultClass::ClientPauseWrite => {
            let d = ms(rng, 200, 2500);
            let start_ns = now_ns();
            command(
                targets,
                &["CLIENT", "PAUSE", &d.as_millis().to_string(), "WRITE"],
            )?;
            thread::sleep(d);
            fault(class, None, start_ns)
        }
        FaultClass::DebugSleep => {
            let d = ms(rng, 200, 1500);
            let start_ns = now_ns();
            let seconds = format!("{:.3}", d.as_secs_f64());
            command(targets, &["DEBUG", "SLEEP", &seconds])?;
            fault(class, None, start_ns)
        }
        FaultClass::KillPubsub => {
            let start_ns = now_ns();
            command(targets, &["CLIENT", "KILL", "TYPE", "pubsub"])?;
            fault(class, None, start_ns)
        }
        FaultClass::RestartAof | FaultClass::RestartWiped => {
            let down = ms(rng, 100, 1500);
            let mut server = targets.server.lock().unwrap();
            let start_ns = now_ns();
            server.stop();
            if class == FaultClass::RestartWiped {
                let aof = server.dir().join("appendonlydir");
                remove_dir(&aof)?;
            }
            thread::sleep(down);
            server.try_restart()?;
            let mut fault = fault(class, None, start_ns);
            if class == FaultClass::RestartWiped {
                drop(server);
                reseed(&targets.agents[0], targets.semaphores)?;
                fault.end_ns = now_ns();
            }
            fault
        }
    })
}

fn fault(class: FaultClass, target: Option<String>, start_ns: u64) -> Fault {
    Fault {
        class,
        target,
        start_ns,
        end_ns: now_ns(),
    }
}

fn remove_dir(dir: &PathBuf) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", dir.display())),
    }
}

/// Sends one command on a fresh direct connection (the server may have restarted).
fn command(targets: &Targets<'_>, args: &[&str]) -> Result<(), String> {
    let mut con = targets.server.lock().unwrap().try_connect()?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<redis::Value>(&mut con)
        .map(drop)
        .map_err(|e| format!("{}: {e}", args.join(" ")))
}
