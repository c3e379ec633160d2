//! The `config hydradns 'main'` section: listening, upstreams, the cache,
//! blocking, access, dnsmasq, the router and the files the gateway uses.

use super::*;

/// Defaults a list option drops when the config gives its own first entry.
#[derive(Debug, Default)]
pub(super) struct Replaced {
    pub(super) listen: bool,
    pub(super) bootstrap: bool,
    pub(super) allow_client: bool,
    pub(super) trusted_proxy: bool,
    pub(super) router: router::Replaced,
}

impl SectionReader<'_> {
    pub(super) fn main(&mut self, cfg: &mut Config, replaced: &mut Replaced) -> Result<(), ConfigError> {
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
                    cfg.upstream_strategy = upstream::Strategy::from_name(&v.value)
                        .ok_or_else(|| self.bad(v, "failover, random or parallel"))?
                }
                "serve_stale" => cfg.serve_stale = self.boolean(v)?,
                "prefetch" => cfg.prefetch = self.boolean(v)?,
                "trust_upstream_ad" => cfg.trust_upstream_ad = self.boolean(v)?,
                "dnssec" => cfg.dnssec = self.boolean(v)?,
                "trust_anchor_file" => cfg.trust_anchor_file = Some(self.file_path(v)?),
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
                    // The settings' write ACL (LuCI) would be root's:
                    // `run --user root` on the command line stays.
                    if v.value == "root" {
                        return Err(self.error(
                            v.line,
                            "option 'user': not root, whom LuCI's settings would then choose for the daemon \
                             (`hydradns run --user root` keeps root, from the command line only)"
                                .into(),
                        ));
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
}
