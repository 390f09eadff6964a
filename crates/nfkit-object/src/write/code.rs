//! The code sections' contents: each function's instructions, with map
//! indices, global-data offsets, function addresses and calls across
//! sections turned back into relocations (as clang emits them).

use super::btf_maps::MapsLayout;
use super::elf_out::OutElf;
use super::layout::{CodeLayout, CodeSymbols};
use super::unsupported;
use crate::error::WriteError;
use crate::image::Image;
use crate::read::{R_BPF_64_32, R_BPF_64_64};
use nfkit_isa::{CallKind, Insn, LddwKind};

/// A relocation to add: (symbol, type).
type Rel = Option<(usize, u32)>;

/// Writes the code, with everything it needs to know where things went.
pub(super) struct CodeWriter<'a> {
    pub image: &'a Image,
    pub layout: &'a CodeLayout,
    pub syms: &'a CodeSymbols,
    pub maps: &'a MapsLayout,
}

/// The instruction being written.
struct Site {
    /// Its function.
    fi: usize,
    /// Its slot in the output section.
    slot: usize,
    /// Its slot in the Image.
    image_slot: usize,
    /// `function+slot`, for errors.
    at: String,
}

impl CodeWriter<'_> {
    /// Appends every function's instructions (and relocations) to its
    /// code section.
    pub fn write(&self, out: &mut OutElf) -> Result<(), WriteError> {
        for (fi, f) in self.image.functions.iter().enumerate() {
            let p = &self.layout.placement[fi];
            let sec = self.syms.sections[p.section];
            let mut local_slot = 0usize;
            for insn in &self.image.insns[self.layout.ranges[fi].clone()] {
                let site = Site {
                    fi,
                    slot: p.slot + local_slot,
                    image_slot: f.start + local_slot,
                    at: format!("{}+{}", f.name, local_slot),
                };
                let (ins, rel) = self.relocate(out, &site, *insn)?;
                if let Some((sym, t)) = rel {
                    out.sections[sec].rels.push((site.slot as u64 * 8, sym, t));
                }
                for r in ins.encode() {
                    out.sections[sec].data.extend_from_slice(&r.to_bytes());
                }
                local_slot += insn.slots();
            }
        }
        Ok(())
    }

    /// The function starting at Image slot `slot`.
    fn func_at(&self, slot: i64) -> Option<usize> {
        self.image
            .functions
            .iter()
            .position(|f| f.start as i64 == slot)
    }

    /// `insn` as written at `site`, and its relocation.
    fn relocate(
        &self,
        out: &mut OutElf,
        site: &Site,
        insn: Insn,
    ) -> Result<(Insn, Rel), WriteError> {
        match insn {
            Insn::Lddw { .. } => self.lddw(out, site, insn),
            Insn::Call {
                kind: CallKind::Local,
                imm,
            } => self.call(out, site, imm),
            Insn::Call {
                kind: CallKind::Kfunc,
                ..
            } => Err(unsupported(site.at.clone(), "kfunc calls")),
            _ => Ok((insn, None)),
        }
    }

    /// An `lddw`: map indices against the map symbol, global-data values
    /// against the section symbol (offset in imm), function addresses
    /// against the code section (byte offset in imm).
    fn lddw(&self, out: &mut OutElf, site: &Site, insn: Insn) -> Result<(Insn, Rel), WriteError> {
        let Insn::Lddw {
            kind,
            dst,
            imm,
            next_imm,
        } = insn
        else {
            return Ok((insn, None));
        };
        let at = || site.at.clone();
        match kind {
            LddwKind::Imm64 => Ok((insn, None)),
            LddwKind::MapIdx => {
                let sym = self.maps.declared_symbol(imm).ok_or_else(|| {
                    unsupported(
                        at(),
                        format!("lddw of map {imm}, which is not a declared map"),
                    )
                })?;
                Ok((Insn::lddw(dst, 0), Some((sym, R_BPF_64_64))))
            }
            LddwKind::MapIdxValue => {
                let gsec = self.maps.global_section(imm).ok_or_else(|| {
                    unsupported(
                        at(),
                        format!("lddw into map {imm}, which is not global data"),
                    )
                })?;
                let size = self
                    .image
                    .maps
                    .get(imm as usize)
                    .map_or(0, |m| m.value_size);
                if next_imm < 0 || next_imm as u32 >= size {
                    return Err(unsupported(
                        at(),
                        format!("offset {next_imm} is outside map {imm} ({size} bytes)"),
                    ));
                }
                let ins = Insn::Lddw {
                    kind: LddwKind::Imm64,
                    dst,
                    imm: next_imm,
                    next_imm: 0,
                };
                Ok((ins, Some((out.section_symbol(gsec), R_BPF_64_64))))
            }
            LddwKind::Func => {
                let g = self
                    .func_at(site.image_slot as i64 + 1 + imm as i64)
                    .ok_or_else(|| unsupported(at(), "function address is not a function"))?;
                let gp = &self.layout.placement[g];
                if self.layout.entry_of[g].is_some() {
                    return Err(unsupported(at(), "the address of an entry program"));
                }
                let sym = out.section_symbol(self.syms.sections[gp.section]);
                Ok((
                    Insn::lddw(dst, gp.slot as u64 * 8),
                    Some((sym, R_BPF_64_64)),
                ))
            }
            LddwKind::MapFd | LddwKind::MapValue | LddwKind::BtfId => Err(unsupported(
                at(),
                "lddw with a map fd or BTF id (only map indices can be relocated)",
            )),
        }
    }

    /// A local call: relative inside one section, else against the
    /// callee's symbol (global) or its section's symbol (static).
    fn call(&self, out: &mut OutElf, site: &Site, imm: i32) -> Result<(Insn, Rel), WriteError> {
        let image = self.image;
        let g = self
            .func_at(site.image_slot as i64 + 1 + imm as i64)
            .ok_or_else(|| unsupported(site.at.clone(), "call target is not a function"))?;
        if self.layout.entry_of[g].is_some() {
            return Err(unsupported(
                site.at.clone(),
                format!("call of entry program {}", image.functions[g].name),
            ));
        }
        let gp = &self.layout.placement[g];
        let call = |imm: i32| Insn::Call {
            kind: CallKind::Local,
            imm,
        };
        Ok(if gp.section == self.layout.placement[site.fi].section {
            (call((gp.slot as i64 - site.slot as i64 - 1) as i32), None)
        } else if image.functions[g].global {
            (call(-1), Some((self.syms.funcs[g], R_BPF_64_32)))
        } else {
            let sym = out.section_symbol(self.syms.sections[gp.section]);
            (call(gp.slot as i32 - 1), Some((sym, R_BPF_64_32)))
        })
    }
}
