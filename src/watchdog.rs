//! The watchdog: fails the network's DNS open when the daemon stops
//! answering, and back when it answers again.
//!
//! dnsmasq forwards the LAN's queries to the daemon (or the daemon holds
//! port 53 itself); when the daemon has crashed and is not back, is hung
//! (SIGSTOP, a deadlock), or cannot bind its port, every device on the
//! network is without DNS. The watchdog, a second procd instance of the
//! service, notices and runs the init script's `unfiltered` (dnsmasq answers
//! from the WAN's resolvers on its own, logged as unfiltered), then its
//! `filtered` once the daemon answers again.
//!
//! It stays out of the query path and does not wake the daemon on a healthy
//! router: every [`TICK`] it reads the kernel's socket table
//! (`/proc/net/udp`), which says whether the daemon's port is bound and how
//! many bytes wait unread in its receive queues. A bound port with empty
//! queues is a daemon that keeps up, or an idle one: a hang matters only
//! when someone asks, and then the queries wait in the queue. Only then, or
//! while the port is unbound, is the daemon asked a query of its own (one
//! it answers without the network: BADVERS for an EDNS version 1 query).
//! While failed open it asks every tick, since nothing else reaches it.
//!
//! A LAN device flooding the port fills the same queues: a daemon that
//! keeps reading but cannot keep up loses the probe with the flood's
//! queries, as a hung one loses it with everything. So when a probe goes
//! unanswered, the watchdog also asks the daemon's control socket how
//! many UDP queries its receive threads have read (`received`), before
//! and after the probe: a count that moved is a daemon at work, which a
//! switch to dnsmasq would only take out of the filter's path (issue 58);
//! a hung one (stopped, deadlocked) answers neither. Without a control
//! socket only the probe decides, as before.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the socket table is read on a healthy router.
pub const TICK: Duration = Duration::from_secs(5);
/// How often once something looks wrong, or while failed open: 2/5 of
/// [`TICK`] (2 s), so a failure is confirmed, and a recovery seen, quickly.
const FAST: u32 = 5;
/// How long a daemon that does not listen must stay so, checked at least
/// twice, before DNS fails open: 9/5 of [`TICK`] (9 s), longer than procd's
/// 5 s respawn delay and the daemon's start, so one crash that procd mends
/// does not switch dnsmasq twice.
const SPAN: u32 = 9;
/// The same for a daemon that listens but leaves queries unanswered: 4/5 of
/// [`TICK`] (4 s; procd does not mend a hang). A hung daemon under traffic
/// is seen at the next tick (5 s at most) and confirmed two checks later;
/// with 9 s here the LAN went 17-24 s without DNS on the rig
/// (tests/openwrt/rig/net.sh, CI load), too near the 30 s allowed.
const SPAN_HUNG: u32 = 4;
/// Answers in a row, [`TICK`] * 2/5 apart, before forwarding to it again.
pub const PASSES: u32 = 2;
/// A daemon that fails again within this long of being forwarded to again
/// is flapping (a crash a few seconds after each start): each such failure
/// doubles the answers it must give before the next switch back, so the
/// LAN is not without DNS for [`SPAN`] at every crash, nor dnsmasq
/// restarted twice a minute.
const FLAPPING: Duration = Duration::from_secs(600);
/// The most answers in a row ever asked for: 5 minutes of them at 2 s.
const MAX_PASSES: u32 = 150;
/// How long one probe waits for its answer; a loaded daemon answers a
/// local query in milliseconds.
const PROBE_WAIT: Duration = Duration::from_secs(1);
/// Longest sockets file read: an inode number per UDP socket, a few per worker.
const OURS_MAX: u64 = 64 * 1024;
/// Where the init script's `unfiltered` is told why, and `status` reads
/// since when (root's, on tmpfs: a reboot starts filtered).
pub const STATE_FILE: &str = "/var/run/hydradns.unfiltered";
/// The init script, whose `unfiltered` and `filtered` switch dnsmasq.
pub const HOOK: &str = "/etc/init.d/hydradns";

/// What the watchdog watches and how it acts.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the daemon answers the queries that matter (dnsmasq's
    /// forwarding target, or port 53 in `replace` mode).
    pub probe: SocketAddr,
    /// [`TICK`], shorter in tests.
    pub tick: Duration,
    /// Run with `unfiltered` (after [`Settings::state`] says why) and `filtered`.
    pub hook: PathBuf,
    /// [`STATE_FILE`].
    pub state: PathBuf,
    /// `fail_open`: false only logs (the owner prefers no DNS to unfiltered DNS).
    pub fail_open: bool,
    /// The daemon's control socket, asked whether it still reads queries
    /// when a probe goes unanswered (none: `control_socket 'off'`).
    pub control: Option<PathBuf>,
    /// Where the daemon lists its UDP sockets' inodes
    /// ([`crate::config::Config::sockets_file`]): a socket on the port that
    /// is not one of them is another program's, not the daemon.
    pub ours: Option<PathBuf>,
}

/// What the watchdog believes, and what it has seen in a row.
#[derive(Debug, Default, PartialEq, Eq)]
struct Watch {
    /// dnsmasq answers on its own.
    open: bool,
    /// Since when the daemon fails (while forwarding to it), and how many
    /// checks in a row it failed.
    failing: Option<(Instant, u32)>,
    /// Probes in a row it answered (while failed open).
    passed: u32,
    /// When DNS was last switched back to the daemon.
    closed: Option<Instant>,
    /// Failures in a row that came within [`FLAPPING`] of a switch back.
    strikes: u32,
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Answers,
    /// The probe went unanswered but the daemon reads queries: overloaded,
    /// not hung.
    Busy,
    /// Why, and how long such a failure must last ([`SPAN`], [`SPAN_HUNG`]).
    Fails(String, Duration),
}

/// What to do after a check.
#[derive(Debug, PartialEq, Eq)]
enum Act {
    Nothing,
    Open(String),
    Close,
}

impl Watch {
    /// Takes in what a check at `now` found.
    #[inline(never)]
    fn step(&mut self, seen: Seen, now: Instant) -> Act {
        match (self.open, seen) {
            (false, Seen::Answers | Seen::Busy) => self.failing = None,
            (false, Seen::Fails(why, span)) => {
                let (since, n) = self.failing.get_or_insert((now, 0));
                *n += 1;
                if *n >= 2 && now.duration_since(*since) >= span {
                    let again = self.closed.is_some_and(|c| now.duration_since(c) < FLAPPING);
                    let strikes = if again { self.strikes + 1 } else { 0 };
                    *self = Watch { open: true, strikes, ..Watch::default() };
                    return Act::Open(why);
                }
            }
            (true, Seen::Fails(..)) => self.passed = 0,
            // Not asked while failed open (the LAN's queries go to dnsmasq).
            (true, Seen::Busy) => {}
            (true, Seen::Answers) => {
                self.passed += 1;
                if self.passed >= self.passes() {
                    *self = Watch { closed: Some(now), strikes: self.strikes, ..Watch::default() };
                    return Act::Close;
                }
            }
        }
        Act::Nothing
    }

    /// Answers in a row needed to switch back: [`PASSES`], doubled for
    /// each strike.
    fn passes(&self) -> u32 {
        PASSES.checked_shl(self.strikes).unwrap_or(MAX_PASSES).min(MAX_PASSES)
    }

    /// How long to sleep before the next check.
    fn wait(&self, tick: Duration) -> Duration {
        if self.open || self.failing.is_some() { tick * 2 / FAST } else { tick }
    }
}

/// Runs until killed.
pub fn run(s: &Settings) -> ! {
    let mut w = Watch { open: s.state.exists(), ..Watch::default() };
    let mut since = Instant::now();
    let mut id: u16 = std::process::id() as u16;
    log::info!(
        "watchdog: watching {} every {} ms{}",
        s.probe,
        s.tick.as_millis(),
        if w.open { "; DNS is unfiltered (failed open before this start)" } else { "" }
    );
    let (span, span_hung) = (s.tick * SPAN / 5, s.tick * SPAN_HUNG / 5);
    let mut busy = false;
    loop {
        std::thread::sleep(w.wait(s.tick));
        let waiting = queued(s.probe, s.ours.as_deref());
        let seen = match (w.open, waiting) {
            (_, None) => Seen::Fails(format!("it does not listen on {}", s.probe), span),
            // Nothing waits unread: it keeps up (or nobody asks).
            (false, Some(0)) => Seen::Answers,
            _ => {
                id = id.wrapping_add(1);
                let control = s.control.as_deref().filter(|_| !w.open);
                let before = control.and_then(received);
                match probe(s.probe, id) {
                    Ok(()) => Seen::Answers,
                    Err(_) if before.zip(control.and_then(received)).is_some_and(|(b, a)| a > b) => Seen::Busy,
                    Err(e) => Seen::Fails(format!("it does not answer on {}: {e}", s.probe), span_hung),
                }
            }
        };
        if (seen == Seen::Busy) != busy {
            busy = !busy;
            if busy {
                log::warn!(
                    "watchdog: the gateway does not keep up with the queries on {} ({} bytes wait unread), but it \
                     reads them: overloaded, not hung; DNS stays filtered",
                    s.probe,
                    waiting.unwrap_or(0)
                );
            }
        }
        match w.step(seen, Instant::now()) {
            Act::Nothing => {}
            Act::Open(why) if s.fail_open => {
                let text = format!("{}: {why}", crate::sys::unix_now());
                if let Err(e) = crate::sys::write_atomic(&s.state, text.as_bytes()) {
                    log::error!("watchdog: cannot write {}: {e}", s.state.display());
                }
                log::error!("DNS is unfiltered: the gateway does not answer ({why}); dnsmasq answers on its own");
                if w.strikes > 0 {
                    log::warn!(
                        "watchdog: the gateway failed again within {} min of coming back: DNS is filtered again \
                         after {} s of answers",
                        FLAPPING.as_secs() / 60,
                        (s.tick * 2 / FAST).as_secs() * u64::from(w.passes())
                    );
                }
                hook(&s.hook, &["unfiltered"]);
                since = Instant::now();
            }
            Act::Open(why) => {
                log::error!(
                    "the gateway does not answer ({why}); fail_open is 0: the network has no DNS until it does"
                );
                since = Instant::now();
            }
            Act::Close => {
                let after = crate::timetext::duration_text(since.elapsed().as_secs());
                if s.fail_open {
                    log::warn!("DNS is filtered again: the gateway answers on {} (unfiltered for {after})", s.probe);
                    // First, as the init script's own `filtered` does: the
                    // hook rebuilds dnsmasq's config from the file's absence,
                    // and whoever sees the hook done finds the state gone.
                    let _ = std::fs::remove_file(&s.state);
                    hook(&s.hook, &["filtered"]);
                } else {
                    log::warn!("the gateway answers again on {} (after {after})", s.probe);
                }
            }
        }
    }
}

/// Runs the init script's command and logs a failure.
#[inline(never)]
fn hook(path: &Path, args: &[&str]) {
    match crate::sys::run(path, args) {
        Ok(Some(0)) => {}
        Ok(code) => log::error!("watchdog: {} {} failed ({code:?})", path.display(), args.join(" ")),
        Err(e) => log::error!("watchdog: cannot run {}: {e}", path.display()),
    }
}

/// How many UDP queries the daemon has read, by its control socket's
/// word; `None` when it does not say within [`PROBE_WAIT`] (a hung daemon's
/// socket accepts the connection, and nobody answers).
#[inline(never)]
fn received(control: &Path) -> Option<u64> {
    let answer = crate::control::request(control, "received", PROBE_WAIT).ok()?;
    answer.strip_prefix("{\"udp\":")?.strip_suffix('}')?.parse().ok()
}

/// Since when and why DNS is unfiltered, if it is: what `status` shows.
pub fn unfiltered(state: &Path) -> Option<(u64, String)> {
    let text = std::fs::read_to_string(state).ok()?;
    let (since, why) = text.split_once(": ")?;
    Some((since.trim().parse().ok()?, why.trim().to_string()))
}

/// Bytes waiting unread in the receive queues of the daemon's UDP sockets
/// bound to `addr` (or to the wildcard address on its port): those whose
/// inodes the `ours` file lists, any without one. `None` when none is.
/// Not inlined, as the rest of this module: it runs every 5 s, and size is
/// what counts here (the aarch64 binary's budget, scripts/build-release.sh).
#[inline(never)]
fn queued(addr: SocketAddr, ours: Option<&Path>) -> Option<u64> {
    let table = if addr.is_ipv4() { "/proc/net/udp" } else { "/proc/net/udp6" };
    // The daemon's file, in its directory: no link followed, no FIFO waited
    // on, no more read than a few thousand inodes take.
    let ours = ours.and_then(|p| crate::sys::read_unlinked_text(p, OURS_MAX).ok()).unwrap_or_default();
    queued_in(&std::fs::read_to_string(table).ok()?, addr, &ours)
}

/// [`queued`] of one table's text; `ours`: the daemon's inodes, space
/// separated (empty: any socket).
fn queued_in(table: &str, addr: SocketAddr, ours: &str) -> Option<u64> {
    let mut found = None;
    for e in crate::sys::udp_entries(table) {
        let Some(bound) = local_address(e.local) else { continue };
        if bound.port() != addr.port() || !(bound.ip() == addr.ip() || bound.ip().is_unspecified()) {
            continue;
        }
        if !ours.is_empty() && !ours.split_whitespace().any(|o| o.parse() == Ok(e.inode)) {
            continue;
        }
        found = Some(found.unwrap_or(0) + e.rx_queue);
    }
    found
}

/// `0100007F:14E9` or 32 hex digits and a port: the kernel prints an
/// address as the 32-bit words it holds in memory, in the host's order.
fn local_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word =
        |i: usize| -> Option<[u8; 4]> { Some(u32::from_str_radix(ip.get(8 * i..8 * i + 8)?, 16).ok()?.to_ne_bytes()) };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[4 * i..4 * i + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Asks the daemon a query it answers without the network (EDNS version 1:
/// BADVERS); Ok on any answer of ours. One try: the next check, 2 s
/// later, is the retry. Not a connected socket: a wildcard listener of a
/// version before `IP_PKTINFO` (server/udp.rs) asked on 127.0.0.2 answers
/// from the route's source, 127.0.0.1, which a connected socket would
/// drop; the answer is known by its port and ID.
#[inline(never)]
fn probe(addr: SocketAddr, id: u16) -> io::Result<()> {
    let local: SocketAddr =
        if addr.is_ipv4() { (Ipv4Addr::LOCALHOST, 0).into() } else { (Ipv6Addr::LOCALHOST, 0).into() };
    let sock = UdpSocket::bind(local)?;
    sock.set_read_timeout(Some(PROBE_WAIT))?;
    let mut q = crate::wire::build::query(id, "watchdog.hydradns.invalid", crate::wire::rtype::A, Some((1232, false)))
        .ok_or_else(|| io::Error::other("probe query"))?;
    let version = q.len() - 5;
    q[version] = 1;
    let mut buf = [0u8; 512];
    sock.send_to(&q, addr)?;
    let deadline = Instant::now() + PROBE_WAIT;
    while Instant::now() < deadline {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) if from.port() == addr.port() && n >= 2 && buf[..2] == id.to_be_bytes() => return Ok(()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::TimedOut, format!("no answer in {} ms", PROBE_WAIT.as_millis())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fails_open_after_a_failure_that_lasts_and_back_after_two_answers() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let gone = || Seen::Fails("gone".into(), Duration::from_secs(9));
        let hung = || Seen::Fails("hung".into(), Duration::from_secs(4));
        let mut w = Watch::default();
        assert_eq!(w.wait(TICK), TICK);
        assert_eq!(w.step(gone(), at(0)), Act::Nothing);
        assert_eq!(w.wait(TICK), Duration::from_secs(2), "checked again soon");
        assert_eq!(w.step(gone(), at(2)), Act::Nothing);
        // A crash procd respawns: back within its 5 s.
        assert_eq!(w.step(Seen::Answers, at(6)), Act::Nothing);
        assert_eq!(w.wait(TICK), TICK);
        assert_eq!(w.step(gone(), at(20)), Act::Nothing);
        assert_eq!(w.step(gone(), at(28)), Act::Nothing, "8 s of not listening is not yet 9");
        assert_eq!(w.step(gone(), at(29)), Act::Open("gone".into()));
        assert!(w.open);
        assert_eq!(w.wait(TICK), Duration::from_secs(2));
        assert_eq!(w.step(Seen::Answers, at(31)), Act::Nothing);
        // One answer then a failure: not back yet.
        assert_eq!(w.step(hung(), at(33)), Act::Nothing);
        assert_eq!(w.step(Seen::Answers, at(35)), Act::Nothing);
        assert_eq!(w.step(Seen::Answers, at(37)), Act::Close);
        assert_eq!(w, Watch { closed: Some(at(37)), ..Watch::default() });
        // A hang is confirmed sooner: 4 s over two checks at least.
        assert_eq!(w.step(hung(), at(40)), Act::Nothing);
        assert_eq!(w.step(hung(), at(43)), Act::Nothing);
        assert_eq!(w.step(hung(), at(46)), Act::Open("hung".into()));
        let mut w = Watch::default();
        let now = Seen::Fails("x".into(), Duration::ZERO);
        assert_eq!(w.step(now, at(0)), Act::Nothing, "twice at least");
    }

    #[test]
    fn a_busy_daemon_is_not_a_failing_one() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let hung = || Seen::Fails("hung".into(), Duration::from_secs(4));
        let mut w = Watch::default();
        assert_eq!(w.step(hung(), at(0)), Act::Nothing);
        // Reading again: the failure so far is forgotten.
        assert_eq!(w.step(Seen::Busy, at(2)), Act::Nothing);
        assert_eq!(w.wait(TICK), TICK);
        for s in (5..60).step_by(5) {
            assert_eq!(w.step(Seen::Busy, at(s)), Act::Nothing, "busy for {s} s");
        }
        assert_eq!(w.step(hung(), at(60)), Act::Nothing);
        assert_eq!(w.step(hung(), at(62)), Act::Nothing);
        assert_eq!(w.step(hung(), at(64)), Act::Open("hung".into()));
        // Failed open, a busy word changes nothing either way.
        assert_eq!(w.step(Seen::Answers, at(66)), Act::Nothing);
        assert_eq!(w.step(Seen::Busy, at(68)), Act::Nothing);
        assert_eq!(w.step(Seen::Answers, at(70)), Act::Close);
    }

    #[test]
    fn a_daemon_that_fails_soon_after_each_start_waits_longer_each_time() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let gone = || Seen::Fails("gone".into(), Duration::from_secs(9));
        let mut w = Watch::default();
        let mut t = 0;
        // Fails for 10 s, then answers until switched back; returns the answers it took.
        let cycle = |w: &mut Watch, t: &mut u64| {
            assert_eq!(w.step(gone(), at(*t)), Act::Nothing);
            assert!(matches!(w.step(gone(), at(*t + 10)), Act::Open(_)));
            let mut n = 0;
            loop {
                *t += 2;
                n += 1;
                if w.step(Seen::Answers, at(*t + 10)) == Act::Close {
                    *t += 10;
                    return n;
                }
            }
        };
        assert_eq!(cycle(&mut w, &mut t), 2);
        t += 30;
        assert_eq!(cycle(&mut w, &mut t), 4, "failed 30 s after coming back");
        t += 30;
        assert_eq!(cycle(&mut w, &mut t), 8);
        for _ in 0..6 {
            t += 30;
            cycle(&mut w, &mut t);
        }
        assert_eq!(w.passes(), MAX_PASSES, "5 minutes at most");
        // Up for longer than FLAPPING: forgiven.
        t += FLAPPING.as_secs() + 1;
        assert_eq!(cycle(&mut w, &mut t), 2);
    }

    #[test]
    fn reads_the_queues_of_the_bound_port_only() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
            \x20 10: 0100007F:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0\n\
            \x20 11: 0100007F:14E9 00000000:0000 07 00000000:00000340 00:00000000 00000000     0        0 4243 2 0000000000000000 0\n\
            \x20 12: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 99 2 0000000000000000 5\n\
            \x20 13: 0200007F:1F90 00000000:0000 07 00000000:00000010 00:00000000 00000000     0        0 98 2 0000000000000000 5\n";
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(queued_in(table, at("127.0.0.1:5353"), ""), Some(0x340), "two workers' sockets");
        assert_eq!(queued_in(table, at("127.0.0.1:5353"), "4242 4243"), Some(0x340));
        assert_eq!(queued_in(table, at("127.0.0.1:5353"), "4243 7"), Some(0x340), "one of them ours");
        assert_eq!(queued_in(table, at("127.0.0.1:5353"), "4244 4245"), None, "another program's");
        assert_eq!(queued_in(table, at("127.0.0.1:53"), ""), Some(0), "the wildcard on port 53");
        assert_eq!(queued_in(table, at("127.0.0.1:8080"), ""), None, "127.0.0.2 is another address");
        assert_eq!(queued_in(table, at("127.0.0.1:5354"), ""), None);
    }

    #[test]
    fn reads_the_kernels_addresses() {
        if cfg!(target_endian = "little") {
            assert_eq!(local_address("0100007F:0035"), Some("127.0.0.1:53".parse().unwrap()));
            assert_eq!(local_address("00000000000000000000000001000000:14E9"), Some("[::1]:5353".parse().unwrap()));
            assert_eq!(
                local_address("B80D0120000000000000000000000000:0035"),
                Some("[2001:db8::]:53".parse().unwrap())
            );
        }
        assert_eq!(local_address("0100007F"), None);
        assert_eq!(local_address("0100007:0035"), None);
    }

    #[test]
    fn a_live_socket_is_found_and_answers_or_not() {
        // What the kernel says of a socket this test binds.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        assert_eq!(queued(addr, None), Some(0));
        UdpSocket::bind("127.0.0.1:0").unwrap().send_to(b"hello", addr).unwrap();
        // (Queued as the send returns, on loopback; polled for all that.)
        let end = Instant::now() + Duration::from_secs(10);
        while queued(addr, None) == Some(0) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(queued(addr, None).unwrap() > 0, "a datagram waits unread");
        // Nobody reads it: no answer.
        let started = Instant::now();
        assert!(probe(addr, 7).is_err());
        assert!(started.elapsed() >= PROBE_WAIT);
        drop(sock);
        assert_eq!(queued(addr, None), None);
        assert!(probe(addr, 8).is_err());
    }

    #[test]
    fn a_wildcard_listener_answering_from_another_loopback_address_answers() {
        // As the daemon on 0.0.0.0:53 does: asked on 127.0.0.2, it answers
        // from 127.0.0.1, the route's source.
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(&buf[..n], from);
            }
        });
        assert!(probe(SocketAddr::from(([127, 0, 0, 2], port)), 9).is_ok());
    }

    #[test]
    fn the_state_file_says_since_when_and_why() {
        let dir = std::env::temp_dir().join(format!("hydradns-watchdog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("unfiltered");
        assert_eq!(unfiltered(&f), None);
        std::fs::write(&f, "1764849780: nothing listens on 127.0.0.1:5353").unwrap();
        assert_eq!(unfiltered(&f), Some((1_764_849_780, "nothing listens on 127.0.0.1:5353".into())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
