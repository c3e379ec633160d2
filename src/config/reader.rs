//! Reading one section's values: [`SectionReader`] and the value parsers
//! (numbers, sizes, durations, addresses, paths, booleans), each mistake
//! reported as `file:line`; and the table of the options each section
//! reads, for the "did you mean" of an unknown one.

use super::*;

/// Reads one section's values, turning bad ones into `file:line` errors.
pub(super) struct SectionReader<'a> {
    pub(super) file: &'a str,
    pub(super) section: &'a uci::Section,
    pub(super) warnings: &'a mut Vec<String>,
}

impl SectionReader<'_> {
    pub(super) fn error(&self, line: usize, message: String) -> ConfigError {
        ConfigError { file: self.file.to_string(), line, message }
    }

    pub(super) fn bad(&self, v: &uci::Value, what: &str) -> ConfigError {
        self.error(v.line, format!("option '{}': '{}' is not {what}", v.key, v.value))
    }

    pub(super) fn warn(&mut self, line: usize, text: &str) {
        self.warnings.push(format!("{}:{}: {text}", self.file, line));
    }

    pub(super) fn warn_section(&mut self, text: &str) {
        let line = self.section.line;
        self.warn(line, text);
    }

    pub(super) fn unknown(&mut self, v: &uci::Value) {
        let mut text = format!("unknown option '{}' in '{}' section ignored", v.key, self.section.kind);
        if let Some(meant) = suggest(&self.section.kind, &v.key) {
            text.push_str(&format!("; did you mean '{meant}'?"));
        }
        self.warn(v.line, &text);
    }

    pub(super) fn domain(&self, v: &uci::Value) -> Result<String, ConfigError> {
        crate::domain::normalize_name(&v.value).ok_or_else(|| self.bad(v, "a domain name"))
    }

    pub(super) fn path(&self, v: &uci::Value) -> Result<PathBuf, ConfigError> {
        if v.value.starts_with('/') { Ok(PathBuf::from(&v.value)) } else { Err(self.bad(v, "an absolute path")) }
    }

    /// [`Self::path`] of a file the gateway reads, with a warning when it
    /// exists and is not a regular file (it will not be read: see
    /// [`crate::sys::open_regular`]). A missing one is no warning: leases
    /// and resolv.conf.auto appear after boot.
    pub(super) fn file_path(&mut self, v: &uci::Value) -> Result<PathBuf, ConfigError> {
        let p = self.path(v)?;
        self.warn_unless_regular(v);
        Ok(p)
    }

    pub(super) fn warn_unless_regular(&mut self, v: &uci::Value) {
        // stat only: a FIFO or a device is judged without opening it.
        if !v.value.is_empty() && std::fs::metadata(&v.value).is_ok_and(|m| !m.is_file()) {
            self.warn(v.line, &format!("option '{}': '{}' is not a regular file; it will not be read", v.key, v.value));
        }
    }

    pub(super) fn size(&self, v: &uci::Value, min: u64, max: u64) -> Result<u64, ConfigError> {
        match parse_size(&v.value) {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(v, &format!("a size from {}K to {}G (e.g. 32M)", min >> 10, max >> 30))),
        }
    }

    pub(super) fn number(&self, v: &uci::Value, min: u64, max: u64) -> Result<u64, ConfigError> {
        match v.value.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.bad(v, &format!("a number from {min} to {max}"))),
        }
    }

    pub(super) fn duration(&self, v: &uci::Value, min_ms: u64, max_ms: u64) -> Result<Duration, ConfigError> {
        match parse_duration(&v.value) {
            Some(d) if (min_ms..=max_ms).contains(&(d.as_millis() as u64)) => Ok(d),
            _ => Err(self.bad(v, &format!("a duration from {min_ms}ms to {}s", max_ms / 1000))),
        }
    }

    pub(super) fn boolean(&self, v: &uci::Value) -> Result<bool, ConfigError> {
        match v.value.as_str() {
            "1" | "yes" | "on" | "true" | "enabled" => Ok(true),
            "0" | "no" | "off" | "false" | "disabled" => Ok(false),
            _ => Err(self.bad(v, "a boolean (0 or 1)")),
        }
    }
}

/// The options each section type reads, for the "did you mean" of an
/// unknown one: a typo'd `list upstrem` is ignored, and the gateway
/// forwards to resolv.conf's servers instead, so the warning must say what
/// was meant. `options_table_matches_the_readers` holds each name to being read.
pub(super) const OPTIONS: &[(&str, &[&str])] = &[
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
            "dnssec",
            "trust_anchor_file",
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
    (
        "group",
        &[
            "schedule",
            "block_mode",
            "service",
            "safe_search",
            "youtube_restrict",
            "querylog",
            "upstream",
            "fallback_main",
            "dnssec",
        ],
    ),
    ("schedule", &["day", "start", "end"]),
];

/// The option of section type `kind` that `key` most likely misspells:
/// at most two edits away (one for short names), the closest first.
pub(super) fn suggest(kind: &str, key: &str) -> Option<&'static str> {
    let (_, names) = OPTIONS.iter().find(|(k, _)| *k == kind)?;
    let most = if key.len() <= 4 { 1 } else { 2 };
    names.iter().map(|n| (edits(key, n), *n)).filter(|&(d, _)| d <= most).min_by_key(|&(d, _)| d).map(|(_, n)| n)
}

/// Levenshtein distance, with a swap of two neighbours counted as one edit.
pub(super) fn edits(a: &str, b: &str) -> usize {
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

pub(super) fn line_of(sections: &[uci::Section], key: &str) -> usize {
    sections.iter().flat_map(|s| s.values.iter()).find(|v| v.key == key).map_or(0, |v| v.line)
}

pub(super) fn file_name_of(origin: &str) -> String {
    origin.rsplit_once(':').map_or(origin, |(f, _)| f).to_string()
}

pub(super) fn line_of_origin(origin: &str) -> usize {
    origin.rsplit_once(':').and_then(|(_, l)| l.parse().ok()).unwrap_or(0)
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

pub(super) fn parse_block_mode(s: &str) -> Option<BlockMode> {
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
    #![allow(clippy::unwrap_used)]
    use super::*;

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
}
