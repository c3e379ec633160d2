//! Making an encrypted upstream's connection: the addresses to try, TCP
//! connect and TLS handshake within a time limit, and why it failed (said
//! once a minute, with a hint when the clock is what makes a certificate
//! look expired).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConnection};

use super::bootstrap::Addresses;
use super::https::Refusal;
use super::runtime;
use super::tls::LOG_EVERY;
use crate::config::upstream::{Endpoint, Scheme};

/// Connecting and the handshake take at most this long per address (or
/// the upstream timeout, if longer).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a connection failed or ended.
#[derive(Debug)]
pub enum Failure {
    /// Connecting, reading or writing.
    Io(io::Error),
    /// TLS refused the server (certificate, protocol).
    Tls(rustls::Error),
    /// No address to connect to, or no TLS settings.
    Resolve(String),
    /// Nothing happened in time.
    Timeout(&'static str),
    /// The server closed the connection.
    Closed,
    /// A message with a length no DNS message has.
    Framing,
    /// DoH: the server broke HTTP's rules.
    Protocol(&'static str),
    /// DoH: the server answered a query with something not a DNS reply.
    Refused(Refusal),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Io(e) => e.fmt(f),
            Failure::Tls(rustls::Error::InvalidCertificate(e)) => write!(f, "certificate refused: {e}"),
            Failure::Tls(e) => write!(f, "TLS: {e}"),
            Failure::Resolve(e) => e.fmt(f),
            Failure::Timeout(what) => write!(f, "{what} timed out"),
            Failure::Closed => f.write_str("closed by the server"),
            Failure::Framing => f.write_str("a malformed message"),
            Failure::Protocol(what) => write!(f, "HTTP: {what}"),
            Failure::Refused(why) => why.fmt(f),
        }
    }
}

impl Failure {
    /// Refused only for its validity dates: the clock may be wrong.
    pub(super) fn is_clock(&self) -> bool {
        matches!(
            self,
            Failure::Tls(rustls::Error::InvalidCertificate(
                CertificateError::Expired
                    | CertificateError::ExpiredContext { .. }
                    | CertificateError::NotValidYet
                    | CertificateError::NotValidYetContext { .. }
            ))
        )
    }

    /// An I/O error during the handshake, or the TLS error inside it.
    pub(super) fn from_handshake(e: io::Error) -> Failure {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            Some(tls) => Failure::Tls(tls.clone()),
            None if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Failure::Timeout("the handshake")
            }
            None => Failure::Io(e),
        }
    }
}

/// Says why `endpoint` failed, at most once per [`LOG_EVERY`].
pub(super) fn report(endpoint: &Endpoint, last: &mut Option<Instant>, what: &str, why: &Failure) {
    if last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
        return;
    }
    *last = Some(Instant::now());
    let hint = if why.is_clock() && runtime::context().is_some_and(|c| !c.clock.synced()) {
        " (the clock is not synchronised yet: certificates cannot be checked until NTP sets it)"
    } else {
        ""
    };
    log::warn!("upstream {endpoint}: {what}: {why}{hint}");
}

/// A connected, handshaken TLS stream (non-blocking).
pub struct Conn {
    pub(super) tls: ClientConnection,
    pub(super) sock: TcpStream,
    pub(super) peer: SocketAddr,
}

/// Connects to the first address that takes a connection and a handshake,
/// starting with the one that worked last. Blocking: runs on a thread of
/// its own, with the link's addresses lent to it.
pub fn connect(endpoint: &Endpoint, addrs: &mut Addresses) -> Result<Conn, Failure> {
    let ctx = runtime::context().ok_or(Failure::Resolve("no configuration".into()))?;
    let client = match endpoint.scheme {
        Scheme::Tls => &ctx.client,
        Scheme::Https => &ctx.https_client,
    };
    let client = client.clone().map_err(Failure::Resolve)?;
    if let Err(e) = addrs.refresh(endpoint, &ctx)
        && addrs.ips.is_empty()
    {
        return Err(Failure::Resolve(e));
    }
    let name = ServerName::try_from(endpoint.name.to_string())
        .map_err(|_| Failure::Resolve(format!("'{}' is not a name a certificate can carry", endpoint.name)))?;
    let limit = CONNECT_TIMEOUT.max(ctx.timeout);
    let n = addrs.ips.len();
    let mut last = Failure::Resolve("no address".into());
    for k in 0..n {
        let i = (addrs.preferred + k) % n;
        let peer = SocketAddr::new(addrs.ips[i], endpoint.port);
        match handshake(peer, &client, name.clone(), limit) {
            Ok(c) => {
                addrs.preferred = i;
                return Ok(c);
            }
            // The server answered and refused: another address of it would too.
            Err(e @ Failure::Tls(_)) => return Err(e),
            Err(e) => last = e,
        }
    }
    addrs.failed();
    Err(last)
}

/// TCP connect and TLS handshake to `peer`, each read and write within `limit`.
pub(super) fn handshake(
    peer: SocketAddr,
    client: &Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    limit: Duration,
) -> Result<Conn, Failure> {
    let mut sock = TcpStream::connect_timeout(&peer, limit).map_err(Failure::Io)?;
    let _ = sock.set_nodelay(true);
    sock.set_read_timeout(Some(limit)).map_err(Failure::Io)?;
    sock.set_write_timeout(Some(limit)).map_err(Failure::Io)?;
    let mut tls = ClientConnection::new(client.clone(), name).map_err(Failure::Tls)?;
    let started = Instant::now();
    while tls.is_handshaking() {
        if started.elapsed() > limit {
            return Err(Failure::Timeout("the handshake"));
        }
        tls.complete_io(&mut sock).map_err(Failure::from_handshake)?;
    }
    sock.set_nonblocking(true).map_err(Failure::Io)?;
    Ok(Conn { tls, sock, peer })
}
