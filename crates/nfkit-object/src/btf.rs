//! BTF: the types, function signatures and names carried by objects.
//!
//! [`Btf`] holds a whole `.BTF` blob as typed values ([`Type`], [`Kind`])
//! with names resolved to strings, so it can be inspected, built, merged
//! and encoded again. Type id 0 is `void`; ids index [`Btf::types`].
//!
//! * [`parse`](Btf::parse) / [`encode`](Btf::encode): `.BTF` bytes, with
//!   validation (bounds, string offsets, type ids) giving [`BtfError`]s.
//! * [`ext`]: `.BTF.ext` function info, line info and CO-RE relocations.
//! * queries: sizes, names, C formatting, function signatures (`query`).
//! * [`merge`](Btf::merge): appending another object's types (linking).

pub mod ext;
mod merge;
mod parse;
mod query;
mod write;

pub use merge::MergeMap;
pub use query::{FuncParam, FuncSignature, SecVar};
pub use write::StringTable;

/// Errors of BTF parsing, validation and queries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    #[error("BTF is truncated: {what} needs {need} bytes at offset {offset}, blob has {len}")]
    Truncated {
        what: &'static str,
        offset: usize,
        need: usize,
        len: usize,
    },
    #[error("bad BTF magic 0x{0:04x} (expected 0xeb9f; big-endian BTF is not supported)")]
    Magic(u16),
    #[error("unsupported BTF version {0}")]
    Version(u8),
    #[error("bad BTF header: {0}")]
    Header(String),
    #[error(
        "BTF string offset {offset} (type {type_id}) is outside the string section ({len} bytes)"
    )]
    StringOffset {
        offset: u32,
        type_id: u32,
        len: usize,
    },
    #[error("BTF string at offset {0} is not terminated or not UTF-8")]
    BadString(u32),
    #[error("BTF type {type_id}: unknown kind {kind}")]
    UnknownKind { type_id: u32, kind: u32 },
    #[error("BTF type {type_id} refers to type {target}, but only {count} types exist")]
    BadTypeId {
        type_id: u32,
        target: u32,
        count: u32,
    },
    #[error("BTF type {type_id}: {why}")]
    Invalid { type_id: u32, why: String },
    #[error("BTF type {0}: type chain too deep or cyclic")]
    Cycle(u32),
    #[error("BTF type {0} does not exist")]
    NoSuchType(u32),
    #[error("BTF type {type_id} ({kind}) has no size")]
    NoSize { type_id: u32, kind: &'static str },
    #[error("bad BTF.ext: {0}")]
    Ext(String),
}

/// Linkage of a `FUNC` (its vlen) or `VAR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Linkage {
    Static,
    Global,
    Extern,
    /// A value BTF does not define (kept for round trips).
    Other(u32),
}

impl Linkage {
    pub fn from_u32(v: u32) -> Linkage {
        match v {
            0 => Linkage::Static,
            1 => Linkage::Global,
            2 => Linkage::Extern,
            v => Linkage::Other(v),
        }
    }

    pub fn to_u32(self) -> u32 {
        match self {
            Linkage::Static => 0,
            Linkage::Global => 1,
            Linkage::Extern => 2,
            Linkage::Other(v) => v,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Linkage::Static => "static",
            Linkage::Global => "global",
            Linkage::Extern => "extern",
            Linkage::Other(_) => "unknown",
        }
    }
}

/// A member of a struct or union.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    pub name: String,
    pub ty: u32,
    /// Offset from the start of the struct, in bits.
    pub bit_offset: u32,
    /// Bitfield width in bits (0: not a bitfield).
    pub bitfield_size: u32,
}

/// A function parameter (in `FUNC_PROTO`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    pub name: String,
    pub ty: u32,
}

/// An enumerator (of `ENUM` or `ENUM64`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnumValue {
    pub name: String,
    pub value: i64,
}

/// A variable of a `DATASEC`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarSecinfo {
    /// The `VAR` (or `FUNC` for extern kfuncs) type id.
    pub ty: u32,
    pub offset: u32,
    pub size: u32,
}

/// `INT` encoding bits.
pub const INT_SIGNED: u8 = 1;
pub const INT_CHAR: u8 = 2;
pub const INT_BOOL: u8 = 4;

/// What a BTF type is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Type id 0.
    Void,
    Int {
        size: u32,
        /// [`INT_SIGNED`] | [`INT_CHAR`] | [`INT_BOOL`].
        encoding: u8,
        offset: u8,
        bits: u8,
    },
    Ptr {
        ty: u32,
    },
    Array {
        elem: u32,
        index: u32,
        nelems: u32,
    },
    Struct {
        size: u32,
        members: Vec<Member>,
    },
    Union {
        size: u32,
        members: Vec<Member>,
    },
    Enum {
        size: u32,
        signed: bool,
        values: Vec<EnumValue>,
    },
    Fwd {
        union: bool,
    },
    Typedef {
        ty: u32,
    },
    Volatile {
        ty: u32,
    },
    Const {
        ty: u32,
    },
    Restrict {
        ty: u32,
    },
    Func {
        proto: u32,
        linkage: Linkage,
    },
    FuncProto {
        ret: u32,
        params: Vec<Param>,
    },
    Var {
        ty: u32,
        linkage: Linkage,
    },
    Datasec {
        size: u32,
        vars: Vec<VarSecinfo>,
    },
    Float {
        size: u32,
    },
    DeclTag {
        ty: u32,
        /// -1 for the type itself, else the member/parameter index.
        component: i32,
        /// `kind_flag`: the tag is an attribute.
        attr: bool,
    },
    TypeTag {
        ty: u32,
        attr: bool,
    },
    Enum64 {
        size: u32,
        signed: bool,
        values: Vec<EnumValue>,
    },
}

impl Kind {
    /// The kernel's `BTF_KIND_*` number.
    pub fn number(&self) -> u32 {
        match self {
            Kind::Void => 0,
            Kind::Int { .. } => 1,
            Kind::Ptr { .. } => 2,
            Kind::Array { .. } => 3,
            Kind::Struct { .. } => 4,
            Kind::Union { .. } => 5,
            Kind::Enum { .. } => 6,
            Kind::Fwd { .. } => 7,
            Kind::Typedef { .. } => 8,
            Kind::Volatile { .. } => 9,
            Kind::Const { .. } => 10,
            Kind::Restrict { .. } => 11,
            Kind::Func { .. } => 12,
            Kind::FuncProto { .. } => 13,
            Kind::Var { .. } => 14,
            Kind::Datasec { .. } => 15,
            Kind::Float { .. } => 16,
            Kind::DeclTag { .. } => 17,
            Kind::TypeTag { .. } => 18,
            Kind::Enum64 { .. } => 19,
        }
    }

    /// The kind's name as bpftool prints it (`STRUCT`, `FUNC_PROTO`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Void => "VOID",
            Kind::Int { .. } => "INT",
            Kind::Ptr { .. } => "PTR",
            Kind::Array { .. } => "ARRAY",
            Kind::Struct { .. } => "STRUCT",
            Kind::Union { .. } => "UNION",
            Kind::Enum { .. } => "ENUM",
            Kind::Fwd { .. } => "FWD",
            Kind::Typedef { .. } => "TYPEDEF",
            Kind::Volatile { .. } => "VOLATILE",
            Kind::Const { .. } => "CONST",
            Kind::Restrict { .. } => "RESTRICT",
            Kind::Func { .. } => "FUNC",
            Kind::FuncProto { .. } => "FUNC_PROTO",
            Kind::Var { .. } => "VAR",
            Kind::Datasec { .. } => "DATASEC",
            Kind::Float { .. } => "FLOAT",
            Kind::DeclTag { .. } => "DECL_TAG",
            Kind::TypeTag { .. } => "TYPE_TAG",
            Kind::Enum64 { .. } => "ENUM64",
        }
    }

    /// Every type id this kind refers to, in encoding order.
    pub fn refs(&self) -> Vec<u32> {
        let mut out = Vec::new();
        self.for_each_ref(|id| out.push(id));
        out
    }

    fn for_each_ref(&self, mut f: impl FnMut(u32)) {
        match self {
            Kind::Ptr { ty }
            | Kind::Typedef { ty }
            | Kind::Volatile { ty }
            | Kind::Const { ty }
            | Kind::Restrict { ty }
            | Kind::Var { ty, .. }
            | Kind::DeclTag { ty, .. }
            | Kind::TypeTag { ty, .. } => f(*ty),
            Kind::Func { proto, .. } => f(*proto),
            Kind::Array { elem, index, .. } => {
                f(*elem);
                f(*index);
            }
            Kind::Struct { members, .. } | Kind::Union { members, .. } => {
                members.iter().for_each(|m| f(m.ty))
            }
            Kind::FuncProto { ret, params } => {
                f(*ret);
                params.iter().for_each(|p| f(p.ty));
            }
            Kind::Datasec { vars, .. } => vars.iter().for_each(|v| f(v.ty)),
            Kind::Void
            | Kind::Int { .. }
            | Kind::Enum { .. }
            | Kind::Fwd { .. }
            | Kind::Float { .. }
            | Kind::Enum64 { .. } => {}
        }
    }

    /// Rewrites every type id this kind refers to.
    pub fn map_refs(&mut self, mut f: impl FnMut(u32) -> u32) {
        match self {
            Kind::Ptr { ty }
            | Kind::Typedef { ty }
            | Kind::Volatile { ty }
            | Kind::Const { ty }
            | Kind::Restrict { ty }
            | Kind::Var { ty, .. }
            | Kind::DeclTag { ty, .. }
            | Kind::TypeTag { ty, .. } => *ty = f(*ty),
            Kind::Func { proto, .. } => *proto = f(*proto),
            Kind::Array { elem, index, .. } => {
                *elem = f(*elem);
                *index = f(*index);
            }
            Kind::Struct { members, .. } | Kind::Union { members, .. } => {
                members.iter_mut().for_each(|m| m.ty = f(m.ty))
            }
            Kind::FuncProto { ret, params } => {
                *ret = f(*ret);
                params.iter_mut().for_each(|p| p.ty = f(p.ty));
            }
            Kind::Datasec { vars, .. } => vars.iter_mut().for_each(|v| v.ty = f(v.ty)),
            Kind::Void
            | Kind::Int { .. }
            | Kind::Enum { .. }
            | Kind::Fwd { .. }
            | Kind::Float { .. }
            | Kind::Enum64 { .. } => {}
        }
    }
}

/// One BTF type: its name (empty for anonymous types) and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    pub name: String,
    pub kind: Kind,
}

impl Type {
    pub fn new(name: impl Into<String>, kind: Kind) -> Type {
        Type {
            name: name.into(),
            kind,
        }
    }
}

/// A parsed BTF blob: `types[0]` is `void`, `types[id]` the type with that id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Btf {
    types: Vec<Type>,
}

impl Default for Btf {
    fn default() -> Btf {
        Btf::new()
    }
}

impl Btf {
    /// An empty BTF (only `void`).
    pub fn new() -> Btf {
        Btf {
            types: vec![Type::new("", Kind::Void)],
        }
    }

    /// All types, indexed by id (`types()[0]` is `void`).
    pub fn types(&self) -> &[Type] {
        &self.types
    }

    /// Number of ids (types plus `void`).
    pub fn len(&self) -> u32 {
        self.types.len() as u32
    }

    /// True when only `void` is present.
    pub fn is_empty(&self) -> bool {
        self.types.len() <= 1
    }

    /// The type with id `id`.
    pub fn get(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize)
    }

    /// The type with id `id`, or [`BtfError::NoSuchType`].
    pub fn ty(&self, id: u32) -> Result<&Type, BtfError> {
        self.get(id).ok_or(BtfError::NoSuchType(id))
    }

    /// Mutable access to a type (used to fix up DATASEC offsets and sizes).
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Type> {
        if id == 0 {
            return None;
        }
        self.types.get_mut(id as usize)
    }

    /// Appends a type and returns its id. References are not checked
    /// here; [`Btf::validate`] (and [`Btf::encode`]'s consumer) do.
    pub fn add(&mut self, ty: Type) -> u32 {
        self.types.push(ty);
        self.types.len() as u32 - 1
    }

    /// Checks that every referenced type id exists and that kinds are
    /// used consistently (what the kernel's BTF checker would reject first).
    pub fn validate(&self) -> Result<(), BtfError> {
        let count = self.len();
        for (id, t) in self.types.iter().enumerate().skip(1) {
            let id = id as u32;
            let mut bad = None;
            t.kind.for_each_ref(|r| {
                if r >= count && bad.is_none() {
                    bad = Some(r);
                }
            });
            if let Some(target) = bad {
                return Err(BtfError::BadTypeId {
                    type_id: id,
                    target,
                    count,
                });
            }
            if matches!(t.kind, Kind::Void) {
                return Err(BtfError::Invalid {
                    type_id: id,
                    why: "kind 0 (void) is only valid as id 0".into(),
                });
            }
            match &t.kind {
                Kind::Func { proto, .. }
                    if !matches!(self.types[*proto as usize].kind, Kind::FuncProto { .. }) =>
                {
                    return Err(BtfError::Invalid {
                        type_id: id,
                        why: format!("FUNC refers to type {proto}, which is not a FUNC_PROTO"),
                    });
                }
                Kind::Datasec { vars, .. } => {
                    for v in vars {
                        if !matches!(
                            self.types[v.ty as usize].kind,
                            Kind::Var { .. } | Kind::Func { .. }
                        ) {
                            return Err(BtfError::Invalid {
                                type_id: id,
                                why: format!("DATASEC entry {} is not a VAR", v.ty),
                            });
                        }
                    }
                }
                Kind::Int {
                    size, bits, offset, ..
                } if (!matches!(size, 1 | 2 | 4 | 8 | 16)
                    || u32::from(*bits) + u32::from(*offset) > size * 8) =>
                {
                    return Err(BtfError::Invalid {
                        type_id: id,
                        why: format!("INT size {size} with {bits} bits at offset {offset}"),
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }
}
