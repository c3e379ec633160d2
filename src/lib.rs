//! HydraDNS: a DNS security gateway for OpenWrt routers.
//!
//! A query travels `server` (UDP/TCP listeners, one worker per core) →
//! `wire` (parse) → `policy` (blocklists, allowlists, block answers) →
//! `cache` (fixed-size answer cache) → `upstream` (forwarding); `query` holds
//! that journey together. `config` reads the UCI file, `cli` the command line; `watchdog`
//! fails the network's DNS open when the daemon stops answering. The
//! modules are layered (docs/architecture.md; held by `tests/layers.rs`).

pub mod access;
pub mod answer;
pub mod cache;
pub mod cli;
pub mod client;
pub mod config;
pub mod control;
pub mod dnssec;
pub mod domain;
pub mod json;
pub mod lists;
pub mod localnet;
pub mod logging;
pub mod mac;
pub mod metrics;
pub mod netlink;
pub mod plaintext;
pub mod policy;
pub mod privileges;
pub mod query;
pub mod querylog;
pub mod ratelimit;
pub mod rebuild;
pub mod server;
pub mod stats;
pub mod status;
pub mod sys;
pub mod timetext;
pub mod trust;
pub mod upstream;
pub mod watchdog;
pub mod wire;
