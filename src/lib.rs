//! HydraDNS: a DNS security gateway for OpenWrt routers.
//!
//! A query travels `server` (UDP/TCP listeners, one worker per core) →
//! `wire` (parse) → `policy` (blocklists, allowlists, block answers) →
//! `cache` (fixed-size answer cache) → `upstream` (forwarding); `query` holds
//! that journey together. `config` reads the UCI file, `cli` the command line; `watchdog`
//! fails the network's DNS open when the daemon stops answering.

pub mod access;
pub mod cache;
pub mod cli;
pub mod client;
pub mod config;
pub mod control;
pub mod json;
pub mod lists;
pub mod localnet;
pub mod logging;
pub mod metrics;
pub mod netlink;
pub mod policy;
pub mod privileges;
pub mod query;
pub mod querylog;
pub mod ratelimit;
pub mod server;
pub mod stats;
pub mod sys;
pub mod trust;
pub mod upstream;
pub mod watchdog;
pub mod wire;
