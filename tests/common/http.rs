//! A small HTTP/1.1 (and HTTPS) server on loopback for the list download
//! tests: each path serves a scripted behaviour that a test can switch while
//! the gateway runs.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a path answers.
#[derive(Clone, Debug)]
pub enum Route {
    /// 200 with this body and ETag; 304 when the request carries that ETag.
    List { body: Vec<u8>, etag: String },
    /// Just this status, empty body.
    Status(u16),
    /// Accept the request and never answer.
    Hang,
    /// Promise twice the body's length, send the body, close.
    Truncated(Vec<u8>),
    /// 200 streaming this many bytes of list lines.
    Endless(u64),
    /// 200 for this body: sends the first half, then stalls without closing.
    Stall(Vec<u8>),
    /// 302 to this URL.
    Redirect(String),
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Route>,
    /// (path, If-None-Match) of every request.
    hits: Vec<(String, Option<String>)>,
}

/// A running server.
pub struct HttpServer {
    pub addr: SocketAddr,
    tls: bool,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

/// The test CA that signed the HTTPS server's certificate.
pub fn test_ca() -> std::path::PathBuf {
    super::tls_dir().join("ca.pem")
}

impl HttpServer {
    pub fn start() -> HttpServer {
        HttpServer::launch(false)
    }

    pub fn start_tls() -> HttpServer {
        HttpServer::launch(true)
    }

    fn launch(tls: bool) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let s = HttpServer {
            addr: listener.local_addr().unwrap(),
            tls,
            state: Arc::new(Mutex::new(State::default())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (state, stop) = (s.state.clone(), s.stop.clone());
        let config = tls.then(super::tls_server_config);
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (state, stop, config) = (state.clone(), stop.clone(), config.clone());
                std::thread::spawn(move || {
                    tcp.set_nonblocking(false).unwrap();
                    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    match config {
                        Some(c) => {
                            let Ok(conn) = rustls::ServerConnection::new(c) else { return };
                            serve(rustls::StreamOwned::new(conn, tcp), &state, &stop);
                        }
                        None => serve(tcp, &state, &stop),
                    }
                });
            }
        });
        s
    }

    pub fn set(&self, path: &str, route: Route) {
        self.state.lock().unwrap().routes.insert(path.to_string(), route);
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}://127.0.0.1:{}{path}", if self.tls { "https" } else { "http" }, self.addr.port())
    }

    /// Requests for `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.state.lock().unwrap().hits.iter().filter(|(p, _)| p == path).count()
    }

    /// The If-None-Match of the last request for `path`.
    pub fn last_if_none_match(&self, path: &str) -> Option<String> {
        self.state.lock().unwrap().hits.iter().rev().find(|(p, _)| p == path).and_then(|(_, e)| e.clone())
    }

    /// Requests for `path` that carried If-None-Match.
    pub fn conditional_hits(&self, path: &str) -> usize {
        self.state.lock().unwrap().hits.iter().filter(|(p, e)| p == path && e.is_some()).count()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}

/// A list body of `n` names under `domain`.
pub fn list_body(n: usize, domain: &str) -> Vec<u8> {
    let mut b = format!("# {n} test names\n").into_bytes();
    for i in 0..n {
        b.extend_from_slice(format!("h{i}.{domain}\n").as_bytes());
    }
    b
}

fn serve<S: Read + Write>(stream: S, state: &Mutex<State>, stop: &AtomicBool) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut if_none_match = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("if-none-match")
        {
            if_none_match = Some(v.trim().to_string());
        }
    }
    let route = {
        let mut s = state.lock().unwrap();
        s.hits.push((path.clone(), if_none_match.clone()));
        s.routes.get(&path).cloned()
    };
    let mut out = reader.into_inner();
    let head = |status: &str, len: u64, extra: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n{extra}\r\n")
    };
    let _ = match route {
        None => out.write_all(head("404 Not Found", 0, "").as_bytes()),
        Some(Route::Status(code)) => out.write_all(head(&format!("{code} Scripted"), 0, "").as_bytes()),
        Some(Route::Redirect(to)) => out.write_all(head("302 Found", 0, &format!("Location: {to}\r\n")).as_bytes()),
        Some(Route::List { body, etag }) => {
            if if_none_match.as_deref() == Some(etag.as_str()) {
                out.write_all(head("304 Not Modified", 0, &format!("ETag: {etag}\r\n")).as_bytes())
            } else {
                let mut r = head("200 OK", body.len() as u64, &format!("ETag: {etag}\r\n")).into_bytes();
                r.extend_from_slice(&body);
                out.write_all(&r)
            }
        }
        Some(Route::Hang) => {
            for _ in 0..600 {
                if stop.load(SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
        Some(Route::Stall(body)) => {
            let mut r = head("200 OK", body.len() as u64, "").into_bytes();
            r.extend_from_slice(&body[..body.len() / 2]);
            let _ = out.write_all(&r);
            let _ = out.flush();
            for _ in 0..600 {
                if stop.load(SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
        Some(Route::Truncated(body)) => {
            let mut r = head("200 OK", 2 * body.len() as u64, "").into_bytes();
            r.extend_from_slice(&body);
            out.write_all(&r)
        }
        Some(Route::Endless(total)) => {
            let chunk: Vec<u8> = (0..1000).flat_map(|i| format!("e{i}.endless.example\n").into_bytes()).collect();
            let _ = out.write_all(head("200 OK", total, "").as_bytes());
            let mut sent = 0u64;
            while sent < total {
                let n = chunk.len().min((total - sent) as usize);
                if out.write_all(&chunk[..n]).is_err() {
                    break;
                }
                sent += n as u64;
            }
            Ok(())
        }
    };
    let _ = out.flush();
}
