//! Pattern sets a script declares (`SQLI = Patterns([...])`, checked
//! in `check::patterns`) and their tables in the linked Image: the
//! initial contents of the `dpi` NF's maps (`nf_dpi_next`,
//! `nf_dpi_accept`, `nf_dpi_sets`, see `nfkit_dpi::tables`), set `i`
//! being the i-th declared.

use nfkit_dpi::{Dfa, DpiError, Tables};
use nfkit_nf::{Hook, SearchPath};
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

/// The chain of a pattern filter: drop on a match, pass the rest; the
/// last result in `dpi_last[0]`, a count per pattern in `dpi_hits`
/// (entry `pattern + 1`; entry 0 counts packets with no match).
pub fn filter_script(patterns: &[String], limit: u64, hook: Hook) -> String {
    let pats: Vec<String> = patterns.iter().map(|p| script_literal(p)).collect();
    let hook = match hook {
        Hook::Tc => "tc",
        Hook::Socket => "socket",
        Hook::Switch => "switch",
        Hook::Xdp => "xdp",
    };
    format!(
        "from nf.classify import every_packet\n\
         from nf.dpi import match\n\
         PATTERNS = Patterns([{}])\n\
         dpi_last = ArrayMap(u64, 1)\n\
         dpi_hits = ArrayMap(u64, {})\n\
         def dpi_filter() -> u64:\n    r: u64 = match(PATTERNS, {limit})\n    dpi_last[0] = r\n    dpi_hits[r >> 32] += 1\n    if r != 0:\n        return DROP\n    return PASS\n\
         every_packet(dpi_filter)\n\
         attach(\"dpi0\", \"{hook}\")\n",
        pats.join(", "),
        patterns.len() + 1,
    )
}

/// A self-contained pattern filter ([`filter_script`]) for `hook`, the
/// Image (or the object written from it) alone being the NF (`nfkit dpi
/// compile -o NF.o`): its DFA tables are read-only global data
/// (`.rodata.nf_dpi_next`, `.rodata.nf_dpi_accept`, `.rodata.nf_dpi_sets`,
/// [`nfkit_object::arrays_to_rodata`]), which libbpf loaders fill too;
/// the classifier's configuration is the initial contents of
/// `nfkit_config`.
pub fn filter_image(
    patterns: &[String],
    hook: Hook,
    limit: u64,
    search: &SearchPath,
) -> Result<Image, crate::CompileError> {
    let script = filter_script(patterns, limit, hook);
    let opts = crate::Options {
        search: search.clone(),
        hook: Some(hook),
    };
    let mut c = crate::compile("<dpi filter>", &script, &opts)?;
    let writes = c.control_plane();
    let fail = |why: String| crate::CompileError::Patterns {
        file: "<dpi filter>".into(),
        why,
    };
    preset(&mut c.image, &writes).map_err(fail)?;
    // The tables (read-only to programs) as `.rodata.NAME`, which any
    // libbpf loader fills; the rest (nfkit_config) stays as it is.
    let (image, report) = nfkit_object::arrays_to_rodata(&c.image, |m| {
        m.kind == nfkit_object::MapKind::Declared && m.flags & RDONLY_PROG != 0 && m.data.is_some()
    })
    .map_err(|e| fail(e.to_string()))?;
    if let Some((m, why)) = report.kept.first() {
        return Err(fail(format!(
            "map {m} cannot be read-only global data: {why}"
        )));
    }
    Ok(image)
}

/// `BPF_F_RDONLY_PROG`.
const RDONLY_PROG: u32 = 1 << 7;

/// Makes control-plane writes to array maps initial contents of `image`.
pub fn preset(image: &mut Image, writes: &[crate::link::MapWrite]) -> Result<(), String> {
    for (m, k, v) in writes {
        let spec = image
            .maps
            .iter_mut()
            .find(|s| s.name == *m)
            .ok_or_else(|| format!("no map {m}"))?;
        let key = match <[u8; 4]>::try_from(k.as_slice()) {
            Ok(b) if spec.map_type == nfkit_object::MapType::Array => u32::from_le_bytes(b),
            _ => {
                return Err(format!(
                    "map {m}: only array entries can be initial contents"
                ))
            }
        };
        let vs = spec.value_size as usize;
        let at = key as usize * vs;
        let data = spec.data.get_or_insert_with(Vec::new);
        if data.len() < at + vs {
            data.resize(at + vs, 0);
        }
        let n = v.len().min(vs);
        data[at..at + n].copy_from_slice(&v[..n]);
    }
    Ok(())
}
