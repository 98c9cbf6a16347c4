//! Text from data, made safe to show a person: the one escaping function every human output of
//! both binaries applies where data enters it (kharonctl's tables, `route`, `status`, errors;
//! every field of every kharond log line), and the cap on a table cell's length.
//!
//! Data here means anything kharon did not write itself: inventory values (a cluster's id, display
//! name and facts, some of them reported by the cluster itself), host names a client sent, error
//! texts of servers and of the operating system. Printed raw, a value could move the cursor,
//! recolour or retitle the terminal, clear the screen, rewrite the line above with a carriage
//! return, or start a new, real-looking line in a log.
//!
//! Escaped visibly, so that the value can still be read and reported:
//! - C0 controls U+0000–U+001F and DEL U+007F: `\n`, `\r`, `\t`, else `\x1b` style;
//! - C1 controls U+0080–U+009F (a UTF-8 terminal takes U+009B as CSI): `\u{9b}` style;
//! - the Unicode line and paragraph separators and the bidirectional marks, embeddings, overrides
//!   and isolates (U+2028, U+2029, U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which
//!   break or reorder a line on screen without being controls.
//!
//! Everything else, letters of any script included, passes unchanged; a backslash too (a value
//! that contains `\n` literally reads the same as one that contained a newline, which is harmless:
//! neither starts a line). Both functions take linear time in their input, and [`cap`] bounds what
//! a table has to lay out, however large a value is.

use std::borrow::Cow;
use std::fmt;

/// The most characters a table cell shows of one value; the rest is cut and replaced by `…`.
/// More than any DNS name (253), so a host name or a suffix is never cut.
pub const MAX_CELL: usize = 256;

/// Whether `c` is escaped by [`escape`].
pub fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every character [`needs_escape`] names written as a visible escape; borrowed when
/// there is none (the common case).
pub fn escape(text: &str) -> Cow<'_, str> {
    if text.contains(needs_escape) { Cow::Owned(Escaped(text).to_string()) } else { Cow::Borrowed(text) }
}

fn push_escaped(out: &mut impl fmt::Write, c: char) -> fmt::Result {
    match c {
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        c if u32::from(c) < 0x80 => write!(out, "\\x{:02x}", u32::from(c)),
        c => write!(out, "\\u{{{:x}}}", u32::from(c)),
    }
}

/// The first `max_chars` characters of `text`, followed by `…` when there were more; borrowed
/// when `text` is short enough. Counting stops at `max_chars`, so a 10 MB value costs no more
/// than a short one.
pub fn cap(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// A value as a table cell shows it: cut at [`MAX_CELL`] characters, then escaped.
pub fn cell(text: &str) -> String {
    escape(&cap(text, MAX_CELL)).into_owned()
}

/// Formats as [`escape`] would return it, without an intermediate string: for `format!` and
/// `println!` arguments, `Escaped(&value)`.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(needs_escape) {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or('\u{fffd}');
            push_escaped(f, c)?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// A writer that escapes everything written through it as [`Escaped`] does: for formatting
/// arguments straight into an output (kharond's log lines) without an intermediate string.
pub struct EscapingWriter<W>(pub W);

impl<W: fmt::Write> fmt::Write for EscapingWriter<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write!(self.0, "{}", Escaped(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_visibly_and_text_passes() {
        assert_eq!(escape("c-green-1"), Cow::Borrowed("c-green-1"));
        assert!(matches!(escape("Grüne Wiese 緑"), Cow::Borrowed(_)));
        assert_eq!(escape("a\nb\rc\td"), r"a\nb\rc\td");
        assert_eq!(escape("\u{1b}]0;pwned\u{7}\u{1b}[2J"), r"\x1b]0;pwned\x07\x1b[2J");
        assert_eq!(escape("nul\0 del\u{7f}"), r"nul\x00 del\x7f");
        assert_eq!(escape("csi\u{9b}31m next\u{85}"), r"csi\u{9b}31m next\u{85}");
        assert_eq!(
            escape("evil\u{202e}txt.exe \u{2066}x\u{2069} line\u{2028}sep"),
            r"evil\u{202e}txt.exe \u{2066}x\u{2069} line\u{2028}sep"
        );
        // The bare direction marks reorder neutral characters around them too.
        assert_eq!(escape("a\u{200f}b\u{200e}c\u{61c}d"), r"a\u{200f}b\u{200e}c\u{61c}d");
        assert_eq!(escape(r"a\nb"), r"a\nb", "a backslash stays");
        for c in ['\u{a0}', '\u{200b}', '\u{2030}', 'é'] {
            assert!(!needs_escape(c), "{c:?}");
        }
    }

    #[test]
    fn the_display_form_is_the_same() {
        let mut through = String::new();
        fmt::Write::write_fmt(&mut EscapingWriter(&mut through), format_args!("{}|{:?}", "a\nb", "c\u{1b}"))
            .unwrap();
        assert_eq!(through, escape(&format!("{}|{:?}", "a\nb", "c\u{1b}")));
        for text in ["", "plain", "a\nb", "\u{1b}[31mred\u{1b}[0m", "x\u{9b}y\u{202e}z", "ende\r"] {
            assert_eq!(Escaped(text).to_string(), escape(text), "{text:?}");
        }
    }

    #[test]
    fn cells_are_cut_in_linear_time_and_escaped() {
        assert_eq!(cap("short", 10), Cow::Borrowed("short"));
        assert_eq!(cap("exactly10!", 10), Cow::Borrowed("exactly10!"));
        assert_eq!(cap("abcdefghijk", 10), "abcdefghij…");
        assert_eq!(cap("ääääää", 3), "äää…");
        let huge = format!("{}\n", "x".repeat(10 * 1024 * 1024));
        let shown = cell(&huge);
        assert_eq!(shown.chars().count(), MAX_CELL + 1);
        assert!(shown.ends_with('…') && !shown.contains('\n'));
        assert_eq!(cell("a\u{1b}[2Jb"), r"a\x1b[2Jb");
    }
}
