//! Errors of the kernel backend, each naming the program, map or command.

use std::fmt;

/// A source position a verifier message maps back to (from line info).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
    pub col: u32,
    /// The source line's text, when the object carries it.
    pub text: String,
}

impl fmt::Display for SourceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)?;
        if !self.text.is_empty() {
            write!(f, ": {}", self.text.trim())?;
        }
        Ok(())
    }
}

fn at_line(line: &Option<SourceLine>) -> String {
    match line {
        Some(l) => format!(" at {l}"),
        None => String::new(),
    }
}

/// The last lines of a verifier log (the part that says what went wrong).
pub fn log_tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Errors of loading, running and reading programs and maps.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The verifier refused entry program `entry`; `log` is its full log.
    #[error(
        "verifier rejected program '{entry}'{}: {}",
        at_line(line),
        log_tail(log, 3)
    )]
    Verifier {
        entry: String,
        log: String,
        line: Option<SourceLine>,
    },
    /// The kernel refused a program for another reason than the verifier.
    #[error("cannot load program '{entry}': {}", std::io::Error::from_raw_os_error(*errno))]
    ProgLoad { entry: String, errno: i32 },
    /// The Image cannot be turned into kernel instructions.
    #[error("program '{entry}': {msg}")]
    Image { entry: String, msg: String },
    /// Map creation or initialisation failed.
    #[error("map '{map}': {msg}")]
    Map { map: String, msg: String },
    /// A map operation failed.
    #[error("map '{map}': {op}: {source}")]
    MapOp {
        map: String,
        op: &'static str,
        source: libbpf_rs::Error,
    },
    /// A global variable named in the load options does not exist or
    /// does not fit.
    #[error("global '{name}': {msg}")]
    Global { name: String, msg: String },
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("test run of '{prog}': {}", std::io::Error::from_raw_os_error(*errno))]
    TestRun { prog: String, errno: i32 },
    /// An ELF object could not be opened or loaded by libbpf.
    #[error("object {path}: {source}")]
    Object {
        path: String,
        source: libbpf_rs::Error,
    },
    /// bpffs could not be mounted or used.
    #[error("bpffs at {path}: {msg}")]
    Bpffs { path: String, msg: String },
    /// A command of the testbed failed.
    #[error("testbed: `{cmd}` failed: {msg}")]
    Command { cmd: String, msg: String },
    /// An operating-system call failed.
    #[error("{what}: {}", std::io::Error::from_raw_os_error(*errno))]
    Os { what: String, errno: i32 },

    /// Deployment (attach, pins, state file) failed: what and why.
    #[error("{0}")]
    Deploy(String),
}

impl KernelError {
    /// The OS error number, when the error carries one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            KernelError::ProgLoad { errno, .. }
            | KernelError::TestRun { errno, .. }
            | KernelError::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}
