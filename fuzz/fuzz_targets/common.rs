//! One engine per fuzzing process, configured like a router: a blocklist,
//! an allowlist, local names (one an alias to an outside name), rebinding
//! and CNAME checks on, and a cached answer, so
//! inputs can reach every branch of the answer path without a network.
// Each target uses part of this module.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, OnceLock};

use hydradns::answer::Stored;
use hydradns::cache::{self, MAX_KEY_LEN};
use hydradns::config::Config;
use hydradns::policy::Policy;
use hydradns::query::{Engine, Snapshot};
use hydradns::wire::{self, rtype};

const CONFIG: &str = "config hydradns 'main'
\tlist listen '127.0.0.1:0'
\tlist upstream '127.0.0.1:9'
\tlist rebind_allow 'lan'
config blocklist 'ads'
\tlist domain 'ads.example'
\tlist domain 'tracker.example'
config allowlist 'ok'
\tlist domain 'fine.ads.example'
config record
\toption name 'nas.lan'
\tlist ip '192.168.1.10'
config record
\toption name '*.dev.lan'
\tlist ip 'fd00::10'
config record
\toption name 'web.lan'
\toption cname 'www.example'
";

/// The names the seeds ask for; `cached.example` A is in the cache.
pub const CACHED: &str = "cached.example";

pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let cfg = Config::parse("fuzz.conf", CONFIG).expect("the fuzz config parses");
        let policy = Policy::load(&cfg.lists, cfg.block_mode, cfg.block_ttl);
        let engine = Engine::new(Snapshot::new(Arc::new(cfg), Arc::new(policy), None), None);
        let q = query(CACHED, rtype::A);
        let parsed = wire::parse_query(&q).expect("the seed query parses");
        let mut reply = Vec::new();
        wire::build::start(&mut reply, &parsed, 0);
        wire::build::record(&mut reply, rtype::A, 300, &[192, 0, 2, 1]);
        wire::build::finish(&mut reply, None, [1, 0, 0], false);
        let stored = Stored::from_response(&reply, 0, 86_400).expect("the seed reply is valid");
        let snap = engine.snapshot.load();
        let mut key = [0u8; MAX_KEY_LEN];
        let n = cache::key(&parsed, 0, &mut key);
        // Checked under no generation: the first hit runs the lists, later ones skip them.
        snap.cache.insert(&key[..n], snap.cache.hash(&key[..n]), &stored, 0, snap.cache_sweep);
        drop(snap);
        engine
    })
}

/// A plain query for `name` and `qtype`, ID 0x1234, RD set.
pub fn query(name: &str, qtype: u16) -> Vec<u8> {
    hydradns::wire::build::query(0x1234, name, qtype, None).expect("a valid name")
}

pub const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 20));
