//! The benchmark's load at saturation. One dnsperf thread tops out near the
//! echo responder's rate on the 2-core dev VM, with its core at 100 % and the
//! server's below (docs/benchmarks.md before this load existed), so it
//! measured dnsperf, not the servers. This sends the same query files with
//! `sendmmsg` and reads the answers with `recvmmsg`, up to `WINDOW` queries
//! in flight on one socket, and counts an answer only when it carries the ID
//! and the question of a query in flight, so a server that answers garbage,
//! or nothing, scores nothing.
//!
//!     bench-load ADDR FILE SECS [WINDOW]
//!
//! WINDOW defaults to 100, what bench/redline.py uses: at 200 and more the
//! echo responder's default socket buffer overflowed on the dev VM.
//!
//! FILE has dnsperf's format (`name TYPE` per line), read in a loop. Prints
//! dnsperf's summary lines, which bench/redline.py reads either way. A query
//! unanswered two seconds after it was sent is lost, as with `dnsperf -t 2`;
//! after SECS it stops sending and waits at most that long for the rest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::net::SendFlags;

const TIMEOUT: Duration = Duration::from_secs(2);
/// Queries per `sendmmsg`, and replies read before sending more.
const BURST: usize = 64;
const IDS: usize = 1 << 16;

/// A query in wire form, ID zero; the question runs from byte 12 to the end.
fn encode(name: &str, qtype: &str) -> Option<Vec<u8>> {
    let t: u16 = match qtype.to_ascii_uppercase().as_str() {
        "A" => 1,
        "NS" => 2,
        "CNAME" => 5,
        "SOA" => 6,
        "PTR" => 12,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        "SRV" => 33,
        "HTTPS" => 65,
        _ => return None,
    };
    hydradns::wire::build::query(0, name, t, None).filter(|q| q.len() <= 512)
}

/// Blocks until the socket is readable or `ms` pass.
fn wait_readable(sock: &UdpSocket, ms: i64) {
    let mut fds = [PollFd::new(sock, PollFlags::IN)];
    let timeout = Timespec { tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000 };
    let _ = poll(&mut fds, Some(&timeout));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: bench-load ADDR FILE SECS [WINDOW]");
        std::process::exit(2);
    }
    let secs: f64 = args[3].parse().expect("SECS");
    let window: usize = args.get(4).map_or(100, |w| w.parse().expect("WINDOW")).clamp(1, IDS / 4);
    let queries: Vec<Vec<u8>> = std::fs::read_to_string(&args[2])
        .expect("query file")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            encode(w.next()?, w.next().unwrap_or("A"))
        })
        .collect();
    assert!(!queries.is_empty(), "no queries in {}", args[2]);
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.connect(&args[1]).expect("connect");

    // In flight: by ID, the query's index and when it went; and in send order, to find the lost.
    let mut flight: Vec<Option<(u32, Instant)>> = vec![None; IDS];
    let mut order: VecDeque<(u16, Instant)> = VecDeque::with_capacity(window);
    let mut in_flight = 0usize;
    let (mut sent, mut completed, mut completed_in_time, mut lost, mut wrong) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut next_query = 0usize;
    let mut next_id = 0u16;
    let mut batch = vec![[0u8; 512]; BURST];
    let mut lens = [0usize; BURST];
    let mut replies = hydradns::sys::RecvBatch::new(BURST, 4096);

    let start = Instant::now();
    let stop_sending = start + Duration::from_secs_f64(secs);
    let mut sending = true;
    loop {
        let now = Instant::now();
        if sending && now >= stop_sending {
            sending = false;
        }
        // The oldest in flight, answered or past the timeout, leave the queue.
        while let Some(&(id, t)) = order.front() {
            match flight[id as usize] {
                Some((_, s)) if s == t && now.duration_since(t) < TIMEOUT => break,
                Some((_, s)) if s == t => {
                    flight[id as usize] = None;
                    in_flight -= 1;
                    lost += 1;
                }
                _ => {}
            }
            order.pop_front();
        }
        if !sending && (in_flight == 0 || now >= stop_sending + TIMEOUT) {
            lost += in_flight as u64;
            break;
        }
        if sending && in_flight < window {
            let n = (window - in_flight).min(BURST);
            let mut ids = [0u16; BURST];
            for k in 0..n {
                // Skip an ID still in flight (a lost one not yet timed out).
                while flight[next_id as usize].is_some() {
                    next_id = next_id.wrapping_add(1);
                }
                let q = &queries[next_query];
                batch[k][..q.len()].copy_from_slice(q);
                batch[k][..2].copy_from_slice(&next_id.to_be_bytes());
                lens[k] = q.len();
                ids[k] = next_id;
                flight[next_id as usize] = Some((next_query as u32, now));
                next_id = next_id.wrapping_add(1);
                next_query = (next_query + 1) % queries.len();
            }
            let went = hydradns::sys::sendmmsg(
                sock.as_fd(),
                batch[..n].iter().zip(&lens).map(|(b, &l)| &b[..l]),
                None,
                SendFlags::DONTWAIT,
            )
            .unwrap_or(0);
            for (k, &id) in ids[..n].iter().enumerate() {
                if k < went {
                    order.push_back((id, now));
                } else {
                    flight[id as usize] = None;
                }
            }
            in_flight += went;
            sent += went as u64;
        }
        let got = replies.recv(&sock, false).unwrap_or_default();
        for i in 0..got {
            let msg = replies.datagram(i);
            let id = if msg.len() >= 12 { u16::from_be_bytes([msg[0], msg[1]]) as usize } else { continue };
            let Some((qi, _)) = flight[id] else {
                wrong += 1;
                continue;
            };
            let question = &queries[qi as usize][12..];
            if msg[2] & 0x80 == 0 || msg[4..6] != [0, 1] || msg.get(12..12 + question.len()) != Some(question) {
                wrong += 1;
                continue;
            }
            flight[id] = None;
            in_flight -= 1;
            completed += 1;
            if sending {
                completed_in_time += 1;
            }
        }
        if got == 0 && (!sending || in_flight >= window) {
            wait_readable(&sock, 10);
        }
    }
    let runtime = secs.min(start.elapsed().as_secs_f64());
    let pct = |n: u64| 100.0 * n as f64 / sent.max(1) as f64;
    println!("Statistics (bench-load, window {window}):");
    println!("  Queries sent:         {sent}");
    println!("  Queries completed:    {completed} ({:.2}%)", pct(completed));
    println!("  Queries lost:         {lost} ({:.2}%)", pct(lost));
    println!("  Replies rejected:     {wrong}");
    println!("  Run time (s):         {runtime:.6}");
    println!("  Queries per second:   {:.6}", completed_in_time as f64 / runtime);
}
