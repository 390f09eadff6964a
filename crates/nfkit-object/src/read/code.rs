//! Code sections: split into functions by their `FUNC` symbols, with
//! relocations (and unrelocated relative calls) turned into symbolic
//! references, and `.BTF.ext` function/line info attached.
//!
//! * `refs`: relocations and relative calls into
//!   [`Reloc`](crate::object::Reloc)s.
//! * `ext`: `.BTF.ext` func_info and line_info onto the functions.

mod ext;
mod refs;

use super::elf::{Elf, Section, SymKind, Symbol};
use super::err;
use super::maps::Maps;
use super::notes::Notes;
use crate::btf::ext::BtfExt;
use crate::btf::Btf;
use crate::error::{Location, ReadError, ReadErrorKind};
use crate::image::ProgType;
use crate::object::{Binding, ObjFunction};
use crate::progtype::prog_type_of_section;
use nfkit_isa::{CallKind, Insn, LddwKind, RawInsn};
use object::elf as e;
use refs::SectionRefs;

/// A decoded code section.
struct CodeSection {
    index: usize,
    name: String,
    insns: Vec<Insn>,
    /// Slot of each instruction.
    slots: Vec<usize>,
    /// For each slot, the instruction starting there (None: second half of lddw).
    insn_at_slot: Vec<Option<usize>>,
    /// Per instruction: its original src field (pseudo kind).
    raw: Vec<RawInsn>,
    /// Functions of this section: (first function index in the object, count).
    first_func: usize,
}

fn layout(loc: Location, msg: impl Into<String>) -> ReadError {
    err(loc, ReadErrorKind::Layout(msg.into()))
}

fn bad_rel(loc: Location, msg: impl Into<String>) -> ReadError {
    err(loc, ReadErrorKind::BadRelocation(msg.into()))
}

fn decode(sec: &Section<'_>) -> Result<CodeSection, ReadError> {
    let loc = Location::section(&sec.name);
    if !sec.data.len().is_multiple_of(8) {
        return Err(layout(
            loc,
            format!("code size {} is not a multiple of 8", sec.data.len()),
        ));
    }
    let raw =
        nfkit_isa::raw_slots(sec.data).map_err(|e| err(loc.clone(), ReadErrorKind::Decode(e)))?;
    let insns = nfkit_isa::decode_program(&raw).map_err(|d| {
        err(
            Location::at(&sec.name, d.index as u64 * 8),
            ReadErrorKind::Decode(d),
        )
    })?;
    let slots = nfkit_isa::slot_offsets(&insns);
    let mut insn_at_slot = vec![None; raw.len()];
    for (i, &s) in slots.iter().enumerate() {
        insn_at_slot[s] = Some(i);
    }
    let raw_first: Vec<RawInsn> = slots.iter().map(|&s| raw[s]).collect();
    Ok(CodeSection {
        index: sec.index,
        name: sec.name.clone(),
        insns,
        slots,
        insn_at_slot,
        raw: raw_first,
        first_func: 0,
    })
}

fn binding(s: &Symbol) -> Binding {
    match s.bind {
        e::STB_LOCAL => Binding::Local,
        e::STB_WEAK => Binding::Weak,
        _ => Binding::Global,
    }
}

pub(crate) fn read_functions(
    elf: &Elf<'_>,
    maps: &Maps,
    (btf, ext): (Option<&Btf>, Option<&BtfExt>),
    unknown_sections: Option<ProgType>,
    notes: &mut Notes,
) -> Result<Vec<ObjFunction>, ReadError> {
    let mut functions: Vec<ObjFunction> = Vec::new();
    let mut code: Vec<CodeSection> = Vec::new();
    // Pass 1: split every code section into functions.
    for sec in elf
        .sections
        .iter()
        .filter(|s| s.is_code() && !s.data.is_empty())
    {
        let first = functions.len();
        let split = split_section(elf, sec, unknown_sections, &mut functions, notes);
        match notes.tolerate(split)? {
            Some(Some(cs)) => code.push(cs),
            // The section could not be split: shown without it.
            _ => functions.truncate(first),
        }
    }
    promote_text(&mut functions, unknown_sections);
    // Pass 2: relocations and relative calls.
    let ksyms: Vec<String> = btf
        .map(|b| b.datasec_vars(".ksyms"))
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect();
    for cs in &code {
        let refs = SectionRefs::new(elf, maps, cs, &functions, &ksyms);
        let mut relocated = vec![false; cs.insns.len()];
        let mut new_relocs = refs.relocations(&mut relocated, notes)?;
        new_relocs.extend(refs.relative_refs(&relocated, notes)?);
        for (fi, r) in new_relocs {
            functions[fi].relocs.push(r);
        }
    }
    for f in &mut functions {
        f.relocs.sort_by_key(|r| r.insn);
    }
    if let Some(ext) = ext {
        notes.tolerate(ext::attach_ext(&mut functions, ext, btf))?;
    }
    Ok(functions)
}

/// When no section holds programs, the global functions of `.text` are
/// the programs (of type `unknown`, else `unspec`), as libbpf treats an
/// object of bare functions: the conformance runner's objects are one
/// global `main` in `.text`. The linker takes them as entries only when
/// no object it links has a program section ([`crate::link`]).
fn promote_text(functions: &mut [ObjFunction], unknown: Option<ProgType>) {
    if functions.iter().any(|f| f.prog_type.is_some()) {
        return;
    }
    for f in functions
        .iter_mut()
        .filter(|f| f.section == ".text" && f.binding != Binding::Local)
    {
        f.prog_type = Some(unknown.unwrap_or(ProgType::Unspec));
    }
}

/// The program type of code section `sec` (`None` for `.text`);
/// `unknown` for a name that follows no convention, when given.
fn section_prog_type(
    sec: &Section<'_>,
    unknown: Option<ProgType>,
) -> Result<Option<ProgType>, ReadError> {
    if sec.name == ".text" {
        return Ok(None);
    }
    let pt = prog_type_of_section(&sec.name).or(unknown).ok_or_else(|| {
        err(
            Location::section(&sec.name),
            ReadErrorKind::UnknownSection(sec.name.clone()),
        )
    })?;
    Ok(Some(pt))
}

/// Where a function starts in a code section: at a `FUNC` symbol, or at
/// a call target no symbol names.
enum Start<'s> {
    Symbol(&'s Symbol),
    /// Byte offset of an unsymbolled call (or function address) target.
    Unnamed(u64),
}

impl Start<'_> {
    fn offset(&self) -> u64 {
        match self {
            Start::Symbol(s) => s.value,
            Start::Unnamed(o) => *o,
        }
    }
}

/// Byte offsets, inside `cs`, of the targets of its unrelocated relative
/// calls and function addresses (`call` with src 1, `lddw` with src 4):
/// code clang's assembler or hand-written bytecode reaches without a
/// symbol (the conformance runner's objects, for instance).
fn relative_targets(sec: &Section<'_>, cs: &CodeSection) -> Vec<u64> {
    let relocated: std::collections::HashSet<u64> = sec.rels.iter().map(|r| r.offset).collect();
    let mut out = Vec::new();
    for (i, insn) in cs.insns.iter().enumerate() {
        let imm = match insn {
            Insn::Call {
                kind: CallKind::Local,
                imm,
            }
            | Insn::Lddw {
                kind: LddwKind::Func,
                imm,
                ..
            } => *imm,
            _ => continue,
        };
        if relocated.contains(&(cs.slots[i] as u64 * 8)) {
            continue;
        }
        let t = cs.slots[i] as i64 + 1 + i64::from(imm);
        if t > 0 && (t as usize) < cs.insn_at_slot.len() {
            out.push(t as u64 * 8);
        }
    }
    out
}

/// Decodes code section `sec` and appends its functions: one per `FUNC`
/// symbol (the symbols must cover the section from offset 0), and one
/// static subprogram `sub_<hex offset>` per call target that no symbol
/// names, as libbpf gives every call target its own subprogram. When
/// tolerant, an unknown section name gives programs of type `unspec`, code
/// before the first symbol a `sub_0`, and undecodable code no section
/// (`None`), each noted.
fn split_section(
    elf: &Elf<'_>,
    sec: &Section<'_>,
    unknown: Option<ProgType>,
    functions: &mut Vec<ObjFunction>,
    notes: &mut Notes,
) -> Result<Option<CodeSection>, ReadError> {
    if sec.has_rela {
        notes.refuse(err(
            Location::section(&sec.name),
            ReadErrorKind::Unsupported("RELA relocations".into()),
        ))?;
    }
    let prog_type = notes
        .tolerate(section_prog_type(sec, unknown))?
        .unwrap_or(Some(ProgType::Unspec));
    let Some(mut cs) = notes.tolerate(decode(sec))? else {
        return Ok(None);
    };
    cs.first_func = functions.len();
    let mut starts: Vec<Start<'_>> = elf
        .symbols_in(sec.index)
        .map(|(_, s)| s)
        .filter(|s| s.kind == SymKind::Func)
        .map(Start::Symbol)
        .collect();
    for t in relative_targets(sec, &cs) {
        if !starts.iter().any(|s| s.offset() == t) {
            starts.push(Start::Unnamed(t));
        }
    }
    starts.sort_by_key(Start::offset);
    if starts.first().map(Start::offset) != Some(0) {
        notes.refuse(layout(
            Location::at(&sec.name, 0),
            "code is not covered by a function symbol",
        ))?;
        starts.insert(0, Start::Unnamed(0));
    }
    for (k, s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map(Start::offset);
        let f = match s {
            Start::Symbol(s) => {
                if prog_type.is_some() && s.is_local() {
                    notes.refuse(err(
                        Location::at(&cs.name, s.value).with_symbol(&s.name),
                        ReadErrorKind::Unsupported(
                            "static functions in program sections (make the program global)".into(),
                        ),
                    ))?;
                }
                function_at(&cs, s, end, prog_type)?
            }
            Start::Unnamed(o) => {
                let synth = Symbol {
                    name: format!("sub_{o:x}"),
                    section: Some(sec.index),
                    value: *o,
                    size: 0,
                    kind: SymKind::Func,
                    bind: e::STB_LOCAL,
                };
                function_at(&cs, &synth, end, None)?
            }
        };
        functions.push(f);
    }
    Ok(Some(cs))
}

/// The function of symbol `s` in `cs`, up to the next function start
/// `next` (a byte offset; or the end of the section).
fn function_at(
    cs: &CodeSection,
    s: &Symbol,
    next: Option<u64>,
    prog_type: Option<ProgType>,
) -> Result<ObjFunction, ReadError> {
    let nslots = cs.insn_at_slot.len();
    let floc = Location::at(&cs.name, s.value).with_symbol(&s.name);
    if !s.value.is_multiple_of(8) {
        return Err(layout(floc, "function is not 8-byte aligned"));
    }
    let start = (s.value / 8) as usize;
    let end = match next {
        Some(n) => (n / 8) as usize,
        None => nslots,
    };
    if start >= end || end > nslots {
        return Err(layout(
            floc,
            "function overlaps another or lies outside the section",
        ));
    }
    let (Some(first), true) = (
        cs.insn_at_slot.get(start).copied().flatten(),
        end == nslots || cs.insn_at_slot.get(end).copied().flatten().is_some(),
    ) else {
        return Err(layout(floc, "function boundary splits an lddw"));
    };
    let last = match end == nslots {
        true => cs.insns.len(),
        false => cs.insn_at_slot[end].unwrap_or(cs.insns.len()),
    };
    let bind = binding(s);
    Ok(ObjFunction {
        name: s.name.clone(),
        section: cs.name.clone(),
        section_slot: start,
        insns: cs.insns[first..last].to_vec(),
        binding: bind,
        prog_type,
        btf_id: None,
        relocs: Vec::new(),
        line_info: Vec::new(),
        core_relos: Vec::new(),
    })
}
