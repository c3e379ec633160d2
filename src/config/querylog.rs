//! The `config querylog` section: where the query log lives, how long it
//! keeps rows, and how often its copy goes to flash.

use super::*;

/// The `config querylog` section: where answered queries are recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLogConfig {
    /// Record queries at all.
    pub enabled: bool,
    /// Live database, on tmpfs (RAM) so logging never wears the flash.
    pub path: PathBuf,
    /// Copy on flash, refreshed every `flush_interval` and at stop, restored after a reboot.
    pub flash_path: PathBuf,
    /// How often the flash copy is refreshed; 0 = only at stop.
    pub flush_interval: Duration,
    /// Entries older than this are deleted.
    pub retention: Duration,
    /// The live database is kept under this many bytes, oldest entries deleted first.
    pub max_size: u64,
    /// Entries waiting for the writer; beyond it entries are dropped and counted.
    pub queue_size: usize,
    /// Entries per transaction.
    pub batch_size: usize,
    /// Longest an entry waits before its batch is written. At a router's
    /// rates a commit's cost is mostly its own, not its entries' (the
    /// writer's CPU per query at 100 QPS: 2.7–4.0 µs committing every
    /// second, 1.6 µs committing each 5 s round's 500 entries;
    /// `bench/lowrate.py --threads`, docs/benchmarks.md), so batches are
    /// long; readers ask for a commit before they read (see
    /// `querylog::doorbell`), so nobody waits one out.
    pub batch_interval: Duration,
    /// Store client addresses cut to /24 (IPv4) or /48 (IPv6).
    pub anonymize_clients: bool,
}

impl Default for QueryLogConfig {
    fn default() -> Self {
        QueryLogConfig {
            enabled: true,
            path: PathBuf::from("/tmp/hydradns/queries.db"),
            flash_path: PathBuf::from("/etc/hydradns/queries.db"),
            flush_interval: Duration::from_secs(3600),
            retention: Duration::from_secs(7 * 86_400),
            max_size: 32 << 20,
            queue_size: 4096,
            batch_size: 1024,
            batch_interval: Duration::from_secs(10),
            anonymize_clients: false,
        }
    }
}

impl SectionReader<'_> {
    pub(super) fn querylog(&mut self, cfg: &mut Config) -> Result<(), ConfigError> {
        let q = &mut cfg.querylog;
        for v in &self.section.values {
            match v.key.as_str() {
                "enabled" => q.enabled = self.boolean(v)?,
                "path" => q.path = self.path(v)?,
                "flash_path" => q.flash_path = self.path(v)?,
                "flush_interval" => q.flush_interval = self.duration(v, 0, 30 * 86_400_000)?,
                "retention" => q.retention = self.duration(v, 60_000, 366 * 86_400_000)?,
                "max_size" => q.max_size = self.size(v, 64 << 10, 1 << 40)?,
                "queue_size" => q.queue_size = self.number(v, 16, 1 << 20)? as usize,
                "batch_size" => q.batch_size = self.number(v, 1, 65_536)? as usize,
                "batch_interval" => q.batch_interval = self.duration(v, 10, 60_000)?,
                "anonymize_clients" => q.anonymize_clients = self.boolean(v)?,
                // Documented with the query log, so accept it here as well as in the main section.
                "stats_interval" => cfg.stats_interval = self.duration(v, 0, 30 * 86_400_000)?,
                _ => self.unknown(v),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn querylog_section() {
        let c = Config::parse(
            "f",
            "config querylog 'querylog'\n\toption path '/tmp/q.db'\n\toption max_size '8M'\n\toption retention '2d'\n\toption batch_interval '100ms'\n\toption stats_interval '0'\n\toption anonymize_clients '1'\n",
        )
        .unwrap();
        assert_eq!(c.querylog.path, PathBuf::from("/tmp/q.db"));
        assert_eq!(c.querylog.max_size, 8 << 20);
        assert_eq!(c.querylog.retention, Duration::from_secs(2 * 86400));
        assert_eq!(c.querylog.batch_interval, Duration::from_millis(100));
        assert_eq!(c.stats_interval, Duration::ZERO);
        assert!(c.querylog.anonymize_clients && c.querylog.enabled);
        assert_eq!(c.querylog.flash_path, PathBuf::from("/etc/hydradns/queries.db"));
        let e = Config::parse("f", "config querylog\n\toption max_size 'huge'\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = Config::parse("f", "config querylog\n\toption path 'relative.db'\n").unwrap_err();
        assert!(e.message.contains("absolute path"));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512k"), Some(512 << 10));
        assert_eq!(parse_size("1.5M"), None);
    }
}
