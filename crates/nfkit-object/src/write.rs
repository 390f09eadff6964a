//! Writing an [`Image`] as an eBPF relocatable ELF object that libbpf
//! (`bpftool prog loadall`) loads and [`crate::read_object`] reads back.
//!
//! Layout: each entry program goes to its section (`xdp`, `tc`, ...;
//! entries sharing a section are consecutive), every other function to
//! `.text`. Declared maps go to `.maps` with BTF map definitions (the
//! Image's own definitions are reused when they still describe the map,
//! otherwise new ones are built; legacy `maps` are never written, libbpf
//! 1.x refuses them). Global-data maps become their sections again
//! (`.bss*` as NOBITS). Declared arrays with initial contents get a
//! `.nfkit.init.NAME` section each ([`crate::initial`]). `.BTF` is always written (an Image without BTF
//! gets a new one); `.BTF.ext` carries func_info for every function and
//! the line info. Entry programs and static functions without a BTF
//! `FUNC` get a synthesised one; a global non-entry function without one
//! is an error, because the kernel verifies global functions against
//! their prototype and none can be guessed.
//!
//! Relocations follow clang: map loads against the map symbol, global
//! data against the section symbol (offset in imm), calls across
//! sections against the callee's symbol (global) or `.text` (static),
//! function addresses against `.text` with the byte offset in imm.
//! Calls inside one section stay relative, without relocation.
//!
//! * `layout`: code sections and where each function goes.
//! * `btf_maps`: `.maps` and the global-data sections.
//! * `code`: the instructions, with their relocations.
//! * `btf_sec`: `.BTF`, `.BTF.ext` and the `DATASEC` variables' symbols.
//! * `elf_out`: the ELF file itself.

mod btf_maps;
mod btf_sec;
mod code;
mod elf_out;
mod layout;

use crate::btf::Btf;
use crate::error::WriteError;
use crate::image::{Image, MapKind};
use btf_maps::MapsLayout;
use elf_out::{OutElf, OutSection, OutSymbol};
use layout::CodeLayout;
use object::elf;

fn unsupported(what: impl Into<String>, why: impl Into<String>) -> WriteError {
    WriteError::Unsupported {
        what: what.into(),
        why: why.into(),
    }
}

/// Writes `image` as an eBPF ELF object (see the module doc).
pub fn write_object(image: &Image) -> Result<Vec<u8>, WriteError> {
    write_object_with(image, &[])
}

/// [`write_object`] with `notes` added: (section name, contents), each
/// a non-allocated section that loaders skip ([`crate::read::section_bytes`]
/// reads one back).
pub fn write_object_with(image: &Image, notes: &[(&str, &[u8])]) -> Result<Vec<u8>, WriteError> {
    let layout = CodeLayout::new(image)?;
    let mut out = OutElf::default();
    let syms = layout.add_sections_and_symbols(image, &mut out);
    let mut btf = image.btf.clone().unwrap_or_default();
    let maps = btf_maps::layout_maps(image, &mut btf, &mut out)?;
    add_map_inits(image, &maps, &syms.funcs, &mut out)?;
    add_initial_contents(image, &mut out)?;
    code::CodeWriter {
        image,
        layout: &layout,
        syms: &syms,
        maps: &maps,
    }
    .write(&mut out)?;
    add_license(image, &btf, &mut out);
    for (name, data) in notes {
        out.add_section(OutSection {
            name: (*name).to_string(),
            sh_type: elf::SHT_PROGBITS,
            flags: 0,
            align: 8,
            data: data.to_vec(),
            nobits_size: 0,
            rels: Vec::new(),
        });
    }
    btf_sec::write_btf(image, &mut btf, &mut out, &layout)?;
    out.finish()
}

/// Relocations that put the initial programs into prog array slots (in
/// the `values` array of the map's definition).
fn add_map_inits(
    image: &Image,
    maps: &MapsLayout,
    func_sym: &[usize],
    out: &mut OutElf,
) -> Result<(), WriteError> {
    for init in &image.map_inits {
        let e = image.entries.get(init.entry).ok_or_else(|| {
            unsupported(
                format!("prog array slot {}", init.slot),
                "its entry does not exist",
            )
        })?;
        let (sec, off) = maps.values_slot(init.map, init.slot).ok_or_else(|| {
            unsupported(
                format!("prog array slot {}", init.slot),
                "the map has no 'values' to hold it",
            )
        })?;
        let sym = func_sym[e.function];
        out.sections[sec]
            .rels
            .push((off, sym, crate::read::R_BPF_64_ABS64));
    }
    Ok(())
}

/// A `.nfkit.init.NAME` section for every declared map with initial
/// contents.
fn add_initial_contents(image: &Image, out: &mut OutElf) -> Result<(), WriteError> {
    for m in &image.maps {
        let (MapKind::Declared, Some(data)) = (&m.kind, &m.data) else {
            continue;
        };
        crate::initial::check(m, data.len())
            .map_err(|why| unsupported(format!("map '{}'", m.name), why))?;
        out.add_section(OutSection {
            name: format!("{}{}", crate::initial::SECTION_PREFIX, m.name),
            sh_type: elf::SHT_PROGBITS,
            flags: 0,
            align: 8,
            data: data.clone(),
            nobits_size: 0,
            rels: Vec::new(),
        });
    }
    Ok(())
}

/// The `license` section, with a `LICENSE` symbol unless the BTF already
/// describes the section.
fn add_license(image: &Image, btf: &Btf, out: &mut OutElf) {
    if image.license.is_empty() {
        return;
    }
    let mut data = image.license.as_bytes().to_vec();
    data.push(0);
    let sec = out.add_section(OutSection {
        name: "license".into(),
        sh_type: elf::SHT_PROGBITS,
        flags: u64::from(elf::SHF_ALLOC | elf::SHF_WRITE),
        align: 1,
        data,
        nobits_size: 0,
        rels: Vec::new(),
    });
    if btf.find_datasec("license").is_none() {
        out.add_symbol(OutSymbol {
            name: "LICENSE".into(),
            section: Some(sec),
            value: 0,
            size: image.license.len() as u64 + 1,
            st_type: elf::STT_OBJECT,
            bind: elf::STB_GLOBAL,
        });
    }
}
