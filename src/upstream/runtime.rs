//! Where encrypted upstreams' connections live: one thread, started at the
//! first encrypted query, runs a task per connection; and what those
//! connections need from the config (the TLS client settings, the
//! bootstrap resolvers), swapped in whenever a config is loaded.
//!
//! One thread for every encrypted upstream, rather than a connection per
//! receive thread: one connection per server, so one handshake and one
//! session, whichever thread a miss arrives on. A miss pays a hop to this
//! thread and back, tens of µs beside a round trip to a resolver across
//! the WAN. The thread sleeps in `epoll` while nothing is in flight.

use std::path::PathBuf;
use std::sync::{Arc, Once};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use rustls::ClientConfig;

use super::{Group, Strategy};
use crate::config::Config;

/// Runs the connections' tasks.
static EXECUTOR: smol::Executor<'static> = smol::Executor::new();
/// What connections read when they connect.
static CONTEXT: ArcSwapOption<Context> = ArcSwapOption::const_empty();

/// The config's part in a connection.
#[derive(Debug)]
pub struct Context {
    /// TLS settings, or why there are none (no CA bundle).
    pub client: Result<Arc<ClientConfig>, String>,
    /// Plain resolvers that find encrypted upstreams' addresses.
    pub bootstrap: Group,
    /// How long one bootstrap query, connection or handshake may take.
    pub timeout: Duration,
    /// What `client` was built from.
    ca_file: PathBuf,
    /// The marker of a clock set by NTP (empty: the clock is trusted).
    synced_file: PathBuf,
}

impl Context {
    /// Whether the clock is known good, so that certificates' dates mean something.
    pub fn clock_synced(&self) -> bool {
        self.synced_file.as_os_str().is_empty() || self.synced_file.exists()
    }
}

/// Runs `task` on the connections' thread, starting it the first time.
pub fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    static START: Once = Once::new();
    START.call_once(|| {
        let started = std::thread::Builder::new()
            .name("hydradns-tls".into())
            .spawn(|| smol::block_on(EXECUTOR.run(std::future::pending::<()>())));
        if let Err(e) = started {
            log::error!("cannot start the encrypted upstreams' thread: {e}");
        }
    });
    EXECUTOR.spawn(task).detach();
}

/// The settings connections use now (`None` before any config named an
/// encrypted upstream).
pub fn context() -> Option<Arc<Context>> {
    CONTEXT.load_full()
}

/// Takes `config`'s settings for connections made from now on: the TLS
/// client is built again only when `ca_file` changed, and bootstrap
/// servers keep their health across reloads.
pub fn configure(config: &Config) {
    let old = CONTEXT.load_full();
    let client = match &old {
        Some(o) if o.ca_file == config.ca_file && o.client.is_ok() => o.client.clone(),
        _ => client_config(config),
    };
    if let Err(e) = &client {
        log::error!("encrypted upstreams cannot verify certificates: {e}");
    }
    let known = old.map(|o| o.bootstrap.servers.clone()).unwrap_or_default();
    let bootstrap: Vec<_> = config.bootstrap.iter().map(|a| super::Upstream::Plain(*a)).collect();
    CONTEXT.store(Some(Arc::new(Context {
        client,
        bootstrap: Group::with_fallbacks(&bootstrap, &[], &known, Strategy::Failover),
        timeout: config.upstream_timeout,
        ca_file: config.ca_file.clone(),
        synced_file: config.clock_marker().to_path_buf(),
    })));
}

/// TLS 1.2 and 1.3 with ring, verified against the trust anchors.
fn client_config(config: &Config) -> Result<Arc<ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in crate::trust::certificates(&config.ca_file)? {
        // A certificate rustls cannot use is skipped, as the download path's
        // root store does; the others still verify.
        let _ = roots.add(rustls::pki_types::CertificateDer::from(c.der().to_vec()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(client))
}
