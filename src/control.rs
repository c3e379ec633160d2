//! The control socket: how `hydradns stats` reads live figures from the
//! running gateway.
//!
//! A Unix stream socket (`option control_socket`, default
//! `/var/run/hydradns/control.sock`, mode 0660). The client writes one
//! request line, the gateway writes one JSON line back and closes. Requests:
//! `stats`. Served on the main thread, never on a worker, with a time limit
//! per connection so a stuck client cannot hold it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nanoserde::SerJson;
use smol::future::FutureExt;
use smol::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use smol::{Async, Timer};

use crate::server::status::Status;

/// How long one control connection may take.
const CONN_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest request line accepted.
const MAX_REQUEST: usize = 256;

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

/// Answers requests until the executor stops.
pub async fn serve(listener: UnixListener, status: Arc<Status>) {
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
        let answer = async {
            let mut reader = smol::io::BufReader::new((&stream).take(MAX_REQUEST as u64));
            let mut line = String::new();
            reader.read_line(&mut line).await.ok()?;
            let reply = respond(line.trim(), &status);
            let mut w = &stream;
            w.write_all(reply.as_bytes()).await.ok()?;
            w.write_all(b"\n").await.ok()
        };
        let _ = answer
            .or(async {
                Timer::after(CONN_TIMEOUT).await;
                None
            })
            .await;
    }
}

fn respond(request: &str, status: &Status) -> String {
    match request {
        "stats" => status.report().serialize_json(),
        other => format!("{{\"error\":\"unknown request {:?}\"}}", other.escape_default().to_string()),
    }
}

/// Sends one request to a running gateway and returns its answer line.
pub fn request(path: &Path, request: &str) -> Result<String, String> {
    let mut s = UnixStream::connect(path)
        .map_err(|e| format!("cannot reach the gateway at {}: {e} (is it running?)", path.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    s.write_all(format!("{request}\n").as_bytes()).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).map_err(|e| format!("no answer from the gateway: {e}"))?;
    if line.is_empty() {
        return Err("the gateway closed the connection without answering".into());
    }
    Ok(line.trim_end().to_string())
}
