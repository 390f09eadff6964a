//! Diagnostics: `file:line:col: error: message`, the source line, a caret
//! under the column, and `help:` saying what is supported instead
//! (docs/language.md, "Errors and warnings"). Columns count from 0, as
//! Python's `ast` does, and are in characters.

use std::fmt;

/// Error or warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One diagnostic with its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 0-based column (characters); printed 1-based, as compilers do.
    pub col: u32,
    pub message: String,
    /// What is supported instead (may be empty).
    pub help: String,
    /// The source line (without its newline).
    pub text: String,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(
            f,
            "{}:{}:{}: {}: {}",
            self.file,
            self.line,
            self.col + 1,
            sev,
            self.message
        )?;
        writeln!(f, "{}", self.text)?;
        // The caret keeps the line's tabs so that it lines up.
        let pad: String = self
            .text
            .chars()
            .take(self.col as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{pad}^")?;
        if !self.help.is_empty() {
            write!(f, "\n  help: {}", self.help)?;
        }
        Ok(())
    }
}

/// Renders diagnostics one after the other (each ends with a newline).
pub fn render(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        out.push_str(&d.to_string());
        out.push('\n');
    }
    out
}

/// Maps byte offsets of a source to (line, column) and line texts.
#[derive(Clone, Debug)]
pub struct SourceMap {
    pub file: String,
    pub source: String,
    line_starts: Vec<usize>,
}

impl SourceMap {
    pub fn new(file: &str, source: &str) -> SourceMap {
        let mut line_starts = vec![0];
        for (i, b) in source.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        SourceMap {
            file: file.to_string(),
            source: source.to_string(),
            line_starts,
        }
    }

    /// 1-based line and 0-based character column of byte `offset`.
    pub fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.source.len());
        let li = self.line_starts.partition_point(|&s| s <= offset).max(1) - 1;
        let start = self.line_starts.get(li).copied().unwrap_or(0);
        let col = self
            .source
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0);
        (li as u32 + 1, col as u32)
    }

    /// The text of 1-based line `line` (without newline).
    pub fn line_text(&self, line: u32) -> &str {
        let i = (line as usize).saturating_sub(1);
        let Some(&start) = self.line_starts.get(i) else {
            return "";
        };
        let end = self
            .line_starts
            .get(i + 1)
            .copied()
            .unwrap_or(self.source.len());
        self.source
            .get(start..end)
            .unwrap_or("")
            .trim_end_matches(['\n', '\r'])
    }

    /// A diagnostic at byte `offset`.
    pub fn diag(
        &self,
        severity: Severity,
        offset: usize,
        message: String,
        help: &str,
    ) -> Diagnostic {
        let (line, col) = self.position(offset);
        Diagnostic {
            severity,
            file: self.file.clone(),
            line,
            col,
            message,
            help: help.to_string(),
            text: self.line_text(line).to_string(),
        }
    }
}
