//! Where the Image's functions go: each function's instructions, its
//! output code section (an entry's program section, else `.text`) and
//! slot there; the code sections and function symbols.

use super::elf_out::{OutElf, OutSection, OutSymbol};
use super::unsupported;
use crate::error::WriteError;
use crate::image::Image;
use crate::progtype::{default_section, prog_type_of_section};
use object::elf;
use std::ops::Range;

/// Where a function goes.
pub(super) struct Placement {
    /// Index into [`CodeLayout::names`] of its code section.
    pub section: usize,
    /// First slot inside that section.
    pub slot: usize,
}

/// The code sections and where each function of the Image goes.
pub(super) struct CodeLayout {
    /// Per function: its instructions (indices into `Image::insns`).
    pub ranges: Vec<Range<usize>>,
    /// Per function: the entry it is (index into `Image::entries`).
    pub entry_of: Vec<Option<usize>>,
    /// Names of the code sections, in order of first use.
    pub names: Vec<String>,
    /// Per function: its section and slot.
    pub placement: Vec<Placement>,
}

/// The output indices of the code: sections and function symbols.
pub(super) struct CodeSymbols {
    /// Per code section (as [`CodeLayout::names`]): its output section.
    pub sections: Vec<usize>,
    /// Per function: its symbol.
    pub funcs: Vec<usize>,
}

impl CodeLayout {
    /// Checks that the functions tile the instructions and places them:
    /// sections in order of first use, functions in Image order inside.
    pub fn new(image: &Image) -> Result<CodeLayout, WriteError> {
        let ranges = function_ranges(image)?;
        let entry_of = entry_of(image)?;
        let mut names: Vec<String> = Vec::new();
        let mut func_section = Vec::with_capacity(entry_of.len());
        for entry in &entry_of {
            let name = section_name(image, *entry)?;
            let idx = match names.iter().position(|n| *n == name) {
                Some(i) => i,
                None => {
                    names.push(name);
                    names.len() - 1
                }
            };
            func_section.push(idx);
        }
        let mut placement: Vec<Placement> = Vec::with_capacity(entry_of.len());
        let mut section_len = vec![0usize; names.len()];
        for (fi, f) in image.functions.iter().enumerate() {
            let s = func_section[fi];
            placement.push(Placement {
                section: s,
                slot: section_len[s],
            });
            section_len[s] += f.len;
        }
        Ok(CodeLayout {
            ranges,
            entry_of,
            names,
            placement,
        })
    }

    /// Adds the (empty) code sections and a symbol for every function
    /// (global for global functions and entries).
    pub fn add_sections_and_symbols(&self, image: &Image, out: &mut OutElf) -> CodeSymbols {
        let sections: Vec<usize> = self
            .names
            .iter()
            .map(|n| {
                out.add_section(OutSection {
                    name: n.clone(),
                    sh_type: elf::SHT_PROGBITS,
                    flags: u64::from(elf::SHF_ALLOC | elf::SHF_EXECINSTR),
                    align: 8,
                    data: Vec::new(),
                    nobits_size: 0,
                    rels: Vec::new(),
                })
            })
            .collect();
        let mut funcs = Vec::with_capacity(image.functions.len());
        for (fi, f) in image.functions.iter().enumerate() {
            let global = f.global || self.entry_of[fi].is_some();
            let p = &self.placement[fi];
            funcs.push(out.add_symbol(OutSymbol {
                name: f.name.clone(),
                section: Some(sections[p.section]),
                value: p.slot as u64 * 8,
                size: f.len as u64 * 8,
                st_type: elf::STT_FUNC,
                bind: if global {
                    elf::STB_GLOBAL
                } else {
                    elf::STB_LOCAL
                },
            }));
        }
        CodeSymbols { sections, funcs }
    }
}

/// Each function's instruction range; the functions must follow each
/// other from slot 0 to the end, without gaps or splitting an `lddw`.
fn function_ranges(image: &Image) -> Result<Vec<Range<usize>>, WriteError> {
    let starts = nfkit_isa::slot_offsets(&image.insns);
    let mut ranges = Vec::with_capacity(image.functions.len());
    let mut next = 0usize;
    for f in &image.functions {
        let what = || format!("function '{}'", f.name);
        if f.start != next || f.len == 0 {
            return Err(unsupported(
                what(),
                format!(
                    "it covers slots {}..{}, but functions must follow each other from slot {next} without gaps",
                    f.start,
                    f.start.saturating_add(f.len)
                ),
            ));
        }
        let end = f.start.saturating_add(f.len);
        let a = starts.partition_point(|&s| s < f.start);
        let b = starts.partition_point(|&s| s < end);
        let splits = starts.get(b).is_some_and(|&s| s != end);
        if starts.get(a) != Some(&f.start)
            || splits
            || (b == starts.len() && end != image.slot_count())
        {
            return Err(unsupported(
                what(),
                "its bounds split an lddw or lie outside the instructions",
            ));
        }
        ranges.push(a..b);
        next = end;
    }
    if next != image.slot_count() {
        return Err(unsupported(
            format!("slots {next}..{}", image.slot_count()),
            "they belong to no function",
        ));
    }
    Ok(ranges)
}

/// Per function, the entry it is (index into `Image::entries`).
fn entry_of(image: &Image) -> Result<Vec<Option<usize>>, WriteError> {
    let nf = image.functions.len();
    let mut entry_of = vec![None; nf];
    for (ei, e) in image.entries.iter().enumerate() {
        let f = e.function;
        if f >= nf {
            return Err(unsupported(
                format!("entry {}", e.name),
                "its function does not exist",
            ));
        }
        entry_of[f] = Some(ei);
    }
    Ok(entry_of)
}

/// The code section of a function: its entry's section (which must give
/// the entry's program type; the type's default when empty), else `.text`.
fn section_name(image: &Image, entry: Option<usize>) -> Result<String, WriteError> {
    let Some(ei) = entry else {
        return Ok(".text".to_string());
    };
    let e = &image.entries[ei];
    if e.section.is_empty() {
        Ok(default_section(e.prog_type))
    } else if prog_type_of_section(&e.section) == Some(e.prog_type) {
        Ok(e.section.clone())
    } else {
        Err(unsupported(
            format!("entry {}", e.name),
            format!(
                "section '{}' does not give program type {}",
                e.section,
                e.prog_type.name()
            ),
        ))
    }
}
