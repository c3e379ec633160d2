//! Binding the listening sockets.
//!
//! Every worker gets its own UDP socket and TCP listener per listen address,
//! all bound to the same port with `SO_REUSEPORT`, so the kernel spreads
//! packets and connections over the workers and no two cores share a socket
//! queue. IPv6 sockets are `IPV6_V6ONLY` so `0.0.0.0:53` and `[::]:53` can be
//! listened on side by side. Port 0 picks one free port shared by UDP and TCP.
//! A wildcard UDP socket asks for each datagram's destination, so its
//! answers leave from the address asked (`sys::Local`).
//!
//! `SO_REUSEPORT` lets any process of the same uid join the port and take a
//! share of the packets: a second gateway started by mistake would answer
//! half the queries, silently. So the first socket of each set is bound
//! without it (any other socket on the address, reuse or not, makes that
//! bind fail, as dnsmasq holding the port does), and only then allows reuse
//! for this process's other workers. A second gateway's first bind fails on
//! ours the same way.

use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};

use rustix::net::{AddressFamily, SocketFlags, SocketType, sockopt};

/// Pending TCP connections the kernel queues per listener.
const TCP_BACKLOG: i32 = 128;
/// Receive buffer of each UDP socket, bytes (the kernel books twice this).
/// The default (rmem_default, 208 KiB here) held about 200 small queries:
/// a burst of 300 from one client (devices waking at once, dnsmasq
/// forwarding a burst) lost some. This holds about 2,000 (Unbound suggests
/// 4 MiB for busy servers; a router has fewer clients). Memory is used
/// only while packets wait, and the kernel's drops are reported in `stats`.
pub const UDP_RCVBUF: usize = 1 << 20;
/// Tries at finding one free port for UDP and TCP together when port 0 is asked for.
const PORT_PICK_TRIES: usize = 32;

/// The sockets of one listen address, one of each per worker.
#[derive(Debug)]
pub struct Listener {
    /// The address actually bound (port 0 resolved).
    pub addr: SocketAddr,
    /// One UDP socket per worker.
    pub udp: Vec<UdpSocket>,
    /// Their inode numbers, which /proc/net/udp reports drops by.
    pub udp_inodes: Vec<u64>,
    /// One TCP listener per worker.
    pub tcp: Vec<TcpListener>,
}

/// A socket for `addr`; `reuse` sets `SO_REUSEPORT` before the bind (to join
/// this process's first socket of the set).
fn socket(addr: &SocketAddr, kind: SocketType, reuse: bool) -> io::Result<rustix::fd::OwnedFd> {
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let fd = rustix::net::socket_with(family, kind, SocketFlags::CLOEXEC, None)?;
    if reuse {
        sockopt::set_socket_reuseport(&fd, true)?;
    }
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    Ok(fd)
}

/// Binds `fd` to `addr`; unless it joins the set (`reuse`), it is bound
/// alone first and opened to this process's other workers after.
fn bind_one(fd: &rustix::fd::OwnedFd, addr: &SocketAddr, reuse: bool) -> io::Result<()> {
    rustix::net::bind(fd, addr).map_err(|e| match e {
        rustix::io::Errno::ADDRINUSE => io::Error::new(
            io::ErrorKind::AddrInUse,
            "another program listens on this address (another hydradns, or dnsmasq on the same port?)",
        ),
        e => e.into(),
    })?;
    if !reuse {
        sockopt::set_socket_reuseport(fd, true)?;
    }
    Ok(())
}

/// `shared`: an address this process already listens on overlaps this one
/// (a wildcard beside a specific address on one port), so even the first
/// socket must join by `SO_REUSEPORT`.
fn bind_set(addr: SocketAddr, workers: usize, shared: bool) -> io::Result<Listener> {
    let mut l = Listener { addr, udp: Vec::new(), udp_inodes: Vec::new(), tcp: Vec::with_capacity(workers) };
    for i in 0..workers {
        let reuse = shared || i > 0;
        let fd = socket(&addr, SocketType::DGRAM, reuse)?;
        // Beyond rmem_max needs CAP_NET_ADMIN, which a start as root has
        // (this runs before the user changes); else the kernel caps it.
        if sockopt::set_socket_recv_buffer_size_force(&fd, UDP_RCVBUF).is_err() {
            sockopt::set_socket_recv_buffer_size(&fd, UDP_RCVBUF)?;
        }
        if addr.ip().is_unspecified() {
            // Answers leave from the address each query was sent to (udp.rs).
            crate::sys::enable_pktinfo(&fd, addr.is_ipv6())?;
        }
        bind_one(&fd, &addr, reuse)?;
        l.udp_inodes.push(rustix::fs::fstat(&fd)?.st_ino);
        l.udp.push(UdpSocket::from(fd));
        let fd = socket(&addr, SocketType::STREAM, reuse)?;
        // Restarting must not wait out TIME_WAIT connections of the last run
        // (it still refuses an address another socket listens on).
        sockopt::set_socket_reuseaddr(&fd, true)?;
        bind_one(&fd, &addr, reuse)?;
        rustix::net::listen(&fd, TCP_BACKLOG)?;
        l.tcp.push(TcpListener::from(fd));
    }
    Ok(l)
}

/// Whether a socket on `a` and one on `b` would hold the same address: one
/// family and port, and the same address or a wildcard on either side.
fn overlaps(a: &SocketAddr, b: &SocketAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// Binds UDP and TCP on `addr` for `workers` workers; refuses an address
/// another process listens on. `ours`: the listeners already bound.
pub fn bind(addr: SocketAddr, workers: usize, ours: &[Listener]) -> io::Result<Listener> {
    if addr.port() != 0 {
        let shared = ours.iter().any(|l| overlaps(&l.addr, &addr));
        return bind_set(addr, workers, shared);
    }
    let mut last_err = io::Error::new(io::ErrorKind::AddrInUse, "no free port");
    for _ in 0..PORT_PICK_TRIES {
        // Let the kernel pick a port no one holds, then claim it for all sockets.
        // SO_REUSEPORT on the probe would let the kernel hand out a shared port.
        let port = UdpSocket::bind(addr)?.local_addr()?.port();
        match bind_set(SocketAddr::new(addr.ip(), port), workers, false) {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last_err = e,
            Err(e) => return Err(e),
        }
    }
    Err(last_err)
}
