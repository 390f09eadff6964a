//! Pattern files: one regular expression a line; blank lines and lines
//! whose first non-blank character is `#` are skipped. A pattern keeps
//! its spaces except a trailing `\r` (files written on Windows), so
//! `a b` and ` a` mean what they say.

/// The patterns of a pattern file's text, each with its line number
/// (from 1).
pub fn parse(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            let t = l.trim_start();
            (!t.is_empty() && !t.starts_with('#')).then(|| (i + 1, l.to_string()))
        })
        .collect()
}
