//! `option metrics_listen`: `GET /metrics` over HTTP for a Prometheus
//! scraper. Served on the main thread's executor, never on a worker: at
//! most [`MAX_CONNECTIONS`] at once (more are closed on accept), each with
//! a request of at most [`MAX_REQUEST`] bytes and [`TIMEOUT`] to finish,
//! one answer and close. No keep-alive, no chunking, nothing else served.

use std::cell::Cell;
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::{Async, LocalExecutor, Timer};

use crate::control::within;
use crate::server::status::Status;

/// Connections served at once; a scraper needs one.
const MAX_CONNECTIONS: usize = 4;
/// The request head read, at most; the rest is ignored.
const MAX_REQUEST: usize = 2048;
/// How long one connection may take, request and answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Answers scrapes until the executor stops.
pub async fn serve(listener: TcpListener, status: Arc<Status>, ex: Rc<LocalExecutor<'static>>) {
    let listener = match Async::new(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("metrics: {e}");
            return;
        }
    };
    let open = Rc::new(Cell::new(0usize));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            Timer::after(Duration::from_millis(100)).await;
            continue;
        };
        if open.get() >= MAX_CONNECTIONS {
            continue;
        }
        open.set(open.get() + 1);
        let (status, open) = (status.clone(), open.clone());
        ex.spawn(async move {
            within(TIMEOUT, answer(stream, &status)).await;
            open.set(open.get() - 1);
        })
        .detach();
    }
}

async fn answer(stream: Async<std::net::TcpStream>, status: &Status) {
    let mut head = [0u8; MAX_REQUEST];
    let mut len = 0;
    while len < head.len() && !head[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        match (&stream).read(&mut head[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
    }
    let line = head[..len].split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let (code, kind, body) = match (method, path) {
        (b"GET", b"/metrics") => ("200 OK", super::CONTENT_TYPE, super::render(status)),
        (b"GET", _) => ("404 Not Found", "text/plain", "only /metrics is here\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "GET /metrics\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = (&stream).write_all(reply.as_bytes()).await;
}
