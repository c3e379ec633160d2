//! Typed settings: what each UCI option means, its default, and validation.
//!
//! Syntax lives in [`uci`]; this module turns sections into a [`Config`] and
//! reports every wrong value as `file:line: problem`. Unknown options and
//! section types are warnings, not errors, so a file written for a newer
//! release still starts an older one.
//!
//! Here: [`Config`] with its defaults, [`Config::parse`] over the sections,
//! and the checks across them. One file per section or concern:
//! `main_section` (`config hydradns`), `lists` (block and allow lists),
//! `records` (local names, forwarding), `querylog`, `groups` (clients,
//! groups, schedules), `router` (force DNS, fail-open), `upstream`
//! (resolvers and resolv.conf), `dnsmasq` (the dnsmasq modes), `reader`
//! (reading values, `file:line`, did-you-mean).

mod dnsmasq;
pub mod groups;
mod lists;
mod main_section;
mod querylog;
mod reader;
mod records;
pub mod router;
pub mod uci;
pub mod upstream;

pub use dnsmasq::DnsmasqMode;
pub use lists::{ListKind, ListSource, saved_file_name};
use main_section::Replaced;
pub use querylog::QueryLogConfig;
use reader::{SectionReader, file_name_of, line_of, line_of_origin, parse_block_mode};
pub use reader::{parse_duration, parse_size, parse_socket_addr};
use records::alias_loops;
pub use records::{Forward, LocalRecord, RECORD_TTL, RecordData};

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use upstream::{RESOLV_CONF, Upstream};

/// OpenWrt's marker of a clock set by NTP: `time_synced_file`'s default.
pub const SYNCED_FILE: &str = "/var/state/ntpd-synced";

/// Where `run` looks for its config when `-c` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/config/hydradns";
/// Built-in listen address: unprivileged and loopback, so a first start needs no root
/// and exposes nothing.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 5353);
/// What a blocked name is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlockMode {
    /// A → 0.0.0.0, AAAA → ::, anything else an empty NOERROR answer.
    #[default]
    Null,
    /// NXDOMAIN with a synthetic SOA so clients cache the refusal for `block_ttl`.
    NxDomain,
    /// REFUSED, no records.
    Refused,
    /// A → the IPv4 address, AAAA → the IPv6 address; a family not given gets an empty answer.
    Address(Option<Ipv4Addr>, Option<Ipv6Addr>),
}

/// Everything `run` needs, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Path the config was read from (`<built-in>` for defaults).
    pub source: String,
    /// Addresses served on UDP and TCP.
    pub listen: Vec<SocketAddr>,
    /// Default forwarders, tried in order with failover: plain or encrypted.
    pub upstreams: Vec<Upstream>,
    /// Plain resolvers asked only when every upstream failed (`list fallback`).
    pub fallbacks: Vec<SocketAddr>,
    /// Where the upstreams came from, for the start-up log line.
    pub upstreams_from: String,
    /// None were configured: they come from `resolv_file`, re-read when it changes.
    pub upstreams_auto: bool,
    /// Plain resolvers that find encrypted upstreams' addresses (`list
    /// bootstrap`, else `resolv_file`'s).
    pub bootstrap: Vec<SocketAddr>,
    /// None were configured: they follow `resolv_file`.
    pub bootstrap_auto: bool,
    /// Whether certificates wait for `time_synced_file` (`time_check`).
    pub time_check: bool,
    /// Names resolved in plain by `bootstrap` until the clock is known
    /// good (`list plain_domain`, and the init script's NTP servers).
    pub plain_domains: Vec<String>,
    /// Answer cache capacity in entries; 0 disables the cache.
    pub cache_size: usize,
    /// How blocked names are answered.
    pub block_mode: BlockMode,
    /// TTL of block answers, seconds.
    pub block_ttl: u32,
    /// Cached TTLs are raised to at least this.
    pub min_ttl: u32,
    /// Cached TTLs are cut to at most this.
    pub max_ttl: u32,
    /// Per-try timeout for one upstream.
    pub upstream_timeout: Duration,
    /// How a miss picks the upstream it tries first.
    pub upstream_strategy: upstream::Strategy,
    /// Serve expired answers when the upstream fails or is slow (RFC 8767).
    pub serve_stale: bool,
    /// How long a client whose name has an expired answer waits for the
    /// upstream before it gets that answer; 0 = at once, refreshed behind it.
    pub stale_client_timeout: Duration,
    /// TTL of a stale answer, seconds.
    pub stale_answer_ttl: u32,
    /// How long after expiry an answer may still be served stale, seconds.
    pub stale_max_age: u32,
    /// Refresh names in use shortly before they expire.
    pub prefetch: bool,
    /// Pass on the AD bit of plain (UDP/TCP) upstreams' answers; encrypted
    /// ones' always is (see `upstream::Group::trust_plain_ad`).
    pub trust_upstream_ad: bool,
    /// `option dnssec`: the main upstream set asks with DO and validates
    /// the answers itself (src/dnssec/); the upstreams' AD is then ignored.
    pub dnssec: bool,
    /// `option trust_anchor_file`: DS or DNSKEY records that replace the
    /// built-in root anchors (`None`: the root's KSKs).
    pub trust_anchor_file: Option<PathBuf>,
    /// A TCP client that sends nothing for this long is disconnected.
    pub tcp_idle_timeout: Duration,
    /// Open TCP connections allowed at once, over all listeners.
    pub tcp_max_connections: usize,
    /// Most TCP connections one client (address, or /64) may hold open; 127.0.0.1 and ::1 are exempt.
    pub tcp_max_per_client: usize,
    /// Distinct misses forwarded at once (dnsmasq's `dns-forward-max`); each
    /// holds a socket, so this also bounds descriptors.
    pub forward_max: usize,
    /// Worker threads; 0 means one per core.
    pub workers: usize,
    /// Block and allow sources in file order.
    pub lists: Vec<ListSource>,
    /// Conditional forwarding rules.
    pub forwards: Vec<Forward>,
    /// dnsmasq's DHCP leases: devices' names for the query log.
    pub leases_file: PathBuf,
    /// ethers(5): more devices' names, by MAC.
    pub ethers_file: PathBuf,
    /// Local names (`config record`), in file order.
    pub records: Vec<LocalRecord>,
    /// Devices and their groups (`config client`), in file order.
    pub clients: Vec<groups::ClientRule>,
    /// `config group` sections, in file order.
    pub groups: Vec<groups::GroupConfig>,
    /// `config schedule` sections, in file order.
    pub schedules: Vec<groups::ScheduleConfig>,
    /// Exists once the clock is known good (OpenWrt's ntpd hotplug writes
    /// it); until then scheduled groups stay in their blocking state.
    pub time_synced_file: PathBuf,
    /// Query log settings.
    pub querylog: QueryLogConfig,
    /// Unix socket the CLI asks for live figures; empty (`option
    /// control_socket 'off'`) disables it.
    pub control_socket: PathBuf,
    /// Where `GET /metrics` is served (Prometheus text); off when `None`.
    pub metrics_listen: Option<SocketAddr>,
    /// Where the metrics are written for node-exporter's textfile
    /// collector, at start and every 15 s; off when `None`. Fixed until a
    /// restart.
    pub metrics_textfile: Option<PathBuf>,
    /// Where downloaded lists are kept (flash), so they survive a reboot.
    pub list_dir: PathBuf,
    /// How often downloaded lists are refreshed (±10 % jitter); 0 = only on demand.
    pub refresh_interval: Duration,
    /// Largest list download accepted, bytes.
    pub max_list_size: u64,
    /// Whole-download time limit.
    pub download_timeout: Duration,
    /// PEM bundle of trusted CAs for HTTPS; empty = the system bundle.
    pub ca_file: PathBuf,
    /// Block answers whose CNAME chain passes through a blocked name.
    pub cname_inspection: bool,
    /// `option services_url`: a services.json (HostlistsRegistry format)
    /// to use instead of the built-in catalogue, downloaded like a list.
    pub services_url: Option<String>,
    /// Its saved copy under `list_dir`.
    pub services_saved: Option<PathBuf>,
    /// Clients allowed to ask (`allow_client`); by default loopback and the
    /// networks of this machine's interfaces, as read when the config was
    /// (see `localnet`; the server follows their changes).
    pub allow_client: crate::access::AccessList,
    /// `allow_client` was given. Without it, a client a trusted forwarder
    /// names is not checked against the defaults: the forwarder (dnsmasq,
    /// `localservice`) admitted it already, and a LAN on public IPv6
    /// addresses (or documentation ones) is no less the LAN.
    pub allow_client_given: bool,
    /// Forwarders whose EDNS Client Subnet and MAC options name the client
    /// (dnsmasq on the router); loopback by default.
    pub trusted_proxy: crate::access::AccessList,
    /// What everyone else gets.
    pub deny_action: crate::access::DenyAction,
    /// Queries per second allowed per client; 0 = no limit.
    pub ratelimit: u32,
    /// Bucket size; 0 = twice `ratelimit`.
    pub ratelimit_burst: u32,
    /// What a client over its rate gets.
    pub ratelimit_action: crate::access::DenyAction,
    /// `any_mode forward`: pass ANY queries upstream instead of the RFC 8482 answer.
    pub any_forward: bool,
    /// Answer the names that tell browsers and phones to keep to the
    /// network's resolver (Firefox's DoH canary, iCloud Private Relay) with
    /// NXDOMAIN.
    pub block_bypass: bool,
    /// Block upstream answers that put private addresses under public names.
    pub rebind_protection: bool,
    /// Domains whose answers may hold private addresses.
    pub rebind_allow: Vec<String>,
    /// File whose `nameserver` lines are the upstreams when none is configured.
    pub resolv_file: PathBuf,
    /// The dnsmasq arrangement.
    pub dnsmasq_mode: DnsmasqMode,
    /// dnsmasq's port in `replace` mode.
    pub dnsmasq_port: u16,
    /// The LAN's own domains, sent to dnsmasq in `replace` mode.
    pub local_domains: Vec<String>,
    /// `option enabled` of the main section: read by the init script only.
    pub enabled: bool,
    /// Who to run as once the sockets are bound, when started as root
    /// (`option user`); `None`: the package's user, else `nobody`.
    pub user: Option<String>,
    /// How often a summary line goes to the log; 0 = never.
    pub stats_interval: Duration,
    /// Force DNS and fail-open: read by the init script and the watchdog.
    pub router: router::Router,
    /// Non-fatal findings (unknown options, ignored sections), as `file:line: text`.
    pub warnings: Vec<String>,
}

/// A config problem that stops the load, reported as `file:line: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File the problem is in.
    pub file: String,
    /// 1-based line, 0 when the file itself could not be read.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<uci::SyntaxError> for ConfigError {
    fn from(e: uci::SyntaxError) -> Self {
        ConfigError { file: e.file, line: e.line, message: e.message }
    }
}

/// Largest config file read: a UCI file with every option and a few
/// thousand list entries is far smaller; anything larger (or not a regular
/// file) is refused before it is read, since root reads what LuCI sends.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// Largest `resolv_file` read: a resolv.conf is a few lines.
pub const MAX_RESOLV_BYTES: u64 = 64 << 10;

impl Config {
    /// Built-in defaults: serve on 127.0.0.1:5353, forward to the system resolvers.
    pub fn builtin() -> Config {
        let mut cfg = Config {
            source: "<built-in>".into(),
            listen: vec![DEFAULT_LISTEN],
            upstreams: Vec::new(),
            fallbacks: Vec::new(),
            upstreams_from: String::new(),
            upstreams_auto: false,
            bootstrap: Vec::new(),
            bootstrap_auto: true,
            time_check: true,
            plain_domains: Vec::new(),
            cache_size: 4096,
            block_mode: BlockMode::Null,
            block_ttl: 60,
            min_ttl: 0,
            max_ttl: 86_400,
            upstream_timeout: Duration::from_secs(2),
            upstream_strategy: upstream::Strategy::Failover,
            serve_stale: true,
            stale_client_timeout: Duration::from_millis(1800),
            stale_answer_ttl: 30,
            stale_max_age: 86_400,
            prefetch: true,
            trust_upstream_ad: false,
            dnssec: false,
            trust_anchor_file: None,
            tcp_idle_timeout: Duration::from_secs(10),
            tcp_max_connections: 128,
            tcp_max_per_client: 16,
            forward_max: 512,
            workers: 0,
            lists: Vec::new(),
            forwards: Vec::new(),
            records: Vec::new(),
            clients: Vec::new(),
            groups: Vec::new(),
            schedules: Vec::new(),
            time_synced_file: PathBuf::from(SYNCED_FILE),
            leases_file: PathBuf::from("/tmp/dhcp.leases"),
            ethers_file: PathBuf::from("/etc/ethers"),
            querylog: QueryLogConfig::default(),
            control_socket: PathBuf::from("/var/run/hydradns/control.sock"),
            metrics_listen: None,
            metrics_textfile: None,
            list_dir: PathBuf::from("/etc/hydradns/lists"),
            refresh_interval: Duration::from_secs(6 * 3600),
            max_list_size: 64 << 20,
            download_timeout: Duration::from_secs(120),
            ca_file: PathBuf::new(),
            cname_inspection: true,
            services_url: None,
            services_saved: None,
            // The daemon serves the networks it is on instead (`lists::serve_own_networks`).
            allow_client: crate::access::AccessList::private(),
            allow_client_given: false,
            trusted_proxy: crate::access::AccessList::loopback(),
            deny_action: crate::access::DenyAction::Refuse,
            ratelimit: 0,
            ratelimit_burst: 0,
            ratelimit_action: crate::access::DenyAction::Drop,
            any_forward: false,
            block_bypass: true,
            rebind_protection: true,
            rebind_allow: Vec::new(),
            resolv_file: PathBuf::from(RESOLV_CONF),
            dnsmasq_mode: DnsmasqMode::Off,
            dnsmasq_port: 5354,
            local_domains: Vec::new(),
            enabled: true,
            user: None,
            stats_interval: Duration::from_secs(3600),
            router: router::Router::default(),
            warnings: Vec::new(),
        };
        cfg.upstreams_from_resolv();
        cfg
    }

    /// Reads and validates a UCI file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = crate::sys::read_regular_text(path, MAX_CONFIG_BYTES).map_err(|e| ConfigError {
            file: file.clone(),
            line: 0,
            message: format!("cannot read: {e}"),
        })?;
        let mut cfg = Config::parse(&file, &text)?;
        cfg.plain_domains_from_env();
        Ok(cfg)
    }

    /// Adds the names in `HYDRADNS_PLAIN_DOMAINS` (space-separated) to
    /// `plain_domain`: OpenWrt's init script passes `system.ntp.server`
    /// there, so NTP finds its servers before the clock is set.
    pub fn plain_domains_from_env(&mut self) {
        let Some(names) = std::env::var_os("HYDRADNS_PLAIN_DOMAINS") else { return };
        for name in names.to_string_lossy().split_whitespace() {
            match crate::domain::normalize_name(name) {
                Some(n) if !self.plain_domains.contains(&n) => self.plain_domains.push(n),
                Some(_) => {}
                None => self.warnings.push(format!("HYDRADNS_PLAIN_DOMAINS: '{name}' is not a domain name, ignored")),
            }
        }
    }

    /// Validates UCI text; `file` names it in messages.
    pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        let parsed = uci::parse(file, text)?;
        let sections = parsed.sections;
        let mut cfg = Config::builtin();
        cfg.source = file.to_string();
        cfg.upstreams.clear();
        let mut replaced = Replaced::default();
        let mut main_seen = false;
        let mut warnings: Vec<String> =
            parsed.warnings.into_iter().map(|(line, text)| format!("{file}:{line}: {text}")).collect();
        for section in &sections {
            let mut reader = SectionReader { file, section, warnings: &mut warnings };
            match section.kind.as_str() {
                "hydradns" => {
                    if main_seen {
                        reader.warn_section("a second 'hydradns' section; its options override the first");
                    }
                    main_seen = true;
                    reader.main(&mut cfg, &mut replaced)?;
                }
                "blocklist" => cfg.lists.push(reader.list(ListKind::Block, &cfg.lists)?),
                "allowlist" => cfg.lists.push(reader.list(ListKind::Allow, &cfg.lists)?),
                "forward" => cfg.forwards.push(reader.forward()?),
                "record" => reader.record(&mut cfg.records)?,
                "client" => cfg.clients.push(reader.client()?),
                "group" => cfg.groups.push(reader.group()?),
                "schedule" => cfg.schedules.push(reader.schedule()?),
                "querylog" => reader.querylog(&mut cfg)?,
                other => reader.warn_section(&format!("unknown section type '{other}' ignored")),
            }
        }
        cfg.warnings = warnings;
        alias_loops(&cfg.records)?;
        groups::check(&cfg)?;
        let mut urls = Vec::new();
        for src in cfg.lists.iter_mut() {
            if let Some(url) = &src.url {
                if urls.contains(url) {
                    return Err(ConfigError {
                        file: file_name_of(&src.origin),
                        line: line_of_origin(&src.origin),
                        message: format!("list '{}' downloads the same URL as another section", src.name),
                    });
                }
                src.saved = Some(cfg.list_dir.join(saved_file_name(&src.name, url)));
                urls.push(url.clone());
            }
        }
        if let Some(url) = &cfg.services_url {
            // `.json`: the downloader vets it as a services.json, not a list.
            cfg.services_saved = Some(cfg.list_dir.join(saved_file_name("services", url)).with_extension("json"));
        }
        if cfg.listen.is_empty() {
            cfg.listen.push(DEFAULT_LISTEN);
        }
        if cfg.upstreams.is_empty() {
            cfg.upstreams_from_resolv();
        } else {
            cfg.upstreams_from = file.to_string();
            cfg.upstreams_auto = false;
            cfg.bootstrap_from_resolv();
        }
        dnsmasq::settle(&mut cfg, file, &sections)?;
        if cfg.min_ttl > cfg.max_ttl {
            return Err(ConfigError {
                file: file.into(),
                line: line_of(&sections, "min_ttl"),
                message: format!("min_ttl {} is above max_ttl {}", cfg.min_ttl, cfg.max_ttl),
            });
        }
        // Bootstrap servers from resolv_file are already filtered of our own addresses.
        let configured_bootstrap = cfg.bootstrap.iter().filter(|_| !cfg.bootstrap_auto);
        let plain = cfg.upstreams.iter().filter_map(|u| u.plain().map(|a| ("upstream", a)));
        let others =
            cfg.fallbacks.iter().map(|u| ("fallback", *u)).chain(configured_bootstrap.map(|u| ("bootstrap", *u)));
        for (option, up) in plain.chain(others) {
            if cfg.listen.iter().any(|l| is_loop(l, &up)) {
                return Err(ConfigError {
                    file: file.into(),
                    line: line_of(&sections, option),
                    message: format!("{option} {up} is one of our own listen addresses: queries would loop"),
                });
            }
        }
        for g in &cfg.groups {
            for up in g.upstreams.iter().filter_map(Upstream::plain) {
                if cfg.listen.iter().any(|l| is_loop(l, &up)) {
                    return Err(ConfigError {
                        file: file_name_of(&g.origin),
                        line: line_of_origin(&g.origin),
                        message: format!(
                            "group '{}': upstream {up} is one of our own listen addresses: queries would loop",
                            g.name
                        ),
                    });
                }
            }
        }
        Ok(cfg)
    }

    /// The marker of a clock set by NTP, or an empty path when the clock
    /// is trusted as it is (`time_check '0'`).
    pub fn clock_marker(&self) -> &Path {
        if self.time_check { &self.time_synced_file } else { Path::new("") }
    }

    /// Where the daemon writes the inode numbers of its UDP sockets, beside
    /// the control socket and named after it (two instances with their
    /// control sockets in one directory overwrote one file, and one
    /// watchdog saw its daemon as not listening), so the watchdog can tell
    /// them from another program's on the same port. `None` without a
    /// control socket.
    pub fn sockets_file(&self) -> Option<PathBuf> {
        let stem = self.control_socket.file_stem()?.to_string_lossy();
        Some(self.control_socket.with_file_name(format!("{stem}.udp-sockets")))
    }

    /// Identifies the settings a reload cannot apply (sockets, threads, TCP
    /// limits, the query log, the dnsmasq arrangement, the user, the
    /// watched resolv_file): the init script restarts instead
    /// of reloading when it changes. FNV-1a of their debug form; stable for
    /// one build, which is all it is compared within.
    pub fn restart_key(&self) -> String {
        let material = format!(
            "{:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}",
            self.listen,
            self.worker_count(),
            self.querylog,
            // The query log's writer reads them from its start.
            self.leases_file,
            self.ethers_file,
            self.control_socket,
            self.dnsmasq_mode,
            self.dnsmasq_port,
            self.local_domains,
            // The TCP limits are fixed when the listeners start.
            self.tcp_max_connections,
            self.tcp_max_per_client,
            self.tcp_idle_timeout,
            // Dropped to once, at start.
            self.user,
            // Watched from the start.
            self.resolv_file,
            // Bound at start, like the listeners.
            self.metrics_listen,
            // Fixed at start, like the leases file.
            self.metrics_textfile
        );
        let hash =
            material.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        format!("{hash:016x}")
    }

    /// Worker threads to start: the configured count, else one per core.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            return self.workers;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Would forwarding to `up` reach our own listener on `listen`?
fn is_loop(listen: &SocketAddr, up: &SocketAddr) -> bool {
    listen.port() == up.port() && (listen.ip() == up.ip() || (listen.ip().is_unspecified() && up.ip().is_loopback()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "\
config hydradns 'main'
\tlist listen '127.0.0.1:5353'
\tlist listen '[::1]:5353'
\tlist upstream '192.0.2.53'
\tlist upstream '[2001:db8::53]:5300'
\toption cache_size '100'
\toption block_mode 'nxdomain'
\toption block_ttl '30'
\toption min_ttl '5'
\toption max_ttl '3600'
\toption upstream_timeout '500ms'
\toption frobnicate '1'
config blocklist
\toption name 'ads'
\toption path '/tmp/ads.txt'
\tlist domain 'tracker.example'
config allowlist
\tlist domain 'good.example.com'
config forward
\toption domain 'lan'
\tlist server '127.0.0.1:5354'
config mystery
";

    #[test]
    fn full_config() {
        let c = Config::parse("f", FULL).unwrap();
        assert_eq!(c.listen, ["127.0.0.1:5353".parse().unwrap(), "[::1]:5353".parse().unwrap()]);
        assert_eq!(c.upstreams, ["192.0.2.53:53".parse().unwrap(), "[2001:db8::53]:5300".parse().unwrap()]);
        assert_eq!(c.cache_size, 100);
        assert_eq!(c.block_mode, BlockMode::NxDomain);
        assert_eq!((c.block_ttl, c.min_ttl, c.max_ttl), (30, 5, 3600));
        assert_eq!(c.upstream_timeout, Duration::from_millis(500));
        assert_eq!(c.lists.len(), 2);
        assert_eq!(c.lists[0].name, "ads");
        assert_eq!(c.lists[0].domains, [("tracker.example".to_string(), 16)]);
        assert_eq!(c.lists[1].kind, ListKind::Allow);
        assert_eq!(c.lists[1].name, "allowlist2");
        assert_eq!(c.forwards[0].domains, ["lan"]);
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(c.warnings[0].starts_with("f:12: unknown option 'frobnicate'"));
        assert!(c.warnings[1].starts_with("f:22: unknown section type 'mystery'"));
    }

    #[test]
    fn bad_values_name_the_line() {
        for (text, line, needle) in [
            ("config hydradns\n\toption cache_size 'lots'\n", 2, "cache_size"),
            ("config hydradns\n\n\tlist listen 'nowhere'\n", 3, "listen"),
            ("config hydradns\n\toption block_mode 'maybe'\n", 2, "block_mode"),
            ("config hydradns\n\toption upstream_timeout '2 weeks'\n", 2, "upstream_timeout"),
            ("config hydradns\n\toption min_ttl 10\n\toption max_ttl 5\n", 2, "min_ttl"),
            ("config forward\n\toption domain 'lan'\n", 1, "needs a domain and a server"),
            ("config hydradns\n\tlist listen '127.0.0.1:53'\n\tlist upstream '127.0.0.1'\n", 3, "loop"),
            // LuCI's settings could choose root for the daemon (issue 58).
            ("config hydradns\n\toption enabled '1'\n\toption user 'root'\n", 3, "not root"),
        ] {
            let e = Config::parse("cfg", text).unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.to_string().starts_with(&format!("cfg:{line}: ")), "{e}");
            assert!(e.message.contains(needle), "{e}");
        }
    }

    #[test]
    fn restart_key_covers_what_a_reload_cannot_apply() {
        let key = |extra: &str| {
            Config::parse("f", &format!("config hydradns\n\tlist upstream '192.0.2.1'\n{extra}")).unwrap().restart_key()
        };
        let base = key("");
        assert_eq!(base, key(""));
        assert_eq!(base, key("\tlist upstream '192.0.2.2'\n\toption cache_size '100'\n"), "reloadable");
        assert_ne!(base, key("\tlist listen '127.0.0.1:5300'\n"));
        assert_ne!(base, key("\toption dnsmasq_port '5355'\n"));
        assert_ne!(base, key("config querylog\n\toption retention '1d'\n"));
        assert_ne!(base, key("\toption leases_file '/tmp/other.leases'\n"));
        assert_ne!(base, key("\toption metrics_listen '127.0.0.1:9153'\n"));
        assert_ne!(base, key("\toption metrics_textfile '/var/prometheus/hydradns.prom'\n"));
    }

    #[test]
    fn each_control_socket_has_its_own_sockets_file() {
        let at = |p: &str| Config { control_socket: PathBuf::from(p), ..Config::builtin() }.sockets_file();
        assert_eq!(at("/var/run/hydradns/control.sock"), Some(PathBuf::from("/var/run/hydradns/control.udp-sockets")));
        assert_ne!(at("/tmp/w/a.sock"), at("/tmp/w/b.sock"));
        assert_eq!(at(""), None);
    }
}
