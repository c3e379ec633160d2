//! Binding the listening sockets.
//!
//! Every worker gets its own UDP socket and TCP listener per listen address,
//! all bound to the same port with `SO_REUSEPORT`, so the kernel spreads
//! packets and connections over the workers and no two cores share a socket
//! queue. IPv6 sockets are `IPV6_V6ONLY` so `0.0.0.0:53` and `[::]:53` can be
//! listened on side by side. Port 0 picks one free port shared by UDP and TCP.

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

fn socket(addr: &SocketAddr, kind: SocketType) -> io::Result<rustix::fd::OwnedFd> {
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let fd = rustix::net::socket_with(family, kind, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseport(&fd, true)?;
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    Ok(fd)
}

fn bind_set(addr: SocketAddr, workers: usize) -> io::Result<Listener> {
    let mut l = Listener { addr, udp: Vec::new(), udp_inodes: Vec::new(), tcp: Vec::with_capacity(workers) };
    for _ in 0..workers {
        let fd = socket(&addr, SocketType::DGRAM)?;
        // Beyond rmem_max needs CAP_NET_ADMIN, which a start as root has
        // (this runs before the user changes); else the kernel caps it.
        if sockopt::set_socket_recv_buffer_size_force(&fd, UDP_RCVBUF).is_err() {
            sockopt::set_socket_recv_buffer_size(&fd, UDP_RCVBUF)?;
        }
        rustix::net::bind(&fd, &addr)?;
        l.udp_inodes.push(rustix::fs::fstat(&fd)?.st_ino);
        l.udp.push(UdpSocket::from(fd));
        let fd = socket(&addr, SocketType::STREAM)?;
        // Restarting must not wait out TIME_WAIT connections of the last run.
        sockopt::set_socket_reuseaddr(&fd, true)?;
        rustix::net::bind(&fd, &addr)?;
        rustix::net::listen(&fd, TCP_BACKLOG)?;
        l.tcp.push(TcpListener::from(fd));
    }
    Ok(l)
}

/// Binds UDP and TCP on `addr` for `workers` workers.
pub fn bind(addr: SocketAddr, workers: usize) -> io::Result<Listener> {
    if addr.port() != 0 {
        return bind_set(addr, workers);
    }
    let mut last_err = io::Error::new(io::ErrorKind::AddrInUse, "no free port");
    for _ in 0..PORT_PICK_TRIES {
        // Let the kernel pick a port no one holds, then claim it for all sockets.
        // SO_REUSEPORT on the probe would let the kernel hand out a shared port.
        let port = UdpSocket::bind(addr)?.local_addr()?.port();
        match bind_set(SocketAddr::new(addr.ip(), port), workers) {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last_err = e,
            Err(e) => return Err(e),
        }
    }
    Err(last_err)
}
