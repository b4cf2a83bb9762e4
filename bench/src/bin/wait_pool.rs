//! `WaitPool` wake-up cost against the number of pending waits: `--pending` waits (default
//! 0,100,1000,10000; each a `Next` over a channel that never fires) sit in one pool beside an
//! echo wait; the bench sends the echo `--rounds` messages (default 2 000) one at a time and
//! times each round trip (send, the pool wakes and polls the echo, which answers). Prints the
//! p50 round trip per pending count.
//!
//! `round_trip_cpu_us`: the CPU time of the whole process per round trip (mostly the pool's
//! thread). Then one blocking wake-up of crossbeam's `Select` alone, over as many receivers, as
//! CPU time of the waiting thread (another thread makes one receiver ready `--delay-us`, default
//! 3 000, after it began, so it is asleep by then): `rebuilt` builds the `Select` for each
//! wake-up (what the pool does), `kept` builds it once and only waits on it (what keeping it
//! between wake-ups would leave); `select_build`: building it alone (what keeping it saves).
//!
//! `cargo run --release -p tenure-bench --bin wait_pool -- --pending 0,100,1000,10000`

use std::time::{Duration, Instant};

use clap::Parser;
use crossbeam_channel::{unbounded, Receiver, Select, Sender};
use tenure::{Error, Interest, Next, Pollable, WaitPool};
use tenure_bench::{parse_args, quantile};

#[derive(Parser)]
struct Args {
    /// Pending waits beside the echo, one run per count (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [0, 100, 1000, 10_000])]
    pending: Vec<usize>,
    /// Round trips timed per count.
    #[arg(long, default_value_t = 1000)]
    rounds: usize,
    /// How long after the waiter began a receiver is made ready, µs.
    #[arg(long, default_value_t = 3000)]
    delay_us: u64,
}

/// Answers every message on `rx` on `tx`; never ends.
struct Echo {
    rx: Receiver<u64>,
    tx: Sender<u64>,
}

impl Pollable for Echo {
    type Output = ();

    fn poll(&mut self) -> Result<Option<()>, Error> {
        while let Ok(v) = self.rx.try_recv() {
            let _ = self.tx.send(v);
        }
        Ok(None)
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        interest.recv(&self.rx);
    }
}

fn p50_us(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    quantile(samples, 0.5).as_secs_f64() * 1e6
}

/// The p50 round trip through the pool and the mean CPU time of the process per round trip.
fn pool_round_trip(pending: usize, rounds: usize) -> (f64, f64) {
    let pool = WaitPool::new("bench-wait-pool").expect("start the pool");
    let mut keep = Vec::with_capacity(pending);
    for _ in 0..pending {
        let (tx, rx) = unbounded::<()>();
        keep.push(tx);
        pool.submit(Next::new(rx, None, "nothing"), |_| {});
    }
    let (to_echo, rx) = unbounded();
    let (tx, from_echo) = unbounded();
    pool.submit(Echo { rx, tx }, |_| {});
    while pool.pending() < pending + 1 {
        std::thread::yield_now();
    }
    // The pool polls each new wait once as it takes it: let it take them all first.
    to_echo.send(0).expect("echo");
    from_echo.recv().expect("echo");
    let mut samples = Vec::with_capacity(rounds);
    let used = cpu(false);
    for i in 0..rounds as u64 {
        let t = Instant::now();
        to_echo.send(i).expect("echo");
        from_echo.recv().expect("echo");
        samples.push(t.elapsed());
    }
    let cpu_us = (cpu(false) - used).as_secs_f64() * 1e6 / rounds as f64;
    drop(keep);
    (p50_us(&mut samples), cpu_us)
}

fn build(rxs: &[Receiver<u64>]) -> Select<'_> {
    let mut sel = Select::new();
    for r in rxs {
        sel.recv(r);
    }
    sel
}

/// CPU time used so far by this thread (`thread`) or the whole process.
fn cpu(thread: bool) -> Duration {
    let clock = if thread {
        libc::CLOCK_THREAD_CPUTIME_ID
    } else {
        libc::CLOCK_PROCESS_CPUTIME_ID
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// This thread's CPU time for one blocking wake-up of a `Select` over `pending` idle
/// receivers and one that another thread makes ready `delay` after it was asked (so the
/// `Select` is asleep by then): built anew for each wake-up, or built once and kept.
fn select_only(pending: usize, rounds: usize, rebuild: bool, delay: Duration) -> f64 {
    let mut keep = Vec::with_capacity(pending);
    let mut rxs = Vec::with_capacity(pending + 1);
    for _ in 0..pending {
        let (tx, rx) = unbounded::<u64>();
        keep.push(tx);
        rxs.push(rx);
    }
    let (tx, rx) = unbounded::<u64>();
    rxs.push(rx);
    let (go, asked) = unbounded::<u64>();
    let pinger = std::thread::spawn(move || {
        while let Ok(i) = asked.recv() {
            std::thread::sleep(delay);
            let _ = tx.send(i);
        }
    });
    let mut kept = build(&rxs);
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds as u64 {
        go.send(i).expect("ask");
        let t = cpu(true);
        let index = if rebuild {
            build(&rxs).ready()
        } else {
            kept.ready()
        };
        samples.push(cpu(true) - t);
        rxs[index].try_recv().expect("the ready one");
    }
    drop(go);
    pinger.join().expect("pinger");
    p50_us(&mut samples)
}

/// The time to build (and drop) a `Select` over `pending + 1` receivers: what keeping it
/// between wake-ups would save.
fn build_only(pending: usize, rounds: usize) -> f64 {
    let rxs: Vec<_> = (0..=pending).map(|_| unbounded::<u64>().1).collect();
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        drop(std::hint::black_box(build(&rxs)));
        samples.push(t.elapsed());
    }
    p50_us(&mut samples)
}

fn main() {
    let args: Args = parse_args(include_str!("wait_pool.rs"));
    let (pendings, rounds) = (args.pending, args.rounds);
    let delay = Duration::from_micros(args.delay_us);
    for &n in &pendings {
        let (trip, trip_cpu) = pool_round_trip(n, rounds);
        println!(
            "wait_pool pending={n} round_trip_p50_us={trip:.1} round_trip_cpu_us={trip_cpu:.1} \
             select_rebuilt_cpu_p50_us={:.1} select_kept_cpu_p50_us={:.1} \
             select_build_p50_us={:.1}",
            select_only(n, rounds, true, delay),
            select_only(n, rounds, false, delay),
            build_only(n, rounds),
        );
    }
}
