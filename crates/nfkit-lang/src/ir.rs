//! The typed IR the checker produces and code generation consumes. Every
//! expression carries its type; every operand of an arithmetic or
//! comparison operator already has the operator's type (conversions are
//! explicit [`ExprKind::Cast`]s); names are resolved to indices.

use crate::types::Ty;
use nfkit_isa::Size;
use nfkit_object::MapType;

pub mod walk;

/// Binary arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// Comparisons (signedness from the operand type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Read-modify-write operators on map values (`m[k] op= v`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapRmw {
    Add,
    Sub,
    Or,
    And,
    Xor,
}

/// A typed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub ty: Ty,
    pub kind: ExprKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A constant in the canonical form of `ty`.
    Const(u64),
    /// A local of the current chain (parameters first).
    Local(usize),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    /// `~e`.
    Inv(Box<Expr>),
    /// `not e` (operand: any type, truthiness).
    Not(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// Short-circuit `and` / `or` on truth values; result bool.
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    IfExp(Box<Expr>, Box<Expr>, Box<Expr>),
    /// Conversion of the operand to `ty` (wrapping / truthiness for bool).
    Cast(Box<Expr>),
    /// An NF call (index into [`Program::nfs`]); result u64, a verdict
    /// ends the chain.
    CallNf {
        nf: usize,
        args: Vec<Expr>,
    },
    /// A chain call, inlined (index into [`Program::chains`]).
    CallChain {
        chain: usize,
        args: Vec<Expr>,
    },
    /// `Packet.read_uN(off)`.
    PktRead {
        size: Size,
        off: Box<Expr>,
    },
    /// `Packet.len`.
    PktLen,
    /// `Packet.queue`: the receive queue (`xdp_md.rx_queue_index`,
    /// `__sk_buff.queue_mapping`).
    PktQueue,
    /// `Packet.arrival`: the packet's time, as `nf_now()` gives it (in
    /// the software switch the frame's arrival time).
    PktArrival,
    /// A field of the packet info block (`Packet.l3_off`, ...).
    PktInfo {
        off: i16,
        size: Size,
    },
    /// `m[k]` (0 when absent) or `m.get(k, d)`.
    MapGet {
        map: usize,
        key: Key,
        default: Option<Box<Expr>>,
    },
    /// `k in m` (`negate`: `not in`).
    MapHas {
        map: usize,
        key: Key,
        negate: bool,
    },
}

impl Expr {
    pub fn konst(ty: Ty, v: u64) -> Expr {
        Expr {
            ty,
            kind: ExprKind::Const(ty.wrap(v)),
        }
    }

    /// The expression converted to `ty` (no-op when it already has it;
    /// constants folded).
    pub fn cast(self, ty: Ty) -> Expr {
        if self.ty == ty {
            return self;
        }
        if let ExprKind::Const(v) = self.kind {
            return Expr::konst(ty, v);
        }
        Expr {
            ty,
            kind: ExprKind::Cast(Box::new(self)),
        }
    }

    /// The constant value, if the expression is one.
    pub fn as_const(&self) -> Option<u64> {
        match self.kind {
            ExprKind::Const(v) => Some(v),
            _ => None,
        }
    }
}

/// A statement with its source position (1-based line, 0-based column).
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub line: u32,
    pub col: u32,
    pub kind: StmtKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `local = value` (value already of the local's type).
    Assign {
        local: usize,
        value: Expr,
    },
    Expr(Expr),
    If {
        cond: Expr,
        then: Vec<Stmt>,
        els: Vec<Stmt>,
    },
    /// A loop: `cond` tested before each iteration, `step` run after the
    /// body and on `continue`; `cap`: the inserted iteration cap (a fault
    /// when exceeded), `counter`: the local that counts iterations.
    Loop {
        cond: Expr,
        body: Vec<Stmt>,
        step: Vec<Stmt>,
        cap: Option<(u32, usize)>,
        /// The most iterations the loop can run: its proven bound, or
        /// the cap (bounds the NF calls per packet in dynamic mode).
        trips: u32,
    },
    Break,
    Continue,
    /// `return e` (already of the chain's return type).
    Return(Expr),
    /// `return VERDICT`: the u64 verdict ends the whole chain.
    Verdict(Expr),
    MapSet {
        map: usize,
        key: Key,
        value: Expr,
    },
    MapRmw {
        map: usize,
        key: Key,
        op: MapRmw,
        value: Expr,
    },
    MapDel {
        map: usize,
        key: Key,
    },
    PktWrite {
        size: Size,
        off: Expr,
        value: Expr,
    },
}

/// A chain: a `def`.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    pub name: String,
    /// Parameters: locals `0..params.len()`.
    pub params: Vec<(String, Ty)>,
    pub ret: Ty,
    /// Every local's name and type (parameters first; hidden locals of
    /// loops are named `$...`).
    pub locals: Vec<(String, Ty)>,
    pub body: Vec<Stmt>,
    pub line: u32,
}

/// An imported NF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfRef {
    /// `nf.meter`.
    pub module: String,
    /// `tb_dst`.
    pub name: String,
    /// `nf_tb_dst`.
    pub symbol: String,
    pub arity: usize,
}

/// A map key: one expression per key field (one for an integer key),
/// each already of its field's type.
pub type Key = Vec<Expr>;

/// Largest map key in bytes (a tuple key's struct).
pub const MAX_KEY_BYTES: u32 = 16;

/// A map declared by the script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDecl {
    pub name: String,
    pub map_type: MapType,
    /// The key type of an integer key. For a tuple key: `u64`, so that
    /// tools showing keys as one integer show its first 8 bytes.
    pub key: Ty,
    /// The element types of a tuple key (`HashMap((u32, u32), ...)`);
    /// empty for an integer key.
    pub tuple: Vec<Ty>,
    pub value: Ty,
    pub size: u32,
    pub line: u32,
}

impl MapDecl {
    /// The types of the key's fields: the tuple's, or the integer key.
    pub fn key_fields(&self) -> Vec<Ty> {
        if self.tuple.is_empty() {
            vec![self.key]
        } else {
            self.tuple.clone()
        }
    }

    /// Byte offset of each key field and the key's size: a C struct of
    /// the fields in order with natural alignment (each field at a
    /// multiple of its size, the size a multiple of the largest field).
    pub fn key_layout(&self) -> (Vec<u32>, u32) {
        key_layout(&self.key_fields())
    }

    /// The key's size in bytes.
    pub fn key_size(&self) -> u32 {
        self.key_layout().1
    }
}

/// [`MapDecl::key_layout`] of fields `tys`.
pub fn key_layout(tys: &[Ty]) -> (Vec<u32>, u32) {
    let mut offs = Vec::with_capacity(tys.len());
    let mut at: u32 = 0;
    let mut align: u32 = 1;
    for t in tys {
        let n = t.bytes();
        at = at.div_ceil(n) * n;
        offs.push(at);
        at += n;
        align = align.max(n);
    }
    (offs, at.div_ceil(align) * align)
}

/// A classifier key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClsKey {
    /// `every_packet`.
    All,
    Ipv4 {
        addr: [u8; 4],
        prefix: u8,
    },
    Ipv6 {
        addr: [u8; 16],
        prefix: u8,
    },
    Port(u16),
    Dscp(u8),
}

/// The classifier configuration of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classifier {
    /// `every_packet`, `by_ipv4_dst`, ...
    pub name: String,
    /// (key, chain index into [`Program::chains`]).
    pub entries: Vec<(ClsKey, usize)>,
    /// Verdict for unclaimed packets and plain values.
    pub default: u64,
    /// Verdict on a fault.
    pub fault: u64,
    pub line: u32,
}

/// A checked script.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub file: String,
    pub source: String,
    pub nfs: Vec<NfRef>,
    pub maps: Vec<MapDecl>,
    pub chains: Vec<Chain>,
    pub classifier: Option<Classifier>,
    /// `attach(iface, hook)`.
    pub attach: Option<(String, String)>,
    /// Module constants (name, type if declared, value).
    pub consts: Vec<(String, Option<Ty>, u64)>,
    /// Match-action tables (their maps and chains are above; this keeps
    /// their declared entries).
    pub tables: Vec<crate::table::Table>,
    /// `Patterns(...)` sets, by set id.
    pub patterns: Vec<crate::patterns::PatternSet>,
}

impl Program {
    /// Chains the classifier dispatches, in chain-id order.
    pub fn dispatched(&self) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        if let Some(c) = &self.classifier {
            for (_, ch) in &c.entries {
                if !out.contains(ch) {
                    out.push(*ch);
                }
            }
        }
        out
    }

    /// The names of the dispatched chains, by chain id.
    pub fn chain_names(&self) -> Vec<String> {
        self.dispatched()
            .iter()
            .map(|&i| self.chains[i].name.clone())
            .collect()
    }
}
