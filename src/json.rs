//! A small JSON reader for files from outside: a download, or a file a
//! power cut or an owner may have cut short. nanoserde's derive panics
//! (an abort in the release build) when its input ends inside a member it
//! skips; [`is_whole`] is asked before it reads such a file, and a
//! services.json is read with [`Json`] alone.

/// A reader of just enough JSON for the files the gateway reads but did not
/// necessarily write whole (a downloaded services.json, a list's `.meta`): any JSON reads (members it does not need are skipped, whatever
/// their type), nesting is bounded ([`MAX_DEPTH`]) so a hostile file cannot
/// exhaust the stack, and anything else is `None`. nanoserde's derive,
/// tried first (0.9 KB smaller on aarch64), panics (`unimplemented!`, an
/// abort in the release build) when input ends inside a member it skips:
/// a truncated download would have taken the gateway down.
pub struct Json<'a> {
    b: &'a [u8],
    i: usize,
}

/// Deepest nesting skipped: a hostile file cannot exhaust the stack.
const MAX_DEPTH: u32 = 32;

impl<'a> Json<'a> {
    /// A reader at the start of `text`.
    pub fn new(text: &'a str) -> Json<'a> {
        Json { b: text.as_bytes(), i: 0 }
    }

    /// How far it has read, in bytes.
    pub fn offset(&self) -> usize {
        self.i
    }

    /// Whether the rest is only whitespace.
    pub fn at_end(&mut self) -> bool {
        self.ws();
        self.i == self.b.len()
    }

    pub fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    /// Whether the next byte after whitespace is `c`, consumed if so.
    pub fn eat(&mut self, c: u8) -> bool {
        self.ws();
        let hit = self.b.get(self.i) == Some(&c);
        self.i += usize::from(hit);
        hit
    }

    #[inline(never)]
    pub fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') {
            return None;
        }
        let mut out = Vec::new();
        loop {
            let c = *self.b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.b.get(self.i)?;
                    self.i += 1;
                    let ch = match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'u' => {
                            let hex = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
                            self.i += 4;
                            // Surrogate halves (an emoji in a name) become U+FFFD: only ids and domains matter.
                            char::from_u32(u32::from_str_radix(hex, 16).ok()?).unwrap_or('\u{fffd}')
                        }
                        other => char::from(other),
                    };
                    out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(c),
            }
        }
    }

    /// A whole number that fits a `u64`.
    pub fn number(&mut self) -> Option<u64> {
        self.ws();
        let start = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        std::str::from_utf8(self.b.get(start..self.i)?).ok()?.parse().ok()
    }

    /// A string, or `null` (`Some(None)`).
    pub fn string_or_null(&mut self) -> Option<Option<String>> {
        self.ws();
        if self.b.get(self.i..).is_some_and(|rest| rest.starts_with(b"null")) {
            self.i += 4;
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Skips one value of any type.
    pub fn skip(&mut self, depth: u32) -> Option<()> {
        self.ws();
        match *self.b.get(self.i)? {
            b'"' => self.string().map(drop),
            b'{' if depth < MAX_DEPTH => self.object(&mut |j, _| j.skip(depth + 1)),
            b'[' if depth < MAX_DEPTH => self.array(&mut |j| j.skip(depth + 1)),
            b'{' | b'[' => None,
            _ => {
                let start = self.i;
                while self.b.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || b"+-.".contains(c)) {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }

    /// An object: `member` is given each key and reads its value.
    // `dyn`, not generic: one copy of each, not one per caller (this is cold).
    #[inline(never)]
    pub fn object(&mut self, member: &mut dyn FnMut(&mut Self, String) -> Option<()>) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if !self.eat(b':') {
                return None;
            }
            member(self, key)?;
            if self.eat(b'}') {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    /// An array: `element` reads each value.
    #[inline(never)]
    pub fn array(&mut self, element: &mut dyn FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat(b'[') {
            return None;
        }
        if self.eat(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            if self.eat(b']') {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }
}

/// Whether `text` is one whole JSON value (nested at most [`MAX_DEPTH`]
/// deep) and nothing after it: what nanoserde may be given without panicking.
pub fn is_whole(text: &str) -> bool {
    let mut j = Json::new(text);
    j.skip(0).is_some() && j.at_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_nulls() {
        let mut j = Json::new(" 1800000000 , null \"x\" 18446744073709551616 nul");
        assert_eq!(j.number(), Some(1_800_000_000));
        assert!(j.eat(b','));
        assert_eq!(j.string_or_null(), Some(None));
        assert_eq!(j.string_or_null(), Some(Some("x".into())));
        assert_eq!(j.number(), None, "past u64");
        assert_eq!(Json::new("nul").string_or_null(), None);
        assert_eq!(Json::new("-1").number(), None);
    }

    #[test]
    fn whole_values_only() {
        let text = r#"{"url":"https://x.example/l","unknown":{"a":[1,2,"x\"y"],"b":null},"n":-1.5e3}"#;
        assert!(is_whole(text));
        for n in 0..text.len() {
            assert!(!is_whole(&text[..n]), "{}", &text[..n]);
        }
        assert!(!is_whole(&format!("{text} x")));
        assert!(!is_whole(&"[".repeat(100)));
    }
}
