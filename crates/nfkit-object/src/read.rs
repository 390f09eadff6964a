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

mod btf_sec;
mod code;
mod elf;
mod maps;

use crate::error::{Location, ReadError, ReadErrorKind};
use crate::object::Object;

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
    let elf = Elf::parse(data)?;
    let (btf, ext) = btf_sec::read(&elf)?;
    let license = match elf.section_by_name("license") {
        Some(s) => {
            let bytes = s.data;
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        }
        None => String::new(),
    };
    let mut maps = maps::read_maps(&elf, btf.as_ref())?;
    let functions =
        code::read_functions(&elf, &maps, (btf.as_ref(), ext.as_ref()), unknown_sections)?;
    let map_inits = maps::read_map_inits(&elf, &mut maps, &functions)?;
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

pub(crate) fn err(loc: Location, kind: ReadErrorKind) -> ReadError {
    ReadError::new(loc, kind)
}
