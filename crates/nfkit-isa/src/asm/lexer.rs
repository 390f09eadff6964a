//! Splitting one source line into tokens with their columns. Both syntaxes
//! share the lexer; comments (`#`, `;`, `//`) end the line.

use super::AsmError;

/// One token of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A name: mnemonic, register, label, symbol (`[A-Za-z_.][A-Za-z0-9_.]*`).
    Ident(String),
    /// An unsigned number (decimal or `0x` hex); signs are separate tokens.
    Num { value: u64, hex: bool },
    /// An operator or punctuation mark.
    Punct(&'static str),
}

/// A token and its 1-based column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub col: usize,
}

/// Operators, longest first so the longest match wins.
const PUNCTS: &[&str] = &[
    "<<=", ">>=", "==", "!=", ">=", "<=", "+=", "-=", "*=", "/=", "|=", "&=", "%=", "^=", "<<",
    ">>", "=", "+", "-", "*", "/", "|", "&", "%", "^", "<", ">", "(", ")", "[", "]", ",", ":",
];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '.'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// The part of `line` before any comment.
pub(crate) fn strip_comment(line: &str) -> &str {
    let mut end = line.len();
    for pat in ["#", ";", "//"] {
        if let Some(i) = line.find(pat) {
            end = end.min(i);
        }
    }
    line.get(..end).unwrap_or(line)
}

/// Tokenizes one line (comments removed first). `line_no` is 1-based.
pub(crate) fn tokenize(line: &str, line_no: usize) -> Result<Vec<Token>, AsmError> {
    let text = strip_comment(line);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if is_ident_start(c) {
            let start = i;
            while chars.get(i).is_some_and(|&c| is_ident_char(c)) {
                i += 1;
            }
            let s: String = chars.get(start..i).unwrap_or_default().iter().collect();
            out.push(Token {
                tok: Tok::Ident(s),
                col,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == '_')
            {
                i += 1;
            }
            let s: String = chars.get(start..i).unwrap_or_default().iter().collect();
            let (digits, radix, hex) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(h) => (h, 16, true),
                None => (s.as_str(), 10, false),
            };
            let value = u64::from_str_radix(digits, radix).map_err(|e| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow => "out of range",
                    _ => "not a number",
                };
                AsmError::new(line_no, col, format!("Invalid number `{s}`: {why}"))
            })?;
            out.push(Token {
                tok: Tok::Num { value, hex },
                col,
            });
        } else {
            let rest: String = chars
                .get(i..(i + 3).min(chars.len()))
                .unwrap_or_default()
                .iter()
                .collect();
            let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) else {
                return Err(AsmError::new(
                    line_no,
                    col,
                    format!("Invalid character `{c}`"),
                ));
            };
            i += p.len();
            out.push(Token {
                tok: Tok::Punct(p),
                col,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_columns() {
        let t = tokenize("  r0 s>>= 0x1f # c", 1).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].col, 3);
        assert_eq!(t[1].tok, Tok::Ident("s".into()));
        assert_eq!(t[2].tok, Tok::Punct(">>="));
        assert_eq!(
            t[3].tok,
            Tok::Num {
                value: 31,
                hex: true
            }
        );
    }

    #[test]
    fn bad_number_and_char() {
        assert_eq!(tokenize("mov 12x", 3).unwrap_err().col, 5);
        assert_eq!(
            tokenize("a $", 2).unwrap_err().to_string(),
            "line 2:3: Invalid character `$`"
        );
    }
}
