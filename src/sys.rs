//! Small process- and socket-level helpers shared across threads.

use std::io::IoSlice;
use std::os::fd::AsFd;

use rustix::io::Errno;
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny};

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

/// One `sendmmsg` of `datagrams` on `sock`, each to its address in `peers`,
/// or all to the socket's connected peer when `peers` is `None`; how many
/// went. One datagram goes with a plain `send`/`sendto` and no allocation
/// (the common case below saturation: collected like a batch, it cost
/// 40–110 more instructions per query in `bench/instructions.py`); for
/// more, the headers borrow the datagrams, so they are built per call (three
/// small allocations shared by them all).
pub fn sendmmsg<'a>(
    sock: impl AsFd,
    datagrams: impl Iterator<Item = &'a [u8]>,
    peers: Option<&[SocketAddrAny]>,
    flags: SendFlags,
) -> Result<usize, Errno> {
    let mut datagrams = datagrams.peekable();
    let Some(first) = datagrams.next() else { return Ok(0) };
    if datagrams.peek().is_none() {
        let sent = match peers.and_then(<[_]>::first) {
            Some(peer) => rustix::net::sendto(sock, first, flags, peer),
            None => rustix::net::send(sock, first, flags),
        };
        return sent.map(|_| 1);
    }
    let iovs: Vec<[IoSlice<'_>; 1]> = std::iter::once(first).chain(datagrams).map(|d| [IoSlice::new(d)]).collect();
    let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> = iovs.iter().map(|_| Default::default()).collect();
    let headers = iovs.iter().zip(controls.iter_mut());
    let mut msgs: Vec<MMsgHdr<'_>> = match peers {
        Some(peers) => {
            headers.zip(peers).map(|((iov, control), peer)| MMsgHdr::new_with_addr(peer, iov, control)).collect()
        }
        None => headers.map(|(iov, control)| MMsgHdr::new(iov, control)).collect(),
    };
    rustix::net::sendmmsg(sock, &mut msgs, flags)
}

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`] (Linux nice is per thread).
pub fn lower_thread_priority() {
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), BACKGROUND_NICE) {
        log::warn!("cannot lower the priority of a background thread: {e}");
    }
}
