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

/// Parses a whole UCI file. `file` is only used in error messages.
pub fn parse(file: &str, text: &str) -> Result<Vec<Section>, SyntaxError> {
    let mut sections: Vec<Section> = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let err = |message: String| SyntaxError { file: file.to_string(), line, message };
        let tokens = tokenize(raw).map_err(|m| err(m.to_string()))?;
        let Some((first, rest)) = tokens.split_first() else {
            continue;
        };
        match first.as_str() {
            "package" => {
                if rest.len() != 1 {
                    return Err(err("'package' takes one name".into()));
                }
            }
            "config" => {
                let (kind, name) = match rest {
                    [kind] => (kind, None),
                    [kind, name] => (kind, Some(name)),
                    _ => return Err(err("'config' takes a type and an optional name".into())),
                };
                if !is_identifier(kind) {
                    return Err(err(format!("invalid section type '{kind}'")));
                }
                if let Some(name) = name
                    && !is_identifier(name)
                {
                    return Err(err(format!("invalid section name '{name}'")));
                }
                sections.push(Section { kind: kind.clone(), name: name.cloned(), line, values: Vec::new() });
            }
            keyword @ ("option" | "list") => {
                let [key, value] = rest else {
                    return Err(err(format!("'{keyword}' takes a name and one value")));
                };
                if !is_identifier(key) {
                    return Err(err(format!("invalid option name '{key}'")));
                }
                let Some(section) = sections.last_mut() else {
                    return Err(err(format!("'{keyword}' before any 'config' section")));
                };
                section.values.push(Value { key: key.clone(), value: value.clone(), is_list: keyword == "list", line });
            }
            other => return Err(err(format!("unknown statement '{other}'"))),
        }
    }
    Ok(sections)
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Splits one line into words the way UCI does: whitespace separates words,
/// `'…'` quotes literally, `"…"` quotes with backslash escapes, a backslash
/// escapes the next character outside quotes, and `#` at the start of a word
/// comments out the rest of the line. Adjacent quoted parts join one word.
fn tokenize(line: &str) -> Result<Vec<String>, &'static str> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(tokens),
            Some(_) => {}
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '\'' => loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated single quote"),
                    }
                },
                '"' => loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => return Err("unterminated double quote"),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated double quote"),
                    }
                },
                '\\' => match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err("backslash at end of line"),
                },
                c => word.push(c),
            }
        }
        tokens.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let sections = parse("f", text).unwrap();
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
        assert_eq!(tokenize(r#"a 'b c' "d\"e" f\ g"#).unwrap(), ["a", "b c", "d\"e", "f g"]);
        assert_eq!(tokenize("x'a'\"b\"c").unwrap(), ["xabc"]);
        assert_eq!(tokenize("option a 'it''s'").unwrap(), ["option", "a", "its"]);
        assert_eq!(tokenize("  # all comment").unwrap(), Vec::<String>::new());
        assert_eq!(tokenize("option a 'x#y'").unwrap(), ["option", "a", "x#y"]);
        assert!(tokenize("option a 'open").is_err());
        assert!(tokenize("option a \"open").is_err());
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("/etc/config/hydradns", "config a\n\toption x\n").unwrap_err();
        assert_eq!(e.to_string(), "/etc/config/hydradns:2: 'option' takes a name and one value");
        let e = parse("f", "option x y\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse("f", "\n\nbogus x\n").unwrap_err();
        assert_eq!(e.to_string(), "f:3: unknown statement 'bogus'");
        let e = parse("f", "config a 'b c'\n").unwrap_err();
        assert!(e.message.contains("section name"));
    }
}
