//! References of a code section: ELF relocations, and relative calls and
//! function addresses that need none, as symbolic [`Reloc`]s.

use super::{bad_rel, CodeSection};
use crate::error::{Location, ReadError, ReadErrorKind};
use crate::object::{FuncRef, ObjFunction, Reloc, RelocTarget};
use crate::read::elf::{Elf, Rel, SymKind, Symbol, R_BPF_64_32, R_BPF_64_64, R_BPF_NONE};
use crate::read::err;
use crate::read::maps::Maps;
use crate::read::notes::Notes;
use nfkit_isa::{CallKind, Insn, LddwKind};

/// A reference found: (function index in the object, its reloc).
type Found = (usize, Reloc);

/// One code section with what its references resolve against.
pub(super) struct SectionRefs<'a> {
    elf: &'a Elf<'a>,
    maps: &'a Maps,
    cs: &'a CodeSection,
    /// Every function of the object.
    functions: &'a [ObjFunction],
    /// Number of functions of this section (from `cs.first_func`).
    nfuncs: usize,
    /// Names of the object's `__ksym` externs (BTF `DATASEC .ksyms`).
    ksyms: &'a [String],
}

impl<'a> SectionRefs<'a> {
    pub fn new(
        elf: &'a Elf<'a>,
        maps: &'a Maps,
        cs: &'a CodeSection,
        functions: &'a [ObjFunction],
        ksyms: &'a [String],
    ) -> SectionRefs<'a> {
        let nfuncs = functions[cs.first_func..]
            .iter()
            .take_while(|f| f.section == cs.name)
            .count();
        SectionRefs {
            elf,
            maps,
            cs,
            functions,
            nfuncs,
            ksyms,
        }
    }

    /// The function holding instruction `insn`, and the instruction's
    /// index in it.
    fn func_of_insn(&self, insn: usize) -> (usize, usize) {
        let cs = self.cs;
        let slot = cs.slots[insn];
        let k = self.functions[cs.first_func..cs.first_func + self.nfuncs]
            .partition_point(|f| f.section_slot <= slot)
            .saturating_sub(1);
        let fi = cs.first_func + k;
        let first_insn = cs.insn_at_slot[self.functions[fi].section_slot].unwrap_or(0);
        (fi, insn - first_insn)
    }

    /// The function starting at `slot` of section `section`.
    fn func_at_slot(&self, section: usize, slot: usize) -> Option<usize> {
        self.functions
            .iter()
            .position(|f| f.section == self.elf.section_name(section) && f.section_slot == slot)
    }

    /// The section's ELF relocations, marking each relocated instruction
    /// in `relocated` (at most one relocation per instruction). A
    /// relocation that is not on an instruction breaks the file (an
    /// error); one whose target nfkit cannot resolve is refused or noted
    /// ([`Notes`]).
    pub fn relocations(
        &self,
        relocated: &mut [bool],
        notes: &mut Notes,
    ) -> Result<Vec<Found>, ReadError> {
        let mut found = Vec::new();
        for r in &self.elf.sections[self.cs.index].rels {
            let Some((insn, loc)) = self.site(r, relocated)? else {
                continue;
            };
            let sym = &self.elf.symbols[r.sym];
            let target = match r.rtype {
                R_BPF_64_64 => self.lddw_target(insn, sym, &loc),
                R_BPF_64_32 => self.call_target(insn, sym, &loc),
                t => Err(err(loc.clone(), ReadErrorKind::RelocationType(t))),
            };
            if let Ok(RelocTarget::Call(FuncRef::Named(n))) = &target {
                if self.ksyms.contains(n) {
                    // The linker refuses it, naming the program (a
                    // strict read leaves it to the linker).
                    notes.note(err(
                        loc.clone(),
                        ReadErrorKind::Unsupported(format!(
                            "call of kernel function '{n}' (kfunc, __ksym)"
                        )),
                    ));
                }
            }
            if let Some(t) = notes.tolerate(target)? {
                found.push(self.found(insn, t));
            }
        }
        Ok(found)
    }

    /// The instruction relocation `r` applies to, and where it is (`None`
    /// for `R_BPF_NONE`); marks it relocated.
    fn site(
        &self,
        r: &Rel,
        relocated: &mut [bool],
    ) -> Result<Option<(usize, Location)>, ReadError> {
        let cs = self.cs;
        let sym = &self.elf.symbols[r.sym];
        let loc = Location::at(&cs.name, r.offset).with_symbol(&sym.name);
        if r.rtype == R_BPF_NONE {
            return Ok(None);
        }
        if !r.offset.is_multiple_of(8) {
            return Err(bad_rel(loc, "offset is not on an instruction"));
        }
        let slot = (r.offset / 8) as usize;
        let Some(Some(insn)) = cs.insn_at_slot.get(slot).copied() else {
            return Err(bad_rel(
                loc,
                "offset is outside the section or inside an lddw",
            ));
        };
        if relocated[insn] {
            return Err(bad_rel(loc, "second relocation on one instruction"));
        }
        relocated[insn] = true;
        Ok(Some((insn, loc)))
    }

    /// `target` as a reloc of the function holding instruction `insn`.
    fn found(&self, insn: usize, target: RelocTarget) -> Found {
        let (fi, local) = self.func_of_insn(insn);
        (
            fi,
            Reloc {
                insn: local,
                target,
            },
        )
    }

    /// Unrelocated pseudo instructions: relative calls and function
    /// addresses inside the section; any other pseudo `lddw` needed a
    /// relocation (refused or noted).
    pub fn relative_refs(
        &self,
        relocated: &[bool],
        notes: &mut Notes,
    ) -> Result<Vec<Found>, ReadError> {
        let mut found = Vec::new();
        for i in (0..self.cs.insns.len()).filter(|&i| !relocated[i]) {
            if let Some(Some(f)) = notes.tolerate(self.relative_ref(i))? {
                found.push(f);
            }
        }
        Ok(found)
    }

    /// The reference of unrelocated instruction `i`, if it makes one.
    fn relative_ref(&self, i: usize) -> Result<Option<Found>, ReadError> {
        let cs = self.cs;
        let insn = &cs.insns[i];
        // Made only for an error (most instructions make no reference).
        let loc = || Location::at(&cs.name, cs.slots[i] as u64 * 8);
        let target = match insn {
            Insn::Call {
                kind: CallKind::Local,
                imm,
            }
            | Insn::Lddw {
                kind: LddwKind::Func,
                imm,
                ..
            } => {
                let t = cs.slots[i] as i64 + 1 + *imm as i64;
                let f = usize::try_from(t)
                    .ok()
                    .and_then(|t| self.func_at_slot(cs.index, t))
                    .ok_or_else(|| {
                        bad_rel(
                            loc(),
                            format!(
                                "call target {t} is not the start of a function in this section"
                            ),
                        )
                    })?;
                if matches!(insn, Insn::Call { .. }) {
                    RelocTarget::Call(FuncRef::Index(f))
                } else {
                    RelocTarget::FuncAddr(FuncRef::Index(f))
                }
            }
            Insn::Call {
                kind: CallKind::Kfunc,
                imm,
            } => {
                return Err(err(
                    loc(),
                    ReadErrorKind::Unsupported(format!(
                        "kfunc call (kernel BTF id {imm}) without a relocation"
                    )),
                ));
            }
            Insn::Lddw { kind, .. } if *kind != LddwKind::Imm64 => {
                return Err(bad_rel(
                    loc(),
                    format!(
                        "lddw with pseudo source {} has no relocation",
                        cs.raw[i].src
                    ),
                ));
            }
            _ => return Ok(None),
        };
        Ok(Some(self.found(i, target)))
    }

    /// An `R_BPF_64_64` on `lddw` `insn` against `sym`: a map, an address
    /// in global data, or a function address.
    fn lddw_target(
        &self,
        insn: usize,
        sym: &Symbol,
        loc: &Location,
    ) -> Result<RelocTarget, ReadError> {
        let Insn::Lddw { imm, .. } = self.cs.insns[insn] else {
            return Err(bad_rel(
                loc.clone(),
                "R_BPF_64_64 on an instruction that is not lddw",
            ));
        };
        let raw = self.cs.raw[insn];
        if raw.src != 0 && raw.src != 4 {
            return Err(bad_rel(
                loc.clone(),
                format!("relocated lddw already has pseudo source {}", raw.src),
            ));
        }
        let Some(sidx) = sym.section else {
            if sym.name.is_empty() {
                return Err(bad_rel(
                    loc.clone(),
                    "relocation against an undefined unnamed symbol",
                ));
            }
            return Err(err(
                loc.clone(),
                ReadErrorKind::Unsupported(format!(
                    "lddw of extern '{}' (kconfig/ksym externs)",
                    sym.name
                )),
            ));
        };
        let tsec = &self.elf.sections[sidx];
        if let Some(m) = self.maps.declared_at(sidx, sym.value) {
            return Ok(RelocTarget::Map(m));
        }
        if tsec.name == ".maps" || tsec.name == "maps" {
            return Err(bad_rel(
                loc.clone(),
                "symbol is not the start of a map definition",
            ));
        }
        if let Some(&m) = self.maps.global_by_section.get(&sidx) {
            let off = (sym.value as i64).wrapping_add(imm as i64);
            let size = self.maps.specs[m].value_size as i64;
            if off < 0 || off >= size.max(1) {
                return Err(bad_rel(
                    loc.clone(),
                    format!(
                        "offset {off} is outside section '{}' ({size} bytes)",
                        tsec.name
                    ),
                ));
            }
            return Ok(RelocTarget::MapValue {
                map: m,
                offset: off as u32,
            });
        }
        if tsec.is_code() {
            return self.func_addr_target(sidx, sym, imm, loc);
        }
        Err(err(
            loc.clone(),
            ReadErrorKind::UnknownSymbolSection(tsec.name.clone()),
        ))
    }

    /// The function whose address an `lddw` loads: `sym` (in code section
    /// `sidx`) plus the byte offset `imm`.
    fn func_addr_target(
        &self,
        sidx: usize,
        sym: &Symbol,
        imm: i32,
        loc: &Location,
    ) -> Result<RelocTarget, ReadError> {
        let byte = (sym.value as i64).wrapping_add(imm as i64);
        if byte < 0 || byte % 8 != 0 {
            return Err(bad_rel(
                loc.clone(),
                format!("function address {byte} is not an instruction"),
            ));
        }
        if named(sym) && imm == 0 {
            return Ok(RelocTarget::FuncAddr(FuncRef::Named(sym.name.clone())));
        }
        let f = self
            .func_at_slot(sidx, (byte / 8) as usize)
            .ok_or_else(|| {
                bad_rel(
                    loc.clone(),
                    format!(
                        "function address {byte} in '{}' is not a function",
                        self.elf.sections[sidx].name
                    ),
                )
            })?;
        Ok(RelocTarget::FuncAddr(FuncRef::Index(f)))
    }

    /// An `R_BPF_64_32` on local call `insn` against `sym`: a global
    /// function by name, or the function at `sym` plus the call's offset.
    fn call_target(
        &self,
        insn: usize,
        sym: &Symbol,
        loc: &Location,
    ) -> Result<RelocTarget, ReadError> {
        let Insn::Call { kind, imm } = self.cs.insns[insn] else {
            return Err(bad_rel(
                loc.clone(),
                "R_BPF_64_32 on an instruction that is not a call",
            ));
        };
        match kind {
            CallKind::Local => {}
            CallKind::Kfunc => {
                return Err(err(
                    loc.clone(),
                    ReadErrorKind::Unsupported(format!(
                        "call of kernel function '{}' (kfunc, __ksym)",
                        sym.name
                    )),
                ))
            }
            CallKind::Helper => {
                return Err(bad_rel(loc.clone(), "R_BPF_64_32 on a helper call"));
            }
        }
        let Some(sidx) = sym.section else {
            if sym.name.is_empty() {
                return Err(bad_rel(loc.clone(), "call of an undefined unnamed symbol"));
            }

            return Ok(RelocTarget::Call(FuncRef::Named(sym.name.clone())));
        };
        let tsec = &self.elf.sections[sidx];
        if !tsec.is_code() {
            return Err(err(
                loc.clone(),
                ReadErrorKind::UnknownSymbolSection(tsec.name.clone()),
            ));
        }
        let target = sym.value as i64 / 8 + imm as i64 + 1;
        if named(sym) && imm == -1 {
            return Ok(RelocTarget::Call(FuncRef::Named(sym.name.clone())));
        }
        let f = usize::try_from(target)
            .ok()
            .filter(|_| sym.value.is_multiple_of(8))
            .and_then(|t| self.func_at_slot(sidx, t))
            .ok_or_else(|| {
                bad_rel(
                    loc.clone(),
                    format!(
                        "call target slot {target} in '{}' is not the start of a function",
                        tsec.name
                    ),
                )
            })?;
        Ok(RelocTarget::Call(FuncRef::Index(f)))
    }
}

/// A global function symbol, referred to by name (resolved at link time).
fn named(s: &Symbol) -> bool {
    s.kind == SymKind::Func && !s.is_local() && !s.name.is_empty()
}
