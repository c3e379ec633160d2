//! `option metrics_listen`: `GET /metrics` over HTTP for a Prometheus
//! scraper. Served on the main thread's executor, never on a worker: only
//! to `allow_client`, at most [`MAX_CONNECTIONS`] at once, each with a
//! request of at most [`MAX_REQUEST`] bytes and [`TIMEOUT`] to finish, one
//! answer and close. No keep-alive, no chunking, nothing else served.
//! With every place taken, the oldest connection still sending its request
//! is closed for the new one: four idle sockets, opened again every five
//! seconds, kept the scraper out before.

use std::cell::{Cell, RefCell};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::{Async, LocalExecutor, Timer};

use crate::stats::Counters;
use crate::status::Status;
use crate::sys::within;

/// Connections served at once; a scraper needs one.
const MAX_CONNECTIONS: usize = 4;
/// The request head read, at most; the rest is ignored.
const MAX_REQUEST: usize = 2048;
/// How long one connection may take, request and answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// A connection being served.
struct Served {
    /// Its number, for its task to take it out of the list.
    id: u64,
    /// A duplicate of its socket, to close it for a newcomer.
    sock: TcpStream,
    /// Still reading its request: it may be closed for a newcomer.
    reading: Rc<Cell<bool>>,
}

/// Answers scrapes until the executor stops.
pub async fn serve(listener: TcpListener, status: Arc<Status>, ex: Rc<LocalExecutor<'static>>) {
    let listener = match Async::new(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("metrics: {e}");
            return;
        }
    };
    // In accept order: the first one still reading is the oldest idle one.
    let served: Rc<RefCell<Vec<Served>>> = Rc::new(RefCell::new(Vec::with_capacity(MAX_CONNECTIONS)));
    let mut next_id = 0u64;
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            Timer::after(Duration::from_millis(100)).await;
            continue;
        };
        if !status.engine.snapshot.load().config.allow_client.allows(peer.ip()) {
            // As on the DNS ports: closed unread, counted.
            if let Some(c) = status.workers.first() {
                Counters::bump(&c.denied);
            }
            continue;
        }
        let Ok(sock) = stream.get_ref().try_clone() else { continue };
        {
            let mut list = served.borrow_mut();
            if list.len() >= MAX_CONNECTIONS {
                let Some(i) = list.iter().position(|s| s.reading.get()) else { continue };
                let idle = list.remove(i);
                let _ = idle.sock.shutdown(Shutdown::Both);
            }
            next_id += 1;
            list.push(Served { id: next_id, sock, reading: Rc::new(Cell::new(true)) });
        }
        let (status, served, id) = (status.clone(), served.clone(), next_id);
        let reading = served.borrow().last().map(|s| s.reading.clone()).unwrap_or_default();
        ex.spawn(async move {
            within(TIMEOUT, answer(stream, &status, &reading)).await;
            served.borrow_mut().retain(|s| s.id != id);
        })
        .detach();
    }
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics` (any query string).
    Metrics,
    /// A GET of anything else.
    NotFound,
    /// Another method, or no request line.
    NotAllowed,
}

/// Reads the request line at the start of `head` (what came of the
/// request, whole or not; the fuzz target `metrics_request` feeds it anything).
pub fn route(head: &[u8]) -> Route {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET", b"/metrics") => Route::Metrics,
        (b"GET", _) => Route::NotFound,
        _ => Route::NotAllowed,
    }
}

async fn answer(stream: Async<std::net::TcpStream>, status: &Status, reading: &Cell<bool>) {
    let mut head = [0u8; MAX_REQUEST];
    let mut len = 0;
    while len < head.len() && !head[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        match (&stream).read(&mut head[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    reading.set(false);
    let (code, kind, body) = match route(&head[..len]) {
        Route::Metrics => ("200 OK", super::CONTENT_TYPE, super::render(status)),
        Route::NotFound => ("404 Not Found", "text/plain", "only /metrics is here\n".to_string()),
        Route::NotAllowed => ("405 Method Not Allowed", "text/plain", "GET /metrics\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = (&stream).write_all(reply.as_bytes()).await;
}
