//! The control socket: how `hydradns stats` reads live figures from the
//! running gateway.
//!
//! A Unix stream socket (`option control_socket`, default
//! `/var/run/hydradns/control.sock`, mode 0660). The client writes one
//! request line, the gateway writes one JSON line back and closes. Requests:
//! `stats` (the live report), `metrics` (the Prometheus text), `received`
//! (the UDP queries read so far: the watchdog's sign of life under a
//! flood), `update` (refresh downloaded lists now,
//! answer with each list's result), `commit` (the query log's writer commits
//! what is queued; readers ask before they read), `pause`, `allow` and
//! `block` (an exception with an end) and `exceptions` (those set). Served on the main thread, never on a
//! worker, each connection in its own task with a time limit, so a stuck
//! client cannot hold it.
//!
//! Anyone who can connect (the socket's user and group) may read (`stats`,
//! `metrics`, `exceptions`); acting (`update`, `commit`, `pause`, `allow`,
//! `block`) takes a peer that is
//! root or the gateway's own user, by the kernel's word (SO_PEERCRED): the
//! group may hold other services' accounts.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nanoserde::SerJson;
use smol::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use smol::{Async, LocalExecutor, Timer};

use crate::status::Status;
use crate::sys::within;

/// How long one control connection may take.
const CONN_TIMEOUT: Duration = Duration::from_secs(2);
/// How long `update` may take: every download, then a rebuild.
pub const UPDATE_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long `check` may take: it reads every list file again, line by line,
/// to name the lines that match (a 64 MiB list takes seconds on a router),
/// 30 s for that, then validates the name where its set validates DNSSEC
/// (at most [`crate::query::dnssec::CHECK_WITHIN`]).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(40);
/// One `check` at a time, on a thread of its own: it reads files, which
/// would hold this thread (and every other control and metrics connection)
/// meanwhile; a second one asked before the first is done is refused.
static CHECKING: AtomicBool = AtomicBool::new(false);
/// One `check`'s DNSSEC validation at a time (after its [`CHECKING`] part):
/// each sends up to a chain's worth of upstream queries, which the socket's
/// readers should not be able to multiply.
static VALIDATING: AtomicBool = AtomicBool::new(false);
/// How often `commit` looks whether the log's writer is done (it is woken
/// at once; a batch takes milliseconds). The connection's time limit bounds the wait.
const COMMIT_POLL: Duration = Duration::from_millis(2);
/// Longest request line accepted: `block 31622400 client NAME name NAME`
/// holds a 128-byte client and a 253-byte domain name.
pub const MAX_REQUEST: usize = 512;
/// Longest answer line a client reads: the largest report (a few hundred
/// lists and groups) is tens of KiB. Whoever answers on the socket's path
/// (the daemon's user can put anything there) cannot make root's
/// `hydradns status` hold more.
pub const MAX_REPLY: u64 = 4 << 20;
/// The answer to an action from a peer that may not act.
const NOT_ALLOWED: &str =
    "{\"error\":\"not allowed: only root or the gateway's own user may pause, update, commit, allow or block\"}";

/// Binds the socket, replacing a stale one left by a crash but never one a
/// running gateway still answers on.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "another gateway answers on it"));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    Ok(listener)
}

/// Whether the peer on `stream` may act: root, or `acting_uid` (the
/// gateway's own user, when it is trusted: [`crate::privileges::acting_uid`]).
/// A peer whose credentials cannot be read may not.
fn may_act(stream: &UnixStream, acting_uid: Option<u32>) -> bool {
    rustix::net::sockopt::socket_peercred(stream).is_ok_and(|c| {
        let uid = c.uid.as_raw();
        uid == 0 || Some(uid) == acting_uid
    })
}

/// One request line, read (the fuzz target `control` feeds it anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// `stats`: the report as JSON.
    Stats,
    /// `metrics`: the Prometheus text.
    Metrics,
    /// `received`: UDP queries read by the receive threads so far.
    Received,
    /// `commit`: the query log's queue written out.
    Commit,
    /// `update`: every list downloaded again.
    Update,
    /// `pause SECONDS [GROUP]`.
    Pause {
        /// How long; 0 resumes.
        secs: u64,
        /// One group's lists only.
        group: Option<&'a str>,
    },
    /// `pause` with anything else after it.
    BadPause,
    /// `allow|block SECONDS group|client WHO service|name WHAT`: an
    /// exception with an end (`crate::policy::exceptions`); 0 removes it.
    Except {
        /// `allow` or `block`.
        action: &'a str,
        /// How long from now.
        secs: u64,
        /// `group` or `client`.
        kind: &'a str,
        /// The group's name, or the client as `check --client` takes it.
        who: &'a str,
        /// `service` or `name`.
        what: &'a str,
        /// The service's id, or the domain name.
        target: &'a str,
    },
    /// `allow` or `block` with anything else after it.
    BadExcept,
    /// `exceptions`: those set, as `hydradns exceptions --json` prints them.
    Exceptions,
    /// `check NAME [CLIENT]`: why NAME is answered as it is (for CLIENT).
    Check {
        /// The name asked about.
        name: &'a str,
        /// An address, a MAC, a `config client` name or a hostname.
        client: Option<&'a str>,
    },
    /// Anything else.
    Unknown(&'a str),
}

/// Reads a request line (trimmed).
pub fn parse(request: &str) -> Request<'_> {
    match request {
        "stats" => Request::Stats,
        "metrics" => Request::Metrics,
        "received" => Request::Received,
        "commit" => Request::Commit,
        "update" => Request::Update,
        "exceptions" => Request::Exceptions,
        pause if pause.starts_with("pause ") => {
            let mut words = pause["pause ".len()..].split_ascii_whitespace();
            match (words.next().map(str::parse::<u64>), words.next(), words.next()) {
                (Some(Ok(secs)), group, None) => Request::Pause { secs, group },
                _ => Request::BadPause,
            }
        }
        except if except.starts_with("allow ") || except.starts_with("block ") => {
            let (action, rest) = except.split_at(5);
            let w: Vec<&str> = rest.split_ascii_whitespace().collect();
            match (w.as_slice(), w.first().map(|s| s.parse::<u64>())) {
                ([_, kind, who, what, target], Some(Ok(secs))) => {
                    Request::Except { action, secs, kind, who, what, target }
                }
                _ => Request::BadExcept,
            }
        }
        check if check.starts_with("check ") => {
            let mut words = check["check ".len()..].split_ascii_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some(name), client, None) => Request::Check { name, client },
                _ => Request::Unknown(check),
            }
        }
        other => Request::Unknown(other),
    }
}

/// Requests that change what the gateway does, rather than read it.
fn is_action(request: &str) -> bool {
    matches!(
        parse(request),
        Request::Update
            | Request::Commit
            | Request::Pause { .. }
            | Request::BadPause
            | Request::Except { .. }
            | Request::BadExcept
    )
}

/// Answers requests until the executor stops; each connection is a task on
/// `ex`. Actions only for root and `acting_uid` (see the module doc).
pub async fn serve(
    listener: UnixListener,
    status: Arc<Status>,
    ex: Rc<LocalExecutor<'static>>,
    acting_uid: Option<u32>,
) {
    let listener = match Async::new(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("control socket: {e}");
            return;
        }
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            Timer::after(Duration::from_millis(100)).await;
            continue;
        };
        let status = status.clone();
        ex.spawn(async move {
            let mut line = String::new();
            let read = async {
                let mut reader = smol::io::BufReader::new((&stream).take(MAX_REQUEST as u64));
                reader.read_line(&mut line).await.ok()
            };
            if within(CONN_TIMEOUT, read).await.flatten().is_none() {
                return;
            }
            let request = line.trim();
            let limit = match parse(request) {
                Request::Update => UPDATE_TIMEOUT,
                Request::Check { .. } => CHECK_TIMEOUT,
                _ => CONN_TIMEOUT,
            };
            let reply = if is_action(request) && !may_act(stream.get_ref(), acting_uid) {
                Some(NOT_ALLOWED.to_string())
            } else {
                within(limit, respond(request, &status)).await
            };
            let Some(reply) = reply else { return };
            let mut w = &stream;
            let _ = within(CONN_TIMEOUT, async {
                let _ = w.write_all(reply.as_bytes()).await;
                let _ = w.write_all(b"\n").await;
            })
            .await;
        })
        .detach();
    }
}

async fn respond(request: &str, status: &Status) -> String {
    match parse(request) {
        Request::Stats => status.report().serialize_json(),
        // The Prometheus text, as one JSON string (replies are one line).
        Request::Metrics => crate::metrics::render(status).serialize_json(),
        // A few atomic loads: what the watchdog asks while a probe fails.
        Request::Received => format!("{{\"udp\":{}}}", status.udp_received()),
        // Readers of the query log ask first, so the queries still waiting
        // for their batch are in the database when they read it.
        Request::Commit => match status.engine.logger() {
            Some(log) => {
                let asked = log.ask_commit();
                while !log.committed(asked) {
                    Timer::after(COMMIT_POLL).await;
                }
                "{\"committed\":true}".into()
            }
            None => "{\"committed\":false}".into(),
        },
        Request::Update => match status.lists.refresh().recv().await {
            Ok(results) => results.serialize_json(),
            Err(_) => "{\"error\":\"the lists thread is gone\"}".into(),
        },
        Request::Check { name, client } => check(status, name, client).await,
        Request::Exceptions => status.engine.exceptions_json(),
        Request::BadExcept => {
            "{\"error\":\"allow and block take seconds, group or client and its name, service or name and its \
             value\"}"
                .into()
        }
        Request::Except { action, secs, kind, who, what, target } => {
            except(status, action, secs, [kind, who, what, target])
        }
        Request::BadPause => "{\"error\":\"pause takes seconds and perhaps a group\"}".into(),
        // `pause SECONDS [GROUP]`: blocking (or that group's lists) off for that long; 0 turns it back on.
        Request::Pause { secs, group } => {
            let pause = &status.engine.pause;
            let d = Duration::from_secs(secs);
            let groups_of = || status.engine.snapshot.load().policy.groups.clone();
            let group = match group {
                Some(g) => match pause.set_group(&groups_of(), g, d) {
                    Ok(()) => Some(g),
                    Err(e) => return format!("{{\"error\":{}}}", e.serialize_json()),
                },
                None => {
                    pause.set(d);
                    None
                }
            };
            match (secs, group) {
                (0, None) => log::info!("blocking resumed"),
                (0, Some(g)) => log::info!("blocking resumed for group '{g}'"),
                (s, None) => log::info!("blocking paused for {s} s"),
                (s, Some(g)) => log::info!("blocking paused for {s} s for group '{g}'"),
            }
            let until = match group {
                None => pause.until_unix(),
                Some(g) => pause.groups_until_unix().into_iter().find(|(n, _)| n == g).map_or(0, |p| p.1),
            };
            format!("{{\"paused_until\":{until}}}")
        }
        Request::Unknown(other) => {
            format!("{{\"error\":\"unknown request {:?}\"}}", other.escape_default().to_string())
        }
    }
}

/// `allow` or `block` (`words`: group or client, who, service or name,
/// which): `{"changed":…}` and the exceptions after the change, or
/// `{"error":…}` and nothing changed.
fn except(status: &Status, action: &str, secs: u64, words: [&str; 4]) -> String {
    use crate::policy::exceptions::{Changed, Exception, MAX_SECS, end_after, unix_ms};
    let error = |e: &str| format!("{{\"error\":{}}}", e.serialize_json());
    if secs > MAX_SECS {
        return error(&format!("longer than {} days: what should last longer is a list entry", MAX_SECS / 86_400));
    }
    let ends = if secs == 0 { 0 } else { end_after(unix_ms(), Duration::from_secs(secs)) };
    let [kind, who, what, target] = words;
    let e = match Exception::from_words(action, kind, who, what, target, ends) {
        Ok(e) => e,
        Err(m) => return error(&m),
    };
    let told = e.describe();
    let changed = match status.engine.set_exception(e) {
        Ok(c) => c,
        Err(m) => return error(&m),
    };
    let word = match changed {
        Changed::Added | Changed::Replaced => {
            log::info!("exception: {told} until {}", crate::timetext::iso8601(ends * 1000));
            "set"
        }
        Changed::Removed => {
            log::info!("exception removed: {told}");
            "removed"
        }
        Changed::NotSet => "not set",
    };
    let json = status.engine.exceptions_json();
    format!("{{\"changed\":\"{word}\",{}", json.strip_prefix('{').unwrap_or(&json))
}

/// `check NAME [CLIENT]` from the running gateway's own config and lists
/// (see [`CHECKING`]): `{"lines":[…]}` or `{"error":…}`.
async fn check(status: &Status, name: &str, client: Option<&str>) -> String {
    let error = |e: &str| format!("{{\"error\":{}}}", e.serialize_json());
    if CHECKING.swap(true, Ordering::Acquire) {
        return error("busy: another check is reading the lists; ask again in a moment");
    }
    let snap = status.engine.snapshot.load_full();
    let (name, client) = (name.to_string(), client.map(str::to_string));
    let (for_thread, name_there) = (snap.clone(), name.clone());
    let exceptions = status.engine.exceptions.current(crate::policy::exceptions::unix_ms());
    let (tx, rx) = smol::channel::bounded(1);
    let spawned = std::thread::Builder::new().name("hydradns-check".into()).spawn(move || {
        let (snap, name) = (for_thread, name_there);
        let why = crate::query::why::why(&snap.config, &snap.policy, &name, client.as_deref(), &exceptions);
        CHECKING.store(false, Ordering::Release);
        let _ = tx.try_send(why);
    });
    if let Err(e) = spawned {
        CHECKING.store(false, Ordering::Release);
        return error(&format!("cannot start a thread: {e}"));
    }
    let (mut lines, dnssec) = match rx.recv().await {
        Ok(Ok(why)) => why,
        Ok(Err(e)) => return error(&e),
        Err(_) => return error("the check ended without an answer"),
    };
    if let crate::query::why::Dnssec::Validate(set) = dnssec {
        lines.push(match Validating::start() {
            Some(_held) => crate::query::dnssec::check_line(&snap, &name, set).await,
            None => "dnssec: not validated (busy: another check is validating; ask again in a moment)".into(),
        });
    }
    format!("{{\"lines\":{}}}", lines.serialize_json())
}

/// [`VALIDATING`], held; let go when dropped, also when the connection's
/// time limit drops the check.
struct Validating;

impl Validating {
    fn start() -> Option<Validating> {
        (!VALIDATING.swap(true, Ordering::Acquire)).then_some(Validating)
    }
}

impl Drop for Validating {
    fn drop(&mut self) {
        VALIDATING.store(false, Ordering::Release);
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum RequestError {
    /// No gateway listens on the socket.
    NotRunning(String),
    /// It listened but did not answer properly.
    Failed(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::NotRunning(m) | RequestError::Failed(m) => f.write_str(m),
        }
    }
}

/// Sends one request to a running gateway and returns its answer line,
/// waiting at most `wait` for it.
pub fn request(path: &Path, request: &str, wait: Duration) -> Result<String, RequestError> {
    if path.as_os_str().is_empty() {
        return Err(RequestError::NotRunning("the control socket is off (option control_socket 'off')".into()));
    }
    let unreachable =
        |e: std::io::Error| format!("cannot reach the gateway at {}: {e} (is it running?)", path.display());
    // Whoever owns what stands at the path (the gateway binds its socket
    // as the user it runs as) must be who listens: a link planted there by
    // that user to another service's socket (ubusd's, root's) is refused
    // before a word is sent to it.
    let owner = std::fs::symlink_metadata(path).map_err(|e| RequestError::NotRunning(unreachable(e)))?;
    let s = UnixStream::connect(path).map_err(|e| RequestError::NotRunning(unreachable(e)))?;
    let peer = rustix::net::sockopt::socket_peercred(&s).map(|c| c.uid.as_raw());
    let owner = std::os::unix::fs::MetadataExt::uid(&owner);
    if peer != Ok(owner) {
        return Err(RequestError::Failed(format!(
            "{} is not the gateway's socket: it belongs to uid {owner}, and another user listens on it",
            path.display()
        )));
    }
    send(s, request, wait).map_err(RequestError::Failed)
}

fn send(mut s: UnixStream, request: &str, wait: Duration) -> Result<String, String> {
    use std::io::Read;
    let deadline = std::time::Instant::now() + wait;
    s.set_write_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    s.write_all(format!("{request}\n").as_bytes()).map_err(|e| e.to_string())?;
    // One line, read under a cap and a deadline for the whole of it: a
    // peer that trickles a byte at a time, or never ends its line, gets
    // neither more time nor more memory.
    let mut line = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let late = || format!("no answer from the gateway within {} ms", wait.as_millis());
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(late());
            }
            Err(e) => return Err(format!("no answer from the gateway: {e}")),
        };
        let piece = &buf[..n];
        let end = piece.iter().position(|&b| b == b'\n');
        line.extend_from_slice(&piece[..end.unwrap_or(n)]);
        if line.len() as u64 > MAX_REPLY {
            return Err(format!("the answer is longer than {} bytes: not the gateway's", MAX_REPLY));
        }
        if end.is_some() || n == 0 {
            break;
        }
    }
    if line.is_empty() {
        return Err("the gateway closed the connection without answering".into());
    }
    let line = String::from_utf8(line).map_err(|_| "the answer is not UTF-8 text: not the gateway's".to_string())?;
    Ok(line.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A listener in a directory of its own whose one connection gets
    /// `serve`'s treatment.
    fn peer(tag: &str, serve: impl FnOnce(UnixStream) + Send + 'static) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("hydradns-control-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("control.sock");
        let l = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            if let Ok((s, _)) = l.accept() {
                serve(s);
            }
        });
        (dir, path)
    }

    /// Issue 58: whoever answers on the socket's path (the daemon's user
    /// can put anything there) costs root's client a bounded amount of
    /// memory and time.
    #[test]
    fn an_answer_without_end_is_cut_off_by_size_and_by_time() {
        let (dir, path) = peer("endless", |mut s| {
            let junk = vec![b'a'; 64 * 1024];
            while s.write_all(&junk).is_ok() {}
        });
        let e = request(&path, "stats", Duration::from_secs(30)).unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();

        // A byte every 50 ms for 20 s: the 500 ms deadline ends it within a
        // fifth of that, or it waited for the end.
        let (dir, path) = peer("trickle", |mut s| {
            for _ in 0..400 {
                if s.write_all(b"{").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let started = std::time::Instant::now();
        let e = request(&path, "stats", Duration::from_millis(500)).unwrap_err().to_string();
        assert!(e.contains("within"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(4), "the deadline is for the whole answer");
        std::fs::remove_dir_all(&dir).unwrap();

        let (dir, path) = peer("fine", |mut s| {
            let mut line = [0u8; 9];
            let _ = std::io::Read::read_exact(&mut s, &mut line);
            let _ = s.write_all(b"{\"udp\":42}\n");
        });
        assert_eq!(request(&path, "received", Duration::from_secs(5)).unwrap(), "{\"udp\":42}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A link at the socket's path, made by another user (the gateway's,
    /// on a router) to a socket someone else listens on (root's ubusd):
    /// nothing is sent to it.
    #[test]
    fn a_link_to_someone_elses_socket_is_not_talked_to() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let heard = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let h = heard.clone();
        let (dir, path) = peer("other", move |mut s| {
            let mut b = [0u8; 1];
            if std::io::Read::read(&mut s, &mut b).is_ok_and(|n| n > 0) {
                h.store(true, Ordering::SeqCst);
            }
        });
        let link = dir.join("control-link.sock");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = request(&link, "stats", Duration::from_secs(2)).unwrap_err().to_string();
        assert!(e.contains("is not the gateway's socket"), "{e}");
        std::thread::sleep(Duration::from_millis(100));
        assert!(!heard.load(Ordering::SeqCst), "a request reached the other socket");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn requests_are_read() {
        assert_eq!(parse("received"), Request::Received);
        assert!(!is_action("received"), "the watchdog's question is a read");
        assert_eq!(
            parse("allow 3600 group kids service youtube"),
            Request::Except {
                action: "allow",
                secs: 3600,
                kind: "group",
                who: "kids",
                what: "service",
                target: "youtube"
            }
        );
        assert!(matches!(parse("block 0 client 192.0.2.1 name example.com"), Request::Except { secs: 0, .. }));
        assert_eq!(parse("block 60 group kids service"), Request::BadExcept);
        assert_eq!(parse("allow soon group kids service youtube"), Request::BadExcept);
        assert_eq!(parse("allowance"), Request::Unknown("allowance"));
        assert!(is_action("allow 3600 group kids service youtube") && is_action("block x"));
        assert!(!is_action("exceptions"), "listing them is a read");
    }
}
