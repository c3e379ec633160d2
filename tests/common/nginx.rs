//! nginx (Debian's nginx-light) as a DNS-over-HTTPS front: TLS, HTTP/1.1
//! or HTTP/2, proxying `/dns-query` to a plain-HTTP DoH server behind it,
//! as self-hosted DoH is often set up. Its other paths are what a
//! resolver must not take for an answer: `/wrong-type` (200, an HTML
//! page) and anything else (404). It logs every request's URI, so a test
//! can read the DNS queries as they arrived.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{KillOnDrop, TempDir, spawn_on_free_port, tls_dir};

pub struct Nginx {
    _child: KillOnDrop,
    pub addr: SocketAddr,
    access_log: PathBuf,
    pub dir: TempDir,
}

/// How the front behaves.
pub struct Front {
    /// Offer HTTP/2 in ALPN (else HTTP/1.1 only).
    pub http2: bool,
    /// Requests per connection before nginx ends it (HTTP/1.1:
    /// `Connection: close`; HTTP/2: GOAWAY).
    pub keepalive_requests: u32,
    /// Idle seconds before nginx closes a connection.
    pub keepalive_timeout: u32,
}

impl Nginx {
    pub fn start(backend: SocketAddr, front: Front) -> Nginx {
        let dir = TempDir::new();
        let d = dir.0.display();
        let access_log = dir.0.join("access.log");
        let conf = dir.0.join("nginx.conf");
        // The port is written in when it is known (`@PORT@`).
        let template = format!(
            "daemon off;\nmaster_process off;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n\
                   log_format uri '$request_uri';\n\
                   access_log {log} uri;\n\
                   client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
                   fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
                   keepalive_requests {requests};\n\
                   keepalive_timeout {timeout}s;\n\
                   server {{\n\
                     listen 127.0.0.1:@PORT@ ssl{h2};\n\
                     ssl_certificate {cert};\n\
                     ssl_certificate_key {key};\n\
                     location = /dns-query {{ proxy_pass http://{backend}; proxy_http_version 1.1; }}\n\
                     location = /wrong-type {{ default_type text/html; return 200 '<html>captive portal</html>'; }}\n\
                     location / {{ return 404; }}\n\
                   }}\n\
                 }}\n",
            log = access_log.display(),
            requests = front.keepalive_requests,
            timeout = front.keepalive_timeout,
            h2 = if front.http2 { " http2" } else { "" },
            cert = tls_dir().join("server.pem").display(),
            key = tls_dir().join("server.key").display(),
        );
        let (child, port) = spawn_on_free_port(
            "nginx",
            |port| vec![("tcp", port)],
            |port| {
                std::fs::write(&conf, template.replace("@PORT@", &port.to_string())).unwrap();
                Command::new("nginx")
                    .args(["-p"])
                    .arg(&dir.0)
                    .arg("-c")
                    .arg(&conf)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("nginx (Debian package nginx-light) is needed for these tests")
            },
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        Nginx { _child: child, addr, access_log, dir }
    }

    /// The request URIs logged so far.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.access_log).unwrap_or_default().lines().map(str::to_string).collect()
    }
}

/// The DNS message in a DoH GET's `dns=` parameter.
pub fn dns_param(uri: &str) -> Option<Vec<u8>> {
    let b64 = uri.split(['?', '&']).find_map(|p| p.strip_prefix("dns="))?;
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in b64.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    Some(out)
}
