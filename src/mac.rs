//! MAC addresses as text: how the config, the leases, the log and the
//! control socket write a device's hardware address.

/// `aa:bb:cc:dd:ee:ff` (or with `-`), either case.
pub fn parse_mac(text: &[u8]) -> Option<[u8; 6]> {
    if text.len() != 17 {
        return None;
    }
    let mut mac = [0u8; 6];
    for (i, b) in mac.iter_mut().enumerate() {
        let hex = std::str::from_utf8(text.get(3 * i..3 * i + 2)?).ok()?;
        *b = u8::from_str_radix(hex, 16).ok()?;
        if i < 5 && !matches!(text[3 * i + 2], b':' | b'-') {
            return None;
        }
    }
    Some(mac)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_text(mac: &[u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}
