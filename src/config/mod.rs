//! Typed settings: what each UCI option means, its default, and validation.
//!
//! Syntax lives in [`uci`]; this module turns sections into a [`Config`] and
//! reports every wrong value as `file:line: problem`. Unknown options and
//! section types are warnings, not errors, so a file written for a newer
//! release still starts an older one.

pub mod groups;
pub mod router;
pub mod uci;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::upstream::{Upstream, resolv};

/// Where `run` looks for its config when `-c` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/config/hydradns";
/// Built-in listen address: unprivileged and loopback, so a first start needs no root
/// and exposes nothing.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 5353);
/// Resolver file read for upstreams when the config names none.
const RESOLV_CONF: &str = "/etc/resolv.conf";
/// Reverse zones of private, shared and link-local addresses: in `replace`
/// mode these go to dnsmasq, which knows the LAN's hosts.
const PRIVATE_REVERSE_ZONES: &[&str] = &[
    "10.in-addr.arpa",
    "16.172.in-addr.arpa",
    "17.172.in-addr.arpa",
    "18.172.in-addr.arpa",
    "19.172.in-addr.arpa",
    "20.172.in-addr.arpa",
    "21.172.in-addr.arpa",
    "22.172.in-addr.arpa",
    "23.172.in-addr.arpa",
    "24.172.in-addr.arpa",
    "25.172.in-addr.arpa",
    "26.172.in-addr.arpa",
    "27.172.in-addr.arpa",
    "28.172.in-addr.arpa",
    "29.172.in-addr.arpa",
    "30.172.in-addr.arpa",
    "31.172.in-addr.arpa",
    "168.192.in-addr.arpa",
    "254.169.in-addr.arpa",
    "d.f.ip6.arpa",
    "8.e.f.ip6.arpa",
    "9.e.f.ip6.arpa",
    "a.e.f.ip6.arpa",
    "b.e.f.ip6.arpa",
];

/// How HydraDNS shares DNS with dnsmasq on OpenWrt (the init script does the dnsmasq side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DnsmasqMode {
    /// No dnsmasq arrangement (off the router, or done by hand).
    #[default]
    Off,
    /// dnsmasq keeps port 53 and forwards to us.
    Upstream,
    /// We take port 53; dnsmasq answers local names on `dnsmasq_port`.
    Replace,
}
/// Upstreams used when neither the config nor resolv.conf gives one (Quad9, Cloudflare).
const FALLBACK_UPSTREAMS: [IpAddr; 2] = [IpAddr::V4(Ipv4Addr::new(9, 9, 9, 9)), IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1))];

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

/// Whether a list source blocks or allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `config blocklist`
    Block,
    /// `config allowlist`
    Allow,
}

/// One `config blocklist` / `config allowlist` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListSource {
    /// Name shown in logs and by `hydradns check`.
    pub name: String,
    /// Block or allow.
    pub kind: ListKind,
    /// List files to read, in any supported format.
    pub paths: Vec<PathBuf>,
    /// Inline `list domain` entries, each with the line it came from.
    pub domains: Vec<(String, usize)>,
    /// `file:line` of the section, for messages about it.
    pub origin: String,
    /// Where the list is downloaded from, if anywhere.
    pub url: Option<String>,
    /// The saved copy of the download (under `list_dir`), read like a `path`.
    pub saved: Option<PathBuf>,
    /// `list group`: the groups whose clients it applies to; empty: `default`.
    pub groups: Vec<String>,
}

/// One `config forward` section: names under `domains` go to `servers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// Domains (and their subdomains) this rule applies to.
    pub domains: Vec<String>,
    /// Servers tried in order.
    pub servers: Vec<SocketAddr>,
}

/// A `config record` section: a name the gateway answers itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRecord {
    /// Lowercase, without the trailing dot or a leading `*.`.
    pub name: String,
    /// `*.name`: every name under `name`, not `name` itself.
    pub wildcard: bool,
    /// What the name holds.
    pub data: RecordData,
    /// TTL of every record answered for it, seconds.
    pub ttl: u32,
    /// Where it was defined, `file:line`.
    pub origin: String,
}

/// The addresses or the alias of a [`LocalRecord`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordData {
    /// `list ip`: IPv4 and IPv6 addresses, in file order.
    Addresses(Vec<IpAddr>),
    /// `option cname`: the name it is an alias of.
    Alias(String),
}

/// TTL of a local record without one (dnsmasq's `local-ttl` is 0, which
/// makes every client ask again at once; Unbound's local-data uses 3600).
pub const RECORD_TTL: u32 = 300;

/// The `config querylog` section: where answered queries are recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLogConfig {
    /// Record queries at all.
    pub enabled: bool,
    /// Live database, on tmpfs (RAM) so logging never wears the flash.
    pub path: PathBuf,
    /// Copy on flash, refreshed every `flush_interval` and at stop, restored after a reboot.
    pub flash_path: PathBuf,
    /// How often the flash copy is refreshed; 0 = only at stop.
    pub flush_interval: Duration,
    /// Entries older than this are deleted.
    pub retention: Duration,
    /// The live database is kept under this many bytes, oldest entries deleted first.
    pub max_size: u64,
    /// Entries waiting for the writer; beyond it entries are dropped and counted.
    pub queue_size: usize,
    /// Entries per transaction.
    pub batch_size: usize,
    /// Longest an entry waits before its batch is written. At a router's
    /// rates a commit's cost is mostly its own, not its entries' (the
    /// writer's CPU per query at 100 QPS: 2.7–4.0 µs committing every
    /// second, 1.6 µs committing each 5 s round's 500 entries;
    /// `bench/lowrate.py --threads`, docs/benchmarks.md), so batches are
    /// long; readers ask for a commit before they read (see
    /// `querylog::doorbell`), so nobody waits one out.
    pub batch_interval: Duration,
    /// Store client addresses cut to /24 (IPv4) or /48 (IPv6).
    pub anonymize_clients: bool,
}

impl Default for QueryLogConfig {
    fn default() -> Self {
        QueryLogConfig {
            enabled: true,
            path: PathBuf::from("/tmp/hydradns/queries.db"),
            flash_path: PathBuf::from("/etc/hydradns/queries.db"),
            flush_interval: Duration::from_secs(3600),
            retention: Duration::from_secs(7 * 86_400),
            max_size: 32 << 20,
            queue_size: 4096,
            batch_size: 1024,
            batch_interval: Duration::from_secs(10),
            anonymize_clients: false,
        }
    }
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
    pub upstream_strategy: crate::upstream::Strategy,
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

/// Defaults a list option drops when the config gives its own first entry.
#[derive(Debug, Default)]
struct Replaced {
    listen: bool,
    bootstrap: bool,
    allow_client: bool,
    trusted_proxy: bool,
    router: router::Replaced,
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
            upstream_strategy: crate::upstream::Strategy::Failover,
            serve_stale: true,
            stale_client_timeout: Duration::from_millis(1800),
            stale_answer_ttl: 30,
            stale_max_age: 86_400,
            prefetch: true,
            trust_upstream_ad: false,
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
            time_synced_file: PathBuf::from(crate::policy::schedule::SYNCED_FILE),
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
            match crate::policy::formats::normalize_name(name) {
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
        if cfg.dnsmasq_mode == DnsmasqMode::Upstream && cfg.dnsmasq_server().is_none() {
            return Err(ConfigError {
                file: file.into(),
                line: line_of(&sections, "dnsmasq_mode"),
                message: "dnsmasq_mode 'upstream' needs a listen address on 127.0.0.1 (or 0.0.0.0) on a port \
                          other than 53, which dnsmasq keeps"
                    .into(),
            });
        }
        if cfg.dnsmasq_mode == DnsmasqMode::Replace {
            if !cfg.listen.iter().any(|l| l.port() == 53) {
                return Err(ConfigError {
                    file: file.into(),
                    line: line_of(&sections, "dnsmasq_mode"),
                    message: "dnsmasq_mode 'replace' needs a listen address on port 53".into(),
                });
            }
            if cfg.local_domains.is_empty() {
                cfg.local_domains.push("lan".into());
            }
            // dnsmasq knows the LAN's names and addresses: send them there,
            // unless the config already says where they go.
            let mut domains = cfg.local_domains.clone();
            domains.extend(PRIVATE_REVERSE_ZONES.iter().map(|z| z.to_string()));
            domains.retain(|d| !cfg.forwards.iter().any(|f| f.domains.contains(d)));
            let dnsmasq = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), cfg.dnsmasq_port);
            cfg.forwards.push(Forward { domains, servers: vec![dnsmasq] });
        }
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
        Ok(cfg)
    }

    /// Upstreams from `resolv_file`, minus our own addresses; public
    /// resolvers while it names none (a router's WAN file is empty until the
    /// WAN is up). Called again whenever the file changes.
    pub fn upstreams_from_resolv(&mut self) {
        let (servers, from) = self.resolv_servers();
        if self.bootstrap_auto {
            self.bootstrap = servers.clone();
        }
        self.upstreams = servers.into_iter().map(Upstream::Plain).collect();
        self.upstreams_from = from;
        self.upstreams_auto = true;
    }

    /// Bootstrap resolvers from `resolv_file` (as the upstreams), unless
    /// the config names them.
    pub fn bootstrap_from_resolv(&mut self) {
        if self.bootstrap_auto {
            self.bootstrap = self.resolv_servers().0;
        }
    }

    /// `resolv_file`'s servers minus our own addresses, or the built-in
    /// public resolvers while it names none; and which it was.
    fn resolv_servers(&self) -> (Vec<SocketAddr>, String) {
        // With dnsmasq forwarding to us, the loopback resolver that
        // /etc/resolv.conf names on OpenWrt is dnsmasq itself: asking it
        // would loop. (dnsmasq binds lo's own 127.0.0.1 and ::1, not all of 127/8.)
        let dnsmasq_in_front = self.dnsmasq_mode == DnsmasqMode::Upstream;
        let is_dnsmasq = |up: &SocketAddr| {
            up.port() == 53
                && (up.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) || up.ip() == IpAddr::V6(Ipv6Addr::LOCALHOST))
        };
        let from_resolv: Vec<SocketAddr> = crate::sys::read_regular_text(&self.resolv_file, MAX_RESOLV_BYTES)
            .map(|text| resolv::servers(&text))
            .unwrap_or_default()
            .into_iter()
            .filter(|up| !self.listen.iter().any(|l| is_loop(l, up)))
            .filter(|up| !(dnsmasq_in_front && is_dnsmasq(up)))
            .collect();
        if from_resolv.is_empty() {
            (FALLBACK_UPSTREAMS.iter().map(|ip| SocketAddr::new(*ip, 53)).collect(), "built-in fallback".into())
        } else {
            (from_resolv, self.resolv_file.display().to_string())
        }
    }

    /// Whether encrypted upstreams are configured (they need the TLS
    /// settings and the bootstrap resolvers).
    pub fn has_encrypted(&self) -> bool {
        self.upstreams.iter().any(|u| u.plain().is_none())
    }

    /// The marker of a clock set by NTP, or an empty path when the clock
    /// is trusted as it is (`time_check '0'`).
    pub fn clock_marker(&self) -> &Path {
        if self.time_check { &self.time_synced_file } else { Path::new("") }
    }

    /// In `upstream` mode, where dnsmasq forwards to: our first IPv4
    /// listener reachable on 127.0.0.1, on a port dnsmasq does not hold.
    pub fn dnsmasq_server(&self) -> Option<SocketAddr> {
        self.listen
            .iter()
            .find(|l| {
                l.port() != 53
                    && (l.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) || l.ip() == IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            })
            .map(|l| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), l.port()))
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

    /// Where the daemon answers the queries that matter, for the watchdog:
    /// dnsmasq's forwarding target in `upstream` mode, else a listen address
    /// on port 53 (or the first at all), a wildcard one asked on loopback.
    /// Never 127.0.0.1 when there is another: that is the router's own
    /// resolver, which failing open in replace mode sends to dnsmasq
    /// (the init script's `router_lookups`), so a probe there would see
    /// dnsmasq answer for a daemon that does not.
    pub fn probe_addr(&self) -> SocketAddr {
        if let (DnsmasqMode::Upstream, Some(s)) = (self.dnsmasq_mode, self.dnsmasq_server()) {
            return s;
        }
        let own = |l: &&SocketAddr| l.ip() != IpAddr::V4(Ipv4Addr::LOCALHOST);
        let dns = || self.listen.iter().filter(|l| l.port() == 53);
        let l = dns().find(own).or(dns().next()).or(self.listen.first()).copied().unwrap_or(DEFAULT_LISTEN);
        match l.ip() {
            IpAddr::V4(a) if a.is_unspecified() => SocketAddr::new(Ipv4Addr::new(127, 0, 0, 2).into(), l.port()),
            IpAddr::V6(a) if a.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), l.port()),
            _ => l,
        }
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

/// File name of a downloaded list's saved copy: the list's name made safe,
/// plus a hash of the URL so two lists never share a file.
pub fn saved_file_name(name: &str, url: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(48)
        .collect();
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    format!("{safe}-{:08x}.list", hash as u32)
}

fn file_name_of(origin: &str) -> String {
    origin.rsplit_once(':').map_or(origin, |(f, _)| f).to_string()
}

fn line_of_origin(origin: &str) -> usize {
    origin.rsplit_once(':').and_then(|(_, l)| l.parse().ok()).unwrap_or(0)
}

/// Would forwarding to `up` reach our own listener on `listen`?
fn is_loop(listen: &SocketAddr, up: &SocketAddr) -> bool {
    listen.port() == up.port() && (listen.ip() == up.ip() || (listen.ip().is_unspecified() && up.ip().is_loopback()))
}

/// Refuses aliases that lead back to themselves through other local names
/// (a client would be sent round the loop until its resolver gave up).
fn alias_loops(records: &[LocalRecord]) -> Result<(), ConfigError> {
    let alias_of = |name: &str| {
        records.iter().find_map(|r| match &r.data {
            RecordData::Alias(t) if !r.wildcard && r.name == name => Some(t.as_str()),
            _ => None,
        })
    };
    for r in records.iter().filter(|r| !r.wildcard) {
        let mut at = r.name.as_str();
        for _ in 0..records.len() {
            let Some(next) = alias_of(at) else { break };
            if next == r.name {
                return Err(ConfigError {
                    file: file_name_of(&r.origin),
                    line: line_of_origin(&r.origin),
                    message: format!("record '{}' is an alias that leads back to itself", r.name),
                });
            }
            at = next;
        }
    }
    Ok(())
}

fn line_of(sections: &[uci::Section], key: &str) -> usize {
    sections.iter().flat_map(|s| s.values.iter()).find(|v| v.key == key).map_or(0, |v| v.line)
}

/// The file name of a URL's path without its extension
/// (`https://host/lists/ads.txt?x=1` → `ads`); none for a bare host.
fn url_file_stem(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next()?.splitn(4, '/').nth(3)?;
    let file = path.rsplit('/').next().filter(|f| !f.is_empty())?;
    let stem = Path::new(file).file_stem()?.to_string_lossy().into_owned();
    (!stem.is_empty()).then_some(stem)
}

/// The options each section type reads, for the "did you mean" of an
/// unknown one: a typo'd `list upstrem` is ignored, and the gateway
/// forwards to resolv.conf's servers instead, so the warning must say what
/// was meant. `options_table_matches_the_readers` holds each name to being read.
const OPTIONS: &[(&str, &[&str])] = &[
    (
        "hydradns",
        &[
            "listen",
            "upstream",
            "bootstrap",
            "time_check",
            "plain_domain",
            "fallback",
            "cache_size",
            "block_mode",
            "block_ttl",
            "min_ttl",
            "max_ttl",
            "upstream_timeout",
            "upstream_strategy",
            "serve_stale",
            "prefetch",
            "trust_upstream_ad",
            "stale_client_timeout",
            "stale_answer_ttl",
            "stale_max_age",
            "tcp_idle_timeout",
            "tcp_max_connections",
            "tcp_max_per_client",
            "forward_max",
            "workers",
            "control_socket",
            "metrics_listen",
            "metrics_textfile",
            "list_dir",
            "refresh_interval",
            "max_list_size",
            "download_timeout",
            "ca_file",
            "cname_inspection",
            "services_url",
            "allow_client",
            "leases_file",
            "time_synced_file",
            "ethers_file",
            "trusted_proxy",
            "rebind_protection",
            "ratelimit",
            "ratelimit_burst",
            "ratelimit_action",
            "block_bypass",
            "any_mode",
            "rebind_allow",
            "deny_action",
            "resolv_file",
            "dnsmasq_mode",
            "dnsmasq_port",
            "local_domain",
            "enabled",
            "user",
            "stats_interval",
            "force_dns",
            "force_dns_port",
            "force_dns_zone",
            "force_dns_exempt",
            "fail_open",
        ],
    ),
    ("blocklist", &["name", "path", "domain", "group", "enabled", "url"]),
    ("allowlist", &["name", "path", "domain", "group", "enabled", "url"]),
    (
        "querylog",
        &[
            "enabled",
            "path",
            "flash_path",
            "flush_interval",
            "retention",
            "max_size",
            "queue_size",
            "batch_size",
            "batch_interval",
            "anonymize_clients",
            "stats_interval",
        ],
    ),
    ("forward", &["domain", "server"]),
    ("record", &["name", "ip", "cname", "ttl"]),
    ("client", &["name", "match", "group"]),
    ("group", &["schedule", "block_mode", "service", "safe_search", "youtube_restrict", "querylog"]),
    ("schedule", &["day", "start", "end"]),
];

/// The option of section type `kind` that `key` most likely misspells:
/// at most two edits away (one for short names), the closest first.
fn suggest(kind: &str, key: &str) -> Option<&'static str> {
    let (_, names) = OPTIONS.iter().find(|(k, _)| *k == kind)?;
    let most = if key.len() <= 4 { 1 } else { 2 };
    names.iter().map(|n| (edits(key, n), *n)).filter(|&(d, _)| d <= most).min_by_key(|&(d, _)| d).map(|(_, n)| n)
}

/// Levenshtein distance, with a swap of two neighbours counted as one edit.
fn edits(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut rows = vec![(0..=b.len()).collect::<Vec<usize>>(); a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

/// Reads one section's values, turning bad ones into `file:line` errors.
struct SectionReader<'a> {
    file: &'a str,
    section: &'a uci::Section,
    warnings: &'a mut Vec<String>,
}

impl SectionReader<'_> {
    fn error(&self, line: usize, message: String) -> ConfigError {
        ConfigError { file: self.file.to_string(), line, message }
    }

    fn bad(&self, v: &uci::Value, what: &str) -> ConfigError {
        self.error(v.line, format!("option '{}': '{}' is not {what}", v.key, v.value))
    }

    fn warn(&mut self, line: usize, text: &str) {
        self.warnings.push(format!("{}:{}: {text}", self.file, line));
    }

    fn warn_section(&mut self, text: &str) {
        let line = self.section.line;
        self.warn(line, text);
    }

    fn unknown(&mut self, v: &uci::Value) {
        let mut text = format!("unknown option '{}' in '{}' section ignored", v.key, self.section.kind);
        if let Some(meant) = suggest(&self.section.kind, &v.key) {
            text.push_str(&format!("; did you mean '{meant}'?"));
        }
        self.warn(v.line, &text);
    }

    fn main(&mut self, cfg: &mut Config, replaced: &mut Replaced) -> Result<(), ConfigError> {
        for v in &self.section.values {
            match v.key.as_str() {
                "listen" => {
                    if !replaced.listen {
                        cfg.listen.clear();
                        replaced.listen = true;
                    }
                    cfg.listen.push(parse_socket_addr(&v.value, 53).ok_or_else(|| self.bad(v, "an address"))?);
                }
                "upstream" => cfg.upstreams.push(
                    Upstream::parse(&v.value)
                        .map_err(|e| self.error(v.line, format!("option 'upstream': '{}': {e}", v.value)))?,
                ),
                "bootstrap" => {
                    if !replaced.bootstrap {
                        cfg.bootstrap.clear();
                        cfg.bootstrap_auto = false;
                        replaced.bootstrap = true;
                    }
                    cfg.bootstrap.push(parse_socket_addr(&v.value, 53).ok_or_else(|| self.bad(v, "an address"))?)
                }
                "time_check" => cfg.time_check = self.boolean(v)?,
                "plain_domain" => cfg.plain_domains.push(self.domain(v)?),
                "fallback" => {
                    cfg.fallbacks.push(parse_socket_addr(&v.value, 53).ok_or_else(|| self.bad(v, "an address"))?)
                }
                "cache_size" => cfg.cache_size = self.number(v, 0, 10_000_000)? as usize,
                "block_mode" => {
                    cfg.block_mode = parse_block_mode(&v.value)
                        .ok_or_else(|| self.bad(v, "null, nxdomain, refused or an IP address"))?
                }
                "block_ttl" => cfg.block_ttl = self.number(v, 0, 604_800)? as u32,
                "min_ttl" => cfg.min_ttl = self.number(v, 0, 604_800)? as u32,
                "max_ttl" => cfg.max_ttl = self.number(v, 0, 604_800)? as u32,
                "upstream_timeout" => cfg.upstream_timeout = self.duration(v, 10, 60_000)?,
                "upstream_strategy" => {
                    cfg.upstream_strategy = crate::upstream::Strategy::from_name(&v.value)
                        .ok_or_else(|| self.bad(v, "failover, random or parallel"))?
                }
                "serve_stale" => cfg.serve_stale = self.boolean(v)?,
                "prefetch" => cfg.prefetch = self.boolean(v)?,
                "trust_upstream_ad" => cfg.trust_upstream_ad = self.boolean(v)?,
                "stale_client_timeout" => cfg.stale_client_timeout = self.duration(v, 0, 60_000)?,
                "stale_answer_ttl" => cfg.stale_answer_ttl = self.duration(v, 1000, 3_600_000)?.as_secs() as u32,
                "stale_max_age" => cfg.stale_max_age = self.duration(v, 1000, 30 * 86_400_000)?.as_secs() as u32,
                "tcp_idle_timeout" => cfg.tcp_idle_timeout = self.duration(v, 100, 3_600_000)?,
                "tcp_max_connections" => cfg.tcp_max_connections = self.number(v, 1, 65_535)? as usize,
                "tcp_max_per_client" => cfg.tcp_max_per_client = self.number(v, 1, 65_535)? as usize,
                "forward_max" => cfg.forward_max = self.number(v, 1, 65_535)? as usize,
                "workers" => cfg.workers = self.number(v, 0, 64)? as usize,
                // `off`, since UCI cannot say '': an empty option is no option
                // (libuci), which leaves the default socket on.
                "control_socket" => {
                    cfg.control_socket = if v.value == "off" { PathBuf::new() } else { PathBuf::from(&v.value) }
                }
                "metrics_listen" => {
                    cfg.metrics_listen = match v.value.as_str() {
                        "" => None,
                        a => Some(
                            parse_socket_addr(a, 9153)
                                .ok_or_else(|| self.bad(v, "an address and port, e.g. 127.0.0.1:9153"))?,
                        ),
                    }
                }
                "metrics_textfile" => {
                    cfg.metrics_textfile = if v.value.is_empty() { None } else { Some(self.path(v)?) }
                }
                "list_dir" => cfg.list_dir = self.path(v)?,
                "refresh_interval" => cfg.refresh_interval = self.duration(v, 0, 30 * 86_400_000)?,
                "max_list_size" => cfg.max_list_size = self.size(v, 1 << 10, 1 << 32)?,
                "download_timeout" => cfg.download_timeout = self.duration(v, 1000, 3_600_000)?,
                "ca_file" => {
                    cfg.ca_file = PathBuf::from(&v.value);
                    self.warn_unless_regular(v);
                }
                "cname_inspection" => cfg.cname_inspection = self.boolean(v)?,
                "services_url" => {
                    let lower = v.value.to_ascii_lowercase();
                    cfg.services_url = match v.value.as_str() {
                        "" => None,
                        _ if (lower.starts_with("http://") || lower.starts_with("https://")) && v.value.len() >= 10 => {
                            Some(v.value.clone())
                        }
                        _ => return Err(self.bad(v, "an http:// or https:// URL")),
                    }
                }
                "allow_client" => {
                    if !replaced.allow_client {
                        cfg.allow_client = crate::access::AccessList::empty();
                        cfg.allow_client_given = true;
                        replaced.allow_client = true;
                    }
                    cfg.allow_client.add(&v.value).ok_or_else(|| self.bad(v, "an address or CIDR range"))?;
                }
                "leases_file" => cfg.leases_file = self.file_path(v)?,
                "time_synced_file" => cfg.time_synced_file = self.path(v)?,
                "ethers_file" => cfg.ethers_file = self.file_path(v)?,
                "trusted_proxy" => {
                    if !replaced.trusted_proxy {
                        cfg.trusted_proxy = crate::access::AccessList::empty();
                        replaced.trusted_proxy = true;
                    }
                    if v.value != "none" {
                        cfg.trusted_proxy
                            .add(&v.value)
                            .ok_or_else(|| self.bad(v, "an address or CIDR range, or none"))?;
                    }
                }
                "rebind_protection" => cfg.rebind_protection = self.boolean(v)?,
                "ratelimit" => cfg.ratelimit = self.number(v, 0, 1_000_000)? as u32,
                "ratelimit_burst" => {
                    cfg.ratelimit_burst = self.number(v, 0, u64::from(crate::ratelimit::MAX_BURST))? as u32
                }
                "ratelimit_action" => {
                    cfg.ratelimit_action =
                        crate::access::DenyAction::from_name(&v.value).ok_or_else(|| self.bad(v, "refuse or drop"))?
                }
                "block_bypass" => cfg.block_bypass = self.boolean(v)?,
                "any_mode" => {
                    cfg.any_forward = match v.value.as_str() {
                        "hinfo" => false,
                        "forward" => true,
                        _ => return Err(self.bad(v, "hinfo or forward")),
                    }
                }
                "rebind_allow" => {
                    let name = self.domain(v)?;
                    cfg.rebind_allow.push(name);
                }
                "deny_action" => {
                    cfg.deny_action =
                        crate::access::DenyAction::from_name(&v.value).ok_or_else(|| self.bad(v, "refuse or drop"))?
                }
                "resolv_file" => cfg.resolv_file = self.file_path(v)?,
                "dnsmasq_mode" => {
                    cfg.dnsmasq_mode = match v.value.as_str() {
                        "off" | "" => DnsmasqMode::Off,
                        "upstream" => DnsmasqMode::Upstream,
                        "replace" => DnsmasqMode::Replace,
                        _ => return Err(self.bad(v, "off, upstream or replace")),
                    }
                }
                "dnsmasq_port" => cfg.dnsmasq_port = self.number(v, 1, 65_535)? as u16,
                "local_domain" => {
                    let name = self.domain(v)?;
                    cfg.local_domains.push(name);
                }
                // Read by the init script: whether to start at all.
                "enabled" => cfg.enabled = self.boolean(v)?,
                "user" => {
                    let ok = !v.value.is_empty()
                        && v.value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
                    if !ok {
                        return Err(self.bad(v, "a user name"));
                    }
                    cfg.user = Some(v.value.clone());
                }
                "stats_interval" => cfg.stats_interval = self.duration(v, 0, 30 * 86_400_000)?,
                _ if self.router(&mut cfg.router, &mut replaced.router, v)? => {}
                _ => self.unknown(v),
            }
        }
        Ok(())
    }

    fn list(&mut self, kind: ListKind, earlier: &[ListSource]) -> Result<ListSource, ConfigError> {
        let mut src = ListSource {
            name: String::new(),
            kind,
            paths: Vec::new(),
            domains: Vec::new(),
            origin: format!("{}:{}", self.file, self.section.line),
            url: None,
            saved: None,
            groups: Vec::new(),
        };
        let mut enabled = true;
        for v in &self.section.values {
            match v.key.as_str() {
                "name" => src.name = v.value.clone(),
                "path" => src.paths.push(PathBuf::from(&v.value)),
                "domain" => src.domains.push((v.value.clone(), v.line)),
                "group" => src.groups.push(self.group_name(v)?),
                "enabled" => enabled = self.boolean(v)?,
                "url" => {
                    if src.url.is_some() {
                        return Err(self.error(v.line, "one 'url' per section; add a section per list".into()));
                    }
                    let lower = v.value.to_ascii_lowercase();
                    if !(lower.starts_with("http://") || lower.starts_with("https://")) || v.value.len() < 10 {
                        return Err(self.bad(v, "an http:// or https:// URL"));
                    }
                    src.url = Some(v.value.clone());
                }
                _ => self.unknown(v),
            }
        }
        if src.name.is_empty() {
            // The section's name, else the file's: the URL's file name too,
            // since two lists from one host would share the host's name
            // (and so their metrics series and log name).
            let stem = src.paths.first().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
            let url_stem = src.url.as_deref().and_then(url_file_stem);
            let host = src.url.as_deref().and_then(|u| u.split('/').nth(2)).map(str::to_string);
            let name = self.section.name.clone().or(stem).or(url_stem).or(host);
            let fallback = format!("{}{}", self.section.kind, earlier.len() + 1);
            src.name = match name {
                // Still one name for two lists: the second gets its position.
                Some(n) if earlier.iter().any(|l| l.name == n) => format!("{n}-{}", earlier.len() + 1),
                Some(n) => n,
                None => fallback,
            };
        }
        if !enabled {
            src.paths.clear();
            src.domains.clear();
            src.url = None;
        }
        Ok(src)
    }

    fn querylog(&mut self, cfg: &mut Config) -> Result<(), ConfigError> {
        let q = &mut cfg.querylog;
        for v in &self.section.values {
            match v.key.as_str() {
                "enabled" => q.enabled = self.boolean(v)?,
                "path" => q.path = self.path(v)?,
                "flash_path" => q.flash_path = self.path(v)?,
                "flush_interval" => q.flush_interval = self.duration(v, 0, 30 * 86_400_000)?,
                "retention" => q.retention = self.duration(v, 60_000, 366 * 86_400_000)?,
                "max_size" => q.max_size = self.size(v, 64 << 10, 1 << 40)?,
                "queue_size" => q.queue_size = self.number(v, 16, 1 << 20)? as usize,
                "batch_size" => q.batch_size = self.number(v, 1, 65_536)? as usize,
                "batch_interval" => q.batch_interval = self.duration(v, 10, 60_000)?,
                "anonymize_clients" => q.anonymize_clients = self.boolean(v)?,
                // Documented with the query log, so accept it here as well as in the main section.
                "stats_interval" => cfg.stats_interval = self.duration(v, 0, 30 * 86_400_000)?,
                _ => self.unknown(v),
            }
        }
        Ok(())
    }

    fn domain(&self, v: &uci::Value) -> Result<String, ConfigError> {
        crate::policy::formats::normalize_name(&v.value).ok_or_else(|| self.bad(v, "a domain name"))
    }

    fn path(&self, v: &uci::Value) -> Result<PathBuf, ConfigError> {
        if v.value.starts_with('/') { Ok(PathBuf::from(&v.value)) } else { Err(self.bad(v, "an absolute path")) }
    }

    /// [`Self::path`] of a file the gateway reads, with a warning when it
    /// exists and is not a regular file (it will not be read: see
    /// [`crate::sys::open_regular`]). A missing one is no warning: leases
    /// and resolv.conf.auto appear after boot.
    fn file_path(&mut self, v: &uci::Value) -> Result<PathBuf, ConfigError> {
        let p = self.path(v)?;
        self.warn_unless_regular(v);
        Ok(p)
    }

    fn warn_unless_regular(&mut self, v: &uci::Value) {
        // stat only: a FIFO or a device is judged without opening it.
        if !v.value.is_empty() && std::fs::metadata(&v.value).is_ok_and(|m| !m.is_file()) {
            self.warn(v.line, &format!("option '{}': '{}' is not a regular file; it will not be read", v.key, v.value));
        }
    }

    fn size(&self, v: &uci::Value, min: u64, max: u64) -> Result<u64, ConfigError> {
        match parse_size(&v.value) {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(v, &format!("a size from {}K to {}G (e.g. 32M)", min >> 10, max >> 30))),
        }
    }

    fn forward(&mut self) -> Result<Forward, ConfigError> {
        let mut fwd = Forward { domains: Vec::new(), servers: Vec::new() };
        for v in &self.section.values {
            match v.key.as_str() {
                "domain" => {
                    let name = self.domain(v)?;
                    fwd.domains.push(name);
                }
                "server" => fwd.servers.push(parse_socket_addr(&v.value, 53).ok_or_else(|| self.bad(v, "an address"))?),
                _ => self.unknown(v),
            }
        }
        if fwd.domains.is_empty() || fwd.servers.is_empty() {
            return Err(self.error(self.section.line, "a 'forward' section needs a domain and a server".into()));
        }
        Ok(fwd)
    }

    /// A `config record` section, added to `records`; a second section for
    /// the same name adds its addresses to the first's.
    fn record(&mut self, records: &mut Vec<LocalRecord>) -> Result<(), ConfigError> {
        let origin = format!("{}:{}", self.file, self.section.line);
        let (mut name, mut wildcard, mut ips, mut cname, mut ttl) = (None, false, Vec::new(), None, RECORD_TTL);
        for v in &self.section.values {
            match v.key.as_str() {
                "name" => {
                    let (star, rest) = match v.value.strip_prefix("*.") {
                        Some(rest) => (true, rest),
                        None => (false, v.value.as_str()),
                    };
                    let n = crate::policy::formats::normalize_name(rest)
                        .ok_or_else(|| self.bad(v, "a domain name, or *. and one"))?;
                    (name, wildcard) = (Some(n), star);
                }
                "ip" => ips.push(v.value.trim().parse::<IpAddr>().map_err(|_| self.bad(v, "an IPv4 or IPv6 address"))?),
                "cname" => cname = Some((self.domain(v)?, v.line)),
                "ttl" => ttl = self.number(v, 0, 604_800)? as u32,
                _ => self.unknown(v),
            }
        }
        let line = self.section.line;
        let Some(name) = name else {
            return Err(self.error(line, "a 'record' section needs a name".into()));
        };
        let data = match (cname, ips.is_empty()) {
            (Some((_, l)), false) => {
                return Err(
                    self.error(l, format!("record '{name}' has both an ip and a cname; a name is one or the other"))
                );
            }
            (Some((target, l)), true) => {
                if target == name {
                    return Err(self.error(l, format!("record '{name}' is an alias of itself")));
                }
                RecordData::Alias(target)
            }
            (None, false) => RecordData::Addresses(ips),
            (None, true) => return Err(self.error(line, format!("record '{name}' needs an ip or a cname"))),
        };
        match records.iter_mut().find(|r| r.name == name && r.wildcard == wildcard) {
            Some(LocalRecord { data: RecordData::Addresses(have), ttl: t, .. })
                if matches!(&data, RecordData::Addresses(_)) && *t == ttl =>
            {
                if let RecordData::Addresses(more) = data {
                    have.extend(more);
                }
            }
            Some(first) => {
                return Err(
                    self.error(line, format!("record '{name}' is defined at {} already, differently", first.origin))
                );
            }
            None => records.push(LocalRecord { name, wildcard, data, ttl, origin }),
        }
        Ok(())
    }

    fn number(&self, v: &uci::Value, min: u64, max: u64) -> Result<u64, ConfigError> {
        match v.value.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(v, &format!("a number from {min} to {max}"))),
        }
    }

    fn duration(&self, v: &uci::Value, min_ms: u64, max_ms: u64) -> Result<Duration, ConfigError> {
        match parse_duration(&v.value) {
            Some(d) if (min_ms..=max_ms).contains(&(d.as_millis() as u64)) => Ok(d),
            _ => Err(self.bad(v, &format!("a duration from {min_ms}ms to {}s", max_ms / 1000))),
        }
    }

    fn boolean(&self, v: &uci::Value) -> Result<bool, ConfigError> {
        match v.value.as_str() {
            "1" | "yes" | "on" | "true" | "enabled" => Ok(true),
            "0" | "no" | "off" | "false" | "disabled" => Ok(false),
            _ => Err(self.bad(v, "a boolean (0 or 1)")),
        }
    }
}

/// `192.0.2.1`, `192.0.2.1:5353`, `[2001:db8::1]:53` or a bare `2001:db8::1`.
pub fn parse_socket_addr(s: &str, default_port: u16) -> Option<SocketAddr> {
    let s = s.trim();
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Some(addr);
    }
    let ip = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    ip.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, default_port))
}

/// Bytes, or a number with `K`, `M` or `G` (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// Plain seconds, or a number with `ms`, `s`, `m`, `h` or `d`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let ms = match unit {
        "ms" => n,
        "" | "s" => n.checked_mul(1000)?,
        "m" => n.checked_mul(60_000)?,
        "h" => n.checked_mul(3_600_000)?,
        "d" => n.checked_mul(86_400_000)?,
        _ => return None,
    };
    Some(Duration::from_millis(ms))
}

fn parse_block_mode(s: &str) -> Option<BlockMode> {
    match s.trim().to_ascii_lowercase().as_str() {
        "null" | "null_ip" | "0.0.0.0" => return Some(BlockMode::Null),
        "nxdomain" => return Some(BlockMode::NxDomain),
        "refused" => return Some(BlockMode::Refused),
        _ => {}
    }
    let (mut v4, mut v6) = (None, None);
    for word in s.split_whitespace() {
        match word.parse::<IpAddr>().ok()? {
            IpAddr::V4(a) if v4.is_none() => v4 = Some(a),
            IpAddr::V6(a) if v6.is_none() => v6 = Some(a),
            _ => return None,
        }
    }
    (v4.is_some() || v6.is_some()).then_some(BlockMode::Address(v4, v6))
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

    /// The default name is the section's, else the file's (of a path or a
    /// URL), never one name for two lists.
    #[test]
    fn unnamed_lists_get_distinct_names() {
        let text = "config blocklist\n\toption url 'https://lists.example/ads.txt'\n\
                    config blocklist\n\toption url 'https://lists.example/trackers/hosts?v=2'\n\
                    config blocklist 'mine'\n\toption url 'https://lists.example/x.txt'\n\
                    config blocklist\n\toption url 'https://lists.example/'\n\
                    config allowlist\n\toption url 'https://other.example/ads.txt'\n\
                    config blocklist\n\toption path '/etc/hydradns/local.txt'\n";
        let c = Config::parse("f", text).unwrap();
        let names: Vec<&str> = c.lists.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["ads", "hosts", "mine", "lists.example", "ads-5", "local"]);
        assert_eq!(url_file_stem("https://h.example"), None);
    }

    #[test]
    fn a_misspelt_option_gets_a_suggestion() {
        let c = Config::parse("f", "config hydradns\n\tlist upstrem '192.0.2.1'\n\toption cahce_size '9'\n").unwrap();
        assert_eq!(
            c.warnings,
            [
                "f:2: unknown option 'upstrem' in 'hydradns' section ignored; did you mean 'upstream'?",
                "f:3: unknown option 'cahce_size' in 'hydradns' section ignored; did you mean 'cache_size'?",
            ]
        );
        assert_eq!(suggest("blocklist", "urll"), Some("url"));
        assert_eq!(suggest("hydradns", "frobnicate"), None, "nothing close: no guess");
        assert_eq!(suggest("schedule", "xyz"), None);
    }

    /// Each option the suggestions know is one its section's reader takes:
    /// read, it is no "unknown option" (a bad value is an error on its line).
    #[test]
    fn options_table_matches_the_readers() {
        for (kind, names) in OPTIONS {
            for name in *names {
                // A section is refused whole without its other options, or naming a group or schedule none defines.
                let rest = match *kind {
                    "forward" => "\toption domain 'lan'\n\toption server '192.0.2.1'\n",
                    "record" => "\toption name 'nas.lan'\n\toption ip '192.0.2.1'\n",
                    "client" => "\tlist match '192.0.2.7'\nconfig group 'x'\n",
                    "blocklist" | "allowlist" => "config group 'x'\n",
                    "group" => "config schedule 'x'\n\tlist day 'mon'\n\toption start '08:00'\n\toption end '09:00'\n",
                    "schedule" => "\tlist day 'mon'\n\toption start '08:00'\n\toption end '09:00'\n",
                    _ => "",
                };
                let text = format!("config {kind} 's'\n\toption {name} 'x'\n{rest}");
                match Config::parse("f", &text) {
                    Ok(c) => {
                        assert!(!c.warnings.iter().any(|w| w.contains("unknown option")), "{text}: {:?}", c.warnings)
                    }
                    Err(e) => assert_eq!(e.line, 2, "{text}: {e}"),
                }
            }
        }
        let c = Config::parse("f", "config hydradns 'x'\n\toption nonesuch 'x'\n").unwrap();
        assert!(c.warnings[0].contains("unknown option 'nonesuch'"), "the check above can fail");
    }

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
        ] {
            let e = Config::parse("cfg", text).unwrap_err();
            assert_eq!(e.line, line, "{e}");
            assert!(e.to_string().starts_with(&format!("cfg:{line}: ")), "{e}");
            assert!(e.message.contains(needle), "{e}");
        }
    }

    #[test]
    fn querylog_section() {
        let c = Config::parse(
            "f",
            "config querylog 'querylog'\n\toption path '/tmp/q.db'\n\toption max_size '8M'\n\toption retention '2d'\n\toption batch_interval '100ms'\n\toption stats_interval '0'\n\toption anonymize_clients '1'\n",
        )
        .unwrap();
        assert_eq!(c.querylog.path, PathBuf::from("/tmp/q.db"));
        assert_eq!(c.querylog.max_size, 8 << 20);
        assert_eq!(c.querylog.retention, Duration::from_secs(2 * 86400));
        assert_eq!(c.querylog.batch_interval, Duration::from_millis(100));
        assert_eq!(c.stats_interval, Duration::ZERO);
        assert!(c.querylog.anonymize_clients && c.querylog.enabled);
        assert_eq!(c.querylog.flash_path, PathBuf::from("/etc/hydradns/queries.db"));
        let e = Config::parse("f", "config querylog\n\toption max_size 'huge'\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = Config::parse("f", "config querylog\n\toption path 'relative.db'\n").unwrap_err();
        assert!(e.message.contains("absolute path"));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512k"), Some(512 << 10));
        assert_eq!(parse_size("1.5M"), None);
    }

    #[test]
    fn list_urls_and_download_options() {
        let c = Config::parse(
            "f",
            "config hydradns\n\toption list_dir '/tmp/lists'\n\toption refresh_interval '12h'\n\toption max_list_size '8M'\n\toption cname_inspection '0'\n\
             config blocklist\n\toption name 'hagezi light'\n\toption url 'https://example.com/light.txt'\n\
             config blocklist\n\toption url 'http://lists.example/hosts'\n",
        )
        .unwrap();
        assert_eq!(c.refresh_interval, Duration::from_secs(12 * 3600));
        assert_eq!(c.max_list_size, 8 << 20);
        assert!(!c.cname_inspection);
        let saved = c.lists[0].saved.as_ref().unwrap();
        assert!(saved.starts_with("/tmp/lists"));
        assert!(saved.file_name().unwrap().to_str().unwrap().starts_with("hagezi_light-"), "{saved:?}");
        assert_eq!(c.lists[1].name, "hosts", "the URL's file name, as the docs say");
        assert_ne!(c.lists[0].saved, c.lists[1].saved);
        for (text, line) in [
            ("config blocklist\n\toption url 'ftp://x.example/l'\n", 2),
            (
                "config blocklist\n\toption url 'https://a.example/1'\nconfig blocklist\n\toption name 'x'\n\toption url 'https://a.example/1'\n",
                3,
            ),
        ] {
            let e = Config::parse("f", text).unwrap_err();
            assert_eq!(e.line, line, "{e}");
        }
    }

    #[test]
    fn dnsmasq_modes() {
        let c = Config::parse("f", "config hydradns\n\toption dnsmasq_mode 'replace'\n\tlist listen '0.0.0.0:53'\n\tlist upstream '192.0.2.1'\n").unwrap();
        let fwd = c.forwards.last().unwrap();
        assert_eq!(fwd.servers, ["127.0.0.1:5354".parse().unwrap()]);
        assert!(fwd.domains.contains(&"lan".to_string()) && fwd.domains.contains(&"168.192.in-addr.arpa".to_string()));
        let e = Config::parse("f", "config hydradns\n\toption dnsmasq_mode 'replace'\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(Config::parse("f", "config hydradns\n\toption dnsmasq_mode 'sideways'\n").is_err());
        let c = Config::parse(
            "f",
            "config hydradns\n\toption dnsmasq_mode 'upstream'\n\toption enabled '1'\n\tlist upstream '192.0.2.1'\n",
        )
        .unwrap();
        assert!(c.forwards.is_empty() && c.warnings.is_empty(), "{:?}", c.warnings);
        // In upstream mode dnsmasq on 127.0.0.1:53 is in front of us, not an upstream.
        let dir = std::env::temp_dir().join(format!("hydradns-resolv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let resolv = dir.join("resolv.conf.auto");
        std::fs::write(&resolv, "nameserver 127.0.0.1\nnameserver 192.0.2.53\n").unwrap();
        let text =
            format!("config hydradns\n\toption dnsmasq_mode 'upstream'\n\toption resolv_file '{}'\n", resolv.display());
        let mut c = Config::parse("f", &text).unwrap();
        assert_eq!(c.upstreams, ["192.0.2.53:53".parse().unwrap()]);
        assert!(c.upstreams_auto);
        // Followed: the file changes, the upstreams with it.
        std::fs::write(&resolv, "nameserver 192.0.2.54\n").unwrap();
        c.upstreams_from_resolv();
        assert_eq!(c.upstreams, ["192.0.2.54:53".parse().unwrap()]);
        std::fs::write(&resolv, "").unwrap();
        c.upstreams_from_resolv();
        assert_eq!((c.upstreams.len(), c.upstreams_from.as_str()), (2, "built-in fallback"));
        let configured = Config::parse("f", &format!("{text}\tlist upstream '192.0.2.1'\n")).unwrap();
        assert!(!configured.upstreams_auto, "configured upstreams are not replaced by the file's");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn upstream_mode_needs_a_port_for_dnsmasq() {
        let up = |listen: &str| {
            Config::parse(
                "f",
                &format!(
                    "config hydradns\n\toption dnsmasq_mode 'upstream'\n\tlist listen '{listen}'\n\tlist upstream '192.0.2.1'\n"
                ),
            )
        };
        assert_eq!(up("0.0.0.0:5353").unwrap().dnsmasq_server(), Some("127.0.0.1:5353".parse().unwrap()));
        assert_eq!(up("127.0.0.1:53").unwrap_err().line, 2, "dnsmasq keeps 53");
        assert!(up("[::1]:5353").is_err(), "dnsmasq is pointed at 127.0.0.1");
    }

    #[test]
    fn the_watchdog_asks_where_the_lan_s_queries_arrive() {
        let probe = |extra: &str| {
            Config::parse("f", &format!("config hydradns\n\tlist upstream '192.0.2.1'\n{extra}")).unwrap().probe_addr()
        };
        assert_eq!(probe(""), "127.0.0.1:5353".parse().unwrap());
        assert_eq!(
            probe("\toption dnsmasq_mode 'upstream'\n\tlist listen '[::1]:5353'\n\tlist listen '0.0.0.0:5300'\n"),
            "127.0.0.1:5300".parse().unwrap()
        );
        let replace = "\toption dnsmasq_mode 'replace'\n\tlist listen '192.0.2.1:5353'\n";
        assert_eq!(probe(&format!("{replace}\tlist listen '0.0.0.0:53'\n")), "127.0.0.2:53".parse().unwrap());
        assert_eq!(probe(&format!("{replace}\tlist listen '[::]:53'\n")), "[::1]:53".parse().unwrap());
        let lan = "\tlist listen '127.0.0.1:53'\n\tlist listen '192.168.1.1:53'\n";
        assert_eq!(
            probe(&format!("{replace}{lan}")),
            "192.168.1.1:53".parse().unwrap(),
            "not the router's own resolver"
        );
        assert_eq!(probe(&format!("{replace}\tlist listen '127.0.0.1:53'\n")), "127.0.0.1:53".parse().unwrap());
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
    fn block_modes() {
        assert_eq!(parse_block_mode("null"), Some(BlockMode::Null));
        assert_eq!(parse_block_mode("REFUSED"), Some(BlockMode::Refused));
        assert_eq!(parse_block_mode("192.0.2.1"), Some(BlockMode::Address(Some(Ipv4Addr::new(192, 0, 2, 1)), None)));
        assert_eq!(
            parse_block_mode("192.0.2.1 2001:db8::1"),
            Some(BlockMode::Address(Some(Ipv4Addr::new(192, 0, 2, 1)), Some("2001:db8::1".parse().unwrap())))
        );
        assert_eq!(parse_block_mode("192.0.2.1 192.0.2.2"), None);
        assert_eq!(parse_block_mode("nope"), None);
    }

    #[test]
    fn durations_and_addresses() {
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("6h"), Some(Duration::from_secs(6 * 3600)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86400)));
        assert_eq!(parse_duration("1.5s"), None);
        assert_eq!(parse_duration("s"), None);
        assert_eq!(parse_socket_addr("::1", 53), Some("[::1]:53".parse().unwrap()));
        assert_eq!(parse_socket_addr("[::1]", 53), Some("[::1]:53".parse().unwrap()));
        assert_eq!(parse_socket_addr("10.0.0.1", 53), Some("10.0.0.1:53".parse().unwrap()));
        assert_eq!(parse_socket_addr("host.example", 53), None);
    }

    #[test]
    fn each_control_socket_has_its_own_sockets_file() {
        let at = |p: &str| Config { control_socket: PathBuf::from(p), ..Config::builtin() }.sockets_file();
        assert_eq!(at("/var/run/hydradns/control.sock"), Some(PathBuf::from("/var/run/hydradns/control.udp-sockets")));
        assert_ne!(at("/tmp/w/a.sock"), at("/tmp/w/b.sock"));
        assert_eq!(at(""), None);
    }
}
