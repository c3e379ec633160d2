//! The running gateway: sockets, worker threads, signals.
//!
//! One worker thread per core, each with its own single-threaded executor and
//! its own `SO_REUSEPORT` sockets, so the hot path shares nothing between
//! cores but lock-free reads of the engine's snapshot and cache. The main
//! thread only waits for signals: SIGHUP reloads config and lists (built here,
//! off the workers, then swapped in whole), SIGUSR1 logs the counters,
//! SIGTERM/SIGINT stop.

pub mod sockets;
pub mod tcp;
pub mod udp;

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use async_signal::{Signal, Signals};
use smol::LocalExecutor;
use smol::stream::StreamExt;

use crate::config::Config;
use crate::policy::Policy;
use crate::query::{Engine, Snapshot};
use crate::stats::{Counters, Totals};

/// Loads lists for `cfg` and logs how each source fared.
pub fn load_policy(cfg: &Config) -> Policy {
    let started = Instant::now();
    let policy = Policy::load(&cfg.lists, cfg.block_mode, cfg.block_ttl);
    for line in policy.summary_lines() {
        log::info!("{line}");
    }
    log::info!("lists loaded in {} ms", started.elapsed().as_millis());
    policy
}

/// Sum of every worker's counters.
fn totals(workers: &[Arc<Counters>]) -> Totals {
    let mut t = Totals::default();
    for w in workers {
        t.add(w);
    }
    t
}

fn log_stats(engine: &Engine, workers: &[Arc<Counters>], started: Instant) {
    let snap = engine.snapshot.load();
    log::info!(
        "stats: uptime={}s {} cache_entries={}/{} blocklist={}",
        started.elapsed().as_secs(),
        totals(workers),
        snap.cache.len(),
        snap.cache.capacity(),
        snap.policy.blocked_len()
    );
    for s in snap.servers() {
        use std::sync::atomic::Ordering::Relaxed;
        let answers = s.answers.load(Relaxed);
        let avg_us = s.latency_us.load(Relaxed).checked_div(answers).unwrap_or(0);
        log::info!(
            "upstream {}: answers={} timeouts={} errors={} mismatched={} avg_latency_us={}",
            s.addr,
            answers,
            s.timeouts.load(Relaxed),
            s.errors.load(Relaxed),
            s.mismatched.load(Relaxed),
            avg_us
        );
    }
}

fn reload(engine: &Engine, path: Option<&PathBuf>) {
    let loaded = match path {
        Some(p) => Config::load(p),
        None => Ok(Config::builtin()),
    };
    let cfg = match loaded {
        Ok(cfg) => cfg,
        Err(e) => {
            log::error!("reload failed, still running the previous config: {e}");
            return;
        }
    };
    for w in &cfg.warnings {
        log::warn!("{w}");
    }
    let old = engine.snapshot.load_full();
    if cfg.listen != old.config.listen || cfg.worker_count() != old.config.worker_count() {
        log::warn!("listen addresses and worker count change only on restart");
    }
    let policy = load_policy(&cfg);
    engine.swap(Snapshot::new(Arc::new(cfg), Arc::new(policy), Some(&old)));
    log::info!("reloaded {}", path.map_or("built-in defaults".into(), |p| p.display().to_string()));
}

/// Runs the gateway until SIGTERM or SIGINT.
pub fn run(cfg: Config, path: Option<PathBuf>) -> Result<(), String> {
    let started = Instant::now();
    for w in &cfg.warnings {
        log::warn!("{w}");
    }
    let workers = cfg.worker_count();
    let mut listeners = Vec::new();
    for addr in &cfg.listen {
        let l = sockets::bind(*addr, workers).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        listeners.push(l);
    }
    // Handlers go in before anyone can know our port, so an early SIGHUP cannot kill us.
    let mut signals = Signals::new([Signal::Hup, Signal::Term, Signal::Int, Signal::Usr1])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    log::info!(
        "upstreams {} (from {})",
        cfg.upstreams.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(", "),
        cfg.upstreams_from
    );
    let policy = load_policy(&cfg);
    let limits =
        Arc::new(tcp::Limits { open: AtomicUsize::new(0), max: cfg.tcp_max_connections, idle: cfg.tcp_idle_timeout });
    let engine = Arc::new(Engine::new(Snapshot::new(Arc::new(cfg), Arc::new(policy), None)));
    let counters: Vec<Arc<Counters>> = (0..workers).map(|_| Arc::new(Counters::default())).collect();
    let (stop_tx, stop_rx) = smol::channel::bounded::<()>(1);
    let mut threads = Vec::new();
    for (w, stats) in counters.iter().enumerate() {
        let udp: Vec<_> = listeners.iter_mut().filter_map(|l| l.udp.pop()).collect();
        let tcp: Vec<_> = listeners.iter_mut().filter_map(|l| l.tcp.pop()).collect();
        let (engine, stats, limits, stop) = (engine.clone(), stats.clone(), limits.clone(), stop_rx.clone());
        let thread = std::thread::Builder::new()
            .name(format!("hydradns-w{w}"))
            .spawn(move || {
                let ex = Rc::new(LocalExecutor::new());
                let slots = Rc::new(udp::TaskSlots::default());
                for sock in udp {
                    ex.spawn(udp::serve(sock, engine.clone(), stats.clone(), ex.clone(), slots.clone())).detach();
                }
                for l in tcp {
                    ex.spawn(tcp::accept_loop(l, engine.clone(), stats.clone(), ex.clone(), limits.clone())).detach();
                }
                smol::block_on(ex.run(stop.recv())).ok();
            })
            .map_err(|e| format!("cannot start worker: {e}"))?;
        threads.push(thread);
    }
    for l in &listeners {
        log::info!("listening on {} (udp, tcp)", l.addr);
    }
    log::info!("ready with {workers} workers");
    let path = path.as_ref();
    smol::block_on(async {
        while let Some(sig) = signals.next().await {
            match sig {
                Ok(Signal::Hup) => reload(&engine, path),
                Ok(Signal::Usr1) => log_stats(&engine, &counters, started),
                Ok(_) => break,
                Err(e) => log::warn!("signal error: {e}"),
            }
        }
    });
    log::info!("stopping");
    drop(stop_tx);
    for t in threads {
        let _ = t.join();
    }
    log_stats(&engine, &counters, started);
    Ok(())
}
