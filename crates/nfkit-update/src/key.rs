//! Update keys and key files.
//!
//! A key file holds one key per line, `ID HEX`: a key id (1 to
//! 4294967295; id 0 means "unsigned" in a message) and the 32-byte key
//! as 64 hex digits; `#` starts a comment. Several ids let keys rotate:
//! the switch's file holds the old and the new key, senders move to the
//! new id, then the old line is removed. A key file any group or other
//! user may read (or write) is refused: `chmod 600 FILE`.

use crate::hex;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Bytes in a key.
pub const KEY_LEN: usize = 32;

/// One key: its id and the 32 bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    pub id: u32,
    bytes: [u8; KEY_LEN],
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key {{ id: {}, .. }}", self.id)
    }
}

impl Key {
    /// Key `id` with these bytes (`id` 0 is reserved for unsigned
    /// messages: `None`).
    pub fn new(id: u32, bytes: [u8; KEY_LEN]) -> Option<Key> {
        (id != 0).then_some(Key { id, bytes })
    }

    /// A new random key `id` from the system's random source.
    pub fn generate(id: u32) -> Result<Key, KeyError> {
        let mut bytes = [0u8; KEY_LEN];
        getrandom::getrandom(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Key::new(id, bytes).ok_or(KeyError::IdZero)
    }

    /// The MAC of `data` under this key (keyed BLAKE3).
    pub fn mac(&self, data: &[u8]) -> blake3::Hash {
        blake3::keyed_hash(&self.bytes, data)
    }

    /// The key file line for this key.
    pub fn line(&self) -> String {
        format!("{} {}", self.id, hex::encode(&self.bytes))
    }
}

/// Why keys could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "key file {path} is readable or writable by group or others (mode {mode:04o}); \
         refusing to use it: run `chmod 600 {path}`"
    )]
    Permissive { path: PathBuf, mode: u32 },
    #[error("key file {path}: not a regular file")]
    NotAFile { path: PathBuf },
    #[error("key file {path}, line {line}: {why}")]
    Syntax {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("key file {path}, line {line}: key id {id} given twice")]
    Duplicate { path: PathBuf, line: usize, id: u32 },
    #[error("key file {path}: no keys")]
    Empty { path: PathBuf },
    #[error("key id {0} is not in the key file")]
    NoSuchId(u32),
    #[error("key id 0 is reserved (unsigned messages)")]
    IdZero,
    #[error("no random bytes from the system: {0}")]
    Random(String),
}

/// The keys a switch accepts (or a sender picks from), by id.
#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    keys: BTreeMap<u32, Key>,
}

impl KeyRing {
    /// A ring of `keys` (a later key replaces an earlier one of its id).
    pub fn new(keys: impl IntoIterator<Item = Key>) -> KeyRing {
        KeyRing {
            keys: keys.into_iter().map(|k| (k.id, k)).collect(),
        }
    }

    /// Loads a key file; refuses one group or others may access, one
    /// that is not a regular file, or one with a bad line (naming it).
    pub fn load(path: &Path) -> Result<KeyRing, KeyError> {
        use std::os::unix::fs::PermissionsExt;
        let io = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(KeyError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Permissive {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        KeyRing::parse(path, &text)
    }

    /// The keys in `text` (a key file's contents; `path` names it in
    /// errors).
    pub fn parse(path: &Path, text: &str) -> Result<KeyRing, KeyError> {
        let mut keys = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let syntax = |why: String| KeyError::Syntax {
                path: path.to_path_buf(),
                line,
                why,
            };
            let content = raw.split('#').next().unwrap_or_default().trim();
            if content.is_empty() {
                continue;
            }
            let mut words = content.split_whitespace();
            let (Some(id), Some(hexkey), None) = (words.next(), words.next(), words.next()) else {
                return Err(syntax(
                    "expected `ID HEX` (a key id and 64 hex digits)".into(),
                ));
            };
            let id: u32 = id
                .parse()
                .map_err(|_| syntax(format!("key id `{id}` is not a number (1..=4294967295)")))?;
            let bytes: [u8; KEY_LEN] = hex::decode(hexkey)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| {
                    syntax(format!(
                        "key {id}: expected 64 hex digits (32 bytes), got `{}…` ({} characters)",
                        hexkey.chars().take(8).collect::<String>(),
                        hexkey.len()
                    ))
                })?;
            let key = Key::new(id, bytes)
                .ok_or_else(|| syntax("key id 0 is reserved (unsigned messages)".into()))?;
            if keys.insert(id, key).is_some() {
                return Err(KeyError::Duplicate {
                    path: path.to_path_buf(),
                    line,
                    id,
                });
            }
        }
        if keys.is_empty() {
            return Err(KeyError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(KeyRing { keys })
    }

    /// Key `id`.
    pub fn get(&self, id: u32) -> Option<&Key> {
        self.keys.get(&id)
    }

    /// The key a sender uses by default: the highest id.
    pub fn newest(&self) -> Option<&Key> {
        self.keys.values().next_back()
    }

    /// Key ids, ascending.
    pub fn ids(&self) -> Vec<u32> {
        self.keys.keys().copied().collect()
    }

    /// The key file's text for these keys.
    pub fn file_text(&self) -> String {
        let mut s = String::from("# nfkit update keys: `ID HEX` per line (docs/update.md)\n");
        for k in self.keys.values() {
            s.push_str(&k.line());
            s.push('\n');
        }
        s
    }

    /// Writes the key file at `path`, created with mode 0600 (an existing
    /// file is refused).
    pub fn write_new(&self, path: &Path) -> Result<(), KeyError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        f.write_all(self.file_text().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ids_comments_and_refuses_bad_lines() {
        let p = Path::new("k");
        let a = "11".repeat(32);
        let b = "AB".repeat(32);
        let r = KeyRing::parse(p, &format!("# keys\n\n1 {a}\n  7 {b} # new\n")).expect("parse");
        assert_eq!(r.ids(), vec![1, 7]);
        assert_eq!(r.newest().map(|k| k.id), Some(7));
        assert_eq!(r.get(1).map(|k| k.bytes), Some([0x11; 32]));
        let again = KeyRing::parse(p, &r.file_text()).expect("round trip");
        assert_eq!(again.ids(), r.ids());
        for (text, want) in [
            (format!("1 {a}\n1 {b}\n"), "given twice"),
            (format!("0 {a}\n"), "reserved"),
            ("1 abcd\n".to_string(), "64 hex digits"),
            (format!("x {a}\n"), "not a number"),
            (format!("1 {a} extra\n"), "expected `ID HEX`"),
            ("# nothing\n".to_string(), "no keys"),
        ] {
            let e = KeyRing::parse(p, &text).expect_err(&text).to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = KeyRing::parse(p, &format!("1 {a}\nbad\n"))
            .expect_err("line 2")
            .to_string();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn debug_does_not_show_the_key() {
        let k = Key::new(3, [0x5a; 32]).expect("key");
        assert_eq!(format!("{k:?}"), "Key { id: 3, .. }");
    }
}
