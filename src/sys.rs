//! Small process-, socket- and file-level helpers shared across threads.

use std::io::IoSlice;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::io::Errno;
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags, SocketAddrAny};

/// Nice value of background threads (query log writer and flusher, list
/// downloads and rebuilds). On a core shared with a busy worker the
/// scheduler gives a nice-15 thread about a thirtieth of the core (weights 36
/// and 1024), so background work takes little of a saturated core and drops
/// what it cannot do (counted); idle CPU it may use freely, so below
/// saturation nothing is dropped (bench/querylog.sh: 300,000 queries at
/// 10,000 QPS, all logged). At nice 10 (weight 110) a log writer that
/// always had work took about a tenth, and logging cost 4-23 % of the mix's
/// saturation rate (bench/run.sh, two runs); `bench/ab.sh off=BIN
/// n10+log=BIN10 n15+log=BIN15 -- --scenarios mix` put the writer's CPU per
/// query at 0.3-0.7 µs at nice 15 against 1.0-1.2 µs at nice 10 in two
/// runs (a third, with the VM slowing under outside load, agreed: 3.5
/// against 6.1 µs). Nice 19 once cost 37 %, but that was with musl's
/// malloc, whose one lock the starved writer held while preempted (see
/// main.rs); the allocator is mimalloc now.
pub const BACKGROUND_NICE: i32 = 15;

/// Runs `path` with `args` and waits for it: its exit code (`None`: killed
/// by a signal). Its environment is a fixed PATH, not ours. posix_spawn
/// rather than std's `Command`, which cost the aarch64 binary about
/// 40 KiB for the watchdog's one call (scripts/build-release.sh's budget).
pub fn run(path: &Path, args: &[&str]) -> std::io::Result<Option<i32>> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |s: &[u8]| CString::new(s).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput));
    let mut owned = vec![c(path.as_os_str().as_bytes())?];
    for a in args {
        owned.push(c(a.as_bytes())?);
    }
    let env = [c(b"PATH=/usr/sbin:/usr/bin:/sbin:/bin")?];
    let nul_ended = |v: &[CString]| {
        let mut p: Vec<*mut libc::c_char> = v.iter().map(|s| s.as_ptr().cast_mut()).collect();
        p.push(std::ptr::null_mut());
        p
    };
    let (argv, envp) = (nul_ended(&owned), nul_ended(&env));
    let mut pid: libc::pid_t = 0;
    // SAFETY: argv and envp are NULL-ended arrays of pointers to NUL-ended
    // strings that `owned` and `env` keep alive past the call; no file
    // actions or attributes (NULL), as posix_spawn allows.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::posix_spawn(&mut pid, argv[0], std::ptr::null(), std::ptr::null(), argv.as_ptr(), envp.as_ptr())
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let pid = rustix::process::Pid::from_raw(pid).ok_or_else(|| std::io::Error::other("posix_spawn gave no pid"))?;
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => return Ok(status.exit_status()),
            Ok(None) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Lets SIGPIPE end the process, as it ends `cat` or `grep`: for the
/// commands that print and exit. Rust ignores SIGPIPE, so a write to a
/// closed pipe fails and `println!` panics: `hydradns log | head -1` ended
/// in a panic and exit 134. The gateway (`run`) and the watchdog keep it
/// ignored: a peer closing a socket must not end them.
pub fn die_on_broken_pipe() {
    // SAFETY: signal() with SIG_DFL installs no handler of ours; it is
    // called before any thread starts, and only changes this process's
    // disposition of one signal.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Ends this process (SIGKILL) when the process that started it ends,
/// or at once if that happened already.
pub fn die_with_parent() {
    let parent = rustix::process::getppid();
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // Gone between our start and the call: we were handed to another.
    if rustix::process::getppid() != parent {
        std::process::exit(137);
    }
}

/// The wall clock in Unix seconds (0 if it reads before 1970).
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Opens `path` for reading if it is a regular file. The configuration
/// names files that root reads (`check-config` runs as root for LuCI): a
/// FIFO would block the open until a writer came, a device reads without
/// end (`/dev/zero`) or acts on open, so anything else is refused from its
/// `stat`, before any open, and the descriptor is checked again (the same
/// file, still regular) against a swap in between. Opened non-blocking,
/// which a regular file ignores, in case the swap put a FIFO there.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    open_file(path, true)
}

/// [`open_regular`], but a symlink at `path` is refused rather than
/// followed: for root reading a file in a directory the daemon's user
/// can write, where a link planted there would have root read what it
/// points at (issue 58).
pub fn open_unlinked(path: &Path) -> std::io::Result<std::fs::File> {
    open_file(path, false)
}

fn open_file(path: &Path, follow: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let not_regular = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
    let named = if follow { std::fs::metadata(path)? } else { std::fs::symlink_metadata(path)? };
    if !named.is_file() {
        return Err(not_regular());
    }
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow).open(path)?;
    let opened = file.metadata()?;
    if !opened.is_file() || (opened.dev(), opened.ino()) != (named.dev(), named.ino()) {
        return Err(not_regular());
    }
    Ok(file)
}

/// The whole of regular file `path` ([`open_regular`]), if it holds at
/// most `max` bytes; never more than `max + 1` bytes are read, whatever
/// its size says (files in /proc say 0).
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_capped(open_regular(path)?, max)
}

/// [`read_regular`] through [`open_unlinked`].
pub fn read_unlinked(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_capped(open_unlinked(path)?, max)
}

/// [`read_unlinked`] as UTF-8 text.
pub fn read_unlinked_text(path: &Path, max: u64) -> std::io::Result<String> {
    utf8(read_unlinked(path, max)?)
}

fn read_capped(file: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let too_large = || std::io::Error::new(std::io::ErrorKind::FileTooLarge, format!("larger than {max} bytes"));
    if file.metadata()?.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

fn utf8(bytes: Vec<u8>) -> std::io::Result<String> {
    String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_text(path: &Path, max: u64) -> std::io::Result<String> {
    utf8(read_regular(path, max)?)
}

/// Writes `bytes` to `path` so that a crash at any moment leaves the old
/// file or the new one: temporary file, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no directory"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = create_fresh(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// An exclusive lock on `path` (made if missing, never through a link),
/// or `WouldBlock` while another process holds it. Held until the file
/// is dropped; the kernel lets go of it when its holder dies, however it
/// dies, so no lock outlives a killed holder.
pub fn try_lock(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK)
        .mode(0o600)
        .open(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    Ok(file)
}

/// Creates `path` anew for writing (mode 0644 before the umask): whatever
/// stood at its name is removed first (a link itself, never what it points
/// at), and the create is exclusive, so a link or file put there in
/// between makes it fail rather than be written through. For temporary
/// files in directories another user may write (issue 58: root's
/// `hydradns update` once wrote through links the daemon's user planted).
pub fn create_fresh(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
        .mode(0o644)
        .open(path)
}

/// Creates `dir` and its missing parents with mode 0700: the query log's
/// directories hold every device's DNS history, which no other local account
/// may list (issue 49). A directory that exists keeps its mode: it may be
/// shared (`/tmp`), and only the files in it are ours to restrict.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Makes sure `path` exists with mode 0600 (created empty if missing, its
/// mode narrowed if wider), before SQLite opens it: SQLite would create it
/// 0644, and gives its journal and WAL files the database's own mode.
pub fn private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        private_dir(dir)?;
    }
    let file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(path)?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// Bytes the calling thread has caused to be written to storage since it
/// started: `write_bytes` of `/proc/thread-self/io`, which the kernel counts
/// as page-cache pages are dirtied on a file system backed by a device
/// (tmpfs counts nothing). A thread that writes only to flash measures its
/// flash wear this way, file system metadata aside. `None` where the kernel
/// does not say (no task I/O accounting).
pub fn thread_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    text.lines().find_map(|l| l.strip_prefix("write_bytes:")).and_then(|v| v.trim().parse().ok())
}

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

/// Where a datagram on a wildcard socket (`0.0.0.0`, `[::]`) was sent:
/// the address the client asked and the interface it came in on
/// (`IP_PKTINFO`, `IPV6_PKTINFO`), so the answer leaves from that address.
/// Left to the routing table, it would leave from the route's preferred
/// source, which a client that asked another of the host's addresses
/// (a second IPv4 address, ULA beside GUA, link-local) drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Local {
    /// Not known, or not needed (a socket bound to one address).
    #[default]
    Any,
    /// An IPv4 destination (the interface is left to the routing table).
    V4(Ipv4Addr),
    /// An IPv6 destination and its interface (a link-local one needs it).
    V6(Ipv6Addr, u32),
}

/// Asks the kernel to say where each datagram on the wildcard socket `sock`
/// was sent (see [`Local`]).
pub fn enable_pktinfo(sock: impl AsFd, ipv6: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (level, name) =
        if ipv6 { (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO) } else { (libc::IPPROTO_IP, libc::IP_PKTINFO) };
    let on: libc::c_int = 1;
    // SAFETY: the option value is a live c_int of the size given.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            level,
            name,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Room for the control messages of one datagram: one `in6_pktinfo` (or
/// `in_pktinfo`) with its header takes 40 bytes on 64-bit targets.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Reads the packet info of `hdr`'s control messages, as received.
fn local_of(hdr: &libc::msghdr) -> Local {
    let mut found = Local::Any;
    // SAFETY: `hdr` is a header the kernel filled: its control pointer and
    // length (as the kernel cut it) describe one of our `Control` buffers,
    // or are null and zero. The CMSG_ helpers stay within that length; the
    // data of a message of the type tested is the struct read, which is
    // read unaligned.
    #[allow(unsafe_code)]
    unsafe {
        if hdr.msg_control.is_null() || (hdr.msg_flags & libc::MSG_CTRUNC) != 0 {
            return Local::Any;
        }
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let (level, kind, data) = ((*c).cmsg_level, (*c).cmsg_type, libc::CMSG_DATA(c));
            if level == libc::IPPROTO_IP && kind == libc::IP_PKTINFO {
                let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                let addr = Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr));
                // No answer can leave from a group or broadcast address:
                // those go as before, from the route's source.
                if !addr.is_multicast() && !addr.is_broadcast() {
                    found = Local::V4(addr);
                }
            } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_PKTINFO {
                let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                let addr = Ipv6Addr::from(info.ipi6_addr.s6_addr);
                if !addr.is_multicast() {
                    found = Local::V6(addr, info.ipi6_ifindex);
                }
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    found
}

/// Writes the packet info that sends from `local` into `control`, pointing
/// `hdr` at it; leaves `hdr` without control data for [`Local::Any`].
fn set_source(hdr: &mut libc::msghdr, control: &mut Control, local: Local) {
    let (level, kind, len) = match local {
        Local::Any => {
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            return;
        }
        Local::V4(_) => (libc::IPPROTO_IP, libc::IP_PKTINFO, std::mem::size_of::<libc::in_pktinfo>()),
        Local::V6(..) => (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, std::mem::size_of::<libc::in6_pktinfo>()),
    };
    control.0 = [0; 64];
    hdr.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic; `control` holds CMSG_SPACE of
    // either struct (asserted below), so the header CMSG_FIRSTHDR finds
    // and the data after it lie inside it; the writes are unaligned-safe.
    #[allow(unsafe_code)]
    unsafe {
        let space = libc::CMSG_SPACE(len as u32) as usize;
        debug_assert!(space <= std::mem::size_of::<Control>());
        hdr.msg_controllen = space as _;
        let c = libc::CMSG_FIRSTHDR(hdr);
        if c.is_null() {
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            return;
        }
        (*c).cmsg_level = level;
        (*c).cmsg_type = kind;
        (*c).cmsg_len = libc::CMSG_LEN(len as u32) as _;
        let data = libc::CMSG_DATA(c);
        match local {
            // The interface is left to the routing table (0): naming the
            // one the query came in on would bypass it.
            Local::V4(addr) => std::ptr::write_unaligned(
                data.cast::<libc::in_pktinfo>(),
                libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr { s_addr: u32::from(addr).to_be() },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                },
            ),
            Local::V6(addr, ifindex) => std::ptr::write_unaligned(
                data.cast::<libc::in6_pktinfo>(),
                libc::in6_pktinfo { ipi6_addr: libc::in6_addr { s6_addr: addr.octets() }, ipi6_ifindex: ifindex },
            ),
            Local::Any => {}
        }
    }
}

/// Most datagrams one [`sendmmsg_from`] call sends: its headers live on the stack.
pub const SEND_FROM_BATCH: usize = 16;

/// [`sendmmsg`] for a wildcard socket: each datagram to its peer, from its
/// [`Local`] address; at most [`SEND_FROM_BATCH`] per call, no allocation.
/// How many went.
pub fn sendmmsg_from<D: AsRef<[u8]>>(
    sock: impl AsFd,
    datagrams: &[D],
    peers: &[SocketAddrAny],
    locals: &[Local],
    flags: SendFlags,
) -> Result<usize, Errno> {
    use std::os::fd::AsRawFd;
    let n = datagrams.len().min(peers.len()).min(locals.len()).min(SEND_FROM_BATCH);
    if n == 0 {
        return Ok(0);
    }
    let mut iovs = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; SEND_FROM_BATCH];
    let mut controls = [Control([0; 64]); SEND_FROM_BATCH];
    // SAFETY: mmsghdr is plain old data; all-zero is a valid value.
    #[allow(unsafe_code)]
    let mut hdrs: [libc::mmsghdr; SEND_FROM_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        let d = datagrams[i].as_ref();
        iovs[i] = libc::iovec { iov_base: d.as_ptr() as *mut _, iov_len: d.len() };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_name = peers[i].as_ptr() as *mut _;
        h.msg_namelen = peers[i].addr_len() as _;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        set_source(h, &mut controls[i], locals[i]);
    }
    // SAFETY: the first `n` headers point at live iovecs over `datagrams`
    // (only read by the kernel), at the peers' addresses with their
    // lengths, and at their control buffers, all of which outlive the call.
    #[allow(unsafe_code)]
    let sent =
        unsafe { libc::sendmmsg(sock.as_fd().as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, flags.bits() as _) };
    if sent < 0 {
        return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO));
    }
    Ok(sent as usize)
}

/// One datagram to `peer` from `local` (see [`sendmmsg_from`]).
pub fn send_from(
    sock: impl AsFd,
    datagram: &[u8],
    peer: &SocketAddr,
    local: Local,
    flags: SendFlags,
) -> Result<usize, Errno> {
    if local == Local::Any {
        return rustix::net::sendto(sock, datagram, flags, peer);
    }
    sendmmsg_from(sock, &[datagram], &[SocketAddrAny::from(*peer)], &[local], flags)
}

/// Room for one sender's address, as the kernel writes it (a `sockaddr_in`
/// or `sockaddr_in6`); read back byte by byte in [`RecvBatch::peer`].
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct SockName([u8; 128]);

/// Datagrams taken with one `recvmmsg`. Receiving them one `recvfrom` each,
/// plus the call that finds the socket empty, made the system calls' entry
/// and exit most of the receive thread's own time at saturation (perf on the
/// dev VM, all cache hits: 10.7 % of the server's samples on the instruction
/// after `syscall` in the receive loop alone).
pub struct RecvBatch {
    bufs: Vec<u8>,
    size: usize,
    names: Vec<SockName>,
    /// Bytes and name length of each datagram of the last call.
    lens: Vec<(usize, u32)>,
    /// Built once: each points at its slice of `bufs`, which never moves
    /// (no vector here is resized after `new`).
    iovs: Vec<libc::iovec>,
    /// Built once: each points at its iovec and its name in `names`.
    hdrs: Vec<libc::mmsghdr>,
    /// Control room per datagram, for [`Local`]: empty unless asked for
    /// ([`RecvBatch::with_pktinfo`]), so a socket bound to one address
    /// pays nothing for it.
    controls: Vec<Control>,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").field("count", &self.hdrs.len()).field("size", &self.size).finish()
    }
}

impl RecvBatch {
    /// Room for `count` datagrams of up to `size` bytes each (a longer one is cut).
    pub fn new(count: usize, size: usize) -> RecvBatch {
        let mut b = RecvBatch {
            bufs: vec![0; count * size],
            size,
            names: vec![SockName([0; 128]); count],
            lens: Vec::with_capacity(count),
            iovs: Vec::with_capacity(count),
            hdrs: Vec::with_capacity(count),
            controls: Vec::new(),
        };
        b.iovs.extend(
            b.bufs.chunks_exact_mut(size).map(|c| libc::iovec { iov_base: c.as_mut_ptr().cast(), iov_len: c.len() }),
        );
        for (iov, name) in b.iovs.iter_mut().zip(b.names.iter_mut()) {
            // SAFETY: mmsghdr is plain old data; all-zero is a valid value (null pointers, zero lengths).
            #[allow(unsafe_code)]
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = name.0.as_mut_ptr().cast();
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            b.hdrs.push(h);
        }
        b
    }

    /// This batch, taking each datagram's [`Local`] too (a wildcard socket
    /// with [`enable_pktinfo`]).
    pub fn with_pktinfo(mut self) -> RecvBatch {
        self.controls = vec![Control([0; 64]); self.hdrs.len()];
        for (h, c) in self.hdrs.iter_mut().zip(self.controls.iter_mut()) {
            h.msg_hdr.msg_control = c.0.as_mut_ptr().cast();
        }
        self
    }

    /// Takes what is queued on `sock`, up to the batch's room: waits for the
    /// first datagram (as long as the socket's receive timeout) when `wait`,
    /// else returns `EAGAIN` at once if there is none. How many came.
    pub fn recv(&mut self, sock: impl AsFd, wait: bool) -> Result<usize, Errno> {
        use std::os::fd::AsRawFd;
        self.lens.clear();
        for h in &mut self.hdrs {
            // The kernel wrote the last sender's length here.
            h.msg_hdr.msg_namelen = std::mem::size_of::<SockName>() as libc::socklen_t;
        }
        if !self.controls.is_empty() {
            for h in &mut self.hdrs {
                // As for the name: the kernel wrote what it used.
                h.msg_hdr.msg_controllen = std::mem::size_of::<Control>() as _;
            }
        }
        let count = self.hdrs.len();
        let flags = if wait { libc::MSG_WAITFORONE } else { libc::MSG_DONTWAIT };
        // SAFETY: each header points at its own iovec, name buffer and (with
        // packet info) control buffer, set in `new` and `with_pktinfo` to
        // point into `self.bufs`, `self.names` and `self.controls`, heap
        // blocks that have not moved since (never resized) and are not
        // touched until the call returns; the kernel writes at most the
        // lengths given. `count`
        // is the number of headers. No timeout pointer.
        #[allow(unsafe_code)]
        let n = unsafe {
            libc::recvmmsg(
                sock.as_fd().as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                count as libc::c_uint,
                flags as _,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO));
        }
        let n = (n as usize).min(count);
        let size = self.size;
        self.lens.extend(self.hdrs[..n].iter().map(|h| ((h.msg_len as usize).min(size), h.msg_hdr.msg_namelen)));
        Ok(n)
    }

    /// Datagram `i` of the last call.
    pub fn datagram(&self, i: usize) -> &[u8] {
        let len = self.lens.get(i).map_or(0, |l| l.0);
        &self.bufs[i * self.size..][..len]
    }

    /// Where datagram `i` of the last call was sent ([`Local::Any`] without
    /// [`RecvBatch::with_pktinfo`]).
    pub fn local(&self, i: usize) -> Local {
        match (self.controls.is_empty(), self.hdrs.get(..self.lens.len()).and_then(|h| h.get(i))) {
            (false, Some(h)) => local_of(&h.msg_hdr),
            _ => Local::Any,
        }
    }

    /// Who sent datagram `i` of the last call, if an IPv4 or IPv6 address.
    pub fn peer(&self, i: usize) -> Option<SocketAddr> {
        let &(_, namelen) = self.lens.get(i)?;
        let b = &self.names.get(i)?.0[..(namelen as usize).min(std::mem::size_of::<SockName>())];
        let family = i32::from(u16::from_ne_bytes([*b.first()?, *b.get(1)?]));
        let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
        match family {
            libc::AF_INET => {
                let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
                Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
            }
            libc::AF_INET6 => {
                let flow = u32::from_ne_bytes(b.get(4..8)?.try_into().ok()?);
                let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
                let scope = u32::from_ne_bytes(b.get(24..28)?.try_into().ok()?);
                Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope)))
            }
            _ => None,
        }
    }
}

/// Runs `f` for at most `limit`.
pub async fn within<T>(limit: std::time::Duration, f: impl std::future::Future<Output = T>) -> Option<T> {
    use smol::future::FutureExt;
    async { Some(f.await) }
        .or(async {
            smol::Timer::after(limit).await;
            None
        })
        .await
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_lock_is_one_holders_and_goes_with_it() {
        let dir = std::env::temp_dir().join(format!("hydradns-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.lock");
        let held = try_lock(&path).unwrap();
        assert_eq!(try_lock(&path).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
        drop(held);
        let again = try_lock(&path).unwrap();
        drop(again);
        // Never made through a link.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &path).unwrap();
        assert!(try_lock(&path).is_err());
        assert!(!dir.join("elsewhere").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO (whose open would block until a writer came), a device that
    /// reads without end, a directory: refused, and at once. A regular file
    /// over the limit is refused too; /proc's, which say size 0, are read
    /// up to it.
    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = std::env::temp_dir().join(format!("hydradns-regular-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
        let started = std::time::Instant::now();
        for p in [&fifo, Path::new("/dev/zero"), Path::new("/dev/null"), &dir] {
            let e = read_regular(p, 1 << 20).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{}: {e}", p.display());
        }
        // A blocked open or read would never end: any bound shows it did not.
        assert!(started.elapsed() < Duration::from_secs(5), "nothing blocked: {:?}", started.elapsed());
        let file = dir.join("file");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_regular(&file, 10).unwrap(), b"0123456789");
        assert_eq!(read_regular(&file, 9).unwrap_err().kind(), std::io::ErrorKind::FileTooLarge);
        assert!(read_regular(Path::new("/proc/self/status"), 1 << 20).unwrap().starts_with(b"Name:"));
        assert_eq!(
            read_regular(Path::new("/proc/self/status"), 16).unwrap_err().kind(),
            std::io::ErrorKind::FileTooLarge
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn private_files_and_directories() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hydradns-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let db = dir.join("a/b/q.db");
        private_file(&db).unwrap();
        assert_eq!((mode(&db), mode(&dir.join("a/b")), mode(&dir.join("a"))), (0o600, 0o700, 0o700));
        // A file an older version left world-readable is narrowed, its content kept.
        std::fs::write(&db, b"rows").unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        private_file(&db).unwrap();
        assert_eq!((mode(&db), std::fs::read(&db).unwrap()), (0o600, b"rows".to_vec()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn this_threads_writes_are_counted() {
        // Where the kernel keeps task I/O accounting, a write to a disk-backed
        // file counts; a tmpfs-only machine may see 0, but never less than before.
        let Some(before) = thread_write_bytes() else { return };
        let p = std::env::current_dir().unwrap().join(format!("target/hydradns-io-{}", std::process::id()));
        std::fs::write(&p, vec![1u8; 64 * 1024]).unwrap();
        let after = thread_write_bytes().unwrap();
        let _ = std::fs::remove_file(&p);
        assert!(after >= before);
    }

    #[test]
    fn atomic_write_replaces_whole_files() {
        let dir = std::env::temp_dir().join(format!("hydradns-atomic-{}", std::process::id()));
        let p = dir.join("sub/list.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert!(!dir.join("sub/list.txt.tmp").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn recv_batch_takes_what_is_queued_with_senders() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = RecvBatch::new(4, 8);
        assert_eq!(batch.recv(&server, false), Err(Errno::AGAIN), "empty, no wait");
        assert_eq!(batch.recv(&server, true), Err(Errno::AGAIN), "empty, waited out the timeout");
        let to = server.local_addr().unwrap();
        for (sock, msg) in [(&a, &b"one"[..]), (&b, b"two"), (&a, b"longer than eight"), (&b, b"4"), (&a, b"5")] {
            sock.send_to(msg, to).unwrap();
        }
        assert_eq!(batch.recv(&server, true), Ok(4), "as many as there is room for");
        assert_eq!(batch.datagram(0), b"one");
        assert_eq!(batch.peer(0), Some(a.local_addr().unwrap()));
        assert_eq!(batch.datagram(1), b"two");
        assert_eq!(batch.peer(1), Some(b.local_addr().unwrap()));
        assert_eq!(batch.datagram(2), b"longer t", "cut to the buffer");
        assert_eq!(batch.datagram(3), b"4");
        assert_eq!(batch.recv(&server, false), Ok(1));
        assert_eq!(batch.datagram(0), b"5");
        assert_eq!(batch.datagram(1), b"", "nothing past the last call's count");
        assert_eq!(batch.peer(1), None);
    }

    #[test]
    fn recv_batch_reads_ipv6_senders() {
        let Ok(server) = UdpSocket::bind("[::1]:0") else { return }; // no IPv6 loopback here
        let client = UdpSocket::bind("[::1]:0").unwrap();
        client.send_to(b"six", server.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::new(2, 64);
        server.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(batch.recv(&server, true), Ok(1));
        assert_eq!(batch.datagram(0), b"six");
        assert_eq!(batch.peer(0), Some(client.local_addr().unwrap()));
    }
}

/// Datagrams the kernel dropped for the UDP sockets with these inode
/// numbers (a full receive buffer, mostly): the last column of
/// /proc/net/udp and udp6. Read on demand, for `stats`; 0 where /proc is
/// not there.
pub fn udp_drops(inodes: &[u64]) -> u64 {
    ["/proc/self/net/udp", "/proc/self/net/udp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|table| udp_drops_in(&table, inodes))
        .sum()
}

/// [`udp_drops`] of one table's text.
fn udp_drops_in(table: &str, inodes: &[u64]) -> u64 {
    udp_entries(table).filter(|e| inodes.contains(&e.inode)).map(|e| e.drops).sum()
}

/// One socket of /proc/net/udp or udp6, the fields read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpEntry<'a> {
    /// `0100007F:14E9`: the address as the kernel prints it (see
    /// `watchdog::local_address`).
    pub local: &'a str,
    /// Bytes waiting unread in its receive queue.
    pub rx_queue: u64,
    /// Its inode number, as `fstat` gives it.
    pub inode: u64,
    /// Datagrams the kernel dropped for it.
    pub drops: u64,
}

/// The sockets of one /proc/net/udp(6) table's text; a line that does not
/// fit is left out.
pub fn udp_entries(table: &str) -> impl Iterator<Item = UdpEntry<'_>> {
    table.lines().skip(1).filter_map(|line| {
        // sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ref pointer drops
        let mut f = line.split_whitespace();
        let local = f.nth(1)?;
        let queues = f.nth(2)?;
        let inode = f.nth(4)?.parse().ok()?;
        let drops = f.last()?.parse().ok()?;
        let rx_queue = u64::from_str_radix(queues.split_once(':')?.1, 16).ok()?;
        Some(UdpEntry { local, rx_queue, inode, drops })
    })
}

#[cfg(test)]
mod run_tests {
    #[test]
    fn runs_a_program_and_says_how_it_ended() {
        let sh = std::path::Path::new("/bin/sh");
        assert_eq!(super::run(sh, &["-c", "exit 3"]).unwrap(), Some(3));
        assert_eq!(super::run(sh, &["-c", "[ \"$PATH\" = /usr/sbin:/usr/bin:/sbin:/bin ]"]).unwrap(), Some(0));
        assert_eq!(super::run(sh, &["-c", "kill -9 $$"]).unwrap(), None);
        assert!(super::run(std::path::Path::new("/nonexistent/hook"), &[]).is_err());
    }
}

#[cfg(test)]
mod drop_tests {
    #[test]
    fn drops_of_our_sockets_only() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
            \x20 10: 0100007F:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17\n\
            \x20 11: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 99 2 0000000000000000 5\n";
        assert_eq!(super::udp_drops_in(table, &[4242]), 17);
        assert_eq!(super::udp_drops_in(table, &[4242, 99]), 22);
        assert_eq!(super::udp_drops_in(table, &[7]), 0);
    }
}
