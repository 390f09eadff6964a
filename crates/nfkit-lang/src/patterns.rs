//! Pattern sets a script declares (`SQLI = Patterns([...])`, checked
//! in `check::patterns`) and their tables in the linked Image: the
//! initial contents of the `dpi` NF's maps (`nf_dpi_next`,
//! `nf_dpi_accept`, `nf_dpi_sets`, see `nfkit_dpi::tables`), set `i`
//! being the i-th declared.

use nfkit_dpi::{Dfa, DpiError, Tables};
use nfkit_object::Image;

/// One `NAME = Patterns(...)`: its DFA, compiled when checking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternSet {
    pub name: String,
    /// Line of the declaration.
    pub line: u32,
    pub dfa: Dfa,
}

/// Puts the tables of `sets` into `image`'s dpi maps (when it has them:
/// a script that never calls `match` has none). Trailing zeros are
/// left out (they are the maps' initial state anyway).
pub fn install(sets: &[PatternSet], image: &mut Image) -> Result<(), DpiError> {
    if sets.is_empty() {
        return Ok(());
    }
    let dfas: Vec<Dfa> = sets.iter().map(|s| s.dfa.clone()).collect();
    install_tables(&Tables::build(&dfas)?, image);
    Ok(())
}

/// Puts `tables` into `image`'s dpi maps, if it has them.
pub fn install_tables(tables: &Tables, image: &mut Image) {
    let sets: Vec<u8> = tables.sets.iter().flatten().copied().collect();
    for (name, bytes) in [
        ("nf_dpi_next", &tables.next),
        ("nf_dpi_accept", &tables.accept),
        ("nf_dpi_sets", &sets),
    ] {
        if let Some(m) = image.maps.iter_mut().find(|m| m.name == name) {
            let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            m.data = Some(bytes[..end].to_vec());
        }
    }
}

/// `p` as a chain-script (Python) string literal, for scripts that
/// tools write (`nfkit dpi compile -o`): quotes and backslashes
/// escaped, control characters as `\xNN`.
pub fn script_literal(p: &str) -> String {
    let mut s = String::from("\"");
    for c in p.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                s.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}
