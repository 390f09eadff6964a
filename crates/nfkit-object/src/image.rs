//! The Image: nfkit's linked, backend-independent program (DESIGN.md).
//!
//! All functions of all linked objects live in one instruction vector.
//! Local calls (`call` with [`CallKind::Local`]) and function-address
//! `lddw`s hold relative slot offsets that already point inside it. Maps,
//! and global data (`.rodata`/`.data`/`.bss`, which are single-entry array
//! maps as in libbpf), are referenced by `lddw` with
//! [`LddwKind::MapIdx`] (imm = index into [`Image::maps`]) or
//! [`LddwKind::MapIdxValue`] (imm = index, next_imm = offset in the
//! value). Backends bind those indices to their own map instances.

use crate::btf::Btf;
use nfkit_isa::{CallKind, Insn, LddwKind};
use serde::Serialize;

/// eBPF program types, with the kernel's numbering (`enum bpf_prog_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgType {
    Unspec,
    SocketFilter,
    Kprobe,
    SchedCls,
    SchedAct,
    Tracepoint,
    Xdp,
    PerfEvent,
    CgroupSkb,
    CgroupSock,
    LwtIn,
    LwtOut,
    LwtXmit,
    SockOps,
    SkSkb,
    CgroupDevice,
    SkMsg,
    RawTracepoint,
    CgroupSockAddr,
    LwtSeg6local,
    LircMode2,
    SkReuseport,
    FlowDissector,
    CgroupSysctl,
    RawTracepointWritable,
    CgroupSockopt,
    Tracing,
    StructOps,
    Ext,
    Lsm,
    SkLookup,
    Syscall,
    Netfilter,
}

impl ProgType {
    /// The kernel's `enum bpf_prog_type` value.
    pub fn kernel_id(self) -> u32 {
        self as u32
    }

    /// Short name as bpftool prints it.
    pub fn name(self) -> &'static str {
        use ProgType::*;
        match self {
            Unspec => "unspec",
            SocketFilter => "socket_filter",
            Kprobe => "kprobe",
            SchedCls => "sched_cls",
            SchedAct => "sched_act",
            Tracepoint => "tracepoint",
            Xdp => "xdp",
            PerfEvent => "perf_event",
            CgroupSkb => "cgroup_skb",
            CgroupSock => "cgroup_sock",
            LwtIn => "lwt_in",
            LwtOut => "lwt_out",
            LwtXmit => "lwt_xmit",
            SockOps => "sock_ops",
            SkSkb => "sk_skb",
            CgroupDevice => "cgroup_device",
            SkMsg => "sk_msg",
            RawTracepoint => "raw_tracepoint",
            CgroupSockAddr => "cgroup_sock_addr",
            LwtSeg6local => "lwt_seg6local",
            LircMode2 => "lirc_mode2",
            SkReuseport => "sk_reuseport",
            FlowDissector => "flow_dissector",
            CgroupSysctl => "cgroup_sysctl",
            RawTracepointWritable => "raw_tracepoint_writable",
            CgroupSockopt => "cgroup_sockopt",
            Tracing => "tracing",
            StructOps => "struct_ops",
            Ext => "ext",
            Lsm => "lsm",
            SkLookup => "sk_lookup",
            Syscall => "syscall",
            Netfilter => "netfilter",
        }
    }
}

/// eBPF map types, with the kernel's numbering (`enum bpf_map_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapType {
    Unspec,
    Hash,
    Array,
    ProgArray,
    PerfEventArray,
    PercpuHash,
    PercpuArray,
    StackTrace,
    CgroupArray,
    LruHash,
    LruPercpuHash,
    LpmTrie,
    ArrayOfMaps,
    HashOfMaps,
    Devmap,
    Sockmap,
    Cpumap,
    Xskmap,
    Sockhash,
    CgroupStorage,
    ReuseportSockarray,
    PercpuCgroupStorage,
    Queue,
    Stack,
    SkStorage,
    DevmapHash,
    StructOps,
    Ringbuf,
    InodeStorage,
    TaskStorage,
    BloomFilter,
    UserRingbuf,
    CgrpStorage,
    Arena,
}

impl MapType {
    const ALL: [MapType; 34] = {
        use MapType::*;
        [
            Unspec,
            Hash,
            Array,
            ProgArray,
            PerfEventArray,
            PercpuHash,
            PercpuArray,
            StackTrace,
            CgroupArray,
            LruHash,
            LruPercpuHash,
            LpmTrie,
            ArrayOfMaps,
            HashOfMaps,
            Devmap,
            Sockmap,
            Cpumap,
            Xskmap,
            Sockhash,
            CgroupStorage,
            ReuseportSockarray,
            PercpuCgroupStorage,
            Queue,
            Stack,
            SkStorage,
            DevmapHash,
            StructOps,
            Ringbuf,
            InodeStorage,
            TaskStorage,
            BloomFilter,
            UserRingbuf,
            CgrpStorage,
            Arena,
        ]
    };

    /// The kernel's `enum bpf_map_type` value.
    pub fn kernel_id(self) -> u32 {
        self as u32
    }

    /// The map type with kernel number `id`, if nfkit knows it.
    pub fn from_kernel_id(id: u32) -> Option<MapType> {
        MapType::ALL.get(id as usize).copied()
    }

    /// Short name as bpftool prints it (`hash`, `percpu_array`, `lpm_trie`, ...).
    pub fn name(self) -> String {
        let dbg = format!("{self:?}");
        let mut out = String::new();
        for (i, c) in dbg.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    }
}

/// What a map is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKind {
    /// A map the program declared (`.maps` or legacy `maps`).
    Declared,
    /// Global data of one section (`.rodata`, `.data`, `.bss`, or
    /// `.rodata.*`/`.data.*`): one array entry holding the section.
    Global { section: String, read_only: bool },
}

/// A map specification: what backends create before loading programs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapSpec {
    pub name: String,
    pub kind: MapKind,
    pub map_type: MapType,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// BTF type ids (in [`Image::btf`]) of key and value, when known.
    pub key_type_id: Option<u32>,
    pub value_type_id: Option<u32>,
    /// Initial contents: of global-data maps the section bytes (zeros for
    /// `.bss`); of declared arrays the values of entries 0, 1, ... back to
    /// back, a prefix (see [`crate::initial`]).
    pub data: Option<Vec<u8>>,
    /// `LIBBPF_PIN_BY_NAME` requested in the object.
    pub pin_by_name: bool,
    /// Maps of maps: the inner map definition and initial slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner: Option<Box<InnerMaps>>,
}

/// What a map of maps (`array_of_maps`, `hash_of_maps`) holds, declared
/// the libbpf way: `__array(values, struct inner)` gives the definition
/// every inner map must match, `.values = { [i] = &map }` the initial
/// slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InnerMaps {
    /// The inner map definition (a template: no map of its own).
    pub template: MapSpec,
    /// Initial slots, by slot (the key, a `u32`).
    pub slots: Vec<InnerSlot>,
}

/// One initial slot of a map of maps: declared map `map` at key `slot`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InnerSlot {
    pub slot: u32,
    /// The name of a declared map of the Image.
    pub map: String,
}

/// A function of the Image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Function {
    pub name: String,
    /// First slot of the function in [`Image::insns`] (slot numbering).
    pub start: usize,
    /// Length in slots.
    pub len: usize,
    /// Global (separately verified) rather than static.
    pub global: bool,
    /// BTF `FUNC` type id in [`Image::btf`], when the object has BTF.
    pub btf_id: Option<u32>,
    /// Where the function came from (object path or script), for diagnostics.
    pub origin: String,
}

/// An entry program: a function the backend loads as a program of a hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub name: String,
    /// The ELF section the program came from (`xdp`, `tc`, ...).
    pub section: String,
    pub prog_type: ProgType,
    /// Index into [`Image::functions`].
    pub function: usize,
}

/// Source position of one instruction (from BTF.ext line info).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LineInfo {
    /// Slot of the first instruction of the line.
    pub slot: usize,
    pub file: String,
    pub line: u32,
    pub col: u32,
    /// The source line's text, when the object carries it.
    pub text: String,
}

/// A CO-RE relocation of the Image: where, what, and the value written
/// or why its instruction was poisoned (a call of helper
/// [`crate::co_re::POISON_HELPER`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CoreSite {
    /// Slot of the instruction in the Image.
    pub slot: usize,
    pub function: String,
    /// Slot of the instruction in its function.
    pub func_slot: usize,
    /// Kind and access: `byte_off struct iphdr::daddr`.
    pub what: String,
    /// The value written, or why the instruction was poisoned (naming
    /// the relocation: it starts with `what`).
    pub result: Result<u64, String>,
}

impl CoreSite {
    /// The error of a failed relocation, naming it.
    pub fn error(&self) -> Option<String> {
        self.result.as_ref().err().map(|e| {
            format!(
                "CO-RE relocation in '{}' at insn {}: {e}",
                self.function, self.func_slot
            )
        })
    }
}

/// Initial contents of one slot of a prog array declared with
/// `__array(values, ...)` in C: the loader puts entry program `entry`
/// (index into [`Image::entries`]) at `slot` of map `map`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapInit {
    pub map: usize,
    pub slot: u32,
    pub entry: usize,
}

/// The linked program.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Image {
    /// Instructions of all functions, in slot order.
    #[serde(skip)]
    pub insns: Vec<Insn>,
    /// Functions, sorted by start slot, covering `insns` without gaps.
    pub functions: Vec<Function>,
    pub entries: Vec<Entry>,
    pub maps: Vec<MapSpec>,
    /// Merged BTF of the linked objects (types, function signatures).
    #[serde(skip)]
    pub btf: Option<Btf>,
    /// Line info, sorted by slot.
    pub line_info: Vec<LineInfo>,
    pub license: String,
    /// Prog array slots to fill after loading (from `__array(values, ...)`).
    pub map_inits: Vec<MapInit>,
    /// CO-RE relocations applied (or poisoned), by slot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub core_sites: Vec<CoreSite>,
}

impl Image {
    /// An Image of one entry program from bare instructions (no maps, no
    /// BTF): the form the assembler and the conformance suite give.
    pub fn from_insns(name: &str, prog_type: ProgType, insns: Vec<Insn>) -> Image {
        let len = nfkit_isa::slot_count(&insns);
        Image {
            insns,
            functions: vec![Function {
                name: name.to_string(),
                start: 0,
                len,
                global: true,
                btf_id: None,
                origin: String::new(),
            }],
            entries: vec![Entry {
                name: name.to_string(),
                section: String::new(),
                prog_type,
                function: 0,
            }],
            maps: Vec::new(),
            btf: None,
            line_info: Vec::new(),
            license: "GPL".to_string(),
            map_inits: Vec::new(),
            core_sites: Vec::new(),
        }
    }

    /// Total number of slots.
    pub fn slot_count(&self) -> usize {
        nfkit_isa::slot_count(&self.insns)
    }

    /// The entry called `name`.
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The function whose body holds `slot`.
    pub fn function_at(&self, slot: usize) -> Option<&Function> {
        self.functions
            .iter()
            .find(|f| slot >= f.start && slot < f.start + f.len)
    }

    /// The map called `name`.
    pub fn map(&self, name: &str) -> Option<(usize, &MapSpec)> {
        self.maps.iter().enumerate().find(|(_, m)| m.name == name)
    }

    /// Why entry `entry` (index into [`Image::entries`]) cannot load: it
    /// can execute an instruction whose CO-RE relocation could not be
    /// resolved (one behind a branch a constant rules out, such as a
    /// false `bpf_core_field_exists` guard, does not count, as in the
    /// kernel's verifier).
    pub fn core_error(&self, entry: usize) -> Option<String> {
        if self.core_sites.iter().all(|s| s.result.is_ok()) {
            return None;
        }
        let slot = *crate::co_re::poisons_reached(self, entry).first()?;
        match self.core_site(slot).and_then(CoreSite::error) {
            Some(e) => Some(e),
            None => Some(format!(
                "CO-RE relocation at slot {slot} ({}) could not be resolved",
                self.describe_slot(slot)
            )),
        }
    }

    /// The CO-RE relocation of the instruction at `slot`, if any.
    pub fn core_site(&self, slot: usize) -> Option<&CoreSite> {
        self.core_sites.iter().find(|s| s.slot == slot)
    }

    /// Line info of `slot`: the last record at or before it.
    pub fn line_of(&self, slot: usize) -> Option<&LineInfo> {
        let i = self.line_info.partition_point(|l| l.slot <= slot);
        i.checked_sub(1).map(|i| &self.line_info[i])
    }

    /// `name+offset` of a slot, for diagnostics.
    pub fn describe_slot(&self, slot: usize) -> String {
        match self.function_at(slot) {
            Some(f) => format!("{}+{}", f.name, slot - f.start),
            None => format!("slot {slot}"),
        }
    }

    /// Indices of the maps the instructions in `range` (slots) reference.
    pub fn maps_used(&self, slots: std::ops::Range<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut slot = 0;
        for i in &self.insns {
            if slots.contains(&slot) {
                if let Insn::Lddw {
                    kind: LddwKind::MapIdx | LddwKind::MapIdxValue,
                    imm,
                    ..
                } = *i
                {
                    if imm >= 0 && !out.contains(&(imm as usize)) {
                        out.push(imm as usize);
                    }
                }
            }
            slot += i.slots();
        }
        out
    }

    /// Indices of the functions reachable from function `f` through local
    /// calls and function-address loads, `f` first.
    pub fn reachable_functions(&self, f: usize) -> Vec<usize> {
        let starts = nfkit_isa::slot_offsets(&self.insns);
        let mut out = vec![f];
        let mut i = 0;
        while i < out.len() {
            let func = &self.functions[out[i]];
            for (k, insn) in self.insns.iter().enumerate() {
                let slot = starts[k];
                if slot < func.start || slot >= func.start + func.len {
                    continue;
                }
                let target = match insn {
                    Insn::Call {
                        kind: CallKind::Local,
                        ..
                    }
                    | Insn::Lddw {
                        kind: LddwKind::Func,
                        ..
                    } => insn.call_offset().map(|o| slot as i64 + 1 + o),
                    _ => None,
                };
                if let Some(t) = target {
                    if let Some(idx) = self.functions.iter().position(|g| g.start as i64 == t) {
                        if !out.contains(&idx) {
                            out.push(idx);
                        }
                    }
                }
            }
            i += 1;
        }
        out
    }
}
