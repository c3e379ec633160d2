//! Domain names in uncompressed wire form (`\x03www\x07example\x00`), as
//! DNSSEC compares and orders them: case-insensitively, label by label from
//! the right (RFC 4034 §6.1). Every function accepts any bytes and walks at
//! most 128 labels, so a malformed name costs no more than a long one.

use std::cmp::Ordering;

/// The root name.
pub const ROOT: &[u8] = &[0];

/// Most labels a name of 255 bytes can hold, root included.
const MAX_LABELS: usize = 128;

/// Length of the well-formed uncompressed name at the start of `b` (final
/// zero included): labels of at most 63 bytes, 255 bytes in all. `None` for
/// anything else, a compression pointer included.
pub fn name_len(b: &[u8]) -> Option<usize> {
    let mut p = 0;
    loop {
        let len = *b.get(p)? as usize;
        if len == 0 {
            return (p < crate::wire::MAX_NAME_LEN).then_some(p + 1);
        }
        if len > 63 {
            return None;
        }
        p += 1 + len;
        if p >= crate::wire::MAX_NAME_LEN {
            return None;
        }
    }
}

/// Whether `name` is exactly one well-formed name.
pub fn is_name(name: &[u8]) -> bool {
    name_len(name) == Some(name.len())
}

/// Start offsets of the labels of well-formed `name`, left to right (the
/// root's zero length byte not counted), written into `out`; returns how
/// many. Malformed names give 0 labels past the malformed point.
fn label_starts(name: &[u8], out: &mut [u8; MAX_LABELS]) -> usize {
    let (mut p, mut n) = (0usize, 0usize);
    while let Some(&len) = name.get(p) {
        if len == 0 || len > 63 || n == MAX_LABELS || p + 1 + len as usize > name.len().min(255) {
            break;
        }
        out[n] = p as u8;
        n += 1;
        p += 1 + len as usize;
    }
    n
}

/// Labels in `name`, the root not counted (`www.example.` has 2).
pub fn label_count(name: &[u8]) -> usize {
    let mut starts = [0u8; MAX_LABELS];
    label_starts(name, &mut starts)
}

/// The count an RRSIG's Labels field gives for `owner` (RFC 4034 §3.1.3):
/// a leading `*` label is not counted.
pub fn rrsig_label_count(owner: &[u8]) -> usize {
    let n = label_count(owner);
    if is_wildcard(owner) { n - 1 } else { n }
}

/// Whether the first label of `name` is `*`.
pub fn is_wildcard(name: &[u8]) -> bool {
    name.starts_with(b"\x01*")
}

/// The rightmost `n` labels of `name` (`suffix(www.example., 1)` is
/// `example.`); the whole name when it has no more than `n`.
pub fn suffix(name: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return ROOT;
    }
    let mut starts = [0u8; MAX_LABELS];
    let count = label_starts(name, &mut starts);
    if n >= count {
        return name;
    }
    &name[starts[count - n] as usize..]
}

/// `name` without its first label; `None` for the root.
pub fn parent(name: &[u8]) -> Option<&[u8]> {
    let len = *name.first()? as usize;
    (len != 0).then(|| name.get(1 + len..)).flatten()
}

/// Case-insensitive equality (ASCII only, as DNS defines it). Length bytes
/// are below 64, so lowercasing the whole name only touches label text.
pub fn eq(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Whether `name` is `ancestor` or below it.
pub fn is_at_or_below(name: &[u8], ancestor: &[u8]) -> bool {
    if name.len() < ancestor.len() {
        return false;
    }
    let mut starts = [0u8; MAX_LABELS];
    let count = label_starts(name, &mut starts);
    let at = name.len() - ancestor.len();
    // Only a label boundary can start the ancestor: `xexample.` is not below `example.`.
    let boundary = at + 1 == name.len() || starts[..count].iter().any(|&s| s as usize == at);
    boundary && eq(&name[at..], ancestor)
}

/// Whether `name` is strictly below `ancestor`.
pub fn is_below(name: &[u8], ancestor: &[u8]) -> bool {
    name.len() > ancestor.len() && is_at_or_below(name, ancestor)
}

/// Appends `name` lowercased to `out`.
pub fn push_lower(out: &mut Vec<u8>, name: &[u8]) {
    out.extend(name.iter().map(u8::to_ascii_lowercase));
}

/// The canonical order of names (RFC 4034 §6.1): by the rightmost label
/// first, each label compared as lowercase octets, a shorter label (or
/// name) before a longer one that starts the same.
pub fn canonical_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let (mut sa, mut sb) = ([0u8; MAX_LABELS], [0u8; MAX_LABELS]);
    let (na, nb) = (label_starts(a, &mut sa), label_starts(b, &mut sb));
    for i in 1..=na.min(nb) {
        let la = label(a, sa[na - i]);
        let lb = label(b, sb[nb - i]);
        let ord = la.iter().map(u8::to_ascii_lowercase).cmp(lb.iter().map(u8::to_ascii_lowercase));
        if ord != Ordering::Equal {
            return ord;
        }
    }
    na.cmp(&nb)
}

fn label(name: &[u8], start: u8) -> &[u8] {
    let start = start as usize;
    let len = name[start] as usize;
    &name[start + 1..start + 1 + len]
}

/// The deepest name that is `a` or an ancestor of `a` and also `b` or an
/// ancestor of `b`, as a suffix of `a`.
pub fn common_ancestor<'a>(a: &'a [u8], b: &[u8]) -> &'a [u8] {
    let (mut sa, mut sb) = ([0u8; MAX_LABELS], [0u8; MAX_LABELS]);
    let (na, nb) = (label_starts(a, &mut sa), label_starts(b, &mut sb));
    let mut shared = 0;
    while shared < na.min(nb) && eq(label(a, sa[na - 1 - shared]), label(b, sb[nb - 1 - shared])) {
        shared += 1;
    }
    suffix(a, shared)
}

/// Writes `*.` + `name` into `out` (cleared first); `None` if that would be
/// longer than a name may be.
pub fn wildcard_of(name: &[u8], out: &mut [u8; 255]) -> Option<usize> {
    let len = name.len() + 2;
    if len > out.len() {
        return None;
    }
    out[..2].copy_from_slice(b"\x01*");
    out[2..len].copy_from_slice(name);
    Some(len)
}

/// `name` as text (`www.example.`), for messages.
pub fn to_text(name: &[u8]) -> String {
    let mut out = String::new();
    let mut starts = [0u8; MAX_LABELS];
    let count = label_starts(name, &mut starts);
    for &s in &starts[..count] {
        for &c in label(name, s) {
            match c {
                b'.' | b'\\' => {
                    out.push('\\');
                    out.push(c as char);
                }
                0x21..=0x7e => out.push(c as char),
                _ => out.push_str(&format!("\\{c:03}")),
            }
        }
        out.push('.');
    }
    if count == 0 {
        out.push('.');
    }
    out
}

#[cfg(test)]
pub(crate) fn from_text(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for label in text.trim_end_matches('.').split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> Vec<u8> {
        from_text(text)
    }

    #[test]
    fn counts_and_parts() {
        assert_eq!(label_count(ROOT), 0);
        assert_eq!(label_count(&n("www.example.")), 2);
        assert_eq!(rrsig_label_count(&n("*.a.example.")), 2);
        assert_eq!(suffix(&n("a.b.example."), 2), &n("b.example.")[..]);
        assert_eq!(suffix(&n("a.b.example."), 0), ROOT);
        assert_eq!(suffix(&n("example."), 5), &n("example.")[..]);
        assert_eq!(parent(&n("a.example.")), Some(&n("example.")[..]));
        assert_eq!(parent(ROOT), None);
        assert_eq!(name_len(&n("a.example.")), Some(11));
        assert_eq!(name_len(b"\xc0\x0c"), None);
        assert_eq!(name_len(b"\x03ab"), None);
        assert!(!is_name(&[1, b'a']));
    }

    #[test]
    fn below() {
        assert!(is_at_or_below(&n("a.Example."), &n("example.")));
        assert!(is_at_or_below(&n("example."), &n("EXAMPLE.")));
        assert!(is_at_or_below(&n("example."), ROOT));
        assert!(!is_at_or_below(&n("xexample."), &n("example.")));
        assert!(!is_at_or_below(&n("example."), &n("a.example.")));
        assert!(is_below(&n("a.example."), &n("example.")));
        assert!(!is_below(&n("example."), &n("example.")));
        // A label holding what looks like a name must not match.
        assert!(!is_at_or_below(b"\x09x\x07example\x00", &n("example.")));
    }

    /// RFC 4034 §6.1's example, in its order.
    #[test]
    fn canonical_order() {
        let names: Vec<Vec<u8>> = [
            "example.",
            "a.example.",
            "yljkjljk.a.example.",
            "Z.a.example.",
            "zABC.a.EXAMPLE.",
            "z.example.",
            "\u{1}.z.example.",
            "*.z.example.",
            "\u{c8}.z.example.",
        ]
        .iter()
        .map(|t| {
            // The RFC writes \001 and \200 as escapes; build them as bytes.
            let mut v = n(t);
            if t.starts_with('\u{1}') {
                v = [&[1u8, 1][..], &n("z.example.")].concat();
            } else if t.starts_with('\u{c8}') {
                v = [&[1u8, 200][..], &n("z.example.")].concat();
            }
            v
        })
        .collect();
        for w in names.windows(2) {
            assert_eq!(canonical_cmp(&w[0], &w[1]), Ordering::Less, "{} < {}", to_text(&w[0]), to_text(&w[1]));
            assert_eq!(canonical_cmp(&w[1], &w[0]), Ordering::Greater);
        }
        assert_eq!(canonical_cmp(&n("A.example."), &n("a.EXAMPLE.")), Ordering::Equal);
    }

    #[test]
    fn ancestors_and_text() {
        assert_eq!(common_ancestor(&n("a.b.example."), &n("c.b.EXAMPLE.")), &n("b.example.")[..]);
        assert_eq!(common_ancestor(&n("a.example."), &n("org.")), ROOT);
        let mut buf = [0u8; 255];
        let len = wildcard_of(&n("example."), &mut buf).unwrap();
        assert_eq!(&buf[..len], &n("*.example.")[..]);
        assert_eq!(to_text(&n("www.example.")), "www.example.");
        assert_eq!(to_text(ROOT), ".");
        assert_eq!(to_text(b"\x03a.b\x00"), "a\\.b.");
    }
}
