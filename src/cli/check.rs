//! `check-config`, `check` and `services`: what the config says and what
//! it does to a name, without a running gateway.

use super::*;

pub(super) fn check_config(args: Args) -> ExitCode {
    if let Err(e) = args.only("check-config", &["-c", "--shell"]) {
        return usage_error("check-config", e);
    }
    let cfg = match required_config(&args, "check-config") {
        Ok(c) => c,
        Err(code) => return code,
    };
    for w in &cfg.warnings {
        eprintln!("{w} (warning)");
    }
    if !args.shell {
        for w in policy::services::with_services(&cfg).1 {
            eprintln!("{w} (warning)");
        }
    }
    if args.shell {
        // For the init script to eval: everything it needs, read by the same
        // parser as the daemon's, in values that need no quoting.
        let mode = mode_name(cfg.dnsmasq_mode);
        let server = cfg.dnsmasq_server().map(|s| format!("{}#{}", s.ip(), s.port())).unwrap_or_default();
        println!("hydradns_enabled={}", u8::from(cfg.enabled));
        println!("hydradns_dnsmasq_mode={mode}");
        println!("hydradns_dnsmasq_server={server}");
        println!("hydradns_dnsmasq_port={}", cfg.dnsmasq_port);
        println!("hydradns_restart_key={}", cfg.restart_key());
        print!("{}", cfg.router.shell());
        // Who the daemon will run as, so the script gives it its directories.
        let user = crate::privileges::choose(cfg.user.as_deref()).map(|a| a.name).unwrap_or_default();
        println!("hydradns_user={user}");
        // The textfile's directory, which the user must be able to write
        // (a file is renamed into it); none when the path would need quoting.
        let dir = cfg.metrics_textfile.as_deref().and_then(Path::parent).and_then(Path::to_str).unwrap_or_default();
        if dir.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)) {
            println!("hydradns_metrics_dir={dir}");
        }
        return ExitCode::SUCCESS;
    }
    let mut missing = false;
    for src in &cfg.lists {
        for p in &src.paths {
            // Opened as the daemon reads it: a FIFO or a device is refused
            // here too, without blocking or reading it.
            if let Err(e) = crate::sys::open_regular(p) {
                eprintln!("{}: list file {}: {e} (warning)", src.origin, p.display());
                missing = true;
            }
        }
        for w in policy::scan_warnings(src) {
            eprintln!("{}: list '{}': {w} (warning)", src.origin, src.name);
        }
    }
    // "ok" alone would hide the warnings above it (a misspelt option is one).
    let warnings = match cfg.warnings.len() {
        0 => String::new(),
        1 => ", 1 warning".into(),
        n => format!(", {n} warnings"),
    };
    println!(
        "{}: ok ({} listen, {} upstreams, {} lists, {} forward rules{}{warnings})",
        cfg.source,
        cfg.listen.len(),
        cfg.upstreams.len(),
        cfg.lists.len(),
        cfg.forwards.len(),
        if missing { ", missing list files" } else { "" }
    );
    ExitCode::SUCCESS
}

/// For `hydradns check --client ID`: which `config client` `id` (an
/// address, a MAC, a `config client` name or a hostname from the leases)
/// is, its groups and their schedules' state now, as lines to print; and
/// the groups whose lists apply to it now.
pub(super) fn explain_client(
    cfg: &Config,
    table: &crate::config::groups::GroupTable,
    id: &str,
) -> Result<(Vec<String>, u64), String> {
    let rules = crate::client::rules::ClientRules::new(&cfg.clients, table);
    let book = router_book(cfg);
    let learned = crate::client::rules::Learned::new(&rules, &book);
    let rule = if let Ok(ip) = id.parse::<IpAddr>() {
        rules.find(ip, None, &learned)
    } else if let Some(mac) = crate::mac::parse_mac(id.as_bytes()) {
        let ip = book.devices().find(|d| d.1 == Some(mac)).and_then(|d| d.0);
        rules.find(ip.unwrap_or(IpAddr::from([0u8; 4])), Some(mac), &learned)
    } else if let Some(i) = cfg.clients.iter().position(|c| c.name == id) {
        Some(i)
    } else {
        let device = book.devices().find(|d| d.2.is_some_and(|n| n.eq_ignore_ascii_case(id)));
        let Some((ip, mac, _)) = device else {
            return Err(format!(
                "'{id}' is no address, MAC, 'config client' name or hostname in {}",
                cfg.leases_file.display()
            ));
        };
        rules.find(ip.unwrap_or(IpAddr::from([0u8; 4])), mac, &learned)
    };
    let member = rules.groups(rule);
    let mut lines = vec![match rule.and_then(|r| cfg.clients.get(r)) {
        Some(c) => {
            format!("client {id}: config client '{}' ({}), groups: {}", c.name, c.origin, table.names_of(member))
        }
        None => format!("client {id}: no config client matches; group: default"),
    }];
    let schedules = crate::policy::schedule::Schedules::new(table, &cfg.time_synced_file);
    let off = schedules.off();
    for (bit, name) in table.names.iter().enumerate().filter(|(b, _)| member >> b & 1 != 0) {
        let Some(s) = table.schedules.get(bit).and_then(Option::as_ref) else { continue };
        let state = if !schedules.clock_synced() {
            format!("the clock is not known good yet ({} missing): its lists apply", cfg.time_synced_file.display())
        } else if off >> bit & 1 != 0 {
            format!("outside its window now ({}): its lists do not apply", schedules.zone())
        } else {
            format!("inside its window now ({}): its lists apply", schedules.zone())
        };
        lines.push(format!("  group '{name}': schedule '{}' {state}", s.name));
    }
    Ok((lines, member & !off))
}

pub(super) fn check(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "check", &["-c", "--client"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let [name] = args.positional.as_slice() else {
        return usage_error("check", "check takes one NAME".into());
    };
    let (Some(name), Some(key)) = (crate::domain::normalize_name(name), name_key(name)) else {
        eprintln!("hydradns: '{name}' is not a domain name");
        return ExitCode::from(2);
    };
    if let Some(r) = policy::records::explain(&cfg.records, &name) {
        let star = if r.wildcard { "*." } else { "" };
        println!("{name}: answered by local record '{star}{}' ({}), before any list", r.name, r.origin);
    }
    if cfg.block_bypass && policy::BYPASS_DOTTED.contains(&name.as_str()) {
        println!(
            "{name}: NXDOMAIN by block_bypass, before any list (it tells browsers and phones to keep to this resolver)"
        );
    }
    let policy = Policy::build(&cfg);
    let active = match &args.client {
        Some(id) => match explain_client(&cfg, &policy.groups, id) {
            Ok((lines, active)) => {
                lines.iter().for_each(|l| println!("{l}"));
                active
            }
            Err(e) => {
                eprintln!("hydradns: {e}");
                return ExitCode::from(2);
            }
        },
        None => crate::config::groups::DEFAULT,
    };
    let (block, allow) = policy.entries(&key, active);
    let whose = |source: u16| match policy.group_of(source, active) {
        Some(g) if policy.groups.names.len() > 1 => format!(" of group '{}'", policy.groups.names[g]),
        _ => String::new(),
    };
    let service = |source: u16| policy.source_name(source).strip_prefix(policy::services::PREFIX).map(str::to_string);
    match policy.check(&key, active).verdict {
        Verdict::Blocked { source } if service(source).is_some() => println!(
            "{name}: blocked by service '{}'{} (domain {})",
            service(source).unwrap_or_default(),
            whose(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Blocked { source } => println!(
            "{name}: blocked by list '{}'{} (entry {})",
            policy.source_name(source),
            whose(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Allowed { source } => println!(
            "{name}: allowed by list '{}'{} (entry {}), overriding a block (entry {})",
            policy.source_name(source),
            whose(source),
            allow.as_ref().map_or(String::new(), |a| a.1.clone()),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::SafeSearch { target } => println!(
            "{name}: safe search: answered with '{}' (its CNAME and addresses; HTTPS and SVCB get no data)",
            policy::safesearch::TARGETS.get(target as usize).copied().unwrap_or("?")
        ),
        Verdict::Pass => println!("{name}: not blocked"),
    }
    for e in policy::explain(&policy::services::with_services(&cfg).0, &key) {
        println!("  list '{}' {} it: {}  {}", e.list, e.effect, e.location, e.rule);
    }
    ExitCode::SUCCESS
}

/// `hydradns services`: the catalogue in use, id, category and name a line.
pub(super) fn services_cmd(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "services", &["-c", "--json"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (cat, notes) = policy::services::in_use(&cfg);
    for n in notes {
        eprintln!("hydradns: {n}");
    }
    if args.json {
        println!("{}", cat.to_json());
        return ExitCode::SUCCESS;
    }
    for s in &cat.services {
        println!("{:<16} {:<10} {}  ({})", s.id, s.category, s.name, s.domains.join(", "));
    }
    ExitCode::SUCCESS
}
