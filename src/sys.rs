//! Small process-level helpers shared by the background threads.

/// Nice value of background threads (query log writer and flusher, list
/// downloads and rebuilds). On a core shared with a worker the scheduler
/// gives a nice-10 thread about a tenth of what the nice-0 worker gets
/// (weights 110 and 1024), so background work takes at most about a tenth of
/// a saturated core and drops what it cannot do (counted); idle CPU it may
/// use freely. Chosen by measurement on the dev VM (bench/querylog.sh, 7
/// rounds): at nice 10 logging cost 2–6 % of saturation throughput (two runs), at nice
/// 19 it cost 37 % (the scheduler ran the starved writer in long uninterrupted
/// slices). Short waits at normal load come from the writer yielding between
/// statements instead.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`] (Linux nice is per thread).
pub fn lower_thread_priority() {
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), BACKGROUND_NICE) {
        log::warn!("cannot lower the priority of a background thread: {e}");
    }
}
