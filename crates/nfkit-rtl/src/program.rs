//! A program for the core: one entry of an image, checked and encoded.

use crate::error::RtlError;
use crate::layout::IMEM_SLOTS;
use crate::maps::MapTable;
use crate::subset;
use nfkit_isa::{encode_program, Insn};
use nfkit_object::Image;

/// A checked program: its instruction memory words and where its slots
/// are in the image (traces are reported in image slots, as the VM's).
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    /// The instruction memory contents, one little-endian slot per word.
    pub words: Vec<u64>,
    /// The image slot of the program's slot 0.
    pub base_slot: usize,
    /// The maps it references, as the coprocessor holds them.
    pub maps: MapTable,
}

impl Program {
    /// Bare instructions (the assembler's and conformance suite's form).
    pub fn from_insns(name: &str, insns: &[Insn]) -> Result<Program, RtlError> {
        Program::with_maps(name, insns, MapTable::default())
    }

    /// Bare instructions referencing the maps of `maps` (`lddw` of a map
    /// index, or of an array's value).
    pub fn with_maps(name: &str, insns: &[Insn], maps: MapTable) -> Result<Program, RtlError> {
        subset::check(insns)?;
        let insns = maps.resolve(insns)?;
        let words: Vec<u64> = encode_program(&insns)
            .into_iter()
            .map(|r| r.to_u64())
            .collect();
        if words.len() > IMEM_SLOTS {
            return Err(RtlError::TooLarge {
                slots: words.len(),
                max: IMEM_SLOTS,
            });
        }
        Ok(Program {
            name: name.to_string(),
            words,
            base_slot: 0,
            maps,
        })
    }

    /// The entry `entry` (index into `image.entries`): its function's
    /// instructions (the core has no bpf-to-bpf calls, so no others).
    pub fn from_image(image: &Image, entry: usize) -> Result<Program, RtlError> {
        Program::from_image_sized(image, entry, None)
    }

    /// As [`from_image`](Self::from_image), maps declaring more than
    /// `map_cap` entries sized down to it ([`MapTable::from_image_sized`]);
    /// only the maps the entry references take lines
    /// ([`MapTable::for_program`]).
    pub fn from_image_sized(
        image: &Image,
        entry: usize,
        map_cap: Option<u32>,
    ) -> Result<Program, RtlError> {
        let e = image
            .entries
            .get(entry)
            .ok_or_else(|| RtlError::NoEntry(format!("#{entry}")))?;
        let f = image
            .functions
            .get(e.function)
            .ok_or_else(|| RtlError::NoEntry(e.name.clone()))?;
        let mut insns = Vec::new();
        let mut slot = 0;
        for insn in &image.insns {
            if slot >= f.start && slot < f.start + f.len {
                insns.push(*insn);
            }
            slot += insn.slots();
        }
        // Slots are reported in the image's numbering.
        // Instructions and helpers the core lacks are named before maps
        // it cannot hold.
        let loaded = match MapTable::for_program(image, map_cap, &insns) {
            Ok(maps) => Program::with_maps(&e.name, &insns, maps),
            Err(refused) => subset::check(&insns).and(Err(refused)),
        };
        let mut p = loaded.map_err(|err| match err {
            RtlError::Unsupported {
                slot,
                insn,
                what,
                more,
            } => RtlError::Unsupported {
                slot: slot + f.start,
                insn,
                what,
                more: more.into_iter().map(|m| rebase(&m, f.start)).collect(),
            },
            other => other,
        })?;
        p.base_slot = f.start;
        Ok(p)
    }
}

/// `what (slot N)` with N moved by `base`.
fn rebase(entry: &str, base: usize) -> String {
    let Some((what, rest)) = entry.rsplit_once(" (slot ") else {
        return entry.to_string();
    };
    match rest.trim_end_matches(')').parse::<usize>() {
        Ok(n) => format!("{what} (slot {})", n + base),
        Err(_) => entry.to_string(),
    }
}
