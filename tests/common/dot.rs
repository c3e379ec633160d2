//! DNS over TLS and over HTTPS servers for the encrypted-upstream tests:
//! the real Unbound (Debian's build) serving DoT or DoH (HTTP/2 only) in
//! front of the tests' fake upstream, dnsdist (DoT, DoH with h2o), and
//! a scripted DoT server (rustls) for behaviour Unbound cannot be made to
//! show on demand: replies in reverse order, a connection closed with a
//! query outstanding, a server that stops answering.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{
    KillOnDrop, TempDir, spawn_listening, spawn_on_free_port, tls_dir, tls_server_config, unbound, unbound_server,
    unbound_sockets,
};

/// Unbound serving DNS over TLS on 127.0.0.1, forwarding everything to `forward`.
pub struct Unbound {
    child: Option<KillOnDrop>,
    pub addr: SocketAddr,
    conf: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    pub dir: TempDir,
}

impl Unbound {
    /// Starts it with `extra` lines in its `server:` clause; `cert`/`key`
    /// default to the test certificate.
    pub fn start(forward: SocketAddr, extra: &str) -> Unbound {
        Unbound::start_with(forward, extra, &tls_dir().join("server.pem"), &tls_dir().join("server.key"))
    }

    pub fn start_with(forward: SocketAddr, extra: &str, cert: &Path, key: &Path) -> Unbound {
        Unbound::serve("tls-port", forward, extra, cert, key)
    }

    /// Unbound serving DNS over HTTPS (HTTP/2 only, path /dns-query).
    pub fn start_doh(forward: SocketAddr) -> Unbound {
        Unbound::serve("https-port", forward, "", &tls_dir().join("server.pem"), &tls_dir().join("server.key"))
    }

    fn serve(port_option: &str, forward: SocketAddr, extra: &str, cert: &Path, key: &Path) -> Unbound {
        let dir = TempDir::new();
        let conf = dir.0.join("unbound.conf");
        // The port is written in when it is known (`@PORT@`).
        let template = format!(
            "{server}\
                 \ttls-service-key: \"{key}\"\n\
                 \ttls-service-pem: \"{cert}\"\n\
                 \tverbosity: 1\n\
                 \tdo-not-query-localhost: no\n\
                 \tqname-minimisation: no\n\
                 {extra}\
                 forward-zone:\n\
                 \tname: \".\"\n\
                 \tforward-addr: {ip}@{fport}\n",
            server = unbound_server(&dir.0, port_option),
            key = key.display(),
            cert = cert.display(),
            ip = forward.ip(),
            fport = forward.port(),
        );
        let (child, port) = spawn_on_free_port("unbound", unbound_sockets, |port| {
            std::fs::write(&conf, template.replace("@PORT@", &port.to_string())).unwrap();
            unbound(&conf)
        });
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let (cert, key) = (cert.to_path_buf(), key.to_path_buf());
        Unbound { child: Some(child), addr, conf, cert, key, dir }
    }

    /// Starts the process again on the same port. A client's socket may
    /// hold the port for a moment (it is an ephemeral one): tried again
    /// until it is free, for 30 s at most.
    pub fn launch(&mut self) {
        let end = Instant::now() + Duration::from_secs(30);
        let conf = self.conf.clone();
        loop {
            let port = self.addr.port();
            if let Some(child) = spawn_listening("unbound", port, &unbound_sockets(port), &mut |_| unbound(&conf)) {
                self.child = Some(child);
                return;
            }
            assert!(Instant::now() < end, "unbound could not have its port {} back within 30 s", self.addr);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Restarts it on the same port with another certificate.
    pub fn relaunch_with(&mut self, cert: &Path, key: &Path) {
        self.kill();
        let text = std::fs::read_to_string(&self.conf).unwrap();
        let text = text
            .replace(&*self.cert.to_string_lossy(), &cert.to_string_lossy())
            .replace(&*self.key.to_string_lossy(), &key.to_string_lossy());
        std::fs::write(&self.conf, text).unwrap();
        (self.cert, self.key) = (cert.to_path_buf(), key.to_path_buf());
        self.launch();
    }

    /// Kills it (the port closes; `launch` brings it back).
    pub fn kill(&mut self) {
        self.child = None;
    }
}

/// dnsdist (Debian's) serving DNS over TLS on 127.0.0.1 in front of `backend`.
pub struct Dnsdist {
    _child: KillOnDrop,
    pub addr: SocketAddr,
    pub dir: TempDir,
}

impl Dnsdist {
    /// DNS over TLS.
    pub fn start(backend: SocketAddr) -> Dnsdist {
        Dnsdist::serve(backend, "addTLSLocal(\"127.0.0.1:{port}\", \"{cert}\", \"{key}\")")
    }

    /// DNS over HTTPS (h2o: HTTP/2 or HTTP/1.1, as ALPN picks), path /dns-query.
    pub fn start_doh(backend: SocketAddr) -> Dnsdist {
        Dnsdist::serve(backend, "addDOHLocal(\"127.0.0.1:{port}\", \"{cert}\", \"{key}\", \"/dns-query\")")
    }

    /// DNS over plain HTTP/1.1 (for a TLS proxy in front), path /dns-query.
    pub fn start_plain_doh(backend: SocketAddr) -> Dnsdist {
        Dnsdist::serve(backend, "addDOHLocal(\"127.0.0.1:{port}\", nil, nil, \"/dns-query\")")
    }

    /// `listen` is the Lua line of the listener, with `{port}`, `{cert}` and `{key}` filled in.
    fn serve(backend: SocketAddr, listen: &str) -> Dnsdist {
        let dir = TempDir::new();
        let conf = dir.0.join("dnsdist.conf");
        let listen = listen
            .replace("{cert}", &tls_dir().join("server.pem").to_string_lossy())
            .replace("{key}", &tls_dir().join("server.key").to_string_lossy());
        // Its console-less plain listener (`setLocal`, which it needs) on
        // the port after the one under test: a clash there ends the
        // process too, and the pair is tried again elsewhere.
        let plain = |port: u16| port.checked_add(1).unwrap_or(1024);
        let wants = |port| vec![("tcp", port), ("tcp", plain(port)), ("udp", plain(port))];
        let (child, port) = spawn_on_free_port("dnsdist", wants, |port| {
            let text = format!(
                "setLocal(\"127.0.0.1:{plain}\")\n\
                 {listen}\n\
                 newServer({{address=\"{backend}\"}})\n\
                 setSecurityPollSuffix(\"\")\n",
                plain = plain(port),
                listen = listen.replace("{port}", &port.to_string()),
            );
            std::fs::write(&conf, text).unwrap();
            Command::new("dnsdist")
                .args(["--supervised", "--disable-syslog", "-C"])
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("dnsdist (Debian package dnsdist) is needed for these tests")
        });
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        Dnsdist { _child: child, addr, dir }
    }
}

/// How the scripted server behaves, switchable while it runs.
pub mod mode {
    /// Answer each query at once.
    pub const ANSWER: u8 = 0;
    /// Read queries in fours and answer each four in reverse order.
    pub const REVERSE_FOURS: u8 = 1;
    /// Read one query, then close the connection without answering (once;
    /// then back to ANSWER).
    pub const CLOSE_ONCE: u8 = 2;
    /// Read queries and never answer, keeping the connection open.
    pub const SILENT: u8 = 3;
}

/// A DoT server written here: answers every A query with 203.0.113.9.
pub struct ScriptedDot {
    pub addr: SocketAddr,
    pub mode: Arc<AtomicU8>,
    /// Connections accepted (one handshake each).
    pub connections: Arc<AtomicUsize>,
    /// Connections that ended, as the server saw them.
    pub closed: Arc<AtomicUsize>,
    /// (length, wire ID) of every query received.
    pub queries: Arc<Mutex<Vec<(usize, u16)>>>,
    stop: Arc<AtomicBool>,
}

impl ScriptedDot {
    pub fn start() -> ScriptedDot {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let s = ScriptedDot {
            addr: listener.local_addr().unwrap(),
            mode: Arc::new(AtomicU8::new(mode::ANSWER)),
            connections: Arc::new(AtomicUsize::new(0)),
            closed: Arc::new(AtomicUsize::new(0)),
            queries: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let config = tls_server_config();
        let (mode, connections, closed, queries, stop) =
            (s.mode.clone(), s.connections.clone(), s.closed.clone(), s.queries.clone(), s.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                connections.fetch_add(1, SeqCst);
                let (config, mode, closed, queries) = (config.clone(), mode.clone(), closed.clone(), queries.clone());
                std::thread::spawn(move || {
                    serve(tcp, config, &mode, &queries);
                    closed.fetch_add(1, SeqCst);
                });
            }
        });
        s
    }
}

impl Drop for ScriptedDot {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}

fn serve(tcp: TcpStream, config: Arc<rustls::ServerConfig>, mode: &AtomicU8, queries: &Mutex<Vec<(usize, u16)>>) {
    tcp.set_nonblocking(false).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let conn = rustls::ServerConnection::new(config).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut len = [0u8; 2];
        if tls.read_exact(&mut len).is_err() {
            return;
        }
        let mut q = vec![0u8; u16::from_be_bytes(len) as usize];
        if tls.read_exact(&mut q).is_err() {
            return;
        }
        queries.lock().unwrap().push((q.len(), u16::from_be_bytes([q[0], q[1]])));
        match mode.load(SeqCst) {
            mode::SILENT => continue,
            mode::CLOSE_ONCE => {
                mode.store(mode::ANSWER, SeqCst);
                return;
            }
            mode::REVERSE_FOURS => {
                held.push(q);
                if held.len() < 4 {
                    continue;
                }
                for q in held.drain(..).rev() {
                    if send(&mut tls, &answer(&q)).is_err() {
                        return;
                    }
                }
            }
            _ => {
                if send(&mut tls, &answer(&q)).is_err() {
                    return;
                }
            }
        }
    }
}

fn send(tls: &mut impl Write, msg: &[u8]) -> std::io::Result<()> {
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    tls.write_all(&framed)?;
    tls.flush()
}

/// The reply to `q`: its question, one A record 203.0.113.9 (none for other types).
fn answer(q: &[u8]) -> Vec<u8> {
    use simple_dns::{CLASS, Packet, PacketFlag, ResourceRecord, rdata};
    let p = Packet::parse(q).unwrap();
    let mut r = Packet::new_reply(p.id());
    r.set_flags(PacketFlag::RECURSION_DESIRED | PacketFlag::RECURSION_AVAILABLE);
    r.questions = p.questions.clone();
    if let Some(question) = p.questions.first()
        && question.qtype == simple_dns::QTYPE::TYPE(simple_dns::TYPE::A)
    {
        r.answers.push(ResourceRecord::new(
            question.qname.clone(),
            CLASS::IN,
            300,
            rdata::RData::A(rdata::A { address: u32::from(std::net::Ipv4Addr::new(203, 0, 113, 9)) }),
        ));
    }
    r.build_bytes_vec().unwrap()
}

/// A certificate for localhost and 127.0.0.1 valid from tomorrow for 30
/// days, signed by a CA made for it, all in `dir`: it stands in for a clock
/// that is behind. Returns (CA, certificate, key).
pub fn not_valid_until_tomorrow(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new(args[0]).args(&args[1..]).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut ca = vec!["openssl", "req", "-x509"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "3650", "-subj", "/CN=hydradns clock test CA"]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]);
    run(&ca);
    let mut csr = vec!["openssl", "req"];
    csr.extend(ec);
    csr.extend(["-keyout", "future.key", "-out", "future.csr", "-subj", "/CN=localhost"]);
    run(&csr);
    std::fs::write(dir.join("index.txt"), "").unwrap();
    std::fs::write(dir.join("serial"), "01\n").unwrap();
    std::fs::write(
        dir.join("ca.cnf"),
        format!(
            "[ca]\ndefault_ca = test\n[test]\ndir = {d}\ndatabase = {d}/index.txt\nnew_certs_dir = {d}\n\
             certificate = {d}/ca.pem\nprivate_key = {d}/ca.key\nserial = {d}/serial\ndefault_md = sha256\n\
             policy = any\nx509_extensions = ext\n[any]\ncommonName = supplied\n\
             [ext]\nsubjectAltName = DNS:localhost,IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
             extendedKeyUsage = serverAuth\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let start = run(&["date", "-u", "-d", "tomorrow", "+%y%m%d%H%M%SZ"]);
    let end = run(&["date", "-u", "-d", "30 days", "+%y%m%d%H%M%SZ"]);
    run(&[
        "openssl",
        "ca",
        "-batch",
        "-config",
        "ca.cnf",
        "-in",
        "future.csr",
        "-out",
        "future.pem",
        "-notext",
        "-startdate",
        &start,
        "-enddate",
        &end,
    ]);
    (dir.join("ca.pem"), dir.join("future.pem"), dir.join("future.key"))
}

/// A DoH server scripted with Python's h2 package (tests/scripts/refusing_doh.py)
/// that answers every request with RST_STREAM REFUSED_STREAM.
pub struct RefusingDoh {
    _child: KillOnDrop,
    pub port: u16,
    count_file: PathBuf,
    _dir: TempDir,
}

impl RefusingDoh {
    pub fn start() -> RefusingDoh {
        RefusingDoh::start_with(&[])
    }

    /// With the script's options after its usual arguments (`zero-streams`).
    pub fn start_with(options: &[&str]) -> RefusingDoh {
        use std::io::BufRead;
        let dir = TempDir::new();
        let count_file = dir.0.join("count");
        let mut child = Command::new("python3")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/refusing_doh.py"))
            .arg(tls_dir().join("server.pem"))
            .arg(tls_dir().join("server.key"))
            .arg(&count_file)
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is needed for this test");
        let stdout = child.stdout.take().unwrap();
        // Killed on drop from here on, whatever the test does.
        let child = KillOnDrop(child);
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let port = line.trim().parse().expect("refusing_doh.py prints its port (it needs: pip install h2)");
        RefusingDoh { _child: child, port, count_file, _dir: dir }
    }

    /// Requests received so far.
    pub fn requests(&self) -> u32 {
        std::fs::read_to_string(&self.count_file).ok().and_then(|c| c.parse().ok()).unwrap_or(0)
    }
}

/// A DoH server over HTTP/1.1 (no ALPN) that answers each request with
/// `head`, then `unit` again and again for `for_secs` or until the client
/// hangs up: a response that never ends, in whatever part of it `head`
/// leaves the client (a chunk-size line, trailers, a head).
pub struct EndlessDoh {
    pub addr: SocketAddr,
    /// Connections accepted.
    pub connections: Arc<AtomicUsize>,
    /// Bytes written, on all connections.
    pub sent: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl EndlessDoh {
    pub fn start(head: &'static [u8], unit: &'static [u8], for_secs: u64) -> EndlessDoh {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let s = EndlessDoh {
            addr: listener.local_addr().unwrap(),
            connections: Arc::new(AtomicUsize::new(0)),
            sent: Arc::new(AtomicUsize::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (connections, sent, stop) = (s.connections.clone(), s.sent.clone(), s.stop.clone());
        let config = tls_server_config();
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                connections.fetch_add(1, SeqCst);
                let (config, sent, stop) = (config.clone(), sent.clone(), stop.clone());
                std::thread::spawn(move || {
                    tcp.set_nonblocking(false).unwrap();
                    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let conn = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    let mut request = Vec::new();
                    let mut byte = [0u8; 1];
                    while !request.ends_with(b"\r\n\r\n") {
                        if tls.read_exact(&mut byte).is_err() {
                            return;
                        }
                        request.push(byte[0]);
                    }
                    let mut block = head.to_vec();
                    let started = std::time::Instant::now();
                    while started.elapsed() < Duration::from_secs(for_secs) && !stop.load(SeqCst) {
                        if tls.write_all(&block).and_then(|()| tls.flush()).is_err() {
                            return;
                        }
                        sent.fetch_add(block.len(), SeqCst);
                        block.clear();
                        while block.len() < 16_384 {
                            block.extend_from_slice(unit);
                        }
                    }
                });
            }
        });
        s
    }
}

impl Drop for EndlessDoh {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}
