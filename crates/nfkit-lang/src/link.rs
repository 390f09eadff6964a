//! Linking: the generated chain functions (as an [`Object`] with BTF and
//! line info), the NF modules they call (only the reachable functions,
//! without their standalone programs) and the classifier program into one
//! [`Image`]; then the stack budget of every call path.

use crate::codegen::{GenFunc, Generated, ObjMap, Ref};
use crate::ir::{ClsKey, Program};
use crate::types::Ty;
use nfkit_isa::{CallKind, Insn, LddwKind, Operand, Reg};
use nfkit_nf::{Hook, SearchPath};
use nfkit_object::btf::{Kind, Linkage, Member, Param, Type, INT_SIGNED};
use nfkit_object::object::{Binding, FuncRef, ObjFunction, Reloc, RelocTarget};
use nfkit_object::{Btf, Image, LineInfo, MapKind, MapSpec, MapType, Object};
use std::collections::HashMap;

/// Kernel stack limit summed over one call path.
pub const STACK_LIMIT: u32 = 512;
/// Kernel call-frame limit.
pub const MAX_FRAMES: usize = 8;

/// Link errors.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("no object for NF module '{module}' (hook {hook})")]
    NoModule { module: String, hook: String },
    /// The NF search path could not be read.
    #[error(transparent)]
    Search(#[from] nfkit_nf::NfError),
    /// An NF module's object is malformed.
    #[error("{origin}: {cause}")]
    Read {
        origin: String,
        cause: Box<nfkit_object::ReadError>,
    },
    /// The objects do not link (duplicate or missing symbols, ...).
    #[error(transparent)]
    Objects(#[from] nfkit_object::LinkError),
    #[error("dynamic mode needs a classifier (every_packet(...), ...)")]
    DynNoClassifier,
    #[error("the dynamic image has no nfkit_progs (the nf.classify module is not nfkit's)")]
    DynNoProgArray,
    #[error("no dynamic entry dyn_{nf} in NF module {module}")]
    DynNoEntry { nf: String, module: String },
    #[error("call path {path} needs {bytes} bytes of stack (the kernel allows {STACK_LIMIT})")]
    Stack { path: String, bytes: u32 },
    #[error("call path {path} has {frames} frames (the kernel allows {MAX_FRAMES})")]
    Frames { path: String, frames: usize },
    #[error(transparent)]
    Inline(#[from] nfkit_object::InlineError),
}

/// The `MapSpec` of a shared `nfkit_*` map as the NF header defines it.
fn shared_map(name: &str) -> MapSpec {
    let (map_type, key, value, n) = match name {
        "nfkit_pktinfo" => (MapType::PercpuArray, 4, 80, 16),
        "nfkit_frame" => (MapType::PercpuArray, 4, 504, 16),
        "nfkit_progs" => (MapType::ProgArray, 4, 4, 1024),
        _ => (MapType::PercpuArray, 4, 4, 4), // nfkit_nest
    };
    MapSpec {
        name: name.to_string(),
        kind: MapKind::Declared,
        map_type,
        key_size: key,
        value_size: value,
        max_entries: n,
        flags: 0,
        key_type_id: None,
        value_type_id: None,
        data: None,
        pin_by_name: false,
        inner: None,
    }
}

/// The map specifications of the generated object.
pub fn map_specs(prog: &Program, gen: &Generated) -> Vec<MapSpec> {
    gen.maps
        .iter()
        .map(|m| match m {
            ObjMap::User(i) => {
                let d = &prog.maps[*i];
                MapSpec {
                    name: d.name.clone(),
                    kind: MapKind::Declared,
                    map_type: d.map_type,
                    key_size: d.key_size(),
                    value_size: d.value.bytes(),
                    max_entries: d.size,
                    // The kernel requires BPF_F_NO_PREALLOC for LPM tries.
                    flags: u32::from(d.map_type == MapType::LpmTrie),
                    key_type_id: None,
                    value_type_id: None,
                    data: None,
                    pin_by_name: false,
                    inner: None,
                }
            }
            ObjMap::PktInfo => shared_map("nfkit_pktinfo"),
            ObjMap::Nest => shared_map("nfkit_nest"),
            ObjMap::Frame => shared_map("nfkit_frame"),
            ObjMap::Progs => shared_map("nfkit_progs"),
        })
        .collect()
}

/// BTF of the generated functions: each a `FUNC` with the NF signature
/// `u64 f(void *ctx, u64, u64, u64, u64)`, static linkage (the verifier
/// checks them in their caller's context); `bpf_loop` callbacks have
/// `long cb(u64 index, void *ctx)`.
fn build_btf(funcs: &[GenFunc]) -> (Btf, Vec<u32>) {
    let mut btf = Btf::new();
    let u64_id = btf.add(Type::new(
        "unsigned long long",
        Kind::Int {
            size: 8,
            encoding: 0,
            offset: 0,
            bits: 64,
        },
    ));
    let ptr = btf.add(Type::new("", Kind::Ptr { ty: 0 }));
    let mut params = vec![Param {
        name: "ctx".into(),
        ty: ptr,
    }];
    for i in 1..=4 {
        params.push(Param {
            name: format!("a{i}"),
            ty: u64_id,
        });
    }
    let proto = btf.add(Type::new(
        "",
        Kind::FuncProto {
            ret: u64_id,
            params,
        },
    ));
    let long_id = btf.add(Type::new(
        "long",
        Kind::Int {
            size: 8,
            encoding: 1,
            offset: 0,
            bits: 64,
        },
    ));
    let cb_proto = btf.add(Type::new(
        "",
        Kind::FuncProto {
            ret: long_id,
            params: vec![
                Param {
                    name: "index".into(),
                    ty: u64_id,
                },
                Param {
                    name: "ctx".into(),
                    ty: ptr,
                },
            ],
        },
    ));
    let ids = funcs
        .iter()
        .map(|f| {
            btf.add(Type::new(
                f.name.clone(),
                Kind::Func {
                    proto: if f.callback { cb_proto } else { proto },
                    linkage: Linkage::Static,
                },
            ))
        })
        .collect();
    (btf, ids)
}

/// BTF types of the maps with tuple keys, so that tools show their
/// entries typed: the key a struct `<map>_key` with members `f0, f1,
/// ...` (the layout of [`crate::ir::MapDecl::key_layout`]), the value
/// its integer type.
fn tuple_key_types(prog: &Program, gen: &Generated, btf: &mut Btf, specs: &mut [MapSpec]) {
    let mut ints: HashMap<Ty, u32> = HashMap::new();
    let mut int = |btf: &mut Btf, ty: Ty| {
        *ints.entry(ty).or_insert_with(|| {
            let (name, encoding) = match ty {
                Ty::U8 | Ty::Bool => ("unsigned char", 0),
                Ty::U16 => ("unsigned short", 0),
                Ty::U32 => ("unsigned int", 0),
                Ty::U64 => ("unsigned long long", 0),
                Ty::S8 => ("signed char", INT_SIGNED),
                Ty::S16 => ("short", INT_SIGNED),
                Ty::S32 => ("int", INT_SIGNED),
                Ty::S64 => ("long long", INT_SIGNED),
            };
            btf.add(Type::new(
                name,
                Kind::Int {
                    size: ty.bytes(),
                    encoding,
                    offset: 0,
                    bits: ty.bytes() as u8 * 8,
                },
            ))
        })
    };
    for (spec, m) in specs.iter_mut().zip(&gen.maps) {
        let ObjMap::User(i) = m else { continue };
        let d = &prog.maps[*i];
        if d.tuple.is_empty() {
            continue;
        }
        let (offs, size) = d.key_layout();
        let members = d
            .tuple
            .iter()
            .zip(offs)
            .enumerate()
            .map(|(k, (&ty, off))| Member {
                name: format!("f{k}"),
                ty: int(btf, ty),
                bit_offset: off * 8,
                bitfield_size: 0,
            })
            .collect();
        let key = btf.add(Type::new(
            format!("{}_key", d.name),
            Kind::Struct { size, members },
        ));
        spec.key_type_id = Some(key);
        spec.value_type_id = Some(int(btf, d.value));
    }
}

/// The generated code as an unlinked object.
pub fn chain_object(prog: &Program, gen: &Generated, hook: Hook) -> Object {
    let (mut btf, ids) = build_btf(&gen.funcs);
    let mut maps = map_specs(prog, gen);
    tuple_key_types(prog, gen, &mut btf, &mut maps);
    let lines: Vec<&str> = prog.source.lines().collect();
    let functions = gen
        .funcs
        .iter()
        .zip(ids)
        .map(|(f, id)| {
            let slots = nfkit_isa::slot_offsets(&f.insns);
            let relocs = f
                .refs
                .iter()
                .map(|(i, r)| Reloc {
                    insn: *i,
                    target: match r {
                        Ref::Map(m) => RelocTarget::Map(*m),
                        Ref::Nf(s) => RelocTarget::Call(FuncRef::Named(s.clone())),
                        Ref::Func(k) => RelocTarget::Call(FuncRef::Index(*k)),
                        Ref::FuncAddr(k) => RelocTarget::FuncAddr(FuncRef::Index(*k)),
                    },
                })
                .collect();
            let mut line_info: Vec<LineInfo> = Vec::new();
            for &(i, line, col) in &f.lines {
                let slot = slots.get(i).copied().unwrap_or(0);
                if line_info.last().is_some_and(|l| l.slot == slot) {
                    line_info.pop();
                }
                line_info.push(LineInfo {
                    slot,
                    file: prog.file.clone(),
                    line,
                    col: col + 1,
                    text: lines.get(line as usize - 1).unwrap_or(&"").to_string(),
                });
            }
            ObjFunction {
                name: f.name.clone(),
                section: match f.slot {
                    Some(_) => nfkit_object::progtype::default_section(hook_prog_type(hook)),
                    None => ".text".into(),
                },
                section_slot: 0,
                insns: f.insns.clone(),
                binding: if f.global || f.slot.is_some() {
                    Binding::Global
                } else {
                    Binding::Local
                },
                // Dynamic segments are entry programs of the hook.
                prog_type: f.slot.map(|_| hook_prog_type(hook)),
                btf_id: Some(id),
                relocs,
                line_info,
                core_relos: Vec::new(),
            }
        })
        .collect::<Vec<_>>();
    // Section offsets: functions one after the other in .text.
    let mut functions = functions;
    let mut at: HashMap<String, usize> = HashMap::new();
    for f in &mut functions {
        let at = at.entry(f.section.clone()).or_default();
        f.section_slot = *at;
        *at += f.slot_len();
    }
    Object {
        origin: prog.file.clone(),
        functions,
        maps,
        map_inits: Vec::new(),
        data_symbols: Vec::new(),
        btf: Some(btf),
        license: "Dual MIT/GPL".into(),
    }
}

/// The program type of entry programs for `hook`.
fn hook_prog_type(hook: Hook) -> nfkit_object::ProgType {
    match hook {
        Hook::Xdp | Hook::Switch => nfkit_object::ProgType::Xdp,
        Hook::Tc => nfkit_object::ProgType::SchedCls,
        Hook::Socket => nfkit_object::ProgType::SocketFilter,
    }
}

/// Names of the functions of `obj` reachable from `roots` through calls.
fn reachable(obj: &Object, roots: &[String]) -> Vec<bool> {
    let mut keep = vec![false; obj.functions.len()];
    let mut work: Vec<usize> = obj
        .functions
        .iter()
        .enumerate()
        .filter(|(_, f)| roots.contains(&f.name))
        .map(|(i, _)| i)
        .collect();
    while let Some(i) = work.pop() {
        if keep[i] {
            continue;
        }
        keep[i] = true;
        for r in &obj.functions[i].relocs {
            let t = match &r.target {
                RelocTarget::Call(t) | RelocTarget::FuncAddr(t) => t,
                _ => continue,
            };
            let j = match t {
                FuncRef::Index(j) => Some(*j),
                FuncRef::Named(n) => obj.functions.iter().position(|g| &g.name == n),
            };
            if let Some(j) = j {
                if j < keep.len() && !keep[j] {
                    work.push(j);
                }
            }
        }
    }
    keep
}

/// Keeps the functions marked in `keep`, fixing function indexes.
fn retain(obj: &mut Object, keep: &[bool]) {
    let mut new_index = Vec::with_capacity(keep.len());
    let mut next = 0;
    for &k in keep {
        new_index.push(if k {
            next += 1;
            Some(next - 1)
        } else {
            None
        });
    }
    let old = std::mem::take(&mut obj.functions);
    for (f, &k) in old.into_iter().zip(keep) {
        if k {
            obj.functions.push(f);
        }
    }
    let remap = |r: &mut FuncRef| -> bool {
        match r {
            FuncRef::Index(i) => match new_index.get(*i).copied().flatten() {
                Some(n) => {
                    *i = n;
                    true
                }
                None => false,
            },
            FuncRef::Named(_) => true,
        }
    };
    for f in &mut obj.functions {
        f.relocs.retain_mut(|r| match &mut r.target {
            RelocTarget::Call(t) | RelocTarget::FuncAddr(t) => remap(t),
            _ => true,
        });
    }
    obj.map_inits.retain_mut(|m| remap(&mut m.target));
    // Global variables of NF modules (nf_args) stay private to them.
    obj.data_symbols.clear();
}

/// Loads NF module `module` (`nf.meter`) for `hook`, keeping what `roots` reach.
fn module_object(
    search: &SearchPath,
    module: &str,
    hook: Hook,
    roots: &[String],
) -> Result<Object, LinkError> {
    let m = module.strip_prefix("nf.").unwrap_or(module);
    let bytes = search.object(m, hook)?.ok_or_else(|| LinkError::NoModule {
        module: module.to_string(),
        hook: hook.name().to_string(),
    })?;
    let origin = format!("nf.{m} ({})", hook.name());
    let mut obj = crate::cache::read_object(&bytes, &origin).map_err(|e| LinkError::Read {
        origin,
        cause: Box::new(e),
    })?;
    let keep = reachable(&obj, roots);
    retain(&mut obj, &keep);
    Ok(obj)
}

/// Links the generated code with its NFs and (when the script has one)
/// the classifier program, checks the stack budget, and (with
/// [`Inline::On`]) inlines the calls the verifier's limits allow.
pub fn link_program(
    prog: &Program,
    gen: &Generated,
    hook: Hook,
    search: &SearchPath,
    inline: Inline,
) -> Result<(Image, Object, Option<nfkit_object::InlineReport>), LinkError> {
    let chains = chain_object(prog, gen, hook);
    let mut objects = Vec::new();
    if let Some(c) = &prog.classifier {
        objects.push(module_object(
            search,
            "nf.classify",
            hook,
            std::slice::from_ref(&c.name),
        )?);
    }
    objects.push(chains.clone());
    for (m, roots) in &roots_by_module(prog, |nf| nf.symbol.clone()) {
        objects.push(module_object(search, m, hook, roots)?);
    }
    let image = nfkit_object::link(&objects)?;
    // Only the image that is loaded is checked: the build with calls,
    // each frame rounded up, may need more stack than its inlined form.
    if inline == Inline::Off {
        check_stack(&image)?;
        return Ok((image, chains, None));
    }
    let passes = match inline {
        Inline::NoPasses => nfkit_object::Passes::None,
        _ => nfkit_object::Passes::Static,
    };
    let (inlined, report) = nfkit_object::inline_calls(&image, |_| true, passes)?;
    check_stack(&inlined)?;
    Ok((inlined, chains, Some(report)))
}

/// Whether static linking inlines calls (docs/cost.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inline {
    /// Every call the verifier's limits allow is inlined: classifier,
    /// dispatcher, chains and NFs become one function.
    #[default]
    On,
    /// Calls stay calls (NFs verified as global functions, one each).
    Off,
    /// Calls inlined as with `On`, without the passes that follow
    /// (lookups once, dead code): kept to measure them against
    /// (`--bench ddos`).
    NoPasses,
}

/// The NF modules `prog` calls, each with the functions to keep from it
/// (`root` of each NF called: its function, or its dynamic entry).
fn roots_by_module(
    prog: &Program,
    root: impl Fn(&crate::ir::NfRef) -> String,
) -> Vec<(String, Vec<String>)> {
    let mut by_module: Vec<(String, Vec<String>)> = Vec::new();
    for nf in &prog.nfs {
        let r = root(nf);
        match by_module.iter_mut().find(|(m, _)| *m == nf.module) {
            Some((_, v)) => {
                if !v.contains(&r) {
                    v.push(r)
                }
            }
            None => by_module.push((nf.module.clone(), vec![r])),
        }
    }
    by_module
}

/// Dynamic mode (docs/abi.md §5): the dynamic classifier
/// `dyn_<classifier>`, the chains' segments and the entries of their NF
/// NF calls (calls inlined) with `nfkit_dyn_end` (`nfkit_dyn_finish`
/// with shared entries),
/// and the dynamic entry `dyn_<name>` of every NF they call, in one Image whose `map_inits` fill `nfkit_progs`: NFs,
/// then later segments, then each chain's first segment at its chain id
/// (last, so that filling the slots in order switches each chain in one
/// update). Loading it whole gives a working dynamic program (tests, the
/// VM); the deployer loads only what is not loaded yet.
pub fn link_dynamic(
    prog: &Program,
    gen: &Generated,
    hook: Hook,
    search: &SearchPath,
    inline: Inline,
) -> Result<(Image, Object), LinkError> {
    let chains = chain_object(prog, gen, hook);
    let mut objects = Vec::new();
    let cls = prog
        .classifier
        .as_ref()
        .map(|c| format!("dyn_{}", c.name))
        .ok_or(LinkError::DynNoClassifier)?;
    objects.push(module_object(
        search,
        "nf.classify",
        hook,
        &[
            cls,
            crate::codegen::DYN_FINISH.to_string(),
            crate::codegen::DYN_END.to_string(),
        ],
    )?);
    objects.push(chains.clone());
    for (m, roots) in &roots_by_module(prog, |nf| format!("dyn_{}", nf.name)) {
        objects.push(module_object(search, m, hook, roots)?);
    }
    // Each program's calls inlined (the NF into the segment after its
    // call site, `nfkit_dyn_end` into the segments): a call costs a
    // return thunk here (docs/cost.md). Then the passes sound for one
    // program (lookups once, dead registers and stack stores), not the
    // removal of info-block stores of static builds: the info block is
    // shared between the programs of one packet, so its stores are not
    // dead when this program does not read them.
    let linked = nfkit_object::link(&objects)?;
    let mut image = match inline {
        Inline::On => {
            nfkit_object::inline_calls(&linked, |_| true, nfkit_object::Passes::PerProgram)?.0
        }
        Inline::NoPasses => {
            nfkit_object::inline_calls(&linked, |_| true, nfkit_object::Passes::None)?.0
        }
        Inline::Off => linked,
    };
    check_stack(&image)?;
    let progs = image
        .maps
        .iter()
        .position(|m| m.name == "nfkit_progs")
        .ok_or(LinkError::DynNoProgArray)?;
    let entry = |name: &str| image.entries.iter().position(|e| e.name == name);
    let mut inits = Vec::new();
    for nf in &prog.nfs {
        let (Some(&slot), Some(e)) = (
            gen.nf_slots.get(&nf.symbol),
            entry(&format!("dyn_{}", nf.name)),
        ) else {
            return Err(LinkError::DynNoEntry {
                nf: nf.name.clone(),
                module: nf.module.clone(),
            });
        };
        if !inits.iter().any(|i: &nfkit_object::MapInit| i.slot == slot) {
            inits.push(nfkit_object::MapInit {
                map: progs,
                slot,
                entry: e,
            });
        }
    }
    let mut firsts = Vec::new();
    for f in &gen.funcs {
        let (Some(slot), Some(e)) = (f.slot, entry(&f.name)) else {
            continue;
        };
        let init = nfkit_object::MapInit {
            map: progs,
            slot,
            entry: e,
        };
        // A chain's first segment sits at its chain id (0..62).
        if slot < 63 {
            firsts.push(init);
        } else {
            inits.push(init);
        }
    }
    inits.extend(firsts);
    image.map_inits = inits;
    Ok((image, chains))
}

/// Stack bytes one function uses (from its r10-relative accesses),
/// rounded up to 32.
fn frame_size(insns: &[Insn]) -> u32 {
    let mut min: i64 = 0;
    let mut fp_copy: Option<Reg> = None;
    for i in insns {
        match *i {
            Insn::Ldx { src, off, .. } if src == Reg::FP => min = min.min(off as i64),
            Insn::Stx { dst, off, .. }
            | Insn::St { dst, off, .. }
            | Insn::Atomic { dst, off, .. }
                if dst == Reg::FP =>
            {
                min = min.min(off as i64)
            }
            _ => {}
        }
        match *i {
            Insn::Alu {
                op: nfkit_isa::AluOp::Mov,
                dst,
                src: Operand::Reg(s),
                ..
            } if s == Reg::FP => fp_copy = Some(dst),
            Insn::Alu {
                op: nfkit_isa::AluOp::Add,
                dst,
                src: Operand::Imm(k),
                ..
            } if Some(dst) == fp_copy => {
                min = min.min(k as i64);
                fp_copy = None;
            }
            _ => fp_copy = None,
        }
    }
    // Rounded up to 32 bytes, as the kernel's interpreter, nfkit's VM and
    // the inliner count frames (a function without stack counts 0).
    let bytes = (-min) as u32;
    bytes.div_ceil(32) * 32
}

/// Checks every call path from every entry against the kernel's stack
/// and frame limits; the error names the path.
pub fn check_stack(image: &Image) -> Result<(), LinkError> {
    let slots = nfkit_isa::slot_offsets(&image.insns);
    let nf = image.functions.len();
    let mut frames = vec![0u32; nf];
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); nf];
    for (fi, f) in image.functions.iter().enumerate() {
        let lo = slots.partition_point(|&s| s < f.start);
        let hi = slots.partition_point(|&s| s < f.start + f.len);
        let body = &image.insns[lo..hi];
        frames[fi] = frame_size(body);
        for (k, ins) in body.iter().enumerate() {
            // A local call, or a function address (a bpf_loop callback,
            // which runs in a frame above its caller's).
            if let Insn::Call {
                kind: CallKind::Local,
                imm,
            }
            | Insn::Lddw {
                kind: LddwKind::Func,
                imm,
                ..
            } = *ins
            {
                let t = slots[lo + k] as i64 + 1 + imm as i64;
                if let Some(g) = image.functions.iter().position(|g| g.start as i64 == t) {
                    if !callees[fi].contains(&g) {
                        callees[fi].push(g);
                    }
                }
            }
        }
    }
    fn walk(
        f: usize,
        depth: u32,
        path: &mut Vec<usize>,
        frames: &[u32],
        callees: &[Vec<usize>],
        image: &Image,
    ) -> Result<(), LinkError> {
        let total = depth + frames[f];
        let names = |p: &[usize]| {
            p.iter()
                .map(|&i| image.functions[i].name.as_str())
                .collect::<Vec<_>>()
                .join(" -> ")
        };
        if total > STACK_LIMIT {
            return Err(LinkError::Stack {
                path: names(path),
                bytes: total,
            });
        }
        if path.len() > MAX_FRAMES {
            return Err(LinkError::Frames {
                path: names(path),
                frames: path.len(),
            });
        }
        for &g in &callees[f] {
            if path.contains(&g) {
                continue;
            }
            path.push(g);
            walk(g, total, path, frames, callees, image)?;
            path.pop();
        }
        Ok(())
    }
    for e in &image.entries {
        let mut path = vec![e.function];
        walk(e.function, 0, &mut path, &frames, &callees, image)?;
    }
    Ok(())
}

/// One control-plane write the script implies: (map, key, value).
pub type MapWrite = (String, Vec<u8>, Vec<u8>);

/// The classifier table and configuration as map writes: entries of
/// `nfkit_cls_*` and `nfkit_config` (default and fault actions).
pub fn control_plane(prog: &Program) -> Vec<MapWrite> {
    let mut out: Vec<MapWrite> = prog.tables.iter().flat_map(|t| t.writes()).collect();
    let Some(c) = &prog.classifier else {
        return out;
    };
    let dispatched = prog.dispatched();
    for (key, chain) in &c.entries {
        let id = dispatched.iter().position(|x| x == chain).unwrap_or(0) as u32;
        let mut value = id.to_le_bytes().to_vec();
        value.extend_from_slice(&1u32.to_le_bytes());
        let (map, k) = match key {
            ClsKey::All => continue,
            ClsKey::Ipv4 { addr, prefix } => {
                let mut k = (*prefix as u32).to_le_bytes().to_vec();
                k.extend_from_slice(addr);
                ("nfkit_cls_ip4", k)
            }
            ClsKey::Ipv6 { addr, prefix } => {
                let mut k = (*prefix as u32).to_le_bytes().to_vec();
                k.extend_from_slice(addr);
                ("nfkit_cls_ip6", k)
            }
            ClsKey::Port(p) => ("nfkit_cls_port", p.to_le_bytes().to_vec()),
            ClsKey::Dscp(d) => ("nfkit_cls_dscp", (*d as u32).to_le_bytes().to_vec()),
        };
        out.push((map.to_string(), k, value));
    }
    let mut cfg = Vec::with_capacity(40);
    cfg.extend_from_slice(&c.default.to_le_bytes());
    cfg.extend_from_slice(&c.fault.to_le_bytes());
    cfg.extend_from_slice(&[0u8; 24]);
    out.push(("nfkit_config".to_string(), 0u32.to_le_bytes().to_vec(), cfg));
    out
}

/// Chain id of each dispatched chain, by name.
pub fn chain_ids(prog: &Program) -> HashMap<String, u32> {
    prog.chain_names()
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c, i as u32))
        .collect()
}
