//! How the reader treats what nfkit cannot read into a loadable object:
//! refuse the object (reading for linking, loading and running), or note
//! it and read on ([`crate::inspect_object`], for `nfkit disasm` and
//! `nfkit object show`, which show every part of any object).
//!
//! Every refusal after the ELF layer goes through [`Notes::tolerate`], so
//! a part that one day becomes supported (CO-RE, maps of maps, ...)
//! simply stops producing its note.

use crate::error::{ReadError, ReadErrorKind};

/// The reader's mode and, when tolerant, what it noted.
pub(crate) struct Notes {
    tolerant: bool,
    /// What was not read (tolerant mode only), in the order met.
    pub list: Vec<ReadError>,
}

impl Notes {
    /// Any refusal fails the read.
    pub fn strict() -> Notes {
        Notes {
            tolerant: false,
            list: Vec::new(),
        }
    }

    /// Refusals are noted and the read goes on.
    pub fn tolerant() -> Notes {
        Notes {
            tolerant: true,
            list: Vec::new(),
        }
    }

    /// `r`'s value; its error fails the read when strict, and is noted
    /// (giving `None`) when tolerant, unless it says the file is malformed.
    pub fn tolerate<T>(&mut self, r: Result<T, ReadError>) -> Result<Option<T>, ReadError> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e) if self.tolerant && !matches!(e.kind, ReadErrorKind::Malformed(_)) => {
                self.list.push(e);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Notes `e` when tolerant; a strict read ignores it (a part that
    /// loading does without, such as a section nfkit does not read).
    pub fn note(&mut self, e: ReadError) {
        if self.tolerant {
            self.list.push(e);
        }
    }

    /// Refuses (strict) or notes (tolerant) `e`.
    pub fn refuse(&mut self, e: ReadError) -> Result<(), ReadError> {
        self.tolerate::<()>(Err(e)).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Location;

    fn unsupported() -> ReadError {
        ReadError::new(
            Location::section("sk_lookup/x"),
            ReadErrorKind::Unsupported("x".into()),
        )
    }

    #[test]
    fn strict_refuses_tolerant_notes_but_never_a_malformed_file() {
        let mut strict = Notes::strict();
        assert!(strict.tolerate::<()>(Err(unsupported())).is_err());
        strict.note(unsupported());
        assert!(strict.list.is_empty());

        let mut tolerant = Notes::tolerant();
        assert_eq!(tolerant.tolerate::<u8>(Ok(3)), Ok(Some(3)));
        assert_eq!(tolerant.tolerate::<u8>(Err(unsupported())), Ok(None));
        tolerant.note(unsupported());
        let malformed = ReadError::bare(ReadErrorKind::Malformed("cut".into()));
        assert!(tolerant.tolerate::<()>(Err(malformed)).is_err());
        assert_eq!(tolerant.list.len(), 2);
    }
}
