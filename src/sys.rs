//! Small process-level helpers shared by the background threads.

/// Nice value of background threads (query log writer and flusher, list
/// downloads and rebuilds). Under CPU contention the scheduler gives a
/// nice-10 thread about a tenth of what a nice-0 worker gets (weights 110
/// and 1024), so background work can take at most ~10 % of a saturated core
/// from DNS; idle CPU it may use freely.
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`] (Linux nice is per thread).
pub fn lower_thread_priority() {
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), BACKGROUND_NICE) {
        log::warn!("cannot lower the priority of a background thread: {e}");
    }
}
