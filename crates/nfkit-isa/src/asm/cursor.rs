//! A cursor over one line's tokens with the small parsing steps both
//! syntaxes share: punctuation, names, registers, and range-checked numbers.

use super::lexer::{Tok, Token};
use super::AsmError;
use crate::insn::Reg;

pub(crate) struct Cursor<'a> {
    toks: &'a [Token],
    pos: usize,
    pub line: usize,
    /// Column just past the last token (for "expected ... at end of line").
    end_col: usize,
}

/// A signed number as written, with whether it was hex.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Number {
    pub value: i128,
    pub hex: bool,
    pub col: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(toks: &'a [Token], line: usize, line_len: usize) -> Self {
        Cursor {
            toks,
            pos: 0,
            line,
            end_col: line_len + 1,
        }
    }

    pub fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    pub fn peek_at(&self, n: usize) -> Option<&'a Tok> {
        self.toks.get(self.pos + n).map(|t| &t.tok)
    }

    /// Column of the current token (or end of line).
    pub fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end_col, |t| t.col)
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub fn bump(&mut self) {
        self.pos += 1;
    }

    pub fn err<T>(&self, msg: impl Into<String>) -> Result<T, AsmError> {
        Err(AsmError::new(self.line, self.col(), msg))
    }

    pub fn err_at<T>(&self, col: usize, msg: impl Into<String>) -> Result<T, AsmError> {
        Err(AsmError::new(self.line, col, msg))
    }

    /// What the current token looks like, for messages.
    pub fn describe(&self) -> String {
        match self.peek() {
            None => "end of line".to_string(),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Num { value, hex: true }) => format!("`0x{value:x}`"),
            Some(Tok::Num { value, .. }) => format!("`{value}`"),
            Some(Tok::Punct(p)) => format!("`{p}`"),
        }
    }

    pub fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    pub fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(q)) if q == s)
    }

    pub fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.pos += 1;
        }
        yes
    }

    pub fn eat_ident(&mut self, s: &str) -> bool {
        let yes = self.is_ident(s);
        if yes {
            self.pos += 1;
        }
        yes
    }

    pub fn expect_punct(&mut self, p: &str) -> Result<(), AsmError> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            self.err(format!(
                "Invalid syntax: expected `{p}`, found {}",
                self.describe()
            ))
        }
    }

    pub fn expect_ident(&mut self, s: &str) -> Result<(), AsmError> {
        if self.eat_ident(s) {
            Ok(())
        } else {
            self.err(format!(
                "Invalid syntax: expected `{s}`, found {}",
                self.describe()
            ))
        }
    }

    /// Any name.
    pub fn ident(&mut self, what: &str) -> Result<(String, usize), AsmError> {
        let col = self.col();
        match self.peek() {
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                Ok((s.clone(), col))
            }
            _ => self.err(format!(
                "Invalid {what}: expected a name, found {}",
                self.describe()
            )),
        }
    }

    pub fn expect_end(&self) -> Result<(), AsmError> {
        if self.at_end() {
            Ok(())
        } else {
            self.err(format!(
                "Invalid syntax: unexpected {} at end of instruction",
                self.describe()
            ))
        }
    }

    /// A number with an optional sign (`+`/`-`) in front.
    pub fn number(&mut self, what: &str) -> Result<Number, AsmError> {
        let col = self.col();
        let neg = if self.eat_punct("-") {
            true
        } else {
            self.eat_punct("+");
            false
        };
        match self.peek() {
            Some(Tok::Num { value, hex }) => {
                self.pos += 1;
                let v = *value as i128;
                Ok(Number {
                    value: if neg { -v } else { v },
                    hex: *hex,
                    col,
                })
            }
            _ => self.err(format!(
                "Invalid {what}: expected a number, found {}",
                self.describe()
            )),
        }
    }

    /// True if a number (possibly signed) starts here.
    pub fn at_number(&self) -> bool {
        match self.peek() {
            Some(Tok::Num { .. }) => true,
            Some(Tok::Punct("-" | "+")) => matches!(self.peek_at(1), Some(Tok::Num { .. })),
            _ => false,
        }
    }

    /// A 32-bit immediate: decimal in the signed range, hex also up to
    /// 0xffffffff (taken as the bit pattern).
    pub fn imm32(&mut self, what: &str) -> Result<i32, AsmError> {
        let n = self.number(what)?;
        imm32_of(n).ok_or(()).or_else(|_| {
            self.err_at(
                n.col,
                format!("Invalid {what}: {} does not fit in 32 bits", show(n)),
            )
        })
    }

    /// A 16-bit signed offset.
    pub fn off16(&mut self, what: &str) -> Result<i16, AsmError> {
        let n = self.number(what)?;
        i16::try_from(n.value).or_else(|_| {
            self.err_at(
                n.col,
                format!("Invalid {what}: {} does not fit in 16 bits", show(n)),
            )
        })
    }

    /// A 64-bit immediate (signed or unsigned range).
    pub fn imm64(&mut self, what: &str) -> Result<u64, AsmError> {
        let n = self.number(what)?;
        if n.value < i64::MIN as i128 || n.value > u64::MAX as i128 {
            return self.err_at(
                n.col,
                format!("Invalid {what}: {} does not fit in 64 bits", show(n)),
            );
        }
        Ok(n.value as u64)
    }

    /// A register name `rN` or `wN` (prefix checked by the caller's
    /// `allowed`), giving the register and whether it was `w`.
    pub fn reg_name(&mut self, allowed: &[char]) -> Result<(Reg, bool), AsmError> {
        let col = self.col();
        let Some(Tok::Ident(s)) = self.peek() else {
            return self.err(format!(
                "Invalid register: expected a register, found {}",
                self.describe()
            ));
        };
        match parse_reg(s, allowed) {
            Some(r) => {
                self.pos += 1;
                Ok(r)
            }
            None => self.err_at(col, format!("Invalid register `{s}`")),
        }
    }
}

/// `rN`/`wN` with N in 0..=10.
pub(crate) fn parse_reg(s: &str, allowed: &[char]) -> Option<(Reg, bool)> {
    let mut chars = s.chars();
    let p = chars.next()?;
    if !allowed.contains(&p) {
        return None;
    }
    let digits = chars.as_str();
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() == 2 && digits.starts_with('0') {
        return None;
    }
    let n: u8 = digits.parse().ok()?;
    Some((Reg::new(n)?, p == 'w'))
}

/// Looks like a register name at all (even an invalid number like r50).
pub(crate) fn looks_like_reg(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('r' | 'w')) && {
        let rest = c.as_str();
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
    }
}

pub(crate) fn imm32_of(n: Number) -> Option<i32> {
    if let Ok(v) = i32::try_from(n.value) {
        return Some(v);
    }
    if n.hex && n.value > 0 {
        return u32::try_from(n.value).ok().map(|v| v as i32);
    }
    None
}

fn show(n: Number) -> String {
    match (n.hex, n.value < 0) {
        (true, true) => format!("-0x{:x}", -n.value),
        (true, false) => format!("0x{:x}", n.value),
        _ => n.value.to_string(),
    }
}

impl Cursor<'_> {
    /// Number of comma-separated operands left (commas inside brackets or
    /// parentheses do not count).
    pub fn count_operands(&self) -> usize {
        let rest = self.toks.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            return 0;
        }
        let mut depth = 0i32;
        let mut n = 1;
        for t in rest {
            match t.tok {
                Tok::Punct("(" | "[") => depth += 1,
                Tok::Punct(")" | "]") => depth -= 1,
                Tok::Punct(",") if depth == 0 => n += 1,
                _ => {}
            }
        }
        n
    }

    /// `kind(imm)` or `kind(imm, next_imm)`: an `lddw` with a pseudo
    /// source, if one starts here.
    pub fn pseudo_lddw(&mut self, dst: Reg) -> Result<Option<crate::insn::Insn>, AsmError> {
        use crate::insn::{Insn, LddwKind};
        let Some(Tok::Ident(name)) = self.peek() else {
            return Ok(None);
        };
        let kind = match name.as_str() {
            "map_fd" => LddwKind::MapFd,
            "map_value" => LddwKind::MapValue,
            "btf_id" => LddwKind::BtfId,
            "func" => LddwKind::Func,
            "map_idx" => LddwKind::MapIdx,
            "map_idx_value" => LddwKind::MapIdxValue,
            _ => return Ok(None),
        };
        if !matches!(self.peek_at(1), Some(Tok::Punct("("))) {
            return Ok(None);
        }
        self.pos += 2;
        let imm = self.imm32("lddw immediate")?;
        let next_imm = if self.eat_punct(",") {
            self.imm32("lddw second immediate")?
        } else {
            0
        };
        self.expect_punct(")")?;
        Ok(Some(Insn::Lddw {
            kind,
            dst,
            imm,
            next_imm,
        }))
    }
}
