//! Text that came from outside (a server's error, a list's metadata, a
//! catalogue) made safe to store and show: LuCI's pages run as root's
//! session, and one value rendered as HTML there is root on the router
//! (issue 58). The pages render data as text; this is the daemon's half of
//! the defence, so no stored value needs the page to be right.

/// The most characters such a text keeps.
pub const MAX_CHARS: usize = 200;

/// `text` with no control characters and none of `<>&"'` (each replaced
/// by a look-alike that no HTML or shell reads as markup), cut to
/// [`MAX_CHARS`] characters with an ellipsis.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_CHARS * 2));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_CHARS - 1 && text.chars().nth(MAX_CHARS).is_some() {
            out.push('…');
            break;
        }
        out.push(match c {
            '<' => '‹',
            '>' => '›',
            '&' => '+',
            '"' => '”',
            '\'' => '’',
            c if c.is_control() => ' ',
            c => c,
        });
    }
    out
}

/// Whether `text` is already what [`plain`] makes of it.
pub fn is_plain(text: &str) -> bool {
    text.chars().count() <= MAX_CHARS && !text.chars().any(|c| c.is_control() || "<>&\"'".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_quotes_and_control_characters_do_not_survive() {
        let hostile = "HTTP 302 to /<img src=x onerror=\"alert('x')\">&amp;\r\n\u{1b}[31m";
        let p = plain(hostile);
        assert!(is_plain(&p), "{p}");
        assert_eq!(p, "HTTP 302 to /‹img src=x onerror=”alert(’x’)”›+amp;   [31m");
        assert_eq!(
            plain("list ads: cannot read /etc/x: Permission denied"),
            "list ads: cannot read /etc/x: Permission denied"
        );
    }

    #[test]
    fn long_texts_are_cut_to_the_limit() {
        let long = "é".repeat(1000);
        let p = plain(&long);
        assert_eq!(p.chars().count(), MAX_CHARS);
        assert!(p.ends_with('…'));
        let exact = "a".repeat(MAX_CHARS);
        assert_eq!(plain(&exact), exact, "at the limit nothing is cut");
        assert!(is_plain(&exact) && !is_plain(&format!("{exact}a")));
    }
}
