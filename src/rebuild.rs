//! The lists thread: every policy rebuild (SIGHUP reloads, scheduled
//! refreshes, `hydradns update`, the network changing) happens one at a
//! time on `hydradns-lists`, never on a worker: the new policy is built from
//! `lists` while the old one serves, then swapped into the engine whole.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::lists::{FLASH_BYTES, Refreshed, Which, load_policy, next_refresh, refresh_all};
use crate::query::{Engine, Snapshot};

/// How long stopping waits for the lists thread to finish what it is doing.
const STOP_WAIT: Duration = Duration::from_millis(250);

/// What the lists thread is asked to do.
enum Command {
    /// Re-read the config file (or the built-in defaults) and the lists, then refresh downloads.
    Reload(Option<PathBuf>),
    /// Refresh downloads now; send the per-source results back.
    Refresh(smol::channel::Sender<Vec<Refreshed>>),
    /// The network changed (resolv_file rewritten, SIGUSR2 from the WAN's
    /// interface trigger): retry the downloads that failed.
    RetryFailed,
    /// An address of this machine changed: who may ask by default may have
    /// (see `localnet`). Done here, where snapshots are built, rather than
    /// on the thread that hears the kernel: each thread that reads the
    /// snapshot makes every cache insert's swap longer (`Engine::learning`).
    Networks,
    /// Finish: the gateway is stopping.
    Stop,
}

/// The thread that owns policy rebuilds.
pub struct Lists {
    handle: ListsHandle,
    thread: Option<JoinHandle<()>>,
}

/// A cloneable way to ask the lists thread for work.
#[derive(Clone)]
pub struct ListsHandle {
    tx: mpsc::Sender<Command>,
    /// A [`Command::Networks`] waits: a burst of address changes queues one.
    networks: Arc<AtomicBool>,
}

impl Lists {
    /// Starts the thread; it refreshes downloads when they are due.
    pub fn spawn(engine: Arc<Engine>) -> std::io::Result<Lists> {
        let (tx, rx) = mpsc::channel();
        let networks = Arc::new(AtomicBool::new(false));
        let pending = networks.clone();
        let thread = std::thread::Builder::new().name("hydradns-lists".into()).spawn(move || {
            // Rebuilding a million-name list takes a second of CPU: never at the workers' expense.
            crate::sys::lower_thread_priority();
            let mut due = next_refresh(&engine.snapshot.load().config);
            loop {
                let wait = due.map_or(Duration::from_secs(86_400), |d| d.saturating_duration_since(Instant::now()));
                let received = rx.recv_timeout(wait);
                let before = crate::sys::thread_write_bytes();
                match received {
                    Ok(Command::Reload(path)) => {
                        reload(&engine, path.as_deref());
                        refresh_and_swap(&engine, Which::All);
                    }
                    Ok(Command::Refresh(reply)) => {
                        let _ = reply.try_send(refresh_and_swap(&engine, Which::All));
                    }
                    Ok(Command::RetryFailed) => {
                        refresh_and_swap(&engine, Which::Failed);
                    }
                    Ok(Command::Networks) => {
                        pending.store(false, Ordering::Relaxed);
                        follow_networks(&engine);
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if due.is_some() {
                            refresh_and_swap(&engine, Which::Due);
                        }
                    }
                    Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                }
                if let (Some(a), Some(b)) = (crate::sys::thread_write_bytes(), before) {
                    FLASH_BYTES.fetch_add(a.saturating_sub(b), std::sync::atomic::Ordering::Relaxed);
                }
                due = next_refresh(&engine.snapshot.load().config);
            }
        })?;
        Ok(Lists { handle: ListsHandle { tx, networks }, thread: Some(thread) })
    }

    /// A handle for the signal loop and the control socket.
    pub fn handle(&self) -> ListsHandle {
        self.handle.clone()
    }

    /// Stops the thread after whatever it is doing, but waits for at most
    /// [`STOP_WAIT`]: a download can take minutes, and a restart must not
    /// keep the network without DNS for them (procd kills after 5 s). A
    /// download cut short leaves only a temporary file; the saved copy is
    /// replaced by a rename, whole or not at all.
    pub fn stop(mut self) {
        let _ = self.handle.tx.send(Command::Stop);
        let Some(t) = self.thread.take() else { return };
        let end = Instant::now() + STOP_WAIT;
        while !t.is_finished() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            log::info!("not waiting for the list download in progress");
        }
    }
}

impl ListsHandle {
    /// SIGHUP: reload config and lists, then refresh downloads, in the background.
    pub fn reload(&self, path: Option<PathBuf>) {
        let _ = self.tx.send(Command::Reload(path));
    }

    /// The network changed: retry the downloads that failed, after
    /// whatever the thread is doing.
    pub fn retry_failed(&self) {
        let _ = self.tx.send(Command::RetryFailed);
    }

    /// An address of this machine changed (see [`Command::Networks`]).
    pub fn networks_changed(&self) {
        if !self.networks.swap(true, Ordering::Relaxed) {
            let _ = self.tx.send(Command::Networks);
        }
    }

    /// `hydradns update`: refresh now; the results arrive on the returned channel.
    pub fn refresh(&self) -> smol::channel::Receiver<Vec<Refreshed>> {
        let (tx, rx) = smol::channel::bounded(1);
        let _ = self.tx.send(Command::Refresh(tx));
        rx
    }
}

/// Downloads what `which` selects and, if any list changed, rebuilds and swaps the policy.
fn refresh_and_swap(engine: &Engine, which: Which) -> Vec<Refreshed> {
    let cfg = engine.snapshot.load().config.clone();
    let results = refresh_all(&cfg, which);
    if results.iter().any(|r| r.status == "updated") {
        let policy = Arc::new(load_policy(&cfg));
        // Into whatever config is current (its upstreams may have changed
        // meanwhile), unless its lists did: a reload swaps its own.
        engine.update(|old| {
            (old.config.lists == cfg.lists).then(|| Snapshot::new(old.config.clone(), policy, Some(old)))
        });
    }
    results
}

/// Re-reads the config and rebuilds everything from it.
fn reload(engine: &Engine, path: Option<&Path>) {
    let loaded = match path {
        Some(p) => Config::load(p),
        None => Ok(Config::builtin()),
    };
    let mut cfg = match loaded {
        Ok(cfg) => cfg,
        Err(e) => {
            log::error!("reload failed, still running the previous config: {e}");
            return;
        }
    };
    serve_own_networks(&mut cfg);
    for w in &cfg.warnings {
        log::warn!("{w}");
    }
    let running = engine.snapshot.load_full();
    if cfg.listen != running.config.listen || cfg.worker_count() != running.config.worker_count() {
        log::warn!("listen addresses and worker count change only on restart");
    }
    if cfg.querylog != running.config.querylog || cfg.control_socket != running.config.control_socket {
        log::warn!("query log and control socket settings change only on restart");
    }
    let policy = Arc::new(load_policy(&cfg));
    engine.update(|old| {
        // resolv_file may have changed since the config was read.
        let mut cfg = cfg;
        if cfg.upstreams_auto {
            cfg.upstreams_from_resolv();
        }
        Some(Snapshot::new(Arc::new(cfg), policy, Some(old)))
    });
    log::info!("reloaded {}", path.map_or("built-in defaults".into(), |p| p.display().to_string()));
}

/// Who may ask when the config does not say: the networks this machine is
/// on (read from the kernel at start and reload, not by the parser, which
/// `check-config` and the LuCI plugin also run).
pub fn serve_own_networks(cfg: &mut Config) {
    if !cfg.allow_client_given {
        cfg.allow_client = crate::localnet::allowed_by_default();
    }
}

/// Serves the networks this machine is on now, when the config leaves who
/// may ask to them. Renewed lifetimes wake us too; nothing changes then.
fn follow_networks(engine: &Engine) {
    let changed = engine.update_config(|old| {
        let mut cfg = old.clone();
        serve_own_networks(&mut cfg);
        (cfg.allow_client != old.allow_client).then_some(cfg)
    });
    if changed {
        let now = engine.snapshot.load();
        log::info!("this machine's networks changed; serving clients on {}", now.config.allow_client);
    }
}
