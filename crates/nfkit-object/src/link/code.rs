//! Function layout and relocation: the kept functions concatenated, every
//! reference resolved to a map index or a relative offset.

use super::core_relos::CoreCx;
use super::maps::MergedMaps;
use super::Globals;
use crate::btf::MergeMap;
use crate::error::LinkError;
use crate::image::{CoreSite, Entry, Function, LineInfo, MapInit};
use crate::object::{Binding, FuncRef, ObjFunction, Object, RelocTarget};
use nfkit_isa::{Insn, LddwKind};

/// Where the kept functions go in the Image.
pub(super) struct Layout {
    /// Per object, per object function: its Image function (None: dropped,
    /// a weak definition that lost).
    pub(super) func_index: Vec<Vec<Option<usize>>>,
    pub(super) functions: Vec<Function>,
    /// (object, function) of each Image function.
    pub(super) placed: Vec<(usize, usize)>,
    /// Total length in slots.
    pub(super) slots: usize,
}

impl Layout {
    /// Concatenates the kept functions (object order, then the order read).
    pub(super) fn new(
        objects: &[Object],
        globals: &Globals<'_>,
        btf_maps: &[Option<MergeMap>],
    ) -> Layout {
        let kept = |oi: usize, fi: usize| -> bool {
            let f = &objects[oi].functions[fi];
            f.binding == Binding::Local
                || globals
                    .get(f.name.as_str())
                    .is_some_and(|&(wo, wf, _)| wo == oi && wf == fi)
        };
        let mut layout = Layout {
            func_index: Vec::new(),
            functions: Vec::new(),
            placed: Vec::new(),
            slots: 0,
        };
        for (oi, o) in objects.iter().enumerate() {
            let mut idx = vec![None; o.functions.len()];
            for (fi, f) in o.functions.iter().enumerate() {
                if !kept(oi, fi) {
                    continue;
                }
                idx[fi] = Some(layout.functions.len());
                let len = f.slot_len();
                layout.functions.push(Function {
                    name: f.name.clone(),
                    start: layout.slots,
                    len,
                    global: f.binding != Binding::Local,
                    btf_id: match (&btf_maps[oi], f.btf_id) {
                        (Some(mm), Some(id)) => Some(mm.map(id)),
                        _ => None,
                    },
                    origin: o.origin.clone(),
                });
                layout.placed.push((oi, fi));
                layout.slots += len;
            }
            layout.func_index.push(idx);
        }
        layout
    }
}

/// The linked code: instructions, line info (in image slots) and entries.
pub(super) struct Code {
    pub(super) insns: Vec<Insn>,
    pub(super) line_info: Vec<LineInfo>,
    pub(super) entries: Vec<Entry>,
    pub(super) core_sites: Vec<CoreSite>,
}

/// Where a relocation applies: an instruction of function `f` of object `oi`.
struct Site<'a> {
    oi: usize,
    f: &'a ObjFunction,
    /// Slot of the instruction in its function.
    slot: usize,
    /// Slot of the instruction in the Image.
    at: usize,
}

impl Site<'_> {
    fn bad(&self, objects: &[Object], why: String) -> LinkError {
        LinkError::BadReference {
            object: objects[self.oi].origin.clone(),
            function: self.f.name.clone(),
            slot: self.slot,
            why,
        }
    }
}

/// The symbols, maps and function layout the code is linked against.
pub(super) struct Linker<'a> {
    pub(super) objects: &'a [Object],
    pub(super) globals: Globals<'a>,
    pub(super) maps: MergedMaps,
    pub(super) layout: Layout,
    pub(super) core: CoreCx<'a>,
}

impl Linker<'_> {
    /// The Image function `r` of object `oi` refers to.
    fn resolve(&self, oi: usize, r: &FuncRef) -> Option<usize> {
        let func_index = &self.layout.func_index;
        match r {
            FuncRef::Index(i) => match func_index[oi].get(*i).copied().flatten() {
                Some(g) => Some(g),
                None => {
                    let name = &self.objects[oi].functions.get(*i)?.name;
                    let &(wo, wf, _) = self.globals.get(name.as_str())?;
                    func_index[wo][wf]
                }
            },
            FuncRef::Named(name) => {
                let &(wo, wf, _) = self.globals.get(name.as_str())?;
                func_index[wo][wf]
            }
        }
    }

    /// The name `r` of object `oi` refers to (for diagnostics).
    fn name_of(&self, oi: usize, r: &FuncRef) -> String {
        match r {
            FuncRef::Named(n) => n.clone(),
            FuncRef::Index(i) => self.objects[oi]
                .functions
                .get(*i)
                .map(|f| f.name.clone())
                .unwrap_or_default(),
        }
    }

    /// Every placed function's instructions with references resolved, its
    /// line info shifted to image slots, and the entry programs.
    pub(super) fn code(&self) -> Result<Code, LinkError> {
        let mut code = Code {
            insns: Vec::with_capacity(self.layout.slots),
            line_info: Vec::new(),
            entries: Vec::new(),
            core_sites: Vec::new(),
        };
        // `.text` programs (objects of bare functions) are entries only
        // when no linked object has a program section.
        let section_programs = self.objects.iter().any(|o| {
            o.functions
                .iter()
                .any(|f| f.prog_type.is_some() && f.section != ".text")
        });
        for (gi, &(oi, fi)) in self.layout.placed.iter().enumerate() {
            let f = &self.objects[oi].functions[fi];
            let start = self.layout.functions[gi].start;
            let mut body = self.relocate(oi, f, start)?;
            let sites = self.core.apply(self.objects, oi, f, start, &mut body);
            code.core_sites.extend(sites);
            code.insns.extend(body);
            code.line_info.extend(f.line_info.iter().map(|l| LineInfo {
                slot: l.slot + start,
                ..l.clone()
            }));
            let entry = f.section != ".text" || !section_programs;
            if let Some(pt) = f.prog_type.filter(|_| entry) {
                code.entries.push(Entry {
                    name: f.name.clone(),
                    section: f.section.clone(),
                    prog_type: pt,
                    function: gi,
                });
            }
        }
        Ok(code)
    }

    /// The body of function `f` of object `oi`, placed at image slot
    /// `start`, with its relocations applied.
    fn relocate(&self, oi: usize, f: &ObjFunction, start: usize) -> Result<Vec<Insn>, LinkError> {
        let slots = nfkit_isa::slot_offsets(&f.insns);
        let mut body = f.insns.clone();
        for r in &f.relocs {
            let Some(ins) = body.get_mut(r.insn) else {
                return Err(LinkError::BadReference {
                    object: self.objects[oi].origin.clone(),
                    function: f.name.clone(),
                    slot: r.insn,
                    why: "relocation past the end of the function".into(),
                });
            };
            let site = Site {
                oi,
                f,
                slot: slots[r.insn],
                at: start + slots[r.insn],
            };
            *ins = self.apply(&site, *ins, &r.target)?;
        }
        Ok(body)
    }

    /// Instruction `ins` at `site` with its reference to `target` resolved:
    /// map indices for maps, relative offsets for calls and addresses.
    fn apply(&self, site: &Site<'_>, ins: Insn, target: &RelocTarget) -> Result<Insn, LinkError> {
        let err = |why: String| site.bad(self.objects, why);
        let dst = match ins {
            Insn::Lddw { dst, .. } => Some(dst),
            _ => None,
        };
        Ok(match target {
            RelocTarget::Map(m) | RelocTarget::MapValue { map: m, .. } => {
                let (gm, shift) = *self.maps.index[site.oi]
                    .get(*m)
                    .ok_or_else(|| err(format!("map {m} does not exist")))?;
                let dst = dst.ok_or_else(|| err("map reference on a non-lddw".into()))?;
                match *target {
                    RelocTarget::MapValue { offset, .. } => Insn::Lddw {
                        kind: LddwKind::MapIdxValue,
                        dst,
                        imm: gm as i32,
                        next_imm: offset.wrapping_add(shift) as i32,
                    },
                    _ => Insn::Lddw {
                        kind: LddwKind::MapIdx,
                        dst,
                        imm: gm as i32,
                        next_imm: 0,
                    },
                }
            }
            RelocTarget::Call(fr) => Insn::Call {
                kind: nfkit_isa::CallKind::Local,
                imm: self.func_offset(site, fr)?,
            },
            RelocTarget::FuncAddr(fr) => {
                let imm = self.func_offset(site, fr)?;
                let dst = dst.ok_or_else(|| err("function address on a non-lddw".into()))?;
                Insn::Lddw {
                    kind: LddwKind::Func,
                    dst,
                    imm,
                    next_imm: 0,
                }
            }
        })
    }

    /// True if `symbol` is a kernel function object `oi` declares: a
    /// variable of its `.ksyms` BTF section, as `__ksym` declarations give
    /// (an extern of another object is not in it).
    fn is_kfunc(&self, oi: usize, symbol: &str) -> bool {
        self.objects[oi]
            .btf
            .as_ref()
            .is_some_and(|btf| btf.datasec_vars(".ksyms").iter().any(|v| v.name == symbol))
    }

    /// The offset from the instruction at `site` to function `fr`, as a
    /// call or function address encodes it.
    fn func_offset(&self, site: &Site<'_>, fr: &FuncRef) -> Result<i32, LinkError> {
        let g = self.resolve(site.oi, fr).ok_or_else(|| {
            let (object, symbol) = (&self.objects[site.oi], self.name_of(site.oi, fr));
            let (object, function, slot) = (object.origin.clone(), site.f.name.clone(), site.slot);
            if self.is_kfunc(site.oi, &symbol) {
                LinkError::Kfunc {
                    object,
                    function,
                    slot,
                    symbol,
                }
            } else {
                LinkError::UndefinedSymbol {
                    object,
                    function,
                    slot,
                    symbol,
                }
            }
        })?;
        let rel = self.layout.functions[g].start as i64 - (site.at as i64 + 1);
        i32::try_from(rel).map_err(|_| {
            site.bad(
                self.objects,
                format!("call offset {rel} does not fit 32 bits"),
            )
        })
    }

    /// Prog array contents: each object's initial slots, pointing at
    /// entries of the Image (the first initialisation of a slot wins).
    pub(super) fn map_inits(&self, entries: &[Entry]) -> Result<Vec<MapInit>, LinkError> {
        let mut map_inits: Vec<MapInit> = Vec::new();
        for (oi, o) in self.objects.iter().enumerate() {
            for mi in &o.map_inits {
                let Some(&(map, _)) = self.maps.index[oi].get(mi.map) else {
                    continue;
                };
                let bad = |target: String| LinkError::BadMapInit {
                    object: o.origin.clone(),
                    map: self.maps.maps[map].name.clone(),
                    slot: mi.slot,
                    target,
                };
                let name = self.name_of(oi, &mi.target);
                let g = self
                    .resolve(oi, &mi.target)
                    .ok_or_else(|| bad(name.clone()))?;
                let entry = entries
                    .iter()
                    .position(|e| e.function == g)
                    .ok_or_else(|| bad(name))?;
                if !map_inits.iter().any(|x| x.map == map && x.slot == mi.slot) {
                    map_inits.push(MapInit {
                        map,
                        slot: mi.slot,
                        entry,
                    });
                }
            }
        }
        Ok(map_inits)
    }
}
