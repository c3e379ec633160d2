//! Reading the query log for `hydradns log` and `hydradns top`.
//!
//! The CLI opens the live database read-only (WAL lets it read while the
//! writer writes) and runs plain SQL; nothing here touches the gateway.
// nanoserde's DeJson derive expands to code clippy would write with `?`.
#![allow(clippy::question_mark)]

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nanoserde::{DeJson, SerJson};
use rusqlite::{Connection, OpenFlags, params_from_iter, types::Value};

/// One logged query as shown by `hydradns log --json`.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct LogRow {
    /// The row's id: `--before ID` pages to the rows older than it.
    pub id: i64,
    /// UTC time, ISO 8601 with milliseconds.
    pub time: String,
    /// Unix time in milliseconds.
    pub unix_ms: u64,
    /// Client address (truncated when `anonymize_clients` is on).
    pub client: String,
    /// Question name, lowercase, no trailing dot.
    pub name: String,
    /// Question type (`A`, `AAAA`, … or `TYPE65`).
    #[nserde(rename = "type")]
    pub qtype: String,
    /// `forwarded`, `cached`, `blocked`, `local`, `failed`, `stale`, `record` or `paused`.
    pub outcome: String,
    /// Response code (`NOERROR`, `NXDOMAIN`, …).
    pub rcode: String,
    /// Upstream that answered (forwarded queries).
    pub upstream: Option<String>,
    /// List that blocked it (blocked queries).
    pub list: Option<String>,
    /// Time from arrival to answer, µs.
    pub latency_us: u64,
    /// The client's hardware address, when dnsmasq in front gave it (`add-mac`).
    pub mac: Option<String>,
    /// The device's name from the DHCP leases or /etc/ethers, when known.
    pub client_name: Option<String>,
    /// The group's upstream set that answered (forwarded queries); none:
    /// the main upstreams.
    #[nserde(default)]
    pub upstream_set: Option<String>,
    /// What DNSSEC validation decided (`secure`, `insecure`, `bogus`,
    /// `indeterminate`), for misses a validating set answered; none otherwise.
    #[nserde(default)]
    pub dnssec: Option<String>,
}

/// What `hydradns log` filters on.
#[derive(Debug, Clone, Default)]
pub struct LogFilter {
    /// Newest entries first, at most this many.
    pub limit: usize,
    /// Only blocked queries.
    pub blocked: bool,
    /// Only this client.
    pub client: Option<String>,
    /// Only names matching: `*` wildcards, or a domain and its subdomains.
    pub domain: Option<String>,
    /// Only entries younger than this.
    pub since: Option<Duration>,
    /// Only rows older than this row id (the next page).
    pub before: Option<i64>,
    /// Only this outcome (`blocked`, `cached`, …).
    pub outcome: Option<String>,
    /// Only rows this list decided.
    pub list: Option<String>,
    /// Only these clients, each its address, a space and the MAC the log
    /// has with it, if any (a group's members, found with [`clients`]).
    pub clients: Option<Vec<String>>,
}

/// What `hydradns top` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopKind {
    /// Most queried names.
    Domains,
    /// Most blocked names.
    Blocked,
    /// Busiest clients.
    Clients,
}

/// One ranked item for `hydradns top --json`.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct TopRow {
    /// Name or client address.
    pub key: String,
    /// Queries counted.
    pub count: u64,
}

/// Opens the live database for reading.
pub fn open(path: &Path) -> Result<Connection, String> {
    if !path.exists() {
        return Err(format!("no query log at {} (is the query log enabled and the gateway running?)", path.display()));
    }
    // The gateway's file, in its directory: a link or a FIFO there is not
    // the log (SQLite's own open would follow the one and wait on the other).
    crate::sys::open_unlinked(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| format!("{}: {e}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(2)).map_err(|e| e.to_string())?;
    Ok(conn)
}

/// The first row id at or after Unix time `ms` (ids are time-ordered, see the writer).
pub(super) fn id_at(ms: u64) -> i64 {
    (ms as i64) << super::writer::ID_SEQ_BITS
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The writer creates the file a moment before its tables; until then there is nothing to read.
pub(super) fn has_table(conn: &Connection) -> bool {
    conn.query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'queries'", [], |_| Ok(())).is_ok()
}

/// Whether the `queries` table has `column` (a database an older version
/// wrote has not gained it until this version's writer opens it).
pub(super) fn has_column(conn: &Connection, column: &str) -> bool {
    table_has_column(conn, "queries", column)
}

/// [`has_column`] for table (or view) `table`.
pub(super) fn table_has_column(conn: &Connection, table: &str, column: &str) -> bool {
    conn.query_row("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", [table, column], |_| Ok(())).is_ok()
}

/// Every client of the rows `filter`'s `since` and `before` leave, at most
/// `max`, as [`LogFilter::clients`] takes them (address, space, MAC if
/// any): whom a group filter asks the client rules about. One pass over
/// those rows, grouped.
pub fn clients(conn: &Connection, filter: &LogFilter, max: usize) -> Result<Vec<String>, String> {
    if !has_table(conn) {
        return Ok(Vec::new());
    }
    let mac = if has_column(conn, "mac") { "mac" } else { "NULL" };
    let since = filter.since.map_or(0, |s| id_at(now_ms().saturating_sub(s.as_millis() as u64)));
    let sql = format!(
        "SELECT client || ' ' || ifnull({mac}, '') FROM queries WHERE id >= ?1 AND id < ?2 GROUP BY 1 LIMIT ?3"
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map((since, filter.before.unwrap_or(i64::MAX), max as i64), |r| r.get(0))
        .map_err(|e| e.to_string())?;
    rows.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

/// Newest entries matching `filter`.
pub fn recent(conn: &Connection, filter: &LogFilter) -> Result<Vec<LogRow>, String> {
    if !has_table(conn) {
        return Ok(Vec::new());
    }
    // A database an older version wrote, not yet opened by this one's writer.
    let mac = if has_column(conn, "mac") { "mac" } else { "NULL" };
    let client_name = if has_column(conn, "client_name") { "client_name" } else { "NULL" };
    let upstream_set = if has_column(conn, "upstream_set") { "upstream_set" } else { "NULL" };
    let dnssec = if has_column(conn, "dnssec") { "dnssec" } else { "NULL" };
    let mut sql = format!(
        "SELECT ts, client, name, qtype, outcome, rcode, upstream, list, latency_us, {mac}, {client_name}, id, \
         {upstream_set}, {dnssec} FROM queries WHERE 1"
    );
    let mut args: Vec<Value> = Vec::new();
    if filter.blocked {
        sql.push_str(" AND outcome = 'blocked'");
    }
    if let Some(c) = &filter.client {
        match crate::mac::parse_mac(c.as_bytes()) {
            Some(m) => {
                sql.push_str(&format!(" AND {mac} = ?"));
                args.push(Value::Text(crate::mac::mac_text(&m)));
            }
            // An address, or a device's name.
            None => {
                sql.push_str(&format!(" AND (client = ? OR {client_name} = ?)"));
                args.push(Value::Text(c.clone()));
                args.push(Value::Text(c.clone()));
            }
        }
    }
    if let Some(d) = &filter.domain {
        let d = d.trim_end_matches('.').to_ascii_lowercase();
        if d.contains('*') {
            sql.push_str(" AND name GLOB ?");
            args.push(Value::Text(d));
        } else {
            sql.push_str(" AND (name = ? OR name GLOB ?)");
            args.push(Value::Text(d.clone()));
            args.push(Value::Text(format!("*.{d}")));
        }
    }
    if let Some(before) = filter.before {
        sql.push_str(" AND id < ?");
        args.push(Value::Integer(before));
    }
    if let Some(o) = &filter.outcome {
        sql.push_str(" AND outcome = ?");
        args.push(Value::Text(o.clone()));
    }
    if let Some(l) = &filter.list {
        sql.push_str(" AND list = ?");
        args.push(Value::Text(l.clone()));
    }
    if let Some(since) = filter.since {
        sql.push_str(" AND id >= ?");
        args.push(Value::Integer(id_at(now_ms().saturating_sub(since.as_millis() as u64))));
    }
    if let Some(who) = &filter.clients {
        sql.push_str(&format!(" AND client || ' ' || ifnull({mac}, '') IN ({})", vec!["?"; who.len()].join(",")));
        args.extend(who.iter().cloned().map(Value::Text));
    }
    sql.push_str(" ORDER BY id DESC LIMIT ?");
    args.push(Value::Integer(filter.limit as i64));
    let mut stmt = conn.prepare(&sql).map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map(params_from_iter(args), |r| {
            let ts: i64 = r.get(0)?;
            let qtype: u16 = r.get(3)?;
            let rcode: u8 = r.get(5)?;
            Ok(LogRow {
                id: r.get(11)?,
                time: crate::timetext::iso8601(ts as u64),
                unix_ms: ts as u64,
                client: r.get(1)?,
                name: r.get(2)?,
                qtype: type_name(qtype),
                outcome: r.get(4)?,
                rcode: rcode_name(rcode),
                upstream: r.get(6)?,
                list: r.get(7)?,
                latency_us: r.get::<_, i64>(8)? as u64,
                mac: r.get(9)?,
                client_name: r.get(10)?,
                upstream_set: r.get(12)?,
                dnssec: r.get(13)?,
            })
        })
        .map_err(|e| e.to_string())?;
    rows.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

/// The `limit` most frequent names or clients in the last `since`.
pub fn top(conn: &Connection, kind: TopKind, since: Duration, limit: usize) -> Result<Vec<TopRow>, String> {
    if !has_table(conn) {
        return Ok(Vec::new());
    }
    // What is shown, what is counted by, and whether only blocked queries count.
    let (shown, column, only_blocked) = match kind {
        TopKind::Domains => ("name", "name", false),
        TopKind::Blocked => ("name", "name", true),
        // A client with a name is shown as `name (address)`.
        TopKind::Clients if has_column(conn, "client_name") => {
            ("coalesce(max(client_name) || ' (' || client || ')', client)", "client", false)
        }
        TopKind::Clients => ("client", "client", false),
    };
    let sql = format!(
        "SELECT {shown}, count(*) AS n FROM queries WHERE id >= ?1 {} GROUP BY {column} ORDER BY n DESC, {column} LIMIT ?2",
        if only_blocked { "AND outcome = 'blocked'" } else { "" }
    );
    let cutoff = id_at(now_ms().saturating_sub(since.as_millis() as u64));
    let mut stmt = conn.prepare(&sql).map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map((cutoff, limit as i64), |r| Ok(TopRow { key: r.get(0)?, count: r.get::<_, i64>(1)? as u64 }))
        .map_err(|e| e.to_string())?;
    rows.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

/// Mnemonic of a record type.
pub fn type_name(t: u16) -> String {
    let name = match t {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        35 => "NAPTR",
        43 => "DS",
        48 => "DNSKEY",
        64 => "SVCB",
        65 => "HTTPS",
        255 => "ANY",
        257 => "CAA",
        _ => return format!("TYPE{t}"),
    };
    name.to_string()
}

/// Mnemonic of a response code.
pub fn rcode_name(rc: u8) -> String {
    let name = match rc {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => return format!("RCODE{rc}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnemonics() {
        assert_eq!(type_name(28), "AAAA");
        assert_eq!(type_name(999), "TYPE999");
        assert_eq!(rcode_name(3), "NXDOMAIN");
    }
}
