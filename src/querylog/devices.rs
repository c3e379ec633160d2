//! The devices the query log saw: each client's queries, blocked ones and
//! last query since a time (`hydradns devices`, LuCI's Devices page; the
//! merge with the router's files is the CLI's, `cli/devices.rs`). Bounded
//! and indexed like the history: one SQL statement over the rowid range
//! (ids follow time), grouped by client.

use std::net::IpAddr;

use rusqlite::Connection;

/// One device, merged: typed, to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub ip: Option<IpAddr>,
    pub mac: Option<[u8; 6]>,
    pub name: Option<String>,
    pub last_ms: u64,
    pub queries: u64,
    pub blocked: u64,
}

/// Each client's rows since Unix milliseconds `since_ms`. A client the log
/// keeps no address of (a group's `querylog anonymous`) is left out. Its
/// MAC and name are the leases' and neighbours' (the log's own come from
/// the same files): asking for them cost 1.5 KB of code.
pub fn seen(conn: &Connection, since_ms: u64) -> Result<Vec<Merged>, String> {
    if !super::read::has_table(conn) {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare(
            "SELECT client, max(ts), count(*), sum(outcome = 'blocked') FROM queries WHERE id >= ?1 GROUP BY client",
        )
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([super::read::id_at(since_ms)], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
        })
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for row in rows {
        let (client, last, n, blocked) = row.map_err(|e| e.to_string())?;
        let Some(ip) = client.parse::<IpAddr>().ok().filter(|ip| !ip.is_unspecified()) else { continue };
        out.push(Merged {
            ip: Some(ip),
            mac: None,
            name: None,
            last_ms: last as u64,
            queries: n as u64,
            blocked: blocked as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::querylog::history::tests::log;

    /// One row of the log, as the writer stores it.
    pub(crate) fn add(conn: &Connection, ms: u64, seq: i64, client: &str, mac: Option<&str>, outcome: &str) {
        conn.execute(
            "INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us, mac) \
             VALUES (?1, ?2, ?3, 'a.example', 1, ?4, 0, 10, ?5)",
            (crate::querylog::read::id_at(ms) | seq, ms as i64, client, outcome, mac),
        )
        .unwrap();
    }

    pub(crate) const MIDNIGHT: u64 = 1_796_428_800;

    #[test]
    fn counts_start_at_midnight_and_the_anonymous_are_left_out() {
        let conn = log();
        add(&conn, MIDNIGHT * 1000 - 1, 0, "192.168.1.50", None, "blocked");
        add(&conn, MIDNIGHT * 1000, 0, "192.168.1.50", None, "blocked");
        add(&conn, MIDNIGHT * 1000 + 5000, 0, "192.168.1.50", Some("02:00:5e:10:00:01"), "forwarded");
        add(&conn, MIDNIGHT * 1000 + 6000, 0, "0.0.0.0", None, "forwarded");
        let s = seen(&conn, MIDNIGHT * 1000).unwrap();
        assert_eq!(
            s,
            [Merged {
                ip: "192.168.1.50".parse().ok(),
                mac: None,
                name: None,
                last_ms: MIDNIGHT * 1000 + 5000,
                queries: 2,
                blocked: 1
            }]
        );
        assert!(seen(&Connection::open_in_memory().unwrap(), 0).unwrap().is_empty(), "no table yet");
    }
}
