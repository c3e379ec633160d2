//! UCI syntax: the tokens of `/etc/config/*` files, with no meaning attached.
//!
//! Owns quoting, comments and the `package` / `config` / `option` / `list`
//! statements. Every section and value keeps the line it came from so that
//! the typed layer can report `file:line` for a bad value.

use std::fmt;

/// One `config TYPE ['NAME']` block with the statements under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Section type, e.g. `hydradns`, `blocklist`.
    pub kind: String,
    /// Section name when given (`config hydradns 'main'`); anonymous otherwise.
    pub name: Option<String>,
    /// Line of the `config` statement, for messages about the whole section.
    pub line: usize,
    /// `option` and `list` statements in file order.
    pub values: Vec<Value>,
}

/// One `option` or `list` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// Option name.
    pub key: String,
    /// Unquoted value.
    pub value: String,
    /// `list` statements may repeat; `option` ones replace.
    pub is_list: bool,
    /// Source line, for `file:line` errors.
    pub line: usize,
}

/// A syntax error, reported as `file:line: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// File the text came from.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for SyntaxError {}

/// A parsed file: its sections, and text that uci itself silently skips,
/// as `(line, what)`, for the typed layer to warn about.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Sections in libuci's order.
    pub sections: Vec<Section>,
    /// Findings that are not errors.
    pub warnings: Vec<(usize, String)>,
}

/// C `isspace` in the "C" locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// libuci's name rules: section and option names are letters, digits and
/// `_`; package names may also hold `-`; section types any printable ASCII.
fn valid(s: &str, kind: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || b == b'_'
                || (kind == "package" && b == b'-')
                || (kind == "type" && (33..=126).contains(&b))
        })
}

/// Reads UCI text the way libuci's parser does, quirks included, so that a
/// file means the same to HydraDNS as to `uci`, LuCI and the init script.
/// libuci works on one line at a time and pulls in more lines only to finish
/// a quoted string or after a backslash at the end of a line; `#` outside
/// quotes ends the line; `;` separates statements, but a `;` straight after
/// an unquoted, unescaped word ends the whole line (libuci writes the word's
/// terminator over it). tests/openwrt/uci-compat.sh holds this against libuci.
struct Lexer<'a> {
    /// Input not read yet.
    rest: &'a str,
    /// The line being parsed, with any lines pulled in.
    buf: Vec<u8>,
    pos: usize,
    /// Where each physical line starts in `buf`, and its number.
    marks: Vec<(usize, usize)>,
    next_line: usize,
    /// The first quoted string of this logical line that ran on over a line
    /// end: its opening line and the line it closed on. When the file then
    /// ends inside a quote, this one is most likely the quote left open
    /// (its closing quote was the next value's opening one).
    spanned: Option<(usize, usize)>,
}

/// A syntax error before it is given a file name: line and message.
type Fault = (usize, String);

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Lexer { rest: text, buf: Vec::new(), pos: 0, marks: Vec::new(), next_line: 1, spanned: None }
    }

    /// Replaces what `buf` holds from `at` on with the next physical line;
    /// false at the end of the input.
    fn pull(&mut self, at: usize) -> bool {
        self.buf.truncate(at);
        self.marks.retain(|&(offset, _)| offset < at);
        if self.rest.is_empty() {
            return false;
        }
        let end = self.rest.find('\n').map_or(self.rest.len(), |i| i + 1);
        let (line, rest) = self.rest.split_at(end);
        self.rest = rest;
        self.marks.push((at, self.next_line));
        self.next_line += 1;
        self.buf.extend_from_slice(line.as_bytes());
        true
    }

    fn next_logical_line(&mut self) -> bool {
        self.pos = 0;
        self.marks.clear();
        self.spanned = None;
        self.pull(0)
    }

    fn line_at(&self, offset: usize) -> usize {
        self.marks.iter().rev().find(|m| m.0 <= offset).map_or(self.next_line.saturating_sub(1), |m| m.1)
    }

    /// The current byte; 0 past the end, as in libuci's C string.
    fn cur(&self) -> u8 {
        self.buf.get(self.pos).copied().unwrap_or(0)
    }

    fn skip_space(&mut self) {
        while self.cur() != 0 && is_space(self.cur()) {
            self.pos += 1;
        }
    }

    /// After a backslash: false when it ended the line (the next line is
    /// joined on and nothing is taken), true when the byte after it is to be
    /// taken literally.
    fn backslash(&mut self) -> bool {
        self.pos += 1;
        let c = self.cur();
        let crlf_end = c == b'\r' && self.buf.get(self.pos + 1) == Some(&b'\n') && self.pos + 2 == self.buf.len();
        if c == 0 || c == b'\n' || crlf_end {
            self.pull(self.pos);
            return false;
        }
        true
    }

    fn take(&mut self, out: &mut Vec<u8>) {
        out.push(self.cur());
        self.pos += 1;
    }

    /// A quoted string; the cursor is on the opening quote.
    fn quoted(&mut self, out: &mut Vec<u8>) -> Result<(), Fault> {
        let quote = self.cur();
        let opened = self.line_at(self.pos);
        self.pos += 1;
        loop {
            match self.cur() {
                c if c == quote => {
                    let closed = self.line_at(self.pos);
                    if closed > opened && self.spanned.is_none() {
                        self.spanned = Some((opened, closed));
                    }
                    self.pos += 1;
                    return Ok(());
                }
                // A quoted string runs on over line ends.
                0 => {
                    if !self.pull(self.pos) || self.cur() == 0 {
                        let which = if quote == b'"' { "double" } else { "single" };
                        return Err(match self.spanned {
                            Some((line, closed)) => (
                                line,
                                format!(
                                    "unterminated quote: the one opened on this line runs on to line {closed}, \
                                     and the file ends inside the {which} quote opened there"
                                ),
                            ),
                            None => (opened, format!("unterminated {which} quote")),
                        });
                    }
                }
                b'\\' if quote == b'"' => {
                    if self.backslash() {
                        self.take(out);
                    }
                }
                _ => self.take(out),
            }
        }
    }

    /// One word: quoted and unquoted pieces run together until whitespace.
    /// Returns the word and whether a statement after it was lost.
    fn word(&mut self) -> Result<(Vec<u8>, bool), Fault> {
        let start = self.pos;
        let mut out = Vec::new();
        loop {
            match self.cur() {
                b'\'' | b'"' => self.quoted(&mut out)?,
                b'#' => {
                    self.buf.truncate(self.pos);
                    break;
                }
                0 => break,
                b';' => {
                    // libuci terminates the word in place; with nothing
                    // dropped from it (no quotes, no escapes) that lands on
                    // the ';' and the rest of the line is gone.
                    let mut lost = false;
                    if start + out.len() == self.pos {
                        let rest = self.buf[self.pos + 1..].iter().find(|&&c| !is_space(c));
                        lost = rest.is_some_and(|&c| c != b'#');
                        self.buf.truncate(self.pos);
                    }
                    return Ok((out, lost));
                }
                b'\\' => {
                    if self.backslash() {
                        self.take(&mut out);
                    }
                }
                _ => self.take(&mut out),
            }
            if self.cur() == 0 || is_space(self.cur()) {
                break;
            }
        }
        if self.cur() != 0 {
            self.pos += 1;
        }
        Ok((out, false))
    }

    /// The next argument of a statement: empty at the end of the statement.
    fn arg(&mut self) -> Result<(String, bool), Fault> {
        self.skip_space();
        if self.cur() == b';' {
            self.pos += 1;
            return Ok((String::new(), false));
        }
        let (bytes, swallowed) = self.word()?;
        Ok((String::from_utf8_lossy(&bytes).into_owned(), swallowed))
    }
}

/// Parses a whole UCI file. `file` is only used in error messages.
pub fn parse(file: &str, text: &str) -> Result<Parsed, SyntaxError> {
    parse_inner(text).map_err(|(line, message)| SyntaxError { file: file.to_string(), line, message })
}

fn parse_inner(text: &str) -> Result<Parsed, Fault> {
    let mut out = Parsed::default();
    // Index of the section the following options belong to.
    let mut current: Option<usize> = None;
    let mut lx = Lexer::new(text);
    while lx.next_logical_line() {
        lx.skip_space();
        loop {
            // The statement keyword ends at a space or tab only.
            while matches!(lx.cur(), b' ' | b'\t') {
                lx.pos += 1;
            }
            if lx.cur() == 0 {
                break;
            }
            let start = lx.pos;
            while !matches!(lx.cur(), 0 | b' ' | b'\t') {
                lx.pos += 1;
            }
            let line = lx.line_at(start);
            let raw = String::from_utf8_lossy(&lx.buf[start..lx.pos]).into_owned();
            if raw.starts_with('#') {
                break;
            }
            let keyword = match raw.as_str() {
                "p" | "package" => "package",
                "c" | "config" => "config",
                "o" | "option" => "option",
                "l" | "list" => "list",
                other => {
                    let word = other.trim_end_matches(|c: char| c.is_ascii_whitespace());
                    return Err((
                        line,
                        match word {
                            "" => "a ';' must be followed by a statement on the same line".to_string(),
                            "package" | "config" | "option" | "list" => format!("'{word}' needs arguments"),
                            _ => format!("unknown statement '{word}'"),
                        },
                    ));
                }
            };
            if lx.cur() == 0 {
                return Err((line, format!("'{keyword}' needs arguments")));
            }
            lx.pos += 1;
            let err = |message: String| (line, message);
            let mut swallowed = false;
            let mut arg = |lx: &mut Lexer| -> Result<String, Fault> {
                let (a, s) = lx.arg()?;
                swallowed |= s;
                Ok(a)
            };
            match keyword {
                "package" => {
                    let name = arg(&mut lx)?;
                    if name.is_empty() {
                        return Err(err("'package' needs a name".into()));
                    }
                    if !valid(&name, "package") {
                        return Err(err(format!("invalid package name '{name}'")));
                    }
                }
                "config" => {
                    let kind = arg(&mut lx)?;
                    if kind.is_empty() {
                        return Err(err("'config' needs a section type".into()));
                    }
                    if !valid(&kind, "type") {
                        return Err(err(format!("invalid section type '{kind}'")));
                    }
                    let name = arg(&mut lx)?;
                    if !name.is_empty() && !valid(&name, "name") {
                        // libuci refuses `-` in a name, but the issue that
                        // specified groups and schedules wrote 'school-nights':
                        // read it, and say what OpenWrt's own tools will do.
                        if !valid(&name, "package") {
                            return Err(err(format!("invalid section name '{name}' (letters, digits and _ only)")));
                        }
                        out.warnings.push((
                            line,
                            format!(
                                "section name '{name}': OpenWrt's uci tools (uci, LuCI) refuse '-' in section names; \
                                 hydradns reads it, but use '{}' to keep the file editable",
                                name.replace('-', "_")
                            ),
                        ));
                    }
                    let sections = &mut out.sections;
                    // A name seen before reopens that section, in its place.
                    match sections.iter().position(|s| !name.is_empty() && s.name.as_deref() == Some(name.as_str())) {
                        Some(i) if sections[i].kind != kind => {
                            return Err(err(format!(
                                "section '{name}' was declared with type '{}' on line {}",
                                sections[i].kind, sections[i].line
                            )));
                        }
                        Some(i) => current = Some(i),
                        None => {
                            let name = (!name.is_empty()).then_some(name);
                            sections.push(Section { kind, name, line, values: Vec::new() });
                            current = Some(sections.len() - 1);
                        }
                    }
                }
                _ => {
                    let Some(section) = current.map(|i| &mut out.sections[i]) else {
                        return Err(err(format!("'{keyword}' before any 'config' section")));
                    };
                    let key = arg(&mut lx)?;
                    if key.is_empty() {
                        return Err(err(format!("'{keyword}' needs a name")));
                    }
                    if !valid(&key, "name") {
                        return Err(err(format!("invalid option name '{key}' (letters, digits and _ only)")));
                    }
                    let value = arg(&mut lx)?;
                    apply(section, keyword == "list", key, value, line);
                }
            }
            if !arg(&mut lx)?.is_empty() {
                return Err(err(format!("too many words in this '{keyword}' statement (quote values with spaces)")));
            }
            if swallowed {
                out.warnings.push((
                    line,
                    "the rest of this line after ';' is ignored (uci ignores it too): put a space before the ';'"
                        .into(),
                ));
            }
        }
    }
    Ok(out)
}

/// An `option` or `list` statement's effect, as libuci has it: an empty
/// option changes nothing; an option replaces the key (moving it last)
/// unless the value is the same; a list after an option makes a list of both.
fn apply(section: &mut Section, is_list: bool, key: String, value: String, line: usize) {
    let existing: Vec<usize> = (0..section.values.len()).filter(|&i| section.values[i].key == key).collect();
    if !is_list {
        if value.is_empty() {
            return;
        }
        if let [i] = existing[..]
            && !section.values[i].is_list
            && section.values[i].value == value
        {
            return;
        }
        section.values.retain(|v| v.key != key);
        section.values.push(Value { key, value, is_list: false, line });
        return;
    }
    if let [i] = existing[..]
        && !section.values[i].is_list
    {
        let mut first = section.values.remove(i);
        first.is_list = true;
        section.values.push(first);
    }
    section.values.push(Value { key, value, is_list: true, line });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str) -> Vec<Section> {
        parse("f", text).unwrap().sections
    }

    /// `key=value` pairs of the first section, lists joined with `|`.
    fn values(text: &str) -> Vec<String> {
        let s = &sections(text)[0];
        let mut keys: Vec<&str> = Vec::new();
        for v in &s.values {
            if !keys.contains(&v.key.as_str()) {
                keys.push(&v.key);
            }
        }
        keys.iter()
            .map(|k| {
                let vals: Vec<&str> = s.values.iter().filter(|v| v.key == *k).map(|v| v.value.as_str()).collect();
                format!("{k}={}", vals.join("|"))
            })
            .collect()
    }

    #[test]
    fn parses_sections_options_lists_and_comments() {
        let text = "\
# leading comment
package hydradns

config hydradns 'main'
\tlist listen '127.0.0.1:5353'   # trailing comment
\tlist listen \"[::1]:5353\"
\toption cache_size 4096
config blocklist
\toption name 'my ads'
\tlist domain 'a.example'
";
        let sections = sections(text);
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].kind, "hydradns");
        assert_eq!(sections[0].name.as_deref(), Some("main"));
        assert_eq!(sections[0].line, 4);
        let v = &sections[0].values;
        assert_eq!(v[0].value, "127.0.0.1:5353");
        assert!(v[0].is_list);
        assert_eq!(v[0].line, 5);
        assert_eq!(v[1].value, "[::1]:5353");
        assert_eq!(v[2].key, "cache_size");
        assert!(!v[2].is_list);
        assert_eq!(sections[1].name, None);
        assert_eq!(sections[1].values[0].value, "my ads");
    }

    #[test]
    fn quoting_rules() {
        let v = |value: &str| values(&format!("config t\n\toption a {value}\n"));
        assert_eq!(v(r#"'b c'"#), ["a=b c"]);
        assert_eq!(v(r#""d\"e\\f""#), ["a=d\"e\\f"]);
        assert_eq!(v(r#"f\ g"#), ["a=f g"]);
        assert_eq!(v(r#"x'a'"b"c"#), ["a=xabc"]);
        assert_eq!(v(r#"'it''s'"#), ["a=its"]);
        assert_eq!(v(r#"'no \escape'"#), ["a=no \\escape"]);
        assert_eq!(v("'x#y'"), ["a=x#y"]);
        assert_eq!(v("'one\ntwo'"), ["a=one\ntwo"], "quotes span lines");
        assert_eq!(v("lo\\\nng"), ["a=long"], "a backslash joins lines");
        assert_eq!(v("\"lo\\\r\nng\""), ["a=long"]);
        assert!(values("config t\n\toption a x#y z\n\toption b 1\n").contains(&"a=x".to_string()), "# ends the line");
        assert!(values("  # all comment\nconfig t\n\toption a 1\n").contains(&"a=1".to_string()));
    }

    #[test]
    fn semicolons_as_libuci_reads_them() {
        assert_eq!(values("config t\n\toption a 1 ;option b 2\n"), ["a=1", "b=2"]);
        assert_eq!(values("config t\n\toption a 'x';option b 2\n"), ["a=x", "b=2"]);
        // Straight after a plain word the ';' ends the line, and we say so.
        let p = parse("f", "config t\n\toption a 1; option b 2\n").unwrap();
        assert_eq!(p.sections[0].values.len(), 1);
        assert_eq!(p.warnings.len(), 1);
        assert_eq!(p.warnings[0].0, 2);
        assert!(parse("f", "config t\n\toption a 1 ;\n").is_err(), "a newline after ';' is a statement to libuci");
    }

    #[test]
    fn libuci_semantics() {
        let s = sections("config t 'n'\n\toption a 1\nconfig t\nconfig t 'n'\n\toption b 2\n");
        assert_eq!(s.len(), 2, "a repeated name reopens the section");
        assert_eq!(s[0].values.len(), 2);
        assert!(parse("f", "config t 'n'\nconfig u 'n'\n").is_err(), "but not as another type");
        assert_eq!(values("config t\n\toption a 1\n\toption a ''\n"), ["a=1"], "an empty option changes nothing");
        assert_eq!(values("config t\n\toption a 1\n\toption b 2\n\toption a 3\n"), ["b=2", "a=3"]);
        assert_eq!(values("config t\n\toption a 1\n\toption b 2\n\toption a 1\n"), ["a=1", "b=2"]);
        assert_eq!(values("config t\n\toption a 1\n\toption b 2\n\tlist a 3\n"), ["b=2", "a=1|3"]);
        assert_eq!(values("config t\n\tlist a 1\n\toption a 3\n"), ["a=3"]);
        assert_eq!(values("config t\n\tlist a ''\n\tlist a x\n"), ["a=|x"]);
        assert_eq!(values("config t\n\to a 1\n\tl b 2\n"), ["a=1", "b=2"], "abbreviated keywords");
        assert!(parse("f", "config my-type\n").is_ok(), "types may hold '-'");
        let dashed = parse("f", "config t 'my-name'\n").unwrap();
        assert!(dashed.warnings[0].1.contains("refuse '-'"), "names may not in libuci: read, with a warning");
        assert!(parse("f", "config t 'my.name'\n").is_err());
        assert!(parse("f", "config t\n\toption my-opt x\n").is_err());
        assert!(
            parse("f", "config t\n\toption a 'x\u{1}'\n").is_ok(),
            "control characters are the typed layer's business"
        );
        let s = sections("config t\n\toption a 'multi\nline'\n\toption b 2\n");
        assert_eq!(s[0].values[0].value, "multi\nline");
        assert_eq!(s[0].values[1].line, 4, "lines counted inside quotes");
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("/etc/config/hydradns", "config a\n\toption x y z\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/config/hydradns:2: too many words in this 'option' statement (quote values with spaces)"
        );
        let e = parse("f", "option x y\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse("f", "\n\nbogus x\n").unwrap_err();
        assert_eq!(e.to_string(), "f:3: unknown statement 'bogus'");
        let e = parse("f", "config a 'b c'\n").unwrap_err();
        assert!(e.message.contains("section name"));
        let e = parse("f", "config a b c\n").unwrap_err();
        assert!(e.message.contains("too many words"));
        let e = parse("f", "config t\n\toption a 'open\n\toption b 2\n").unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "unterminated single quote"), "where the quote opened");
        // The quote left open on line 2 closes at the next value's opening
        // quote on line 3, whose own quote then never closes: line 2 is the
        // one to fix.
        let e =
            parse("f", "config hydradns 'main'\n\toption cache_size '100\n\tlist upstream '192.0.2.1'\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("runs on to line 3"), "{e}");
        let e = parse("f", "x\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert_eq!(parse("f", "config\n").unwrap_err().message, "'config' needs arguments");
    }
}
