/// The Rust side allocates through mimalloc, with per-thread free lists, not
/// through musl's malloc and its one global lock: SQLite in the nice-10 log
/// writer holds that lock so often that, preempted while holding it, it kept
/// the DNS threads waiting (bench/run.sh, mix with the log on at 10k QPS:
/// p99.9 5-27 ms and queries lost in the kernel; with mimalloc 1.2-2.2 ms and
/// none lost, and 13-20 % more mix throughput with the log on).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    hydradns::cli::main()
}
