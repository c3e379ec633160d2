//! The running gateway: sockets, worker threads, signals.
//!
//! One worker per core, each with its own `SO_REUSEPORT` sockets: a receive
//! thread per UDP socket, which answers and forwards its own queries (see
//! udp.rs), and a single-threaded executor for TCP and the UDP jobs that
//! have to wait. The hot path shares nothing between cores but lock-free
//! reads of the engine's snapshot and cache. The main
//! thread waits for signals and serves the control socket: SIGHUP reloads
//! config and lists (built here, off the workers, then swapped in whole),
//! SIGUSR1 logs the counters, SIGTERM/SIGINT stop (the query log is drained
//! and copied to flash first), SIGUSR2 says the network changed (as does a
//! change of `resolv_file`, which it watches): upstreams from that file are
//! re-read and failed downloads retried. It also logs a summary every
//! `stats_interval`.

pub mod sockets;
pub mod tcp;
pub mod udp;

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_signal::{Signal, Signals};
use smol::future::FutureExt;
use smol::stream::StreamExt;
use smol::{LocalExecutor, Timer};

use crate::client::names::{CHECK_EVERY, NameBook};
use crate::client::rules::Learned;
use crate::config::Config;
use crate::control;
use crate::lists::load_policy;
use crate::localnet;
use crate::query::{Engine, Snapshot};
use crate::querylog::QueryLog;
use crate::rebuild::Lists;
use crate::stats::Counters;
use crate::status::Status;
use crate::upstream::resolv::{self, Watch};

/// Logs every counter (SIGUSR1 and at stop), then one line per upstream.
fn log_stats(status: &Status) {
    let r = status.report();
    let mut line = format!("stats: uptime={}s {}", r.uptime_s, r.counters);
    line.push_str(&format!(
        " udp_receive_drops={} cache_entries={}/{} blocklist={} p50_us={} p90_us={} p99_us={}",
        r.udp_receive_drops,
        r.cache_entries,
        r.cache_capacity,
        r.blocklist_names,
        r.latency.p50_us,
        r.latency.p90_us,
        r.latency.p99_us
    ));
    if r.querylog.enabled {
        line.push_str(&format!(
            " log_written={} log_dropped={} log_lost={}",
            r.querylog.written, r.querylog.dropped, r.querylog.lost
        ));
    }
    log::info!("{line}");
    for u in &r.upstreams {
        log::info!(
            "upstream {}: answers={} timeouts={} errors={} mismatched={} avg_latency_us={}",
            u.addr,
            u.answers,
            u.timeouts,
            u.errors,
            u.mismatched,
            u.avg_latency_us
        );
    }
}

/// What woke the main loop.
enum Wake {
    Signal(Option<std::io::Result<Signal>>),
    /// The summary line or the devices' files are due.
    Timer,
    /// `resolv_file` changed, or watching it failed.
    Resolv(std::io::Result<()>),
    /// A reload brought `config client` rules that need the devices' files.
    Learning,
}

/// Runs the gateway until SIGTERM or SIGINT. Started as root, it runs as
/// `user` (see privileges.rs) once its sockets are bound.
pub fn run(mut cfg: Config, path: Option<PathBuf>, user: Option<&str>) -> Result<(), String> {
    let started = Instant::now();
    crate::rebuild::serve_own_networks(&mut cfg);
    for w in &cfg.warnings {
        log::warn!("{w}");
    }
    let workers = cfg.worker_count();
    let mut listeners = Vec::new();
    for addr in &cfg.listen {
        let l = sockets::bind(*addr, workers, &listeners).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        listeners.push(l);
    }
    // Before any thread or parser of ours runs: nothing after this needs root.
    let acting_uid = crate::privileges::settle(&cfg, user)?;
    // Handlers go in before anyone can know our port, so an early SIGHUP cannot kill us.
    let mut signals = Signals::new([Signal::Hup, Signal::Term, Signal::Int, Signal::Usr1, Signal::Usr2])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    // The WAN's resolvers arrive in this file after we start, and a change
    // there is also the sign that downloads which failed may now work.
    let mut resolv = match Watch::new(&cfg.resolv_file) {
        Ok(w) => {
            log::info!("following {} (watching {})", cfg.resolv_file.display(), w.dir().display());
            Some(w)
        }
        Err(e) => {
            log::warn!("cannot watch {}: {e}; its changes apply on reload", cfg.resolv_file.display());
            None
        }
    };
    // A file that cannot be read stops the start; what is in force is
    // logged as the first snapshot takes it (query::snapshot).
    if (cfg.dnssec || cfg.groups.iter().any(|g| g.dnssec && !g.upstreams.is_empty()))
        && let Some(path) = &cfg.trust_anchor_file
    {
        crate::dnssec::TrustAnchors::load(path).map_err(|e| format!("trust_anchor_file: {e}"))?;
    }
    if !cfg.allow_client_given {
        log::info!("serving clients on this machine's networks: {}", cfg.allow_client);
    }
    log::info!(
        "upstreams {} (from {})",
        cfg.upstreams.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(", "),
        cfg.upstreams_from
    );
    if cfg.has_encrypted() {
        log::info!(
            "bootstrap resolvers {} (for the encrypted upstreams' addresses)",
            cfg.bootstrap.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(", ")
        );
        if !crate::upstream::clock::ClockGate::new(cfg.clock_marker()).synced() {
            log::warn!(
                "the clock is not known good yet ({} missing): certificates cannot be checked, so encrypted \
                 upstreams may fail until NTP sets it; meanwhile {} go in plain to the bootstrap resolvers, \
                 and other names to the fallbacks if any",
                cfg.clock_marker().display(),
                if cfg.plain_domains.is_empty() {
                    "no names (plain_domain is empty)".into()
                } else {
                    cfg.plain_domains.join(", ")
                }
            );
        }
    }
    let querylog = if cfg.querylog.enabled {
        match QueryLog::start(&cfg.querylog, NameBook::router(&cfg.leases_file, &cfg.ethers_file)) {
            Ok(q) => {
                log::info!(
                    "query log at {} (flash copy {})",
                    cfg.querylog.path.display(),
                    cfg.querylog.flash_path.display()
                );
                Some(q)
            }
            Err(e) => {
                log::error!("query log not started: {e}");
                None
            }
        }
    } else {
        None
    };
    let control = match &cfg.control_socket {
        p if p.as_os_str().is_empty() => None,
        p => match control::bind(p) {
            Ok(l) => Some((l, p.clone())),
            Err(e) => {
                log::warn!("control socket {}: {e}; `hydradns stats` will not reach this gateway", p.display());
                None
            }
        },
    };
    let metrics = cfg.metrics_listen.and_then(|a| match std::net::TcpListener::bind(a) {
        Ok(l) => {
            // The bound address: with port 0 the kernel picks the port, and
            // the log is where a caller learns it.
            log::info!("metrics at http://{}/metrics", l.local_addr().unwrap_or(a));
            Some(l)
        }
        Err(e) => {
            log::warn!("metrics_listen {a}: {e}; no metrics over HTTP");
            None
        }
    });
    let stats_interval = cfg.stats_interval;
    let policy = load_policy(&cfg);
    let limits = Arc::new(tcp::Limits::new(cfg.tcp_max_connections, cfg.tcp_max_per_client, cfg.tcp_idle_timeout));
    let logger = querylog.as_ref().map(|q| q.logger.clone());
    // The files fixed until a restart (`Config::restart_key`), for
    // [`look_at_devices`] and [`write_textfile`]: the main loop reads no
    // snapshot for them (see `Engine::learning`).
    let (leases, ethers) = (cfg.leases_file.clone(), cfg.ethers_file.clone());
    let textfile = cfg.metrics_textfile.clone().filter(|p| textfile_writable(p));
    let sockets_file = cfg.sockets_file();
    let snapshot = Snapshot::new(Arc::new(cfg), Arc::new(policy), None);
    // Exceptions a previous run set, until their ends (a reboot empties the directory).
    let exceptions = crate::query::exceptions::restore(&snapshot);
    let engine = Arc::new(Engine::with_exceptions(snapshot, logger, exceptions));
    let counters: Vec<Arc<Counters>> = (0..workers).map(|_| Arc::new(Counters::default())).collect();
    let (stop_tx, stop_rx) = smol::channel::bounded::<()>(1);
    let udp_stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut udp_counters = Vec::new();
    let mut udp_sockets = Vec::new();
    let udp_inodes: Vec<u64> = listeners.iter().flat_map(|l| l.udp_inodes.iter().copied()).collect();
    for (w, stats) in counters.iter().enumerate() {
        // Each UDP socket gets a receive thread; the TCP listeners and the
        // jobs the receive threads hand over go to the worker's executor thread.
        let mut udp = Vec::new();
        for sock in listeners.iter_mut().filter_map(|l| l.udp.pop()) {
            let sock = Arc::new(sock);
            udp_sockets.push(sock.clone());
            let (tx, rx) = smol::channel::bounded(udp::MISS_QUEUE);
            // Counters have one writer each (see stats.rs): the receive thread
            // gets its own; the jobs it hands over count on the worker's.
            let own = Arc::new(Counters::default());
            udp_counters.push(own.clone());
            let (engine, stats, stop) = (engine.clone(), own, udp_stop.clone());
            let s = sock.clone();
            let thread = std::thread::Builder::new()
                .name(format!("hydradns-u{w}"))
                .spawn(move || udp::receive_loop(s, engine, stats, tx, stop))
                .map_err(|e| format!("cannot start a UDP thread: {e}"))?;
            threads.push(thread);
            udp.push((sock, rx));
        }
        let tcp: Vec<_> = listeners.iter_mut().filter_map(|l| l.tcp.pop()).collect();
        let (engine, stats, limits, stop) = (engine.clone(), stats.clone(), limits.clone(), stop_rx.clone());
        let thread = std::thread::Builder::new()
            .name(format!("hydradns-w{w}"))
            .spawn(move || {
                let ex = Rc::new(LocalExecutor::new());
                let slots = Rc::new(udp::TaskSlots::default());
                for (sock, jobs) in udp {
                    let task = udp::run_jobs(sock, jobs, engine.clone(), stats.clone(), ex.clone(), slots.clone());
                    ex.spawn(task).detach();
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
    // For the watchdog: which sockets on our ports are ours.
    if let Some(path) = sockets_file {
        let text: Vec<String> = udp_inodes.iter().map(u64::to_string).collect();
        if let Err(e) = crate::sys::write_atomic(&path, text.join(" ").as_bytes()) {
            log::warn!("{}: {e}; the watchdog cannot tell our sockets from another program's", path.display());
        }
    }
    log::info!("ready with {workers} workers");
    // Downloads and rebuilds happen on their own thread, never here or on a worker.
    let lists = Lists::spawn(engine.clone()).map_err(|e| format!("cannot start the lists thread: {e}"))?;
    // Who may ask by default follows this machine's networks: a new IPv6
    // prefix on the LAN must not turn its devices away until a reload.
    // Followed even with `allow_client` set, which a reload may take out.
    let handle = lists.handle();
    if let Err(e) = localnet::follow(move || handle.networks_changed()) {
        log::warn!("cannot follow this machine's networks: {e}");
    }
    let mut counters = counters;
    counters.extend(udp_counters);
    let status =
        Arc::new(Status { engine: engine.clone(), workers: counters, started, lists: lists.handle(), udp_inodes });
    let main = Rc::new(LocalExecutor::new());
    if let Some((listener, _)) = control.as_ref().and_then(|(l, p)| Some((l.try_clone().ok()?, p))) {
        main.spawn(control::serve(listener, status.clone(), main.clone(), acting_uid)).detach();
    }
    if let Some(listener) = metrics {
        main.spawn(crate::metrics::http::serve(listener, status.clone(), main.clone())).detach();
    }
    let path = path.as_ref();
    smol::block_on(main.run(async {
        let mut next_summary = (!stats_interval.is_zero()).then(|| Instant::now() + stats_interval);
        let mut devices = NameBook::router(&leases, &ethers);
        // The engine read the devices' files as it started.
        let start = Instant::now();
        let mut next_look = status.engine.learning.load(Ordering::Relaxed).then_some(start + CHECK_EVERY);
        let mut textfile_failing = false;
        if write_textfile(&status, textfile.as_deref(), &mut textfile_failing) {
            next_look = Some(sooner(next_look, start + TEXTFILE_EVERY));
        }
        loop {
            // One timer for both periodic jobs (a second one in the race was 14 KB of code).
            let due = match (next_summary, next_look) {
                (Some(s), Some(l)) => Some(s.min(l)),
                (s, l) => s.or(l),
            };
            let timer = async {
                match due {
                    Some(due) => Timer::at(due).await,
                    None => smol::future::pending().await,
                };
                Wake::Timer
            };
            let learning = async {
                status.engine.learning_started().await;
                Wake::Learning
            };
            let signal = async { Wake::Signal(signals.next().await) };
            let network = async {
                match &resolv {
                    Some(w) => Wake::Resolv(w.changed().await),
                    None => smol::future::pending().await,
                }
            };
            let wake = signal.or(timer).or(network).or(learning).await;
            match wake {
                Wake::Signal(Some(Ok(Signal::Hup))) => status.lists.reload(path.cloned()),
                Wake::Signal(Some(Ok(Signal::Usr1))) => log_stats(&status),
                Wake::Signal(Some(Ok(Signal::Usr2))) => {
                    log::info!("SIGUSR2: the network changed; retrying failed downloads");
                    if status.engine.update_config(resolv::follow) {
                        resolv::announce(&status.engine.snapshot.load().config);
                    }
                    status.lists.retry_failed();
                }
                Wake::Resolv(Ok(())) => {
                    log::info!("{} changed", status.engine.snapshot.load().config.resolv_file.display());
                    if status.engine.update_config(resolv::follow) {
                        resolv::announce(&status.engine.snapshot.load().config);
                    }
                    status.lists.retry_failed();
                }
                Wake::Resolv(Err(e)) => {
                    log::warn!("stopped watching {}: {e}", status.engine.snapshot.load().config.resolv_file.display());
                    resolv = None;
                }
                Wake::Signal(Some(Err(e))) => log::warn!("signal error: {e}"),
                Wake::Signal(_) => break,
                // The reload filled the table; it is kept from the next look on.
                Wake::Learning => {
                    next_look.get_or_insert_with(|| Instant::now() + CHECK_EVERY);
                }
                Wake::Timer => {
                    let now = Instant::now();
                    if next_look.is_some_and(|t| t <= now) {
                        next_look = look_at_devices(&status.engine, &mut devices).map(|d| now + d);
                        // The textfile rides on the same timer, every TEXTFILE_EVERY
                        // while it is set (the one wake-up an idle gateway then has).
                        if write_textfile(&status, textfile.as_deref(), &mut textfile_failing) {
                            next_look = Some(sooner(next_look, now + TEXTFILE_EVERY));
                        }
                    }
                    if next_summary.is_some_and(|t| t <= now) {
                        log::info!("{}", status.report().summary().replacen("stats:", "summary:", 1));
                        next_summary = next_summary.map(|t| t + stats_interval);
                    }
                }
            }
        }
    }));
    log::info!("stopping");
    drop(stop_tx);
    udp_stop.store(true, Ordering::Relaxed);
    // A receive thread blocked with no timeout wakes when its socket's read
    // side is shut (Linux wakes readers even of an unconnected UDP socket,
    // though the call reports ENOTCONN).
    for sock in &udp_sockets {
        let _ = rustix::net::shutdown(&**sock, rustix::net::Shutdown::Read);
    }
    for t in threads {
        let _ = t.join();
    }
    lists.stop();
    if let Some(q) = querylog {
        q.shutdown();
    }
    if let Some((_, p)) = control {
        let _ = std::fs::remove_file(p);
    }
    log_stats(&status);
    Ok(())
}

/// Keeps the engine's table of devices' MACs and hostnames current for
/// `config client` rules that match on them: a look at the leases, ethers
/// and the ARP table every [`CHECK_EVERY`] while such rules exist (a reload
/// that adds them builds the table at once, see [`Engine::update`]).
/// Returns when to look next: never while no rule needs it (a reload that
/// brings one rings [`Engine::learning_started`]; an idle gateway sleeps).
fn look_at_devices(engine: &Engine, book: &mut NameBook) -> Option<Duration> {
    // A flag, not the snapshot: see `Engine::learning`.
    if !engine.learning.load(Ordering::Relaxed) {
        return None;
    }
    let snap = engine.snapshot.load_full();
    book.look(Instant::now());
    if book.changed() || !engine.learned().is_for(&snap.clients) {
        engine.set_learned(Arc::new(Learned::new(&snap.clients, book)));
    }
    Some(CHECK_EVERY)
}

/// The earlier of a deadline that may not be set and `at`.
fn sooner(due: Option<Instant>, at: Instant) -> Instant {
    due.map_or(at, |t| t.min(at))
}

/// Writes `metrics_textfile` to `path`, if set (false when not); a failure
/// is logged once, until a write works again.
fn write_textfile(status: &Status, path: Option<&std::path::Path>, failing: &mut bool) -> bool {
    let Some(path) = path else { return false };
    // Whole or not at all, as node-exporter's textfile collector wants it.
    match crate::sys::write_atomic(path, crate::metrics::render(status).as_bytes()) {
        Ok(()) => *failing = false,
        Err(e) if !*failing => {
            log::warn!("metrics_textfile {}: {e}", path.display());
            *failing = true;
        }
        Err(_) => {}
    }
    true
}

/// Whether `metrics_textfile` can go at `path`: its directory is one this
/// process (no longer root) may write, or missing (then made). The init
/// script no longer makes a directory it did not create writable for us:
/// named `/etc/x.prom`, that was `/etc` (issue 58). Said once in the log.
fn textfile_writable(path: &std::path::Path) -> bool {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    match rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK) {
        Ok(()) => true,
        Err(rustix::io::Errno::NOENT) => true,
        Err(e) => {
            log::warn!(
                "metrics_textfile {}: this gateway's user cannot write in {} ({e}); no textfile (HydraDNS writes \
                 only in a directory it made or one its user may write already)",
                path.display(),
                dir.display()
            );
            false
        }
    }
}

/// How often `metrics_textfile` is rewritten.
const TEXTFILE_EVERY: Duration = Duration::from_secs(15);
