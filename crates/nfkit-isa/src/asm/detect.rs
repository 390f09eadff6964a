//! Which syntax a line is written in. `exit`, `call N`, `call name`,
//! labels and blank lines belong to both; everything else to one.

use super::cursor::looks_like_reg;
use super::lexer::{tokenize, Tok, Token};
use super::{conformance, Syntax};

/// The syntax of one line's tokens (labels already removed), if only one
/// syntax has it.
pub(crate) fn classify(toks: &[Token]) -> Option<Syntax> {
    let first = &toks.first()?.tok;
    let second = toks.get(1).map(|t| &t.tok);
    // `%r1` only exists in the conformance syntax.
    if toks.windows(2).any(|w| {
        matches!(&w[0].tok, Tok::Punct("%"))
            && matches!(&w[1].tok, Tok::Ident(s) if looks_like_reg(s))
    }) {
        return Some(Syntax::Conformance);
    }
    match first {
        Tok::Punct("*") => Some(Syntax::Llvm),
        Tok::Ident(s) => match s.as_str() {
            "exit" | "call" | "may_goto" => None,
            "lock" => match second {
                Some(Tok::Punct("*")) => Some(Syntax::Llvm),
                Some(Tok::Ident(_)) | None => Some(Syntax::Conformance),
                _ => None,
            },
            "if" | "goto" | "gotol" | "callx" => Some(Syntax::Llvm),
            s if looks_like_reg(s) => Some(Syntax::Llvm),
            s if conformance::is_mnemonic(s) => Some(Syntax::Conformance),
            _ => None,
        },
        _ => None,
    }
}

/// Strips `name:` label definitions from the front of a line.
pub(crate) fn split_labels(toks: &[Token]) -> (Vec<(String, usize)>, &[Token]) {
    let mut labels = Vec::new();
    let mut rest = toks;
    while let [Token {
        tok: Tok::Ident(name),
        col,
    }, Token {
        tok: Tok::Punct(":"),
        ..
    }, tail @ ..] = rest
    {
        labels.push((name.clone(), *col));
        rest = tail;
    }
    (labels, rest)
}

/// The syntax of the first line that tells.
pub(crate) fn detect(text: &str) -> Option<Syntax> {
    text.lines().enumerate().find_map(|(i, line)| {
        let toks = tokenize(line, i + 1).ok()?;
        classify(split_labels(&toks).1)
    })
}
