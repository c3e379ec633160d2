//! Deterministic synthetic domain names shaped like real blocklists.
//!
//! Shape measured on the HaGeZi light and StevenBlack unified lists in
//! ../shared/data (2026): 2 labels 27–34 %, 3 labels 51–53 %, 4 labels
//! 12–19 %, 5+ about 3 %; non-TLD labels average 8 characters; names average
//! 19–21 bytes; about half end in `.com`. Shared by benchmarks, examples and
//! tests through `#[path]`, so every figure is made from the same names.
#![allow(dead_code, unreachable_pub)]

/// TLDs with rough weights from the same lists.
const TLDS: &[(&str, u32)] = &[
    ("com", 50),
    ("net", 10),
    ("org", 3),
    ("io", 3),
    ("me", 3),
    ("ru", 2),
    ("de", 2),
    ("site", 2),
    ("xyz", 2),
    ("info", 2),
    ("shop", 2),
    ("pl", 2),
    ("jp", 1),
    ("cyou", 1),
    ("top", 1),
    ("eu", 1),
    ("fr", 1),
    ("app", 1),
    ("co.uk", 1),
];

/// xorshift64*: fast, seedable, good enough to shape test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn label(rng: &mut Rng, out: &mut String) {
    // 3..=14 characters, mean ~8; letters mostly, some digits and inner hyphens.
    let len = 3 + (rng.below(6) + rng.below(7)) as usize;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz0123456789";
    for i in 0..len {
        if i > 0 && i + 1 < len && rng.below(20) == 0 {
            out.push('-');
        } else {
            out.push(CHARS[rng.below(CHARS.len() as u64) as usize] as char);
        }
    }
}

/// The `i`-th name of the stream seeded by `seed` (names may repeat rarely).
pub fn name(rng: &mut Rng) -> String {
    let labels = match rng.below(100) {
        0..=29 => 2,
        30..=81 => 3,
        82..=96 => 4,
        _ => 5,
    };
    let total: u32 = TLDS.iter().map(|t| t.1).sum();
    let mut pick = rng.below(total as u64) as u32;
    let tld = TLDS
        .iter()
        .find(|t| {
            if pick < t.1 {
                true
            } else {
                pick -= t.1;
                false
            }
        })
        .map_or("com", |t| t.0);
    let mut s = String::with_capacity(32);
    for _ in 0..labels - 1 {
        label(rng, &mut s);
        s.push('.');
    }
    s.push_str(tld);
    s
}

/// `n` names from `seed`.
pub fn names(n: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| name(&mut rng)).collect()
}
