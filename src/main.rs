/// The Rust side allocates through mimalloc, with per-thread free lists, not
/// through musl's malloc and its one global lock: SQLite in the low-priority log
/// writer holds that lock so often that, preempted while holding it, it kept
/// the DNS threads waiting (bench/run.sh, mix with the log on at 10k QPS:
/// p99.9 5-27 ms and queries lost in the kernel; with mimalloc 1.2-2.2 ms and
/// none lost, and 13-20 % more mix throughput with the log on).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    return_freed_memory();
    hydradns::cli::main()
}

/// A list build frees tens of MiB of scratch; by default mimalloc keeps it
/// (arenas, delayed purging, transparent huge pages), so a router held
/// 1.7x the memory the blocklist needs. Measured with bench/rss.sh and
/// /proc/PID/status, 1M-name list, x86_64 musl on the dev VM: RSS after load /
/// peak 49.5 / 52.8 MiB with defaults, 31.0 / 31.8 MiB with these settings
/// (musl malloc: 29.1 MiB).
fn return_freed_memory() {
    use libmimalloc_sys as mi;
    // Values of `mi_option_e` in the vendored v2 mimalloc.h
    // (libmimalloc-sys 0.1.49); the crate does not name them.
    const PURGE_DELAY: mi::mi_option_t = 15;
    const DISALLOW_ARENA_ALLOC: mi::mi_option_t = 27;
    // THP off for the whole process: with THP the kernel backed the
    // scratch with 2 MiB pages that a 64 KiB purge cannot give back.
    // Linux has had this prctl since 3.15; only emulators (qemu-user) refuse
    // it, and then the cost is memory, not correctness: say nothing, since
    // this runs before every command, `--version` included.
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    // SAFETY: mi_option_set only stores an integer in mimalloc's option
    // table (an atomic store); both are valid option numbers.
    #[allow(unsafe_code)]
    unsafe {
        // Decommit a span as soon as it is free, not 10 ms later on the next
        // allocation that happens to look (the list builder's thread is gone by then).
        mi::mi_option_set(PURGE_DELAY, 0);
        // Segments straight from mmap and back with munmap, instead of a
        // 1 GiB arena that keeps what it once handed out.
        mi::mi_option_set(DISALLOW_ARENA_ALLOC, 1);
    }
}

#[cfg(test)]
mod tests {
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn scratch_freed_by_a_finished_thread_leaves_the_process() {
        super::return_freed_memory();
        let before = rss_kib();
        // Like a list build: many mid-sized buffers, touched, then dropped
        // by a thread that ends.
        std::thread::spawn(move || {
            let bufs: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8 | 1; 256 * 1024]).collect();
            assert!(rss_kib() > before + 48 * 1024, "the scratch was resident");
            drop(bufs);
        })
        .join()
        .unwrap();
        let after = rss_kib();
        assert!(after < before + 16 * 1024, "64 MiB scratch kept: RSS {before} KiB -> {after} KiB");
    }
}
