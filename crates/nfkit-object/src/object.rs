//! An unlinked object: what the ELF reader produces and the linker
//! consumes. Instructions are kept as in the file; every instruction that
//! needs fixing up carries a symbolic [`Reloc`] (which map, which
//! function), so several objects can be linked into one Image.

use crate::btf::Btf;
use crate::co_re::CoreRelo;
use crate::image::{LineInfo, MapSpec, ProgType};
use nfkit_isa::Insn;

/// Symbol binding of a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Binding {
    /// `static`: visible only inside its object.
    Local,
    Global,
    /// ELF weak: loses to a global definition of the same name.
    Weak,
}

/// A function the relocation points at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FuncRef {
    /// A function of the same object (index into [`Object::functions`]).
    Index(usize),
    /// A global symbol, resolved by name at link time.
    Named(String),
}

/// What an instruction refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RelocTarget {
    /// `lddw` of a map (index into [`Object::maps`]).
    Map(usize),
    /// `lddw` of an address inside a map's value (global data).
    MapValue { map: usize, offset: u32 },
    /// `call` of a bpf function.
    Call(FuncRef),
    /// `lddw` of a function's address (callbacks).
    FuncAddr(FuncRef),
}

/// A fix-up of one instruction of a function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reloc {
    /// Instruction index in [`ObjFunction::insns`] (not slot).
    pub insn: usize,
    pub target: RelocTarget,
}

/// A function of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjFunction {
    pub name: String,
    /// ELF section (`xdp`, `.text`, ...).
    pub section: String,
    /// Offset in the section, in slots.
    pub section_slot: usize,
    pub insns: Vec<Insn>,
    pub binding: Binding,
    /// The program type when this function is an entry program (a
    /// function in a program section rather than `.text`).
    pub prog_type: Option<ProgType>,
    /// The function's `FUNC` id in [`Object::btf`].
    pub btf_id: Option<u32>,
    pub relocs: Vec<Reloc>,
    /// Line info, `slot` relative to the function's first slot.
    pub line_info: Vec<LineInfo>,
    /// CO-RE relocations of its instructions (applied when linking).
    pub core_relos: Vec<CoreRelo>,
}

impl ObjFunction {
    /// Length in slots.
    pub fn slot_len(&self) -> usize {
        nfkit_isa::slot_count(&self.insns)
    }
}

/// Initial contents of one slot of a prog array (or map-of-maps) declared
/// with `__array(values, ...)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjMapInit {
    /// Index into [`Object::maps`].
    pub map: usize,
    pub slot: u32,
    /// The program (entry function) placed in the slot.
    pub target: FuncRef,
}

/// A global variable (`.data`, `.rodata`, `.bss`, ...) of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSymbol {
    pub name: String,
    /// Index into [`Object::maps`] (a global-data map).
    pub map: usize,
    pub offset: u32,
    pub size: u32,
    pub binding: Binding,
}

/// A parsed, unlinked eBPF object.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    /// Where it came from (a path), for diagnostics and `Function::origin`.
    pub origin: String,
    /// Functions in section order, then by offset.
    pub functions: Vec<ObjFunction>,
    /// Declared maps (in `.maps`/`maps` symbol order), then one
    /// global-data map per data section.
    pub maps: Vec<MapSpec>,
    pub map_inits: Vec<ObjMapInit>,
    pub data_symbols: Vec<DataSymbol>,
    pub btf: Option<Btf>,
    pub license: String,
}

impl Object {
    /// The function called `name`.
    pub fn function(&self, name: &str) -> Option<&ObjFunction> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// Entry programs (functions of program sections).
    pub fn programs(&self) -> impl Iterator<Item = &ObjFunction> {
        self.functions.iter().filter(|f| f.prog_type.is_some())
    }
}
