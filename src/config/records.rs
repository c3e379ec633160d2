//! The `config record` and `config forward` sections: local names the
//! gateway answers itself, and domains sent to servers of their own.

use super::*;

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

/// Refuses aliases that lead back to themselves through other local names
/// (a client would be sent round the loop until its resolver gave up).
pub(super) fn alias_loops(records: &[LocalRecord]) -> Result<(), ConfigError> {
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

impl SectionReader<'_> {
    pub(super) fn forward(&mut self) -> Result<Forward, ConfigError> {
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
    pub(super) fn record(&mut self, records: &mut Vec<LocalRecord>) -> Result<(), ConfigError> {
        let origin = format!("{}:{}", self.file, self.section.line);
        let (mut name, mut wildcard, mut ips, mut cname, mut ttl) = (None, false, Vec::new(), None, RECORD_TTL);
        for v in &self.section.values {
            match v.key.as_str() {
                "name" => {
                    let (star, rest) = match v.value.strip_prefix("*.") {
                        Some(rest) => (true, rest),
                        None => (false, v.value.as_str()),
                    };
                    let n = crate::domain::normalize_name(rest)
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
}
