//! `status`, `stats`, `metrics` and `lists`: the running gateway's report
//! (or, when it is stopped, what can be known without it), as text or JSON.

use super::*;

/// `hydradns metrics`: the running gateway's Prometheus text.
pub(super) fn metrics(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "metrics", &["-c"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match control::request(&cfg.control_socket, "metrics", Duration::from_secs(5)).map(|j| String::deserialize_json(&j))
    {
        Ok(Ok(text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("hydradns: unreadable answer from the gateway: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("hydradns: {e}");
            ExitCode::from(1)
        }
    }
}

pub(super) fn stats(args: Args) -> ExitCode {
    if let Err(e) = args.only("stats", &["-c", "--json", "--history"]) {
        return usage_error("stats", e);
    }
    if args.history {
        return stats_history(args);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let json = match control::request(&cfg.control_socket, "stats", Duration::from_secs(5)) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("hydradns: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{json}");
        return ExitCode::SUCCESS;
    }
    match Report::deserialize_json(&json) {
        Ok(r) => {
            print!("{}", stats_text(&r));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hydradns: unreadable answer from the gateway ({e}): {json}");
            ExitCode::from(1)
        }
    }
}

/// `hydradns stats --history`: from the query log, which outlives restarts
/// (the live counters do not).
pub(super) fn stats_history(args: Args) -> ExitCode {
    let conn = match any_config(&args).and_then(|cfg| open_log(&cfg)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let h = match crate::querylog::history::history(&conn, crate::sys::unix_now()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", h.serialize_json());
        return ExitCode::SUCCESS;
    }
    println!("{:<17} {:>9} {:>9}", "from (UTC)", "allowed", "blocked");
    for b in h.buckets.iter().filter(|b| b.allowed + b.blocked > 0) {
        println!(
            "{:<17} {:>9} {:>9}",
            &crate::timetext::iso8601(b.start * 1000)[..16].replace('T', " "),
            b.allowed,
            b.blocked
        );
    }
    let (a, b) = h.buckets.iter().fold((0, 0), |(a, b), x| (a + x.allowed, b + x.blocked));
    println!("{:<17} {a:>9} {b:>9}", "last 24 h");
    ExitCode::SUCCESS
}

/// One line per group, for `stats` and `status`: none for the common case
/// of one group, which has nothing to say.
pub(super) fn group_lines(r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    for g in r.groups.iter().filter(|_| r.groups.len() > 1) {
        let _ = write!(o, "group        {}: {} blocked", g.name, g.blocked);
        if !g.schedule.is_empty() {
            let when = if g.active { "inside" } else { "outside: lists off" };
            let _ = write!(o, ", schedule '{}' ({when})", g.schedule);
        }
        if g.paused_until > 0 {
            let _ = write!(o, ", paused until {}", crate::timetext::iso8601(g.paused_until * 1000));
        }
        o.push('\n');
    }
    o
}

/// `hydradns stats` as text.
pub(super) fn stats_text(r: &Report) -> String {
    use std::fmt::Write;
    let c = &r.counters;
    let mut o = String::new();
    let pct = |n: u64| if r.queries == 0 { 0.0 } else { 100.0 * n as f64 / r.queries as f64 };
    let _ = writeln!(o, "hydradns {}, up {}", r.version, duration_text(r.uptime_s));
    if r.paused_until > 0 {
        let _ = writeln!(o, "blocking     paused until {}", crate::timetext::iso8601(r.paused_until * 1000));
    }
    let _ = writeln!(o, "queries      {} ({} udp, {} tcp)", r.queries, c.udp_queries, c.tcp_queries);
    let _ = writeln!(o, "  blocked    {} ({:.1}%)", c.blocked, pct(c.blocked));
    let _ = writeln!(o, "  cached     {} ({:.1}%)", c.cached, pct(c.cached));
    let _ = writeln!(
        o,
        "  forwarded  {} ({:.1}%, {} joined a query in flight)",
        c.forwarded + c.coalesced,
        pct(c.forwarded + c.coalesced),
        c.coalesced
    );
    let _ = writeln!(
        o,
        "  failed     {} ({} no upstream answer, {} overloaded)",
        c.failed + c.overloaded,
        c.failed,
        c.overloaded
    );
    let _ = writeln!(
        o,
        "  errors     {} formerr, {} notimp, {} badvers, {} dropped",
        c.formerr, c.notimp, c.badvers, c.dropped
    );
    let _ = writeln!(o, "  lost       {} in the kernel (receive buffers full)", r.udp_receive_drops);
    let _ = writeln!(
        o,
        "latency      p50 {} us, p90 {} us, p99 {} us ({} answers)",
        r.latency.p50_us, r.latency.p90_us, r.latency.p99_us, r.latency.samples
    );
    let _ = writeln!(
        o,
        "cache        {}/{} entries, hit ratio {:.1}%",
        r.cache_entries,
        r.cache_capacity,
        100.0 * r.cache_hit_ratio
    );
    let _ = writeln!(o, "lists        {} blocked, {} allowed names", r.blocklist_names, r.allowlist_names);
    for l in &r.lists {
        // An allowlist's plain entries allow: none of them blocks.
        let entries = match l.kind.as_str() {
            "allowlist" => format!("{} allows", l.blocks + l.allows),
            _ => format!("{} blocks, {} allows", l.blocks, l.allows),
        };
        let _ =
            writeln!(o, "  {} ({}): {entries}, {} unsupported, {} invalid", l.name, l.kind, l.unsupported, l.invalid);
    }
    o.push_str(&group_lines(r));
    for u in &r.upstreams {
        let _ = writeln!(
            o,
            "upstream     {}: {}{}{} answers, {} timeouts, {} errors, {} ignored replies, avg {} us",
            u.addr,
            if u.down { "DOWN (probed every 30 s), " } else { "" },
            if u.transport != "udp" { format!("{}, {} handshakes, ", u.state, u.handshakes) } else { String::new() },
            u.answers,
            u.timeouts,
            u.errors,
            u.mismatched,
            u.avg_latency_us
        );
    }
    o.push_str(&set_lines(r));
    let q = &r.querylog;
    if q.enabled {
        let _ = writeln!(
            o,
            "query log    {} written, {} dropped (queue full), {} lost (database), {}/{} queued",
            q.written, q.dropped, q.lost, q.queued, q.queue_size
        );
        let last = if q.last_flush_unix == 0 {
            "none yet".to_string()
        } else {
            crate::timetext::iso8601(q.last_flush_unix * 1000)
        };
        let _ = writeln!(o, "flash copy   {} written, {} failed, last {}", q.flushes, q.flush_errors, last);
    } else {
        let _ = writeln!(o, "query log    off");
    }
    // The owner's view of the wear (issue 46): what reached flash, by whom.
    let _ = writeln!(
        o,
        "flash        {} KiB in {} files written since start ({} KiB in {} query log, {} KiB in {} lists)",
        (q.flash_bytes_written + r.lists_flash_bytes_written) / 1024,
        q.flash_files_written + r.lists_flash_files_written,
        q.flash_bytes_written / 1024,
        q.flash_files_written,
        r.lists_flash_bytes_written / 1024,
        r.lists_flash_files_written
    );
    o
}

/// The name `option dnsmasq_mode` gives `m`.
pub(super) fn mode_name(m: DnsmasqMode) -> &'static str {
    match m {
        DnsmasqMode::Off => "off",
        DnsmasqMode::Upstream => "upstream",
        DnsmasqMode::Replace => "replace",
    }
}

/// What `hydradns status --json` prints: the first look after install.
#[derive(SerJson)]
struct Status {
    /// [`crate::stats::SCHEMA`].
    schema: u64,
    /// A gateway answered on the control socket.
    running: bool,
    /// The router's clock, Unix seconds: what `paused_until` is counted
    /// against (a browser's clock may be off).
    now: u64,
    /// Why none did, when none did.
    error: String,
    /// The config file read (`<built-in>` without one).
    config: String,
    listen: Vec<String>,
    dnsmasq_mode: String,
    /// Configured upstreams (or those from `resolv_file`) when not running.
    upstreams: Vec<String>,
    /// The running gateway's counters, upstream states, groups and pause.
    stats: Option<Report>,
    /// Each list from disk: download state (entries from the running gateway).
    lists: Vec<lists::ListInfo>,
    /// Since when (Unix seconds) dnsmasq answers on its own because the
    /// daemon did not (the watchdog failed DNS open); 0 while filtered.
    unfiltered_since: u64,
    /// Why the watchdog failed open; empty while filtered.
    unfiltered_reason: String,
    /// The running gateway's exceptions with an end, as `exceptions --json` lists them.
    exceptions: crate::query::exceptions::Rows,
}

/// `hydradns status`: is it running, and with what. Exit 0 when it runs,
/// 3 when it does not (as an init script's `status`).
pub(super) fn status(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "status", &["-c", "--json", "--live"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = control::request(&cfg.control_socket, "stats", Duration::from_secs(5));
    let (stats, error) = match answer.map(|j| Report::deserialize_json(&j)) {
        Ok(Ok(r)) => (Some(r), String::new()),
        Ok(Err(e)) => (None, format!("unreadable answer from the gateway: {e}")),
        Err(e) => (None, e.to_string()),
    };
    // Counting entries reads every list; the running gateway knows them
    // already, and with --live (LuCI's, root's, at every poll) nothing
    // reads them here.
    let count = stats.is_none() && !args.live;
    // Counting reads the lists in list_dir, the gateway's user's: as that user.
    if count && let Err(e) = crate::privileges::become_owner_of(&cfg.list_dir) {
        eprintln!("hydradns: {e}");
        return ExitCode::from(1);
    }
    let mut lists = lists::describe_with(&cfg, count);
    for l in lists.iter_mut() {
        if let Some(live) = stats.iter().flat_map(|r| &r.lists).find(|r| r.name == l.name && r.kind == l.kind) {
            (l.entries, l.skipped) = (live.blocks + live.allows, live.unsupported + live.invalid);
            // The gateway reads as its own user: what it could not read is
            // what counts, though this command (as root) could.
            if let Some(e) = live.errors.first() {
                l.last_error = Some(e.clone());
            }
            l.warnings.clone_from(&live.warnings);
        }
    }
    let unfiltered = crate::watchdog::unfiltered(Path::new(crate::watchdog::STATE_FILE));
    let exceptions = crate::query::exceptions::Rows(match &stats {
        Some(_) => super::exceptions::running(&cfg),
        None => Vec::new(),
    });
    let st = Status {
        schema: crate::stats::SCHEMA,
        running: stats.is_some(),
        now: crate::sys::unix_now(),
        error,
        config: cfg.source.clone(),
        listen: cfg.listen.iter().map(|a| a.to_string()).collect(),
        dnsmasq_mode: mode_name(cfg.dnsmasq_mode).into(),
        upstreams: cfg.upstreams.iter().map(|a| a.to_string()).collect(),
        stats,
        lists,
        unfiltered_since: unfiltered.as_ref().map_or(0, |u| u.0),
        unfiltered_reason: unfiltered.map(|u| u.1).unwrap_or_default(),
        exceptions,
    };
    let code = if st.running { ExitCode::SUCCESS } else { ExitCode::from(3) };
    if args.json {
        println!("{}", st.serialize_json());
        return code;
    }
    match &st.stats {
        Some(r) => println!("hydradns     running, version {}, up {}", r.version, duration_text(r.uptime_s)),
        None => println!("hydradns     not running ({})", st.error),
    }
    if st.unfiltered_since > 0 {
        println!(
            "DNS          UNFILTERED since {}: the gateway did not answer ({}); dnsmasq answers on its own",
            crate::timetext::iso8601(st.unfiltered_since * 1000),
            st.unfiltered_reason
        );
    }
    println!("config       {}", st.config);
    println!("listen       {} (dnsmasq_mode {})", st.listen.join(", "), st.dnsmasq_mode);
    match &st.stats {
        Some(r) => {
            for u in &r.upstreams {
                let state = if u.down { "DOWN".to_string() } else { format!("up, avg {} us", u.avg_latency_us) };
                println!("upstream     {} ({state}, {} answers)", u.addr, u.answers);
            }
            let blocking = match r.paused_until {
                0 => "on".to_string(),
                t => format!("paused until {}", crate::timetext::iso8601(t * 1000)),
            };
            print!("{}", set_lines(r));
            if !r.dnssec_clock_wait.is_empty() {
                println!(
                    "dnssec       signature dates not checked until the clock is known good (waiting for {})",
                    r.dnssec_clock_wait
                );
            }
            println!("blocking     {blocking}, {} names blocked so far", r.counters.blocked);
            print!("{}", group_lines(r));
            print!("{}", super::exceptions::lines(&st.exceptions.0, st.now));
        }
        None => println!("upstream     {} (configured)", st.upstreams.join(", ")),
    }
    for l in &st.lists {
        let when = match (&l.url, &l.last_success) {
            (None, _) => String::new(),
            (Some(_), Some(t)) => format!(", updated {t}"),
            (Some(_), None) => ", never downloaded".to_string(),
        };
        let error = l.last_error.as_ref().map(|e| format!(", last error: {e}")).unwrap_or_default();
        println!("list         {} ({}): {} entries{when}{error}", l.name, l.kind, l.entries);
        for w in &l.warnings {
            println!("             warning: {w}");
        }
    }
    code
}

pub(super) fn lists_cmd(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "lists", &["-c", "--json"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let infos = lists::describe(&cfg);
    if args.json {
        println!("{}", infos.serialize_json());
        return ExitCode::SUCCESS;
    }
    for l in &infos {
        println!("{} ({}): {} entries, {} skipped lines, {} KiB", l.name, l.kind, l.entries, l.skipped, l.bytes / 1024);
        if let Some(url) = &l.url {
            println!("  url           {url}");
            println!("  last success  {}", l.last_success.as_deref().unwrap_or("never"));
            if let Some(etag) = &l.etag {
                println!("  etag          {etag}");
            }
        }
        for f in &l.files {
            println!("  file          {f}");
        }
        if let Some(e) = &l.last_error {
            println!("  last error    {e}");
        }
        for w in &l.warnings {
            println!("  warning       {w}");
        }
    }
    ExitCode::SUCCESS
}

/// A line per upstream set: none without a group's own upstreams, when
/// the main set's figures are the upstreams' own.
fn set_lines(r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    if !r.upstream_sets.is_empty() {
        for s in &r.upstream_sets {
            let _ = writeln!(
                o,
                "upstream set {}: {}{}; {} queries, {} failed, avg {} us",
                s.name,
                s.upstreams.join(", "),
                if s.fallback_main { ", then main" } else { "" },
                s.queries,
                s.failed,
                s.avg_latency_us
            );
        }
    }
    o
}
