//! Test harness: the real `hydradns` binary on an ephemeral loopback port,
//! a fake upstream server it forwards to, and a small DNS client.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use simple_dns::{CLASS, Name, Packet, PacketFlag, QCLASS, QTYPE, Question, RCODE, ResourceRecord, TYPE, rdata};

pub const A: u16 = 1;
pub const AAAA: u16 = 28;
pub const MX: u16 = 15;

/// Whether process `pid` holds a socket on `port` of 127.0.0.1: for
/// `"tcp"` listening, for `"udp"` bound. Read from /proc: a port that
/// answers a connect may be another test's.
pub fn holds(pid: u32, proto: &str, port: u16) -> bool {
    let want = format!("0100007F:{port:04X}");
    let Ok(table) = std::fs::read_to_string(format!("/proc/net/{proto}")) else { return false };
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 9 && f[1] == want && (proto == "udp" || f[3] == "0A"))
        .map(|f| format!("socket:[{}]", f[9]))
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|link| inodes.iter().any(|i| link.as_os_str() == i.as_str()))
}

/// Starts a program (`spawn` makes it, given `port`) and waits until it
/// holds every socket of `wants` ((`"tcp"` or `"udp"`, port) on
/// 127.0.0.1); `None` when it exits first, as a program does when one of
/// its ports is taken.
pub fn spawn_listening(
    what: &str,
    port: u16,
    wants: &[(&str, u16)],
    spawn: &mut dyn FnMut(u16) -> Child,
) -> Option<KillOnDrop> {
    let mut child = KillOnDrop(spawn(port));
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if wants.iter().all(|(proto, p)| holds(child.0.id(), proto, *p)) {
            return Some(child);
        }
        if child.0.try_wait().unwrap().is_some() {
            return None;
        }
        assert!(Instant::now() < end, "{what} did not bind {wants:?} within 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a server that cannot be handed a bound socket (Unbound,
/// dnsdist, nginx) on a port of 127.0.0.1 free for TCP and UDP when
/// picked. Another test may take it before the server binds it (the
/// server then exits): a clash is tried again on a fresh port. `wants`
/// gives the sockets it must hold for a port `P` (see [`spawn_listening`]).
/// The server and `P`.
pub fn spawn_on_free_port(
    what: &str,
    wants: impl Fn(u16) -> Vec<(&'static str, u16)>,
    mut spawn: impl FnMut(u16) -> Child,
) -> (KillOnDrop, u16) {
    for _ in 0..20 {
        let port = udp_and_tcp_on("127.0.0.1:0".parse().unwrap()).0.local_addr().unwrap().port();
        if let Some(child) = spawn_listening(what, port, &wants(port), &mut spawn) {
            return (child, port);
        }
    }
    panic!("{what}: 20 ports in a row were taken before it could bind one");
}

/// The test TLS material (tests/data/tls): a CA, and a certificate for
/// localhost and 127.0.0.1 that it signed.
pub fn tls_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls"))
}

/// A TLS server's settings with the test certificate (rustls with ring).
pub fn tls_server_config() -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(tls_dir().join("server.pem")).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(tls_dir().join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    )
}

/// Path of third-party test data (tests/data, see its SOURCES.md). A list
/// kept there as `REL.xz` is decompressed once into cargo's target
/// directory, so the repository stays small and the tests read plain files.
pub fn data(rel: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let plain = dir.join(rel);
    if plain.exists() {
        return plain;
    }
    let packed = dir.join(format!("{rel}.xz"));
    assert!(packed.exists(), "missing test data {} (tests/data/SOURCES.md)", plain.display());
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("data").join(rel);
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if out.exists() && mtime(&out) >= mtime(&packed) {
        return out;
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    // Tests run in parallel threads and binaries: each writes its own file
    // and renames it into place, so no reader sees half a list.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = out.with_extension(format!("{}.{}.tmp", std::process::id(), SEQ.fetch_add(1, SeqCst)));
    let file = std::fs::File::create(&tmp).unwrap();
    let status =
        Command::new("xz").arg("-dc").arg(&packed).stdout(file).status().unwrap_or_else(|e| {
            panic!("cannot run xz to read {} ({e}); install it (Debian: xz-utils)", packed.display())
        });
    assert!(status.success(), "xz -dc {} failed", packed.display());
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let p = std::env::temp_dir().join(format!(
            "hydradns-test-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, SeqCst),
            nanos
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }
}

/// A child process killed (and reaped) when dropped, whatever the test did:
/// a server left running would keep holding cargo's output pipe.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

// ---------------------------------------------------------------- fake upstream

/// What the fake upstream does, adjustable while it runs.
#[derive(Default)]
pub struct Behaviour {
    /// Ignore every query.
    pub silent: AtomicBool,
    /// Delay every answer by this many ms.
    pub delay_ms: AtomicU64,
    /// Answer every UDP query with junk that carries the query's ID.
    pub garbage: AtomicBool,
    /// When not 0, answer every query with this RCODE and no records (an
    /// NXDOMAIN carries an SOA): an upstream whose answers changed.
    pub rcode: AtomicU8,
    /// Hold every UDP answer until this is cleared: a slow upstream whose
    /// answer comes when the test says, not after some time.
    pub hold: AtomicBool,
    /// When not 0, the TTL of every answer's records, whatever the name says
    /// (read as the answer is sent): the same name, now longer-lived.
    pub ttl: AtomicU32,
}

/// A DNS server on 127.0.0.1 (UDP and TCP, same port) with scripted answers.
///
/// Names drive the answer: `nx.*` NXDOMAIN+SOA, `nodata.*` NOERROR+SOA,
/// `servfail.*` SERVFAIL, `ttlN.*` TTL N, `big.*` 40 A records (fits 1232,
/// not 512), `huge.*` 100 A records (sent with TC over UDP, whole over TCP),
/// `spoof.*` a wrong-ID and a wrong-question reply before the real one,
/// `cloaked.*` a CNAME to `tracker.cname-target.example` and its A record,
/// `flood.*` 2,000 forged replies (wrong IDs) before the real one.
/// Anything else: A `answer_ip`, AAAA 2001:db8::1, TTL 300.
pub struct Upstream {
    pub addr: SocketAddr,
    pub answer_ip: Ipv4Addr,
    pub behaviour: Arc<Behaviour>,
    log: Arc<Mutex<Vec<(String, u16, bool)>>>,
    /// Every query that arrived, answered or not (a silent upstream's too).
    heard: Arc<Mutex<Vec<String>>>,
    client_options: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// A UDP socket and a TCP listener on one port of `bind`'s address (port
/// 0: any). The UDP port the kernel picks may be taken for TCP by another
/// test's connection: fresh ports are tried until both binds succeed.
pub fn udp_and_tcp_on(bind: SocketAddr) -> (UdpSocket, TcpListener) {
    (0..64)
        .find_map(|_| {
            let udp = UdpSocket::bind(bind).ok()?;
            let tcp = TcpListener::bind(udp.local_addr().ok()?).ok()?;
            Some((udp, tcp))
        })
        .expect("no port free for both UDP and TCP")
}

impl Upstream {
    pub fn start(answer_ip: Ipv4Addr) -> Upstream {
        Upstream::start_on("127.0.0.1:0".parse().unwrap(), answer_ip)
    }

    /// On `bind` (port 0: any free one), e.g. port 53 of an address of
    /// 127/8, as a resolv.conf can name no other port.
    pub fn start_on(bind: SocketAddr, answer_ip: Ipv4Addr) -> Upstream {
        let (udp, tcp) = udp_and_tcp_on(bind);
        let addr = udp.local_addr().unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        tcp.set_nonblocking(true).unwrap();
        let up = Upstream {
            addr,
            answer_ip,
            behaviour: Arc::new(Behaviour::default()),
            log: Arc::new(Mutex::new(Vec::new())),
            heard: Arc::new(Mutex::new(Vec::new())),
            client_options: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (b, log, stop) = (up.behaviour.clone(), up.log.clone(), up.stop.clone());
        let (client_options, heard) = (up.client_options.clone(), up.heard.clone());
        std::thread::spawn(move || {
            let udp = Arc::new(udp);
            let mut buf = [0u8; 4096];
            while !stop.load(SeqCst) {
                let Ok((n, peer)) = udp.recv_from(&mut buf) else { continue };
                let msg = buf[..n].to_vec();
                let identifying = |c: &u16| matches!(c, 8 | 65001 | 65073 | 65074);
                if Packet::parse(&msg)
                    .is_ok_and(|p| p.opt().is_some_and(|o| o.opt_codes.iter().any(|c| identifying(&c.code))))
                {
                    client_options.fetch_add(1, SeqCst);
                }
                if let Some((name, _)) = question(&msg).or_else(|| raw_question(&msg)) {
                    heard.lock().unwrap().push(name);
                }
                if b.silent.load(SeqCst) {
                    continue;
                }
                if b.garbage.load(SeqCst) && msg.len() >= 2 {
                    let mut junk = msg[..2].to_vec();
                    junk.extend((0..40u8).map(|i| i.wrapping_mul(37) | 0x80));
                    let _ = udp.send_to(&junk, peer);
                    continue;
                }
                let Some((name, qtype)) = question(&msg) else {
                    // A type simple-dns does not know: answer NOERROR, no records, by hand.
                    if let Some((name, qtype)) = raw_question(&msg) {
                        log.lock().unwrap().push((name, qtype, false));
                        let _ = udp.send_to(&raw_nodata(&msg), peer);
                    }
                    continue;
                };
                log.lock().unwrap().push((name.clone(), qtype, false));
                let delay = b.delay_ms.load(SeqCst);
                let force = b.rcode.load(SeqCst);
                let held = b.hold.load(SeqCst);
                let (udp, b2) = (udp.clone(), b.clone());
                let reply = move || {
                    if delay > 0 {
                        std::thread::sleep(Duration::from_millis(delay));
                    }
                    while b2.hold.load(SeqCst) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    if name.starts_with("spoof.") {
                        let mut wrong_id = answer(&msg, answer_ip, false, 0);
                        wrong_id[0] ^= 0xff;
                        let _ = udp.send_to(&wrong_id, peer);
                        let other = build_query(1, "other.example", A, None);
                        let mut other = answer(&other, Ipv4Addr::new(6, 6, 6, 6), false, 0);
                        other[..2].copy_from_slice(&msg[..2]);
                        let _ = udp.send_to(&other, peer);
                        let _ = udp.send_to(b"garbage", peer);
                    }
                    if name.starts_with("flood.") {
                        let mut forged = answer(&msg, Ipv4Addr::new(6, 6, 6, 6), false, 0);
                        for i in 0..2000u16 {
                            let id = u16::from_be_bytes([msg[0], msg[1]]) ^ (i | 1);
                            forged[..2].copy_from_slice(&id.to_be_bytes());
                            let _ = udp.send_to(&forged, peer);
                        }
                    }
                    let mut reply = answer(&msg, answer_ip, false, force);
                    set_ttl(&mut reply, b2.ttl.load(SeqCst));
                    let _ = udp.send_to(&reply, peer);
                };
                if delay > 0 || held {
                    std::thread::spawn(reply);
                } else {
                    reply();
                }
            }
        });
        let (b, log, stop, heard) = (up.behaviour.clone(), up.log.clone(), up.stop.clone(), up.heard.clone());
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                let Ok((mut s, _)) = tcp.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                while let Some(msg) = read_frame(&mut s) {
                    if let Some((name, _)) = question(&msg) {
                        heard.lock().unwrap().push(name);
                    }
                    if b.silent.load(SeqCst) {
                        continue;
                    }
                    let Some((name, qtype)) = question(&msg) else { break };
                    log.lock().unwrap().push((name, qtype, true));
                    let mut reply = answer(&msg, answer_ip, true, b.rcode.load(SeqCst));
                    set_ttl(&mut reply, b.ttl.load(SeqCst));
                    let _ = write_frame(&mut s, &reply);
                }
            }
        });
        up
    }

    /// UDP queries that reached it carrying a client-identifying EDNS
    /// option (Client Subnet, dnsmasq's MAC options, CPE id): none should.
    pub fn client_options_seen(&self) -> usize {
        self.client_options.load(SeqCst)
    }

    /// Queries seen for `name` (lowercase), over UDP and TCP.
    pub fn seen(&self, name: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|(n, _, _)| n == name).count()
    }
    /// Queries seen for `name` over TCP.
    pub fn seen_tcp(&self, name: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|(n, _, tcp)| n == name && *tcp).count()
    }
    /// All queries seen.
    pub fn total(&self) -> usize {
        self.log.lock().unwrap().len()
    }
    /// Queries that arrived for `name`, answered or not: a silent
    /// upstream's count shows whether the gateway asked it.
    pub fn asked(&self, name: &str) -> usize {
        self.heard.lock().unwrap().iter().filter(|n| *n == name).count()
    }
    /// Every query that arrived, answered or not.
    pub fn asked_total(&self) -> usize {
        self.heard.lock().unwrap().len()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}

fn question(msg: &[u8]) -> Option<(String, u16)> {
    let p = Packet::parse(msg).ok()?;
    let q = p.questions.first()?;
    let qtype: u16 = q.qtype.into();
    Some((q.qname.to_string().to_ascii_lowercase(), qtype))
}

/// The question of a query simple-dns will not parse (an unknown type).
fn raw_question(msg: &[u8]) -> Option<(String, u16)> {
    let mut labels = Vec::new();
    let mut p = 12;
    loop {
        let len = *msg.get(p)? as usize;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(msg.get(p + 1..p + 1 + len)?).to_ascii_lowercase());
        p += 1 + len;
    }
    let t = u16::from_be_bytes([*msg.get(p + 1)?, *msg.get(p + 2)?]);
    Some((labels.join("."), t))
}

/// NOERROR with no records, for a query given as bytes: header and question only.
fn raw_nodata(msg: &[u8]) -> Vec<u8> {
    let mut p = 12;
    while msg[p] != 0 {
        p += 1 + msg[p] as usize;
    }
    let mut r = msg[..p + 5].to_vec();
    r[2] = 0x81;
    r[3] = 0x80;
    r[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
    r
}

fn soa(zone: &str, ttl: u32, minimum: u32) -> ResourceRecord<'static> {
    ResourceRecord::new(
        Name::new_unchecked(zone).into_owned(),
        CLASS::IN,
        ttl,
        rdata::RData::SOA(rdata::SOA {
            mname: Name::new_unchecked("ns.test").into_owned(),
            rname: Name::new_unchecked("hostmaster.test").into_owned(),
            serial: 1,
            refresh: 3600,
            retry: 600,
            expire: 86400,
            minimum,
        }),
    )
}

/// Sets every answer record's TTL in `reply` to `ttl` (0: leaves them).
fn set_ttl(reply: &mut Vec<u8>, ttl: u32) {
    if ttl == 0 {
        return;
    }
    let Ok(mut p) = Packet::parse(reply) else { return };
    p.answers.iter_mut().for_each(|r| r.ttl = ttl);
    *reply = p.build_bytes_vec_compressed().unwrap();
}

/// The fake upstream's answer to `msg` (`force`: see [`Behaviour::rcode`]).
fn answer(msg: &[u8], ip: Ipv4Addr, over_tcp: bool, force: u8) -> Vec<u8> {
    let q = Packet::parse(msg).unwrap();
    let mut p = Packet::new_reply(q.id());
    p.set_flags(PacketFlag::RECURSION_DESIRED | PacketFlag::RECURSION_AVAILABLE);
    p.questions = q.questions.clone();
    let qn = &q.questions[0];
    let name = qn.qname.to_string().to_ascii_lowercase();
    let qtype: u16 = qn.qtype.into();
    let mut ttl = 300;
    if let Some(rest) = name.strip_prefix("ttl") {
        ttl = rest.split('.').next().and_then(|n| n.parse().ok()).unwrap_or(300);
    }
    let record = |i: u32| {
        ResourceRecord::new(qn.qname.clone(), CLASS::IN, ttl, rdata::RData::A(rdata::A { address: u32::from(ip) + i }))
    };
    if force != 0 {
        *p.rcode_mut() = RCODE::from(u16::from(force));
        if force == 3 {
            p.name_servers.push(soa("test", 600, 60));
        }
    } else if name.starts_with("cloaked.") {
        // A first-party name that is really a tracker: CNAME into another domain.
        let target = Name::new_unchecked("tracker.cname-target.example").into_owned();
        p.answers.push(ResourceRecord::new(
            qn.qname.clone(),
            CLASS::IN,
            ttl,
            rdata::RData::CNAME(rdata::CNAME(target.clone())),
        ));
        p.answers.push(ResourceRecord::new(
            target,
            CLASS::IN,
            ttl,
            rdata::RData::A(rdata::A { address: u32::from(ip) }),
        ));
    } else if name.starts_with("nx.") {
        *p.rcode_mut() = RCODE::NameError;
        p.name_servers.push(soa("test", 600, 60));
    } else if name.starts_with("nodata.") {
        p.name_servers.push(soa("test", 45, 600));
    } else if name.starts_with("servfail.") {
        *p.rcode_mut() = RCODE::ServerFailure;
    } else if name.starts_with("big.") {
        (0..40).for_each(|i| p.answers.push(record(i)));
    } else if name.starts_with("huge.") {
        if over_tcp {
            (0..100).for_each(|i| p.answers.push(record(i)));
        } else {
            p.set_flags(PacketFlag::TRUNCATION);
        }
    } else if qtype == A {
        p.answers.push(record(0));
    } else if qtype == AAAA {
        p.answers.push(ResourceRecord::new(
            qn.qname.clone(),
            CLASS::IN,
            ttl,
            rdata::RData::AAAA(rdata::AAAA { address: 0x2001_0db8_0000_0000_0000_0000_0000_0001 }),
        ));
    } else {
        p.name_servers.push(soa("test", 300, 300));
    }
    if name.starts_with("secure.") {
        // As a validating resolver answers a signed name.
        p.set_flags(PacketFlag::AUTHENTIC_DATA);
    }
    if q.opt().is_some() {
        *p.opt_mut() = Some(rdata::OPT { opt_codes: vec![], udp_packet_size: 1232, version: 0 });
    }
    p.build_bytes_vec_compressed().unwrap()
}

// ---------------------------------------------------------------- client

/// A query message. `edns`: Some(udp size).
pub fn build_query(id: u16, name: &str, qtype: u16, edns: Option<u16>) -> Vec<u8> {
    let mut p = Packet::new_query(id);
    p.set_flags(PacketFlag::RECURSION_DESIRED);
    let qtype = QTYPE::TYPE(TYPE::from(qtype));
    p.questions.push(Question::new(Name::new_unchecked(name), qtype, QCLASS::CLASS(CLASS::IN), false));
    if let Some(size) = edns {
        *p.opt_mut() = Some(rdata::OPT { opt_codes: vec![], udp_packet_size: size, version: 0 });
    }
    p.build_bytes_vec().unwrap()
}

/// The start of a test Unbound's `server:` clause: foreground, no user,
/// chroot, pidfile or syslog, files in `dir`, loopback only, one thread, no
/// validation of its own (module iterator, no trust anchor), listening on
/// `port_option: @PORT@` (the port is written in once it is known, see
/// [`spawn_on_free_port`]). Without SO_REUSEPORT: a port another root
/// process shares that way (a gateway's) must make the bind fail, not be
/// joined. The caller adds its own lines.
pub fn unbound_server(dir: &Path, port_option: &str) -> String {
    format!(
        "server:\n\
         \tinterface: 127.0.0.1@@PORT@\n\
         \t{port_option}: @PORT@\n\
         \tso-reuseport: no\n\
         \tdo-daemonize: no\n\
         \tusername: \"\"\n\
         \tchroot: \"\"\n\
         \tdirectory: \"{dir}\"\n\
         \tpidfile: \"\"\n\
         \tuse-syslog: no\n\
         \tlogfile: \"\"\n\
         \tnum-threads: 1\n\
         \tdo-ip6: no\n\
         \taccess-control: 127.0.0.0/8 allow\n\
         \tmodule-config: \"iterator\"\n\
         \tauto-trust-anchor-file: \"\"\n",
        dir = dir.display(),
    )
}

/// What Unbound binds on its port: TCP for TLS or HTTPS, UDP for plain DNS.
pub fn unbound_sockets(port: u16) -> Vec<(&'static str, u16)> {
    vec![("tcp", port), ("udp", port)]
}

/// Unbound in the foreground with `conf`.
pub fn unbound(conf: &Path) -> Child {
    Command::new("unbound")
        .args(["-d", "-c"])
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("unbound (Debian package unbound) is needed for these tests")
}

/// Extended DNS Error info codes in the answer's OPT (RFC 8914).
pub fn ede_codes(raw: &[u8]) -> Vec<u16> {
    let p = Packet::parse(raw).unwrap();
    p.opt()
        .map(|o| {
            o.opt_codes
                .iter()
                .filter(|c| c.code == 15 && c.data.len() >= 2)
                .map(|c| u16::from_be_bytes([c.data[0], c.data[1]]))
                .collect()
        })
        .unwrap_or_default()
}

/// A parsed answer, owned, with what tests look at.
#[derive(Debug, Clone)]
pub struct Reply {
    pub raw: Vec<u8>,
    pub id: u16,
    pub rcode: RCODE,
    pub truncated: bool,
    pub qname: Option<String>,
    /// (type, ttl, rdata as text)
    pub answers: Vec<(u16, u32, String)>,
    pub authority: Vec<(u16, u32)>,
    pub opt_size: Option<u16>,
}

impl Reply {
    pub fn parse(raw: Vec<u8>) -> Reply {
        let p = Packet::parse(&raw).unwrap_or_else(|e| panic!("unparseable reply {raw:?}: {e}"));
        let text = |rd: &rdata::RData| match rd {
            rdata::RData::A(a) => Ipv4Addr::from(a.address).to_string(),
            rdata::RData::AAAA(a) => std::net::Ipv6Addr::from(a.address).to_string(),
            other => format!("{other:?}"),
        };
        Reply {
            id: p.id(),
            rcode: p.rcode(),
            truncated: p.has_flags(PacketFlag::TRUNCATION),
            qname: p.questions.first().map(|q| q.qname.to_string()),
            answers: p.answers.iter().map(|r| (r.rdata.type_code().into(), r.ttl, text(&r.rdata))).collect(),
            authority: p.name_servers.iter().map(|r| (r.rdata.type_code().into(), r.ttl)).collect(),
            opt_size: p.opt().map(|o| o.udp_packet_size),
            raw: raw.clone(),
        }
    }
    pub fn ips(&self) -> Vec<String> {
        self.answers.iter().map(|a| a.2.clone()).collect()
    }
}

/// Polls `done` until it holds; fails the test if it does not within `within`.
pub fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends raw bytes over UDP and waits for one datagram.
/// Whether the answer to `name` (asked with AD set, RFC 6840 §5.7) has AD.
pub fn answered_with_ad(server: SocketAddr, name: &str) -> bool {
    let mut q = build_query(0x4144, name, A, Some(1232));
    q[3] |= 0x20;
    let r = udp_raw(server, &q, Duration::from_secs(5)).unwrap_or_else(|| panic!("no answer to {name}"));
    assert_eq!(r[3] & 0x0f, 0, "{name}: rcode");
    r[3] & 0x20 != 0
}

pub fn udp_raw(server: SocketAddr, msg: &[u8], wait: Duration) -> Option<Vec<u8>> {
    let bind = if server.is_ipv4() { "127.0.0.1:0" } else { "[::1]:0" };
    let s = UdpSocket::bind(bind).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.send_to(msg, server).unwrap();
    let mut buf = vec![0u8; 65535];
    let (n, _) = s.recv_from(&mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// An A query carrying EDNS `options` ((code, data) pairs).
pub fn query_with_options(id: u16, name: &str, options: &[(u16, &[u8])]) -> Vec<u8> {
    let mut q = build_query(id, name, A, Some(1232));
    // The OPT record is last and empty: its RDLENGTH is the last two bytes.
    let mut rdata = Vec::new();
    for (code, data) in options {
        rdata.extend_from_slice(&code.to_be_bytes());
        rdata.extend_from_slice(&(data.len() as u16).to_be_bytes());
        rdata.extend_from_slice(data);
    }
    let len = q.len();
    q[len - 2..].copy_from_slice(&(rdata.len() as u16).to_be_bytes());
    q.extend_from_slice(&rdata);
    q
}

static NEXT_ID: AtomicU16 = AtomicU16::new(1);

/// One UDP query; panics if there is no answer within 10 s (a bound for
/// a hung gateway, far above any test's upstream timeout).
pub fn udp(server: SocketAddr, name: &str, qtype: u16) -> Reply {
    udp_edns(server, name, qtype, None)
}

pub fn udp_edns(server: SocketAddr, name: &str, qtype: u16, edns: Option<u16>) -> Reply {
    let id = NEXT_ID.fetch_add(1, SeqCst);
    let raw = udp_raw(server, &build_query(id, name, qtype, edns), Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no UDP answer for {name}"));
    let r = Reply::parse(raw);
    assert_eq!(r.id, id, "answer carries our ID");
    r
}

pub fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).ok()?;
    Some(buf)
}

pub fn write_frame(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    let mut f = (msg.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(msg);
    s.write_all(&f)
}

pub fn tcp_connect(server: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&server, Duration::from_secs(10)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// One query over a new TCP connection.
pub fn tcp(server: SocketAddr, name: &str, qtype: u16) -> Reply {
    let mut s = tcp_connect(server);
    let id = NEXT_ID.fetch_add(1, SeqCst);
    write_frame(&mut s, &build_query(id, name, qtype, None)).unwrap();
    let r = Reply::parse(read_frame(&mut s).expect("TCP answer"));
    assert_eq!(r.id, id);
    r
}

// ---------------------------------------------------------------- the gateway

/// The binary under test: this build's, or `HYDRADNS_TEST_BIN` (a cross-built
/// one) run through `HYDRADNS_TEST_RUNNER` (e.g. `qemu-aarch64`), so the same
/// tests check the router binaries under emulation.
pub fn hydradns() -> Command {
    let bin = std::env::var_os("HYDRADNS_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_hydradns").into());
    match std::env::var_os("HYDRADNS_TEST_RUNNER") {
        Some(runner) => {
            let mut c = Command::new(runner);
            c.arg(bin);
            c
        }
        None => Command::new(bin),
    }
}

/// A process's stderr as it comes. Whoever reads the text first moves what
/// the pipe holds into it, under one lock: a line the process wrote before
/// it answered something is in the text once that answer is in, however
/// late a reader thread would have got to it on a busy machine.
pub struct LogPipe {
    fd: rustix::fd::OwnedFd,
    bytes: Mutex<Vec<u8>>,
}

impl LogPipe {
    /// Takes `stderr` over; a thread of its own keeps the pipe from filling.
    pub fn start(stderr: std::process::ChildStderr) -> Arc<LogPipe> {
        let fd = rustix::fd::OwnedFd::from(stderr);
        rustix::io::ioctl_fionbio(&fd, true).unwrap();
        let pipe = Arc::new(LogPipe { fd, bytes: Mutex::new(Vec::new()) });
        let reader = pipe.clone();
        std::thread::spawn(move || {
            use rustix::event::{PollFd, PollFlags, poll};
            loop {
                let mut fds = [PollFd::new(&reader.fd, PollFlags::IN)];
                if poll(&mut fds, None).is_err_and(|e| e != rustix::io::Errno::INTR) {
                    return;
                }
                if reader.drain(&mut reader.bytes.lock().unwrap()) {
                    return;
                }
            }
        });
        pipe
    }

    /// Moves what the pipe holds into `bytes`; true at its end.
    fn drain(&self, bytes: &mut Vec<u8>) -> bool {
        let mut buf = [0u8; 16384];
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(0) => return true,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return false,
                Err(_) => return true,
            }
        }
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        let mut bytes = self.bytes.lock().unwrap();
        self.drain(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The real binary, started on 127.0.0.1:0 with a config written for the test.
pub struct Gateway {
    child: Child,
    pub addr: SocketAddr,
    pub addrs: Vec<SocketAddr>,
    pub config: PathBuf,
    pub log: Arc<LogPipe>,
    pub dir: TempDir,
}

/// A config listening on an ephemeral loopback port and forwarding to
/// `upstreams`, with the shipped 2 s `upstream_timeout`: the fake upstream
/// on a busy machine answers well within it. A test that waits for a
/// timeout sets its own (`extra` comes after, and the later line wins).
pub fn config(upstreams: &[&Upstream], extra: &str) -> String {
    let mut c = String::from("config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '2s'\n");
    for u in upstreams {
        c.push_str(&format!("\tlist upstream '{}'\n", u.addr));
    }
    c.push_str(extra);
    c
}

impl Gateway {
    /// Starts with `config_text`; panics if it does not come up within 10 s.
    pub fn start(config_text: &str) -> Gateway {
        let dir = TempDir::new();
        let config = dir.file("hydradns.conf", &Gateway::localize(config_text, &dir.0));
        Gateway::start_with(dir, config)
    }

    /// Keeps every file the gateway writes inside the test's directory:
    /// `@DIR@` becomes that directory, and the control socket and query log
    /// go there unless the config already places them.
    pub fn localize(config_text: &str, dir: &Path) -> String {
        let d = dir.display().to_string();
        let mut text = config_text.replace("@DIR@", &d);
        if !text.contains("control_socket")
            && let Some(start) = text.find("config hydradns")
            && let Some(eol) = text[start..].find('\n')
        {
            text.insert_str(start + eol + 1, &format!("\toption control_socket '{d}/control.sock'\n"));
        }
        if !text.contains("config querylog") {
            text.push_str(&format!(
                "config querylog 'querylog'\n\toption path '{d}/live/queries.db'\n\toption flash_path '{d}/flash/queries.db'\n"
            ));
        }
        text
    }

    /// The control socket path (where `localize` put it).
    pub fn control_socket(&self) -> PathBuf {
        self.dir.0.join("control.sock")
    }

    pub fn start_with(dir: TempDir, config: PathBuf) -> Gateway {
        Gateway::start_command(dir, config, hydradns())
    }

    /// Starts `command` (the binary, perhaps behind a wrapper) with `run` and
    /// `config`. Run as root (as in CI), the gateway stays root: the test's
    /// files are root's.
    pub fn start_command(dir: TempDir, config: PathBuf, command: Command) -> Gateway {
        Gateway::start_as(dir, config, command, "root")
    }

    /// As [`Gateway::start_command`], running as `user` once the sockets are bound.
    pub fn start_as(dir: TempDir, config: PathBuf, mut command: Command, user: &str) -> Gateway {
        let mut child = command
            .args(["run", "--user", user, "--log", "stderr", "-c"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = LogPipe::start(child.stderr.take().unwrap());
        let mut g = Gateway { child, addr: "0.0.0.0:0".parse().unwrap(), addrs: Vec::new(), config, log, dir };
        // Emulated binaries start slower.
        assert!(g.wait_log("ready with ", Duration::from_secs(30)), "gateway did not start:\n{}", g.log());
        g.addrs =
            g.log().lines().filter_map(|l| l.split("listening on ").nth(1)?.split(' ').next()?.parse().ok()).collect();
        g.addr = g.addrs[0];
        g
    }

    pub fn log(&self) -> String {
        self.log.text()
    }

    /// Where `metrics_listen` bound (its port 0 made concrete), from the log.
    pub fn metrics_addr(&self) -> SocketAddr {
        let log = self.log();
        let addr = log.lines().find_map(|l| l.split("metrics at http://").nth(1)?.strip_suffix("/metrics"));
        addr.and_then(|a| a.parse().ok()).unwrap_or_else(|| panic!("no metrics listener in the log:\n{log}"))
    }

    /// CPU time the process has used so far (user + system), from /proc.
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        let ticks: u64 = rest[11].parse::<u64>().unwrap() + rest[12].parse::<u64>().unwrap();
        // USER_HZ is 100 on every Linux target this runs on.
        ticks as f64 / 100.0
    }

    /// Waits until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_log_count(needle, 1, timeout)
    }

    /// Waits until `needle` appears at least `n` times.
    pub fn wait_log_count(&self, needle: &str, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.log().matches(needle).count() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([&format!("-{sig}"), &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
    }

    /// The server's own counters (SIGUSR1 makes it log them).
    pub fn stats(&self) -> HashMap<String, u64> {
        let before = self.log().matches("stats: ").count();
        self.signal("USR1");
        assert!(self.wait_log_count("stats: ", before + 1, Duration::from_secs(30)), "no stats line");
        let log = self.log();
        let line = log.lines().rev().find(|l| l.contains("stats: ")).unwrap();
        line.split_whitespace()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.split('/').next()?.parse().ok()?))
            })
            .collect()
    }

    /// The live report `hydradns stats --json` reads over the control socket.
    pub fn report(&self) -> hydradns::stats::Report {
        use nanoserde::DeJson;
        let (code, out, err) = cli(&["stats", "-c", self.config.to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{err}");
        hydradns::stats::Report::deserialize_json(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// Replaces the config file and sends SIGHUP; waits for the reload to be
    /// logged. The lists are rebuilt on a thread at nice 15, which a busy
    /// machine leaves little of the CPU: up to two minutes.
    pub fn reload(&self, config_text: &str) {
        let before = self.log().matches("reload").count();
        std::fs::write(&self.config, Gateway::localize(config_text, &self.dir.0)).unwrap();
        self.signal("HUP");
        assert!(
            self.wait_log_count("reload", before + 1, Duration::from_secs(120)),
            "no reload logged:\n{}",
            self.log()
        );
    }

    /// SIGTERM, then the exit status and the directory, kept for inspection or a restart.
    pub fn stop_keeping_dir(mut self) -> (std::process::ExitStatus, TempDir) {
        let status = self.terminate();
        (status, std::mem::replace(&mut self.dir, TempDir(PathBuf::new())))
    }

    /// SIGKILL (no chance to clean up), keeping the directory for a restart.
    pub fn kill_keeping_dir(mut self) -> TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, TempDir(PathBuf::new()))
    }

    /// SIGTERM, then the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.terminate()
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < end, "did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary with `args` and returns (exit code, stdout, stderr).
pub fn cli(args: &[&str]) -> (i32, String, String) {
    let out = hydradns().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Are the tests running as root (as in CI)?
pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().unwrap().stdout == b"0\n"
}

pub fn localhost() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

/// Context switches of all the process's threads so far.
pub fn wake_ups(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

// ---------------------------------------------------------------- query log

pub fn cfg_path(gw: &Gateway) -> &str {
    gw.config.to_str().unwrap()
}

/// `hydradns log --json` with `extra` arguments.
pub fn log_rows(gw: &Gateway, extra: &[&str]) -> Vec<hydradns::querylog::read::LogRow> {
    use nanoserde::DeJson;
    let mut args = vec!["log", "-c", cfg_path(gw), "--json", "--limit", "100000"];
    args.extend_from_slice(extra);
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "{err}");
    LogPage::deserialize_json(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}")).entries
}

/// A `config querylog` section keeping its files in the test's directory.
pub fn log_section(dir_extra: &str) -> String {
    format!(
        "config querylog 'querylog'\n\toption path '@DIR@/live/queries.db'\n\toption flash_path '@DIR@/flash/queries.db'\n{dir_extra}"
    )
}

/// `hydradns log --json`.
#[derive(nanoserde::DeJson)]
pub struct LogPage {
    pub schema: u64,
    pub entries: Vec<hydradns::querylog::read::LogRow>,
}
