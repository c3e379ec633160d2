//! Fetching one list over HTTP(S) with ureq.
//!
//! Conditional requests (ETag / Last-Modified) make an unchanged list cost
//! one small round trip. The body is read under a size cap, so a hostile or
//! broken server cannot exhaust memory, within a connect timeout and a total
//! timeout. HTTPS verifies against a PEM bundle (the system's by default).
//! A list asked for over HTTPS is taken only over HTTPS: a redirect to
//! plain HTTP would let anyone on the path write the list (an `@@` rule, a
//! block of the whole `com`), so it fails the download and the last good
//! copy stays.

use std::path::Path;
use std::time::Duration;

use ureq::tls::{RootCerts, TlsConfig};

/// Time to establish the connection (TCP and TLS).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Redirects followed (list hosts move files to CDNs).
const MAX_REDIRECTS: u32 = 5;

/// Validators of the copy we have, for a conditional request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// `ETag` of the last good download.
    pub etag: Option<String>,
    /// `Last-Modified` of the last good download.
    pub last_modified: Option<String>,
}

/// What the server sent.
#[derive(Debug)]
pub enum Fetched {
    /// 304: our copy is current.
    NotModified,
    /// 200: the body went to the sink; these validate it next time.
    Body(Validators),
}

/// An HTTP client set up for list downloads.
pub struct Downloader {
    agent: ureq::Agent,
    max_size: u64,
}

impl Downloader {
    /// A client with the given limits. Fails only if the CA bundle is unusable
    /// (then no HTTPS download could be verified).
    pub fn new(ca_file: &Path, max_size: u64, timeout: Duration) -> Result<Downloader, String> {
        let tls =
            TlsConfig::builder().root_certs(RootCerts::new_with_certs(&crate::trust::certificates(ca_file)?)).build();
        let config = ureq::Agent::config_builder()
            .tls_config(tls)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(MAX_REDIRECTS)
            .user_agent(concat!("hydradns/", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Downloader { agent: config.into(), max_size })
    }

    /// Fetches `url`, conditionally on `have`, handing the body to `sink` in
    /// pieces as it arrives (never more than one buffer in memory).
    pub fn fetch(
        &self,
        url: &str,
        have: &Validators,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<Fetched, String> {
        use std::io::Read;
        let https = url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"));
        let mut req = self.agent.get(url).config().https_only(https).build();
        if let Some(etag) = &have.etag {
            req = req.header("If-None-Match", etag);
        }
        if let Some(lm) = &have.last_modified {
            req = req.header("If-Modified-Since", lm);
        }
        let mut resp = req.call().map_err(|e| failure(&e))?;
        match resp.status().as_u16() {
            304 => Ok(Fetched::NotModified),
            200 => {
                let header = |name: &str| {
                    let v = resp.headers().get(name).and_then(|v| v.to_str().ok())?;
                    validator(v).then(|| v.to_string())
                };
                let validators = Validators { etag: header("etag"), last_modified: header("last-modified") };
                let mut reader = resp.body_mut().with_config().limit(self.max_size).reader();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = reader.read(&mut buf).map_err(|e| {
                        if e.to_string().contains("limit") {
                            format!("larger than max_list_size ({} bytes)", self.max_size)
                        } else {
                            format!("the download broke off ({})", io_words(e.kind()))
                        }
                    })?;
                    if n == 0 {
                        return Ok(Fetched::Body(validators));
                    }
                    sink(&buf[..n])?;
                }
            }
            status => Err(format!("HTTP {status}")),
        }
    }
}

/// A validator kept for the next conditional request only in the shapes
/// servers send (an entity tag of letters, digits and `"/:._+=-`; an HTTP
/// date): it is stored, and reported by `status`.
fn validator(v: &str) -> bool {
    v.len() <= 128 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"\"/:._+=-, ".contains(&b))
}

/// Why a download failed, in our own words. A server's words never
/// reach them: the text is stored, shown in LuCI and the log, and a
/// redirect's `Location` (ureq's `BadUri`, `RequireHttpsOnly`) once
/// carried a page's markup there (issue 58).
fn failure(e: &ureq::Error) -> String {
    use ureq::Error as E;
    match e {
        E::StatusCode(code) => format!("HTTP {code}"),
        E::RequireHttpsOnly(_) => "redirected to plain HTTP: refused".into(),
        E::BadUri(_) | E::RedirectFailed => "redirected to an address that is not a URL".into(),
        E::TooManyRedirects => format!("more than {MAX_REDIRECTS} redirects"),
        E::HostNotFound => "host not found".into(),
        E::ConnectionFailed => "cannot connect".into(),
        E::Timeout(_) => "timed out".into(),
        E::Io(io) => io_words(io.kind()).into(),
        E::Rustls(rustls::Error::InvalidCertificate(c)) => {
            use rustls::CertificateError as C;
            let why = match c {
                C::Expired | C::ExpiredContext { .. } => "expired",
                C::NotValidYet | C::NotValidYetContext { .. } => "not valid yet (is the clock right?)",
                C::UnknownIssuer => "from an issuer the CA bundle does not trust",
                C::NotValidForName | C::NotValidForNameContext { .. } => "not valid for the list's host name",
                C::Revoked => "revoked",
                _ => "not valid",
            };
            format!("TLS: the server's certificate is {why}")
        }
        E::Tls(_) | E::Rustls(_) | E::Pem(_) | E::TlsRequired => "TLS failed".into(),
        E::LargeResponseHeader(..) => "the response's header is too large".into(),
        E::BodyExceedsLimit(_) => "larger than max_list_size".into(),
        E::Http(_) | E::Protocol(_) => "not an HTTP response ureq can read".into(),
        _ => "the download failed".into(),
    }
}

/// An I/O failure's kind in words (the OS's own text is not needed).
fn io_words(kind: std::io::ErrorKind) -> &'static str {
    use std::io::ErrorKind as K;
    match kind {
        K::ConnectionRefused => "connection refused",
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => "connection reset",
        K::TimedOut | K::WouldBlock => "timed out",
        K::UnexpectedEof => "the connection closed early",
        K::InvalidData => "invalid data",
        K::NetworkUnreachable | K::HostUnreachable => "network unreachable",
        _ => "network error",
    }
}
