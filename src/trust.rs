//! The certificates HTTPS list downloads and encrypted upstreams are
//! verified against: `ca_file`, or the system's bundle. Nothing turns
//! verification off.

use std::path::Path;

use ureq::tls::{Certificate, PemItem};

/// System CA bundles tried in order when `ca_file` is not set (OpenWrt's
/// `ca-bundle`/`ca-certificates` package, then Debian/Alpine, then Fedora).
const SYSTEM_BUNDLES: &[&str] =
    &["/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/cert.pem", "/etc/pki/tls/certs/ca-bundle.crt"];

/// Largest CA bundle read: the system's (Mozilla's roots) is about 220 KB.
const MAX_BUNDLE_BYTES: u64 = 4 << 20;

/// The trust anchors: `ca_file`, or the first system bundle found.
pub fn certificates(ca_file: &Path) -> Result<Vec<Certificate<'static>>, String> {
    let path = if ca_file.as_os_str().is_empty() {
        SYSTEM_BUNDLES.iter().map(Path::new).find(|p| p.exists()).ok_or("no CA bundle found (set ca_file)")?
    } else {
        ca_file
    };
    let pem =
        crate::sys::read_regular(path, MAX_BUNDLE_BYTES).map_err(|e| format!("CA bundle {}: {e}", path.display()))?;
    let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(format!("CA bundle {} holds no certificates", path.display()));
    }
    Ok(certs)
}
