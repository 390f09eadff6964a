//! What an object holds, for people and scripts (`nfkit object show`):
//! its programs, other functions, declared maps and global data, with
//! BTF type names where the object has BTF. Serialises to a stable JSON
//! form.

use crate::btf::{Btf, Linkage};
use crate::error::{one_line, ReadError};
use crate::image::{InnerSlot, MapKind, MapSpec};
use crate::object::{Binding, Object};
use crate::read::Inspection;
use serde::Serialize;

/// An entry program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProgramSummary {
    pub name: String,
    pub section: String,
    /// Program type as bpftool names it (`xdp`, `sched_cls`, ...).
    #[serde(rename = "type")]
    pub prog_type: String,
    /// Byte offset of the program in its section.
    pub offset: u64,
    /// Number of instructions (`lddw` counts once).
    pub insns: usize,
    /// Size in bytes (8 per slot; `lddw` takes two slots).
    pub size: u64,
    /// The C declaration from BTF, when the object has it.
    pub signature: Option<String>,
}

/// A function that is not an entry program (a subprogram).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionSummary {
    pub name: String,
    pub section: String,
    /// `static`, `global` or `weak`.
    pub binding: &'static str,
    pub offset: u64,
    pub insns: usize,
    pub size: u64,
    pub signature: Option<String>,
}

/// A declared map (`.maps` or legacy `maps`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapSummary {
    pub name: String,
    /// Map type as bpftool names it (`hash`, `percpu_array`, `lpm_trie`, ...).
    #[serde(rename = "type")]
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// Key and value types in C, when the definition names them.
    pub key_type: Option<String>,
    pub value_type: Option<String>,
    pub pinned: bool,
    /// Maps of maps: the inner map definition and the initial slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner: Option<Box<InnerSummary>>,
}

/// The inner maps of a map of maps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InnerSummary {
    /// The definition every inner map must match (named after its C struct).
    pub template: MapSummary,
    /// Initial slots: key -> declared map.
    pub slots: Vec<InnerSlot>,
}

/// A variable of a global-data section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VarSummary {
    pub name: String,
    pub offset: u32,
    pub size: u32,
    /// `static` or `global` (`weak` for weak ELF symbols).
    pub linkage: &'static str,
    /// The variable's type in C, when the object has BTF.
    #[serde(rename = "type")]
    pub c_type: Option<String>,
}

/// A global-data section (`.rodata*`, `.data*`, `.bss*`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GlobalSummary {
    pub section: String,
    pub size: u32,
    pub read_only: bool,
    /// Variables by offset.
    pub vars: Vec<VarSummary>,
}

/// A CO-RE relocation, beside the instruction it patches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CoreReloSummary {
    pub function: String,
    /// Slot of the instruction in its function.
    pub slot: usize,
    /// `CO-RE byte_off struct iphdr::daddr = 16` (the value on the running
    /// kernel), or why it has none.
    pub note: String,
}

/// Something of the object nfkit cannot load or run (what a strict read
/// refuses), with what it touches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NoteSummary {
    /// The section it touches (a code section, `.maps`, `.BTF.ext`, ...).
    pub section: Option<String>,
    /// The symbol it touches (a function, a map, an extern).
    pub symbol: Option<String>,
    /// Byte offset in the section (an instruction, a map definition).
    pub offset: Option<u64>,
    /// What is not supported, and why.
    pub what: String,
}

impl NoteSummary {
    pub fn of(e: &ReadError) -> NoteSummary {
        NoteSummary {
            section: e.location.section.clone(),
            symbol: e.location.symbol.clone(),
            offset: e.location.offset,
            what: one_line(&e.kind.to_string()),
        }
    }
}

/// Everything `nfkit object show` reports about an object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectSummary {
    pub license: String,
    pub btf: bool,
    pub programs: Vec<ProgramSummary>,
    pub functions: Vec<FunctionSummary>,
    pub maps: Vec<MapSummary>,
    pub globals: Vec<GlobalSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub core_relos: Vec<CoreReloSummary>,
    /// What nfkit cannot load or run (empty for an object read strictly).
    pub notes: Vec<NoteSummary>,
}

fn binding_name(b: Binding) -> &'static str {
    match b {
        Binding::Local => "static",
        Binding::Global => "global",
        Binding::Weak => "weak",
    }
}

fn type_name(btf: Option<&Btf>, id: Option<u32>) -> Option<String> {
    Some(btf?.c_type(id?))
}

fn map_summary(m: &MapSpec, btf: Option<&Btf>) -> MapSummary {
    MapSummary {
        name: m.name.clone(),
        map_type: m.map_type.name(),
        key_size: m.key_size,
        value_size: m.value_size,
        max_entries: m.max_entries,
        flags: m.flags,
        key_type: type_name(btf, m.key_type_id),
        value_type: type_name(btf, m.value_type_id),
        pinned: m.pin_by_name,
        inner: m.inner.as_ref().map(|i| {
            Box::new(InnerSummary {
                template: map_summary(&i.template, btf),
                slots: i.slots.clone(),
            })
        }),
    }
}

impl ObjectSummary {
    /// Summarises an object read by [`crate::inspect_object`], with its
    /// notes.
    pub fn of_inspection(i: &Inspection) -> ObjectSummary {
        ObjectSummary {
            notes: i.notes.iter().map(NoteSummary::of).collect(),
            ..ObjectSummary::of(&i.object)
        }
    }

    /// Summarises `object`.
    pub fn of(object: &Object) -> ObjectSummary {
        let btf = object.btf.as_ref();
        let signature = |id: Option<u32>| {
            let sig = btf?.func_signature(id?).ok()?;
            Some(sig.c_decl)
        };
        let mut programs = Vec::new();
        let mut functions = Vec::new();
        for f in &object.functions {
            let slots = f.slot_len();
            match f.prog_type {
                Some(t) => programs.push(ProgramSummary {
                    name: f.name.clone(),
                    section: f.section.clone(),
                    prog_type: t.name().to_string(),
                    offset: f.section_slot as u64 * 8,
                    insns: f.insns.len(),
                    size: slots as u64 * 8,
                    signature: signature(f.btf_id),
                }),
                None => functions.push(FunctionSummary {
                    name: f.name.clone(),
                    section: f.section.clone(),
                    binding: binding_name(f.binding),
                    offset: f.section_slot as u64 * 8,
                    insns: f.insns.len(),
                    size: slots as u64 * 8,
                    signature: signature(f.btf_id),
                }),
            }
        }
        let maps = object
            .maps
            .iter()
            .filter(|m| m.kind == MapKind::Declared)
            .map(|m| map_summary(m, btf))
            .collect();
        let mut globals = Vec::new();
        for (mi, m) in object.maps.iter().enumerate() {
            let MapKind::Global { section, read_only } = &m.kind else {
                continue;
            };
            let mut vars: Vec<VarSummary> = btf
                .map(|b| b.datasec_vars(section))
                .unwrap_or_default()
                .into_iter()
                .map(|v| VarSummary {
                    c_type: btf.map(|b| b.c_type(v.ty)),
                    linkage: match v.linkage {
                        Linkage::Static => "static",
                        _ => "global",
                    },
                    name: v.name,
                    offset: v.offset,
                    size: v.size,
                })
                .collect();
            // Symbols BTF does not describe (objects without BTF).
            for s in object.data_symbols.iter().filter(|s| s.map == mi) {
                if !vars.iter().any(|v| v.name == s.name) {
                    vars.push(VarSummary {
                        name: s.name.clone(),
                        offset: s.offset,
                        size: s.size,
                        linkage: binding_name(s.binding),
                        c_type: None,
                    });
                }
            }
            vars.sort_by(|a, b| (a.offset, &a.name).cmp(&(b.offset, &b.name)));
            globals.push(GlobalSummary {
                section: section.clone(),
                size: m.value_size,
                read_only: *read_only,
                vars,
            });
        }
        ObjectSummary {
            license: object.license.clone(),
            btf: btf.is_some(),
            programs,
            functions,
            maps,
            globals,
            core_relos: core_relos(object),
            notes: Vec::new(),
        }
    }
}

/// Every CO-RE relocation of `object`, with its value on this kernel.
fn core_relos(object: &Object) -> Vec<CoreReloSummary> {
    let mut out = Vec::new();
    for f in &object.functions {
        let slots = nfkit_isa::slot_offsets(&f.insns);
        for r in &f.core_relos {
            out.push(CoreReloSummary {
                function: f.name.clone(),
                slot: slots.get(r.insn).copied().unwrap_or(0),
                note: crate::co_re::note(object.btf.as_ref(), r),
            });
        }
    }
    out
}
