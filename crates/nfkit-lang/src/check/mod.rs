//! Name resolution and type checking: the Python AST of a script into the
//! typed [`Program`], or the first error as a [`Diagnostic`] (with the
//! supported alternative). Warnings (inserted loop caps, divisions that
//! differ from Python) are collected on the way.
//!
//! The parts follow docs/language.md:

/// The module pass: `attach`, constants, chain declarations, then the
/// chain bodies and the recursion check.
mod module;

/// `from nf.X import ...` and `from lib.X import ...` (library scripts
/// merged into this one).
mod imports;

/// `every_packet(...)`, `by_ipv4_dst({...})`, ...: the classifier table.
mod classifier;

/// Chain statements: assignments, `if`, `return`, verdicts.
mod statements;

/// `while` and `for ... in range(...)`: bounds and iteration caps.
mod loops;

/// Expressions, types and arithmetic: literals, operators, comparisons.
mod expressions;

/// Calls: casts, NFs and (inlined) chains; methods.
mod calls;

/// `Packet.read_*`, `Packet.write_*`, `Packet.len` and the info fields.
mod packet;

/// Map declarations, `m[k]`, `m.get`, `k in m`, `m[k] op= v`, `del m[k]`.
mod maps;

/// `Patterns([...])`: regex sets for `match` of `nf.dpi`.
mod patterns;

/// Which loops run through `bpf_loop`, and that they do not nest.
mod bpf_loop;

/// Errors and warnings: the diagnostics and how constructs are named in them.
mod errors;

pub use bpf_loop::{BPF_LOOP_ABOVE, BPF_LOOP_MAX, MAX_LOOP_CAP};
pub use packet::PKT_FIELDS;

use crate::diag::{Diagnostic, SourceMap};
use crate::ir::{Expr, Program};
use crate::types::Ty;
use nfkit_nf::{Hook, SearchPath};
use rustpython_parser::ast::{self, Ranged};
use std::collections::HashMap;

/// Options of checking and compiling.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where `from nf.X import ...` looks for user NF objects.
    pub search: SearchPath,
    /// The hook to compile for (overrides the script's `attach`).
    pub hook: Option<Hook>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            search: SearchPath::embedded(),
            hook: None,
        }
    }
}

/// A checked script and its warnings.
#[derive(Clone, Debug)]
pub struct Checked {
    pub program: Program,
    pub hook: Hook,
    pub warnings: Vec<Diagnostic>,
}

/// Default iteration cap of loops without a proven bound.
pub const DEFAULT_LOOP_CAP: u32 = 256;

/// Most parameters (and NF arguments).
pub const MAX_ARGS: usize = 4;
/// Most chains a classifier can dispatch (ids 0..62).
pub const MAX_CHAINS: usize = 63;

/// Parses and checks `source` (named `file` in diagnostics).
pub fn check(file: &str, source: &str, opts: &Options) -> Result<Checked, Box<Diagnostic>> {
    module::check_at(file, source, opts, 0)
}

/// A result whose error is the diagnostic that stops checking.
type R<T> = Result<T, Box<Diagnostic>>;

/// What a module-level name stands for.
#[derive(Clone, Debug)]
enum Sym {
    Nf(usize),
    Classifier(String),
    /// A constant; `None` type: an untyped literal.
    Const(Option<Ty>, i128),
    Map(usize),
    Chain(usize),
}

/// A checked expression: typed, or a literal still without a type.
#[derive(Clone, Debug)]
enum TE {
    Typed(Expr),
    Lit(i128, usize),
}

/// The state of checking one script.
struct Checker<'a> {
    sm: SourceMap,
    opts: &'a Options,
    syms: HashMap<String, Sym>,
    prog: Program,
    warnings: Vec<Diagnostic>,
    loop_cap: u32,
    hook: Hook,
    /// The `def`s, in chain order (bodies are checked after the module pass).
    /// `None`: a chain imported from another script (already checked).
    defs: Vec<Option<&'a ast::StmtFunctionDef>>,
    /// Chain call graph: calls[i] = chains chain i calls (with the call's offset).
    calls: Vec<Vec<(usize, usize)>>,
    /// Nesting of library imports (0 for the script itself).
    depth: u32,
    /// True while checking the body of a loop compiled to `bpf_loop`.
    in_bpf_loop: bool,
}

/// Per-chain state while checking a body.
struct Scope {
    locals: Vec<(String, Ty)>,
    by_name: HashMap<String, usize>,
    loops: usize,
    chain: usize,
    ret: Ty,
}

impl Scope {
    /// A new local (hidden from names when it starts with `$`).
    fn add(&mut self, name: &str, ty: Ty) -> usize {
        let i = self.locals.len();
        self.locals.push((name.to_string(), ty));
        if !name.starts_with('$') {
            self.by_name.insert(name.to_string(), i);
        }
        i
    }
}

/// The byte offset of an AST node in the source.
fn off<T: Ranged>(n: &T) -> usize {
    u32::from(n.start()) as usize
}
