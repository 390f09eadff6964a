//! Reading eBPF relocatable ELF objects (as `clang -O2 -g -target bpf`
//! emits them) into an [`Object`].
//!
//! * `elf`: sections, symbols and relocations, checked.
//! * `btf_sec`: `.BTF`/`.BTF.ext` with their relocations applied and
//!   `DATASEC` sizes/offsets fixed up as libbpf does.
//! * `maps`: legacy `maps` and BTF-defined `.maps` map definitions, and
//!   global-data sections as single-entry array maps.
//! * `code`: program and `.text` sections split into functions, with
//!   relocations turned into symbolic [`crate::object::Reloc`]s.
//! * `notes`: refuse what cannot be loaded, or note it and read on.

mod btf_sec;
mod code;
mod elf;
mod maps;
mod notes;

use crate::error::{Location, ReadError, ReadErrorKind};
use crate::object::Object;
use notes::Notes;

pub(crate) use elf::{Elf, R_BPF_64_32, R_BPF_64_64, R_BPF_64_ABS64};
pub(crate) use maps::btf_map_def;

/// Largest global-data section accepted (a `.bss` size from a corrupted
/// header must not make us allocate gigabytes).
pub(crate) const MAX_DATA_SECTION: u64 = 64 << 20;

/// Reads an object from ELF bytes. `origin` names it in diagnostics
/// (usually the path) and becomes `Function::origin` after linking.
pub fn read_object(data: &[u8], origin: &str) -> Result<Object, ReadError> {
    read_object_as(data, origin, None)
}

/// [`read_object`], with the functions of code sections whose name
/// follows no convention (legacy names such as `xdp_foo`, `prog`,
/// `xdp_sock`) taken as programs of type `unknown_sections` when given,
/// as libbpf's explicit program type (`bpf_program__set_type`) does;
/// without it such a section is [`ReadErrorKind::UnknownSection`].
pub fn read_object_as(
    data: &[u8],
    origin: &str,
    unknown_sections: Option<crate::ProgType>,
) -> Result<Object, ReadError> {
    read_with(data, origin, unknown_sections, &mut Notes::strict())
}

/// The contents of the sections called `names` of ELF `data`, in that
/// order (`None` where there is none): notes a writer added beside the
/// code, such as the chain manifest of `nfkit compile`'s objects. The
/// file is parsed once for all of them.
pub fn section_bytes<'a>(
    data: &'a [u8],
    names: &[&str],
) -> Result<Vec<Option<&'a [u8]>>, ReadError> {
    let elf = elf::Elf::parse(data)?;
    Ok(names
        .iter()
        .map(|n| elf.section_by_name(n).map(|s| s.data))
        .collect())
}

/// An object read for showing: every part nfkit could read, and what it
/// could not (each a [`ReadError`] whose location names the section,
/// symbol and offset it touches).
#[derive(Clone, Debug)]
pub struct Inspection {
    pub object: Object,
    /// What nfkit cannot load or run, in the order met: unknown program sections, kfunc calls, externs, map
    /// definitions it does not know, ...
    pub notes: Vec<ReadError>,
}

/// Reads everything of an object that can be read, noting instead of
/// refusing what nfkit cannot load or run; only a broken ELF file (header,
/// section table, symbols, relocation entries) is an error. `nfkit
/// disasm` and `nfkit object show` use it; loading and running use
/// [`read_object`], which refuses those parts.
pub fn inspect_object(data: &[u8], origin: &str) -> Result<Inspection, ReadError> {
    let mut notes = Notes::tolerant();
    let object = read_with(data, origin, None, &mut notes)?;
    Ok(Inspection {
        object,
        notes: notes.list,
    })
}

/// The contents of named sections, in the order asked (`None`: absent).
pub type SectionNotes<'a> = Vec<Option<&'a [u8]>>;

/// An object read for loading only, from ELF `data` (`origin` names it),
/// with the contents of the sections called `sections` (as
/// [`section_bytes`] gives them), the file parsed once for both: what
/// [`read_object`] reads but the line info, which running does not need
/// (the `.BTF.ext` line records' layout is still checked, their file
/// names and source texts are not read; `line_info` stays empty). An
/// update's load path (docs/update.md, "Swap time").
pub fn read_object_for_load<'a>(
    data: &'a [u8],
    origin: &str,
    sections: &[&str],
) -> Result<(Object, SectionNotes<'a>), ReadError> {
    let elf = Elf::parse(data)?;
    let notes = sections
        .iter()
        .map(|n| elf.section_by_name(n).map(|s| s.data))
        .collect();
    let o = read_elf(&elf, origin, None, false, &mut Notes::strict())?;
    Ok((o, notes))
}

fn read_with(
    data: &[u8],
    origin: &str,
    unknown_sections: Option<crate::ProgType>,
    notes: &mut Notes,
) -> Result<Object, ReadError> {
    let elf = Elf::parse(data)?;
    read_elf(&elf, origin, unknown_sections, true, notes)
}

/// [`read_with`] of a parsed file, its line info only when `lines`.
fn read_elf(
    elf: &Elf<'_>,
    origin: &str,
    unknown_sections: Option<crate::ProgType>,
    lines: bool,
    notes: &mut Notes,
) -> Result<Object, ReadError> {
    let (btf, ext) = notes
        .tolerate(btf_sec::read(elf, lines))?
        .unwrap_or((None, None));
    let license = match elf.section_by_name("license") {
        Some(s) => {
            let bytes = s.data;
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        }
        None => String::new(),
    };
    let mut maps = maps::read_maps(elf, btf.as_ref(), notes)?;
    let functions = code::read_functions(
        elf,
        &maps,
        (btf.as_ref(), ext.as_ref()),
        unknown_sections,
        notes,
    )?;
    let map_inits = notes
        .tolerate(maps::read_map_inits(elf, &mut maps, &functions))?
        .unwrap_or_default();
    note_unread_sections(elf, notes);
    Ok(Object {
        origin: origin.to_string(),
        functions,
        maps: maps.specs,
        map_inits,
        data_symbols: maps.data_symbols,
        btf,
        license,
    })
}

/// Notes the allocated sections nothing reads (`.struct_ops` maps, ...):
/// loading does without them, showing says they are there.
fn note_unread_sections(elf: &Elf<'_>, notes: &mut Notes) {
    for s in &elf.sections {
        let read = s.is_code()
            || !s.is_alloc()
            || matches!(s.name.as_str(), "maps" | ".maps" | "license" | "version")
            || maps::is_global_data(&s.name);
        if !read {
            let what = if s.name.starts_with(".struct_ops") {
                "struct_ops maps are not supported".to_string()
            } else {
                format!("section '{}' is not read", s.name)
            };
            notes.note(err(
                Location::section(&s.name),
                ReadErrorKind::Unsupported(what),
            ));
        }
    }
}

pub(crate) fn err(loc: Location, kind: ReadErrorKind) -> ReadError {
    ReadError::new(loc, kind)
}
