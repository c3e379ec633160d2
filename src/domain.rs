//! Domain names as the lists, the config and the engine share them: the
//! text form checked and lowercased, and the reversed-label key every
//! domain set and the cache compare (`ads.example.com` → `com␀example␀ads`).
//! Below every stage, so that `wire` can build keys and `config` can check
//! names without reaching into the policy.

/// Label separator inside keys. Below every byte a listed name may contain
/// (letters, digits, `-`, `_`), so `x.y` sorts right after `y`, before `y-z`.
pub const SEP: u8 = 0;

/// `a == b`, eight bytes at a time, for the same reason as the policy's `key_cmp`:
/// slice equality calls `bcmp`, which in the static musl build is
/// compiler-rt's byte loop. The last eight bytes stand in for the tail, so
/// no byte loop runs for a key of eight bytes or more; in the cache's hit
/// check, `key_cmp(..).is_eq()` counted 1,819 instructions per hit against
/// 1,783 with this (`bench/instructions.py --by-function --scenarios hits`).
#[inline]
pub fn key_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (Some(lx), Some(ly)) = (a.last_chunk::<8>(), b.last_chunk::<8>()) else {
        return a.iter().zip(b).all(|(p, q)| p == q);
    };
    let (mut x, mut y) = (a, b);
    while let (Some((wx, rx)), Some((wy, ry))) = (x.split_first_chunk::<8>(), y.split_first_chunk::<8>()) {
        if u64::from_ne_bytes(*wx) != u64::from_ne_bytes(*wy) {
            return false;
        }
        (x, y) = (rx, ry);
    }
    // The last eight bytes cover the tail the loop left, overlapping what it compared.
    u64::from_ne_bytes(*lx) == u64::from_ne_bytes(*ly)
}

/// Checks and lowercases a domain name from a list or a config: one trailing
/// dot allowed, 1–253 bytes, labels of 1–63 letters, digits, `-` or `_`, no
/// hyphen at either end of a label.
pub fn normalize_name(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    for_each_label_rev(name, |_| {})?;
    let name = name.strip_suffix('.').unwrap_or(name);
    out.extend(name.chars().map(|c| c.to_ascii_lowercase()));
    Some(out)
}

/// Validates `name` and calls `f` with each label, last label first, as
/// lowercase ASCII bytes written into a scratch slice. Returns `None` (having
/// possibly called `f` for some labels) when the name is not acceptable.
pub fn for_each_label_rev(name: &str, mut f: impl FnMut(&[u8])) -> Option<()> {
    let name = name.strip_suffix('.').unwrap_or(name).as_bytes();
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let mut scratch = [0u8; 63];
    for label in name.rsplit(|&b| b == b'.') {
        // RFC 1123 host labels do not start or end with a hyphen; `-468-60-` is a URL fragment.
        if label.is_empty() || label.len() > 63 || label.starts_with(b"-") || label.ends_with(b"-") {
            return None;
        }
        for (dst, &b) in scratch.iter_mut().zip(label) {
            if !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return None;
            }
            *dst = b.to_ascii_lowercase();
        }
        f(&scratch[..label.len()]);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        assert_eq!(normalize_name("Example.COM.").as_deref(), Some("example.com"));
        assert_eq!(normalize_name("_dmarc.x-y.example").as_deref(), Some("_dmarc.x-y.example"));
        assert!(normalize_name("").is_none());
        assert!(normalize_name(".").is_none());
        assert!(normalize_name("a..b").is_none());
        assert!(normalize_name(&"a".repeat(64)).is_none());
        assert!(normalize_name(&format!("{}.com", "a.".repeat(130))).is_none());
        assert!(normalize_name("bücher.de").is_none());
        assert!(normalize_name("-ads.example").is_none());
        assert!(normalize_name("ads-.example").is_none());
        assert_eq!(normalize_name("a-b.example").as_deref(), Some("a-b.example"));
        let mut labels = Vec::new();
        for_each_label_rev("Ads.Example.Com", |l| labels.push(l.to_vec())).unwrap();
        assert_eq!(labels, [b"com".to_vec(), b"example".to_vec(), b"ads".to_vec()]);
    }
}
