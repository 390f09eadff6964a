//! Errors of reading, linking and writing objects. Each is one line that
//! says what went wrong and where (section, symbol, offset; objects).

use crate::btf::BtfError;
use nfkit_isa::DecodeError;
use std::fmt;

/// Where in an ELF file a read error is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub section: Option<String>,
    pub symbol: Option<String>,
    /// Byte offset in the section (or the file, without a section).
    pub offset: Option<u64>,
}

impl Location {
    pub fn section(name: &str) -> Location {
        Location {
            section: Some(name.to_string()),
            ..Location::default()
        }
    }

    pub fn at(name: &str, offset: u64) -> Location {
        Location {
            section: Some(name.to_string()),
            offset: Some(offset),
            ..Location::default()
        }
    }

    pub fn with_symbol(mut self, symbol: &str) -> Location {
        if !symbol.is_empty() {
            self.symbol = Some(symbol.to_string());
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.section.is_none() && self.symbol.is_none() && self.offset.is_none()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = &self.section {
            parts.push(format!("section '{s}'"));
        }
        if let Some(s) = &self.symbol {
            parts.push(format!("symbol '{s}'"));
        }
        if let Some(o) = self.offset {
            parts.push(format!("offset 0x{o:x}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// What went wrong reading an object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadErrorKind {
    #[error("not an ELF file")]
    NotElf,
    #[error("not a 64-bit ELF file")]
    Not64Bit,
    #[error("big-endian ELF is not supported (eBPF objects are little-endian here)")]
    BigEndian,
    #[error("ELF machine {0} is not eBPF (EM_BPF = 247)")]
    WrongMachine(u16),
    #[error("ELF type {0} is not a relocatable object (ET_REL)")]
    NotRelocatable(u16),
    #[error("malformed ELF: {0}")]
    Malformed(String),
    #[error("{0}")]
    Decode(DecodeError),
    #[error("unsupported relocation type {0}")]
    RelocationType(u32),
    #[error("bad relocation: {0}")]
    BadRelocation(String),
    #[error("symbol is in section {0}, which nfkit does not know how to reference")]
    UnknownSymbolSection(String),
    #[error("bad map definition: {0}")]
    BadMap(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A code section whose name gives no program type (`xdp_foo`,
    /// `prog`): [`crate::read_object_as`] can give it one.
    #[error("unsupported: unknown program section '{0}' (no program type follows from it)")]
    UnknownSection(String),
    #[error("bad BTF: {0}")]
    Btf(BtfError),
    #[error("bad function layout: {0}")]
    Layout(String),
}

/// An error reading an object, with its location in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    pub location: Location,
    pub kind: ReadErrorKind,
}

impl fmt::Display for ReadError {
    /// One line: names taken from a damaged file may hold control
    /// characters, which are shown escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = if self.location.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}: {}", self.location, self.kind)
        };
        f.write_str(&one_line(&text))
    }
}

/// `s` with control characters (newlines, ...) escaped, so that an error
/// message stays on one line whatever names a file holds.
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl std::error::Error for ReadError {}

impl ReadError {
    pub fn new(location: Location, kind: ReadErrorKind) -> ReadError {
        ReadError { location, kind }
    }

    pub fn bare(kind: ReadErrorKind) -> ReadError {
        ReadError {
            location: Location::default(),
            kind,
        }
    }
}

/// An error linking objects.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("symbol '{symbol}' is defined in both {first} and {second}")]
    DuplicateSymbol {
        symbol: String,
        first: String,
        second: String,
    },
    #[error("{object}: {function}+{slot}: undefined symbol '{symbol}'")]
    UndefinedSymbol {
        object: String,
        function: String,
        slot: usize,
        symbol: String,
    },
    /// A call of a kernel function (an `extern ... __ksym` function, a
    /// kfunc), which nfkit's linker and VM do not support.
    #[error(
        "{object}: {function}+{slot}: calls kernel function {symbol} (a kfunc, declared __ksym), which nfkit does not support"
    )]
    Kfunc {
        object: String,
        function: String,
        slot: usize,
        symbol: String,
    },
    #[error(
        "map '{name}' is defined differently in {first} ({first_def}) and {second} ({second_def})"
    )]
    MapMismatch {
        name: String,
        first: String,
        second: String,
        first_def: String,
        second_def: String,
    },
    #[error("{object}: {function}+{slot}: {why}")]
    BadReference {
        object: String,
        function: String,
        slot: usize,
        why: String,
    },
    #[error("{object}: prog array '{map}' slot {slot}: '{target}' is not an entry program")]
    BadMapInit {
        object: String,
        map: String,
        slot: u32,
        target: String,
    },
    #[error("global data section '{section}' is too large after linking ({size} bytes)")]
    DataTooLarge { section: String, size: u64 },
    #[error("nothing to link: no objects")]
    NoObjects,
}

/// An error writing an ELF object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {what}: {why}")]
    Unsupported { what: String, why: String },
    #[error("ELF writer: {0}")]
    Elf(String),
}

/// Any error of reading files, reading objects or linking.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("{path}: {cause}")]
    Read { path: String, cause: Box<ReadError> },
    #[error(transparent)]
    Link(#[from] LinkError),
}
