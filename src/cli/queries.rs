//! `log` and `top`: reading the query log, from the running gateway's
//! database or a stopped one's.

use super::*;

/// The query log of `cfg`, read-only.
pub(super) fn open_log(cfg: &Config) -> Result<rusqlite::Connection, ExitCode> {
    // A running gateway first commits the queries still waiting for their
    // batch; a stopped one has committed everything. Either way the read goes on.
    let _ = control::request(&cfg.control_socket, "commit", Duration::from_secs(3));
    // LuCI reads the log as root (log, top, history, devices): as the
    // gateway's user, whose files these are (issue 58).
    if let Some(dir) = cfg.querylog.path.parent()
        && let Err(e) = crate::privileges::become_owner_of(dir)
    {
        eprintln!("hydradns: {e}");
        return Err(ExitCode::from(1));
    }
    read::open(&cfg.querylog.path).map_err(|e| {
        eprintln!("hydradns: {e}");
        ExitCode::from(1)
    })
}

/// `log` and `top` JSON: `{"schema":1,"entries":[…]}`, the array inside an
/// object that says its layout's version, as `stats` and `status` do.
pub(super) fn page(entries: String) -> String {
    format!("{{\"schema\":{},\"entries\":{entries}}}", crate::stats::SCHEMA)
}

pub(super) fn show_log(args: Args) -> ExitCode {
    let flags = [
        "-c",
        "--json",
        "--limit",
        "--blocked",
        "--client",
        "--domain",
        "--since",
        "--before",
        "--outcome",
        "--list",
        "--group",
    ];
    let cfg = match command_config(&args, "log", &flags) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let conn = match open_log(&cfg) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut filter = read::LogFilter {
        limit: args.limit.unwrap_or(50),
        blocked: args.blocked,
        client: args.client.clone(),
        domain: args.domain.clone(),
        since: args.since,
        before: args.before,
        outcome: args.outcome.clone(),
        list: args.list.clone(),
        clients: None,
    };
    if let Some(group) = &args.group {
        match group_members(&cfg, &conn, &filter, group) {
            Ok(who) => filter.clients = Some(who),
            Err(code) => return code,
        }
    }
    let rows = match read::recent(&conn, &filter) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", page(rows.serialize_json()));
    } else {
        for r in &rows {
            let via = match (&r.list, &r.upstream) {
                (Some(l), _) => format!("list {l}"),
                (None, Some(u)) => format!("via {u}"),
                _ => String::new(),
            };
            let client = match (&r.client_name, &r.mac) {
                (Some(n), Some(m)) => format!("{n} ({} {m})", r.client),
                (Some(n), None) => format!("{n} ({})", r.client),
                (None, Some(m)) => format!("{} ({m})", r.client),
                (None, None) => r.client.clone(),
            };
            // Last, so a line without it reads as before.
            let dnssec = r.dnssec.as_deref().map(|d| format!(" dnssec {d}")).unwrap_or_default();
            println!(
                "{} {:<15} {:<6} {} {} {} {}us {}{dnssec}",
                r.time, client, r.qtype, r.name, r.outcome, r.rcode, r.latency_us, via
            );
        }
    }
    ExitCode::SUCCESS
}

/// Most clients a group filter asks the rules about: a household's log
/// holds dozens; past this the filter sees the first ones only.
const MAX_LOG_CLIENTS: usize = 10_000;

/// The log's clients that are in `group` under today's client rules (the
/// log keeps no groups): each (address, MAC) the rows in `filter`'s range
/// hold, found as the daemon finds a client, with the router's leases.
fn group_members(
    cfg: &Config,
    conn: &rusqlite::Connection,
    filter: &read::LogFilter,
    group: &str,
) -> Result<Vec<String>, ExitCode> {
    use crate::client::rules::{ClientRules, Learned};
    let table = crate::config::groups::GroupTable::new(cfg);
    let Some(bit) = table.bit(group) else {
        return Err(usage_error("log", format!("--group: no group '{group}' in the config")));
    };
    let rules = ClientRules::new(&cfg.clients, &table);
    let book = router_book(cfg);
    let learned = Learned::new(&rules, &book);
    let mut who = read::clients(conn, filter, MAX_LOG_CLIENTS).map_err(|e| {
        eprintln!("hydradns: reading the query log: {e}");
        ExitCode::from(1)
    })?;
    who.retain(|key| {
        let (ip, mac) = key.split_once(' ').unwrap_or((key, ""));
        let mac = crate::mac::parse_mac(mac.as_bytes());
        let ip = ip.parse().unwrap_or(IpAddr::from([0u8; 4]));
        rules.groups(rules.find(ip, book.mac(ip, mac), &learned)) & (1 << bit) != 0
    });
    Ok(who)
}

pub(super) fn top(args: Args) -> ExitCode {
    if let Err(e) = args.only("top", &["-c", "--json", "--limit", "--blocked", "--clients", "--domains", "--since"]) {
        return usage_error("top", e);
    }
    let kind = match (args.blocked, args.clients, args.domains) {
        (false, false, _) => read::TopKind::Domains,
        (true, false, false) => read::TopKind::Blocked,
        (false, true, false) => read::TopKind::Clients,
        _ => return usage_error("top", "choose one of --blocked, --clients, --domains".into()),
    };
    let conn = match any_config(&args).and_then(|cfg| open_log(&cfg)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let since = args.since.unwrap_or(Duration::from_secs(86_400));
    match read::top(&conn, kind, since, args.limit.unwrap_or(10)) {
        Ok(rows) if args.json => println!("{}", page(rows.serialize_json())),
        Ok(rows) => {
            for r in rows {
                println!("{:>8}  {}", r.count, r.key);
            }
        }
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
