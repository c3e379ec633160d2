//! A bitmap of cheap hashes of a few keys: a clear bit says "none of
//! them" in a dozen instructions, where a hash map's lookup or a binary
//! search of a small set costs a few hundred. For the checks most names
//! fail (is it a search host, does another group's set list it); a set bit
//! still needs the real lookup.

/// One bit per hash of a key added; sized at build for about one false
/// "maybe" in sixteen.
#[derive(Debug, Clone)]
pub struct Sketch {
    /// The bitmap, a power of two of 64-bit words.
    words: Box<[u64]>,
    /// log2 of the number of bits.
    shift: u32,
}

/// Bits at least: small enough to sit in a few cache lines.
const MIN_BITS: usize = 1 << 10;
/// Bits at most (128 KiB): a set this large is mostly a "maybe" anyway.
const MAX_BITS: usize = 1 << 20;

impl Default for Sketch {
    fn default() -> Sketch {
        Sketch::with_capacity(0)
    }
}

impl Sketch {
    /// Room for `keys` keys.
    pub fn with_capacity(keys: usize) -> Sketch {
        let bits = keys.saturating_mul(16).clamp(MIN_BITS, MAX_BITS).next_power_of_two();
        Sketch { words: vec![0; bits / 64].into_boxed_slice(), shift: bits.trailing_zeros() }
    }

    /// Bytes of the bitmap.
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Marks `key`.
    pub fn add(&mut self, key: &[u8]) {
        let bit = self.bit(key);
        if let Some(w) = self.words.get_mut(bit / 64) {
            *w |= 1 << (bit % 64);
        }
    }

    /// Might `key` have been added? `false` is certain.
    #[inline]
    pub fn may_hold(&self, key: &[u8]) -> bool {
        let bit = self.bit(key);
        self.words.get(bit / 64).is_some_and(|w| w >> (bit % 64) & 1 != 0)
    }

    /// A hash of the key's length and its first and last eight bytes,
    /// below the number of bits.
    #[inline]
    fn bit(&self, key: &[u8]) -> usize {
        let word = |w: Option<&[u8; 8]>| w.map_or(0, |w| u64::from_le_bytes(*w));
        let (head, tail) = match key.len() {
            0..8 => (key.iter().fold(0u64, |v, &b| v << 8 | u64::from(b)), 0),
            _ => (word(key.first_chunk()), word(key.last_chunk())),
        };
        let h = (head ^ tail.rotate_left(29) ^ key.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - self.shift)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_was_added_and_rarely_more() {
        let keys: Vec<String> = (0..500).map(|i| format!("com\0example-{i}")).collect();
        let mut s = Sketch::with_capacity(keys.len());
        for k in &keys {
            s.add(k.as_bytes());
        }
        assert!(keys.iter().all(|k| s.may_hold(k.as_bytes())));
        for short in ["", "a", "net\0x"] {
            s.add(short.as_bytes());
            assert!(s.may_hold(short.as_bytes()));
        }
        let strangers = (0..10_000).filter(|i| s.may_hold(format!("org\0other-{i}").as_bytes())).count();
        assert!(strangers < 1_000, "{strangers} of 10,000 strangers pass");
        assert!(!Sketch::default().may_hold(b"com\0example"));
    }
}
