//! Name resolution and type checking: the Python AST of a script into the
//! typed [`Program`], or the first error as a [`Diagnostic`] (with the
//! supported alternative). Warnings (inserted loop caps, divisions that
//! differ from Python) are collected on the way.

use crate::diag::{Diagnostic, Severity, SourceMap};
use crate::ir::walk::{walk_block_mut, walk_expr_mut, walk_stmt_mut, VisitMut};
use crate::ir::{
    verdict, BinOp, Chain, Classifier, ClsKey, CmpOp, Expr, ExprKind, MapDecl, MapRmw, NfRef,
    Program, Stmt, StmtKind,
};
use crate::types::Ty;
use nfkit_isa::Size;
use nfkit_nf::{Hook, NfKind, SearchPath};
use nfkit_object::MapType;
use rustpython_parser::ast::{self, Constant, Ranged};
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

/// Loops with a larger iteration cap (or proven bound) are compiled to
/// `bpf_loop` (the kernel verifier walks every iteration of a counted
/// loop; a `bpf_loop` body is verified as one callback).
pub const BPF_LOOP_ABOVE: u32 = 1024;

/// Largest iteration count `bpf_loop` takes.
pub const BPF_LOOP_MAX: u32 = 1 << 23;

/// Largest iteration cap: a `bpf_loop` runs cap + 1 times (the last one
/// to see that the cap is exceeded).
pub const MAX_LOOP_CAP: i128 = BPF_LOOP_MAX as i128 - 1;

/// What the cap warnings add for a cap compiled to `bpf_loop`.
fn bpf_loop_note(cap: u32) -> &'static str {
    if cap > BPF_LOOP_ABOVE {
        "; the loop is compiled to bpf_loop"
    } else {
        ""
    }
}

/// Most parameters (and NF arguments).
pub const MAX_ARGS: usize = 4;
/// Most chains a classifier can dispatch (ids 0..62).
pub const MAX_CHAINS: usize = 63;

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

/// Parses and checks `source` (named `file` in diagnostics).
pub fn check(file: &str, source: &str, opts: &Options) -> Result<Checked, Box<Diagnostic>> {
    check_at(file, source, opts, 0)
}

/// [`check`] of a script imported `depth` levels deep.
fn check_at(
    file: &str,
    source: &str,
    opts: &Options,
    depth: u32,
) -> Result<Checked, Box<Diagnostic>> {
    let sm = SourceMap::new(file, source);
    let module = match rustpython_parser::parse(source, rustpython_parser::Mode::Module, file) {
        Ok(m) => m,
        Err(e) => {
            let off = u32::from(e.offset) as usize;
            return Err(Box::new(sm.diag(
                Severity::Error,
                off,
                format!("invalid syntax: {}", e.error),
                "chain scripts are Python syntax: see docs/language.md",
            )));
        }
    };
    let body = match module {
        ast::Mod::Module(m) => m.body,
        _ => Vec::new(),
    };
    let mut c = Checker {
        sm,
        opts,
        syms: HashMap::new(),
        prog: Program {
            file: file.to_string(),
            source: source.to_string(),
            nfs: Vec::new(),
            maps: Vec::new(),
            chains: Vec::new(),
            classifier: None,
            attach: None,
            consts: Vec::new(),
        },
        warnings: Vec::new(),
        loop_cap: DEFAULT_LOOP_CAP,
        hook: opts.hook.unwrap_or(Hook::Xdp),
        defs: Vec::new(),
        calls: Vec::new(),
        depth,
        in_bpf_loop: false,
    };
    c.module(&body)?;
    let hook = c.hook;
    Ok(Checked {
        program: c.prog,
        hook,
        warnings: c.warnings,
    })
}

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
    fn add(&mut self, name: &str, ty: Ty) -> usize {
        let i = self.locals.len();
        self.locals.push((name.to_string(), ty));
        if !name.starts_with('$') {
            self.by_name.insert(name.to_string(), i);
        }
        i
    }
}

fn off<T: Ranged>(n: &T) -> usize {
    u32::from(n.start()) as usize
}

fn stmt_name(s: &ast::Stmt) -> &'static str {
    use ast::Stmt::*;
    match s {
        FunctionDef(_) => "a nested 'def'",
        AsyncFunctionDef(_) => "'async def'",
        ClassDef(_) => "'class'",
        Return(_) => "'return' outside a chain",
        Delete(_) => "'del'",
        Assign(_) => "assignment",
        TypeAlias(_) => "'type' aliases",
        AugAssign(_) => "augmented assignment",
        AnnAssign(_) => "annotated assignment",
        For(_) => "'for'",
        AsyncFor(_) => "'async for'",
        While(_) => "'while'",
        If(_) => "'if'",
        With(_) | AsyncWith(_) => "'with'",
        Match(_) => "'match'",
        Raise(_) => "'raise'",
        Try(_) | TryStar(_) => "'try'",
        Assert(_) => "'assert'",
        Import(_) => "'import'",
        ImportFrom(_) => "'from ... import'",
        Global(_) => "'global'",
        Nonlocal(_) => "'nonlocal'",
        Expr(_) => "expression statement",
        Pass(_) => "'pass'",
        Break(_) => "'break'",
        Continue(_) => "'continue'",
    }
}

fn expr_name(e: &ast::Expr) -> &'static str {
    use ast::Expr::*;
    match e {
        BoolOp(_) => "'and'/'or'",
        NamedExpr(_) => "':=' (assignment expressions)",
        BinOp(_) => "this operator",
        UnaryOp(_) => "this operator",
        Lambda(_) => "'lambda'",
        IfExp(_) => "conditional expressions",
        Dict(_) => "dicts",
        Set(_) => "sets",
        ListComp(_) | SetComp(_) | DictComp(_) | GeneratorExp(_) => "comprehensions",
        Await(_) => "'await'",
        Yield(_) | YieldFrom(_) => "'yield'",
        Compare(_) => "comparisons",
        Call(_) => "calls",
        FormattedValue(_) | JoinedStr(_) => "f-strings",
        Constant(c) => match c.value {
            ast::Constant::Str(_) => "strings",
            ast::Constant::Bytes(_) => "bytes",
            ast::Constant::Float(_) | ast::Constant::Complex { .. } => "floating-point numbers",
            ast::Constant::None => "None",
            ast::Constant::Ellipsis => "'...'",
            _ => "this constant",
        },
        Attribute(_) => "attributes",
        Subscript(_) => "subscripts",
        Starred(_) => "'*' unpacking",
        Name(_) => "names",
        List(_) => "lists",
        Tuple(_) => "tuples",
        Slice(_) => "slices",
    }
}

const VERDICT_NAMES: [&str; 5] = ["ABORTED", "DROP", "PASS", "TX", "FLOOD"];
const VERDICT_CALLS: [&str; 3] = ["REDIRECT", "CONTROLLER", "HOST"];
const MAP_CTORS: [(&str, MapType, bool); 5] = [
    ("HashMap", MapType::Hash, true),
    ("LruHashMap", MapType::LruHash, true),
    ("PercpuHashMap", MapType::PercpuHash, true),
    ("ArrayMap", MapType::Array, false),
    ("PercpuArrayMap", MapType::PercpuArray, false),
];
const CLASSIFIERS: [&str; 7] = [
    "every_packet",
    "by_ipv4_dst",
    "by_ipv4_src",
    "by_ipv6_dst",
    "by_ipv6_src",
    "by_l4_dport",
    "by_dscp",
];

/// Packet info block fields a chain may read: (name, offset, size, type).
pub const PKT_FIELDS: [(&str, i16, Size, Ty); 11] = [
    ("l3_off", 56, Size::H, Ty::U16),
    ("l4_off", 58, Size::H, Ty::U16),
    ("ip_version", 37, Size::B, Ty::U8),
    ("l4_proto", 36, Size::B, Ty::U8),
    ("sport", 32, Size::H, Ty::U16),
    ("dport", 34, Size::H, Ty::U16),
    ("tos", 64, Size::B, Ty::U8),
    ("ttl", 65, Size::B, Ty::U8),
    ("tcp_flags", 66, Size::B, Ty::U8),
    ("eth_proto", 60, Size::H, Ty::U16),
    ("ifindex", 52, Size::W, Ty::U32),
];

fn size_of_suffix(s: &str) -> Option<(Size, Ty)> {
    match s {
        "u8" => Some((Size::B, Ty::U8)),
        "u16" => Some((Size::H, Ty::U16)),
        "u32" => Some((Size::W, Ty::U32)),
        "u64" => Some((Size::DW, Ty::U64)),
        _ => None,
    }
}

impl<'a> Checker<'a> {
    fn err<T>(&self, at: usize, msg: impl Into<String>, help: &str) -> R<T> {
        Err(Box::new(self.sm.diag(
            Severity::Error,
            at,
            msg.into(),
            help,
        )))
    }

    fn warn(&mut self, at: usize, msg: impl Into<String>, help: &str) {
        let d = self.sm.diag(Severity::Warning, at, msg.into(), help);
        self.warnings.push(d);
    }

    fn line_of(&self, at: usize) -> (u32, u32) {
        self.sm.position(at)
    }

    fn define(&mut self, name: &str, sym: Sym, at: usize) -> R<()> {
        if self.syms.contains_key(name) {
            return self.err(
                at,
                format!("'{name}' is already defined"),
                "give each import, constant, map and chain its own name (use 'import x as y' to rename)",
            );
        }
        if is_builtin(name) {
            return self.err(
                at,
                format!("'{name}' is a built-in name of the chain language"),
                "pick another name",
            );
        }
        self.syms.insert(name.to_string(), sym);
        Ok(())
    }

    // ------------------------------------------------------------------
    // Module level.

    fn module(&mut self, body: &'a [ast::Stmt]) -> R<()> {
        // The hook first: `attach` may come last but decides packet rules.
        for s in body {
            if let ast::Stmt::Expr(e) = s {
                if let ast::Expr::Call(call) = e.value.as_ref() {
                    if matches!(call.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "attach")
                    {
                        self.attach(call)?;
                    }
                }
            }
        }
        let mut cls_calls: Vec<&'a ast::ExprCall> = Vec::new();
        for s in body {
            match s {
                ast::Stmt::ImportFrom(i) => self.import(i)?,
                ast::Stmt::Import(i) => {
                    return self.err(
                        off(i),
                        "'import MODULE' is not supported",
                        "import names: 'from nf.meter import tb_dst' or 'from lib.common import chain'",
                    )
                }
                ast::Stmt::Assign(a) => self.module_assign(a)?,
                ast::Stmt::AnnAssign(a) => self.module_ann_assign(a)?,
                ast::Stmt::FunctionDef(f) => self.declare_chain(f)?,
                ast::Stmt::Expr(e) => match e.value.as_ref() {
                    ast::Expr::Constant(ast::ExprConstant {
                        value: Constant::Str(_),
                        ..
                    }) => {}
                    ast::Expr::Call(call) => {
                        let name = match call.func.as_ref() {
                            ast::Expr::Name(n) => n.id.as_str(),
                            _ => "",
                        };
                        if name == "attach" {
                            continue;
                        }
                        match self.syms.get(name) {
                            Some(Sym::Classifier(_)) => cls_calls.push(call),
                            _ => {
                                return self.err(
                                    off(call),
                                    format!(
                                        "only classifier configuration and 'attach' can be called at module level{}",
                                        if name.is_empty() { String::new() } else { format!(", not '{name}'") }
                                    ),
                                    "call NFs inside a chain ('def'); configure the classifier with e.g. 'every_packet(chain)' after importing it from nf.classify",
                                )
                            }
                        }
                    }
                    other => {
                        return self.err(
                            off(other),
                            format!("{} at module level has no effect", expr_name(other)),
                            "module level holds imports, constants, maps, chains, the classifier call and 'attach'",
                        )
                    }
                },
                ast::Stmt::Pass(_) => {}
                other => {
                    return self.err(
                        off(other),
                        format!("{} is not supported at module level", stmt_name(other)),
                        "module level holds imports, constants, maps, chains ('def'), the classifier call and 'attach'",
                    )
                }
            }
        }
        // Chain bodies.
        self.calls = vec![Vec::new(); self.defs.len()];
        for i in 0..self.defs.len() {
            self.chain_body(i)?;
        }
        self.recursion()?;
        let mut seen_cls = false;
        for call in cls_calls {
            if seen_cls {
                return self.err(
                    off(call),
                    "a script has at most one classifier",
                    "configure one classifier; pick chains by key inside it",
                );
            }
            seen_cls = true;
            self.classifier(call)?;
        }
        Ok(())
    }

    fn attach(&mut self, call: &ast::ExprCall) -> R<()> {
        if self.prog.attach.is_some() {
            return self.err(
                off(call),
                "a script has at most one 'attach'",
                "keep one attach(\"IFACE\", \"HOOK\")",
            );
        }
        let help =
            "attach(\"eth0\", \"xdp\"): hooks xdp, xdp-generic, tc-ingress, tc-egress, socket";
        if call.args.len() != 2 || !call.keywords.is_empty() {
            return self.err(off(call), "attach takes two strings", help);
        }
        let s = |e: &ast::Expr| match e {
            ast::Expr::Constant(ast::ExprConstant {
                value: Constant::Str(s),
                ..
            }) => Some(s.clone()),
            _ => None,
        };
        let (Some(iface), Some(hook)) = (s(&call.args[0]), s(&call.args[1])) else {
            return self.err(off(call), "attach takes two strings", help);
        };
        let h = match hook.as_str() {
            "xdp" | "xdp-generic" => Hook::Xdp,
            "tc-ingress" | "tc-egress" | "tc" => Hook::Tc,
            "socket" => Hook::Socket,
            _ => return self.err(off(&call.args[1]), format!("unknown hook '{hook}'"), help),
        };
        if self.opts.hook.is_none() {
            self.hook = h;
        }
        self.prog.attach = Some((iface, hook));
        Ok(())
    }

    fn import(&mut self, i: &ast::StmtImportFrom) -> R<()> {
        let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
        if i.level.map(|l| l.to_u32()).unwrap_or(0) != 0 {
            return self.err(
                off(i),
                "relative imports are not supported",
                "import NFs with 'from nf.MODULE import name'",
            );
        }
        let Some(m) = module.strip_prefix("nf.") else {
            if let Some(rest) = module.strip_prefix("lib.") {
                return self.import_lib(i, rest);
            }
            return self.err(
                off(i),
                format!("unknown module '{module}'"),
                "import NFs and classifiers from 'nf.MODULE' (see 'nfkit nf list')",
            );
        };
        let resolved = self.opts.search.resolve(m, self.hook).ok().flatten();
        let embedded = nfkit_nf::module(m);
        if resolved.is_none() && embedded.is_none() {
            return self.err(
                off(i),
                format!("no NF module 'nf.{m}' (for hook {})", self.hook.name()),
                "see 'nfkit nf list' for the catalogue, or put MODULE.o on the NF search path (--nf-path, NFKIT_NF_PATH)",
            );
        }
        for alias in &i.names {
            let name = alias.name.as_str();
            let local = alias.asname.as_ref().map(|a| a.as_str()).unwrap_or(name);
            let at = off(alias);
            if name == "*" {
                return self.err(
                    at,
                    "'import *' is not supported",
                    "import each name you use",
                );
            }
            let doc = match self.opts.search.find(m, name) {
                Ok(Some(d)) => Some(d),
                _ => nfkit_nf::find(m, name),
            };
            if let Some(d) = doc {
                match d.kind {
                    NfKind::Nf => {
                        let idx = self.prog.nfs.len();
                        self.prog.nfs.push(NfRef {
                            module: format!("nf.{m}"),
                            name: d.name.clone(),
                            symbol: d.symbol.clone(),
                            arity: d.args.len(),
                        });
                        self.define(local, Sym::Nf(idx), at)?;
                    }
                    NfKind::Classifier => {
                        if !CLASSIFIERS.contains(&name) {
                            return self.err(
                                at,
                                format!("unknown classifier '{name}'"),
                                &format!("classifiers: {}", CLASSIFIERS.join(", ")),
                            );
                        }
                        self.define(local, Sym::Classifier(name.to_string()), at)?;
                    }
                }
                continue;
            }
            let konst = embedded
                .and_then(|e| e.doc())
                .and_then(|d| d.consts.iter().find(|c| c.name == name).map(|c| c.value));
            if let Some(v) = konst {
                self.define(local, Sym::Const(None, v as i128), at)?;
                continue;
            }
            return self.err(
                at,
                format!("module 'nf.{m}' has no NF, classifier or constant '{name}'"),
                &format!("see 'nfkit nf list' or 'nfkit nf show nf.{m}.NAME'"),
            );
        }
        Ok(())
    }

    /// `from lib.common import f`: chains of `lib/common.chain` (or
    /// `.py`) next to this script, checked on their own and merged with
    /// the NFs and maps they use.
    fn import_lib(&mut self, i: &ast::StmtImportFrom, rest: &str) -> R<()> {
        let at = off(i);
        if self.depth >= 8 {
            return self.err(
                at,
                "scripts import each other too deeply (a cycle?)",
                "import library chains without cycles",
            );
        }
        let base = std::path::Path::new(&self.prog.file)
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        let rel: std::path::PathBuf = std::iter::once("lib").chain(rest.split('.')).collect();
        let mut found = None;
        for ext in ["chain", "py"] {
            let p = base.join(&rel).with_extension(ext);
            if let Ok(src) = std::fs::read_to_string(&p) {
                found = Some((p, src));
                break;
            }
        }
        let Some((path, src)) = found else {
            return self.err(
                at,
                format!(
                    "no script {} (.chain or .py) next to this script",
                    rel.display()
                ),
                "library scripts live in lib/NAME.chain relative to the importing script",
            );
        };
        let opts = Options {
            search: self.opts.search.clone(),
            hook: Some(self.hook),
        };
        let lib = check_at(&path.display().to_string(), &src, &opts, self.depth + 1)?;
        self.warnings.extend(lib.warnings);
        let lib = lib.program;
        // Merge its NFs, maps and chains, renumbering their references.
        let mut nf_map = Vec::new();
        for nf in &lib.nfs {
            let k = match self
                .prog
                .nfs
                .iter()
                .position(|x| x.symbol == nf.symbol && x.module == nf.module)
            {
                Some(k) => k,
                None => {
                    self.prog.nfs.push(nf.clone());
                    self.prog.nfs.len() - 1
                }
            };
            nf_map.push(k);
        }
        let mut map_map = Vec::new();
        for m in &lib.maps {
            let k = match self.prog.maps.iter().position(|x| x.name == m.name) {
                Some(k) if self.prog.maps[k] == *m => k,
                Some(_) => {
                    return self.err(
                        at,
                        format!(
                            "map '{}' of {} clashes with a map of the same name",
                            m.name,
                            path.display()
                        ),
                        "rename one of the maps",
                    )
                }
                None => {
                    if self.syms.contains_key(&m.name) {
                        return self.err(
                            at,
                            format!(
                                "map '{}' of {} clashes with a name of this script",
                                m.name,
                                path.display()
                            ),
                            "rename one of them",
                        );
                    }
                    self.prog.maps.push(m.clone());
                    self.syms
                        .insert(m.name.clone(), Sym::Map(self.prog.maps.len() - 1));
                    self.prog.maps.len() - 1
                }
            };
            map_map.push(k);
        }
        let first = self.prog.chains.len();
        for c in &lib.chains {
            let mut c = c.clone();
            let mut r = Renumber {
                nfs: &nf_map,
                maps: &map_map,
                chain_base: first,
            };
            walk_block_mut(&mut r, &mut c.body);
            c.name = format!("{}.{}", rest, c.name);
            self.prog.chains.push(c);
            self.defs.push(None);
        }
        for alias in &i.names {
            let name = alias.name.as_str();
            let local = alias.asname.as_ref().map(|a| a.as_str()).unwrap_or(name);
            let Some(k) = lib.chains.iter().position(|c| c.name == name) else {
                return self.err(
                    off(alias),
                    format!("{} has no chain '{name}'", path.display()),
                    "import chains defined with 'def' in the library script",
                );
            };
            self.prog.chains[first + k].name = name.to_string();
            self.define(local, Sym::Chain(first + k), off(alias))?;
        }
        Ok(())
    }

    fn module_assign(&mut self, a: &ast::StmtAssign) -> R<()> {
        let [ast::Expr::Name(target)] = a.targets.as_slice() else {
            return self.err(
                off(a),
                "module level assigns one name at a time",
                "write 'NAME = value'",
            );
        };
        let name = target.id.as_str();
        // A map declaration?
        if let ast::Expr::Call(call) = a.value.as_ref() {
            if let ast::Expr::Name(f) = call.func.as_ref() {
                if let Some(&(_, mt, keyed)) =
                    MAP_CTORS.iter().find(|(n, _, _)| *n == f.id.as_str())
                {
                    return self.map_decl(name, call, mt, keyed, off(target));
                }
            }
        }
        let v = self.const_expr(&a.value)?;
        if name == "LOOP_CAP" {
            if !(1..=MAX_LOOP_CAP).contains(&v) {
                return self.err(
                    off(a.value.as_ref()),
                    format!("LOOP_CAP {v} is out of range"),
                    "use 1 .. 8388607",
                );
            }
            self.loop_cap = v as u32;
        }
        self.prog
            .consts
            .push((name.to_string(), None, Ty::U64.wrap(v as u64)));
        self.define(name, Sym::Const(None, v), off(target))
    }

    fn module_ann_assign(&mut self, a: &ast::StmtAnnAssign) -> R<()> {
        let ast::Expr::Name(target) = a.target.as_ref() else {
            return self.err(
                off(a),
                "module level assigns one name at a time",
                "write 'NAME: u32 = value'",
            );
        };
        let ty = self.type_of(&a.annotation)?;
        let Some(value) = &a.value else {
            return self.err(
                off(a),
                "a constant needs a value",
                "write 'NAME: u32 = value'",
            );
        };
        let v = self.const_expr(value)?;
        if !ty.fits(v) {
            return self.err(
                off(value.as_ref()),
                format!("{v} does not fit {ty}"),
                &fit_help(ty),
            );
        }
        let name = target.id.as_str();
        if name == "LOOP_CAP" && (1..=MAX_LOOP_CAP).contains(&v) {
            self.loop_cap = v as u32;
        }
        self.prog
            .consts
            .push((name.to_string(), Some(ty), ty.wrap(v as u64)));
        self.define(name, Sym::Const(Some(ty), v), off(target))
    }

    fn map_decl(
        &mut self,
        name: &str,
        call: &ast::ExprCall,
        mt: MapType,
        keyed: bool,
        at: usize,
    ) -> R<()> {
        let ctor = match call.func.as_ref() {
            ast::Expr::Name(n) => n.id.to_string(),
            _ => String::new(),
        };
        let help = if keyed {
            format!("{ctor}(KEY_TYPE, VALUE_TYPE, MAX_ENTRIES), e.g. {ctor}(u32, u64, 1024)")
        } else {
            format!("{ctor}(VALUE_TYPE, ENTRIES), e.g. {ctor}(u64, 16)")
        };
        let want = if keyed { 3 } else { 2 };
        if call.args.len() != want || !call.keywords.is_empty() {
            return self.err(
                off(call),
                format!(
                    "{ctor} takes {want} arguments, got {}",
                    call.args.len() + call.keywords.len()
                ),
                &help,
            );
        }
        let (key, value, n) = if keyed {
            (
                self.type_of(&call.args[0])?,
                self.type_of(&call.args[1])?,
                &call.args[2],
            )
        } else {
            (Ty::U32, self.type_of(&call.args[0])?, &call.args[1])
        };
        for (t, e) in [
            (key, &call.args[0]),
            (value, &call.args[if keyed { 1 } else { 0 }]),
        ] {
            if t == Ty::Bool {
                return self.err(off(e), "map keys and values are integer types", &help);
            }
        }
        let size = self.const_expr(n)?;
        if !(1..=1 << 24).contains(&size) {
            return self.err(
                off(n),
                format!("map size {size} is out of range"),
                "use 1 .. 16777216 entries",
            );
        }
        let idx = self.prog.maps.len();
        let (line, _) = self.line_of(at);
        self.prog.maps.push(MapDecl {
            name: name.to_string(),
            map_type: mt,
            key,
            value,
            size: size as u32,
            line,
        });
        if name.starts_with("nfkit_") {
            return self.err(
                at,
                format!("map names starting with 'nfkit_' are reserved ('{name}')"),
                "pick another name",
            );
        }
        self.define(name, Sym::Map(idx), at)
    }

    fn type_of(&self, e: &ast::Expr) -> R<Ty> {
        if let ast::Expr::Name(n) = e {
            if let Some(t) = Ty::from_name(n.id.as_str()) {
                return Ok(t);
            }
            let alt = match n.id.as_str() {
                "int" => "u64 (or s64 for signed values)",
                "float" => "an integer type (floats are not supported)",
                _ => "u8, u16, u32, u64, s8, s16, s32, s64 or bool",
            };
            return self.err(
                off(e),
                format!("unknown type '{}'", n.id.as_str()),
                &format!("use {alt}"),
            );
        }
        self.err(
            off(e),
            format!("{} cannot be a type", expr_name(e)),
            "use u8, u16, u32, u64, s8, s16, s32, s64 or bool",
        )
    }

    /// A compile-time integer (literals, constants, operators).
    fn const_expr(&self, e: &ast::Expr) -> R<i128> {
        match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Int(b) => self.big(b, off(e)),
                Constant::Bool(b) => Ok(*b as i128),
                _ => self.unsupported_expr(e),
            },
            ast::Expr::Name(n) => match self.syms.get(n.id.as_str()) {
                Some(Sym::Const(_, v)) => Ok(*v),
                Some(_) => self.err(
                    off(e),
                    format!("'{}' is not a constant", n.id.as_str()),
                    "constants are integer expressions of literals and other constants",
                ),
                None => match n.id.as_str() {
                    "True" => Ok(1),
                    "False" => Ok(0),
                    id => self.err(
                        off(e),
                        format!("unknown name '{id}'"),
                        "define constants before using them: NAME = 10",
                    ),
                },
            },
            ast::Expr::UnaryOp(u) => {
                let v = self.const_expr(&u.operand)?;
                match u.op {
                    ast::UnaryOp::USub => Ok(-v),
                    ast::UnaryOp::UAdd => Ok(v),
                    ast::UnaryOp::Invert => Ok(!v),
                    ast::UnaryOp::Not => Ok((v == 0) as i128),
                }
            }
            ast::Expr::BinOp(b) => {
                let l = self.const_expr(&b.left)?;
                let r = self.const_expr(&b.right)?;
                self.fold(b.op, l, r, off(e))
            }
            _ => self.err(
                off(e),
                format!("{} are not constant expressions", expr_name(e)),
                "a constant is an integer expression of literals and other constants",
            ),
        }
    }

    fn big(&self, b: &impl ToString, at: usize) -> R<i128> {
        match b.to_string().parse::<i128>() {
            Ok(v) if (-(1i128 << 64)..(1i128 << 64)).contains(&v) => Ok(v),
            _ => self.err(
                at,
                "integer literal is too large",
                "integers have at most 64 bits",
            ),
        }
    }

    /// Folds a binary operator on literals (Python semantics for literals
    /// that stay in range; the result must fit 64 bits).
    fn fold(&self, op: ast::Operator, l: i128, r: i128, at: usize) -> R<i128> {
        use ast::Operator::*;
        let v = match op {
            Add => l.checked_add(r),
            Sub => l.checked_sub(r),
            Mult => l.checked_mul(r),
            FloorDiv => Some(if r == 0 { 0 } else { l / r }),
            Mod => Some(if r == 0 { l } else { l % r }),
            LShift => {
                if !(0..128).contains(&r) {
                    None
                } else {
                    l.checked_mul(1i128 << r)
                }
            }
            RShift => {
                if r < 0 {
                    None
                } else {
                    Some(l >> r.min(127))
                }
            }
            BitOr => Some(l | r),
            BitAnd => Some(l & r),
            BitXor => Some(l ^ r),
            Div => return self.div_err(at),
            Pow => return self.pow_err(at),
            MatMult => {
                return self.err(
                    at,
                    "'@' is not supported",
                    "chains use integer arithmetic: + - * // % & | ^ << >>",
                )
            }
        };
        match v {
            Some(v) if (-(1i128 << 64)..(1i128 << 64)).contains(&v) => Ok(v),
            _ => self.err(
                at,
                "constant expression overflows 64 bits",
                "keep constants within 64 bits",
            ),
        }
    }

    fn div_err<T>(&self, at: usize) -> R<T> {
        self.err(
            at,
            "'/' is not supported: chains use integer arithmetic",
            "use '//' for integer division (x // 0 == 0)",
        )
    }

    fn pow_err<T>(&self, at: usize) -> R<T> {
        self.err(
            at,
            "'**' is not supported",
            "multiply explicitly, or shift for powers of two: 1 << n",
        )
    }

    fn unsupported_expr<T>(&self, e: &ast::Expr) -> R<T> {
        let (what, help) = match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Float(_) | Constant::Complex { .. } => (
                    "floating-point numbers are not supported",
                    "use integers (scale values, e.g. rates in packets per second)",
                ),
                Constant::Str(_) | Constant::Bytes(_) => (
                    "strings are not supported here",
                    "strings appear only as classifier keys and in attach()",
                ),
                Constant::None => ("None is not supported", "use 0, or a verdict such as PASS"),
                _ => (
                    "this constant is not supported",
                    "use integers, True or False",
                ),
            },
            ast::Expr::List(_) => (
                "lists are not supported",
                "use a map: ArrayMap(u64, N) indexed m[i]",
            ),
            ast::Expr::Tuple(_) => ("tuples are not supported", "use separate values"),
            ast::Expr::Dict(_) => (
                "dicts are not supported here",
                "declare a map: m = HashMap(u32, u64, 1024) and use m[k]",
            ),
            ast::Expr::Set(_) => ("sets are not supported", "use a map and 'k in m'"),
            ast::Expr::ListComp(_)
            | ast::Expr::SetComp(_)
            | ast::Expr::DictComp(_)
            | ast::Expr::GeneratorExp(_) => (
                "comprehensions are not supported",
                "use a 'for i in range(...)' loop",
            ),
            ast::Expr::Lambda(_) => ("'lambda' is not supported", "define a chain with 'def'"),
            ast::Expr::Await(_) => (
                "'await' is not supported",
                "chains run to completion per packet",
            ),
            ast::Expr::Yield(_) | ast::Expr::YieldFrom(_) => {
                ("'yield' is not supported", "return a value or a verdict")
            }
            ast::Expr::NamedExpr(_) => ("':=' is not supported", "assign in a statement: x = e"),
            ast::Expr::JoinedStr(_) | ast::Expr::FormattedValue(_) => (
                "f-strings are not supported",
                "strings appear only as classifier keys and in attach()",
            ),
            ast::Expr::Starred(_) => ("'*' unpacking is not supported", "pass each argument"),
            ast::Expr::Slice(_) => (
                "slices are not supported",
                "read packet fields with Packet.read_u8/u16/u32/u64(off)",
            ),
            _ => (
                "this expression is not supported",
                "see docs/language.md for the supported expressions",
            ),
        };
        self.err(off(e), what, help)
    }

    // ------------------------------------------------------------------
    // Chains.

    fn declare_chain(&mut self, f: &'a ast::StmtFunctionDef) -> R<()> {
        let at = off(f);
        if !f.decorator_list.is_empty() {
            return self.err(
                off(&f.decorator_list[0]),
                "decorators are not supported",
                "define plain chains: def name(p: u32) -> u64:",
            );
        }
        let a = &f.args;
        if !a.posonlyargs.is_empty()
            || a.vararg.is_some()
            || !a.kwonlyargs.is_empty()
            || a.kwarg.is_some()
        {
            return self.err(
                at,
                "chains take plain positional parameters",
                "def name(a: u32, b: u64) -> u64:",
            );
        }
        if a.args.len() > MAX_ARGS {
            return self.err(
                off(&a.args[MAX_ARGS].def),
                format!(
                    "a chain has at most {MAX_ARGS} parameters, '{}' has {}",
                    f.name.as_str(),
                    a.args.len()
                ),
                "pass more state through a map",
            );
        }
        let mut params = Vec::new();
        for p in &a.args {
            if p.default.is_some() {
                return self.err(
                    off(&p.def),
                    "default parameter values are not supported",
                    "pass every argument at the call",
                );
            }
            let Some(ann) = &p.def.annotation else {
                return self.err(
                    off(&p.def),
                    format!("parameter '{}' needs a type", p.def.arg.as_str()),
                    &format!("annotate it: {}: u32", p.def.arg.as_str()),
                );
            };
            params.push((p.def.arg.to_string(), self.type_of(ann)?));
        }
        let ret = match &f.returns {
            Some(r) => self.type_of(r)?,
            None => Ty::U64,
        };
        let idx = self.prog.chains.len();
        let (line, _) = self.line_of(at);
        self.prog.chains.push(Chain {
            name: f.name.to_string(),
            params: params.clone(),
            ret,
            locals: params,
            body: Vec::new(),
            line,
        });
        self.defs.push(Some(f));
        self.define(f.name.as_str(), Sym::Chain(idx), at)
    }

    fn chain_body(&mut self, i: usize) -> R<()> {
        let Some(f) = self.defs[i] else {
            return Ok(());
        };
        let ch = &self.prog.chains[i];
        let mut sc = Scope {
            locals: Vec::new(),
            by_name: HashMap::new(),
            loops: 0,
            chain: i,
            ret: ch.ret,
        };
        for (n, t) in ch.params.clone() {
            if sc.by_name.contains_key(&n) {
                return self.err(
                    off(f),
                    format!("parameter '{n}' appears twice"),
                    "give parameters distinct names",
                );
            }
            sc.add(&n, t);
        }
        let body = self.block(&f.body, &mut sc)?;
        let ch = &mut self.prog.chains[i];
        ch.body = body;
        ch.locals = sc.locals;
        Ok(())
    }

    fn recursion(&self) -> R<()> {
        // Depth-first search for a cycle; the error names the path.
        fn visit(c: &Checker, n: usize, path: &mut Vec<usize>, done: &mut Vec<bool>) -> R<()> {
            if done[n] {
                return Ok(());
            }
            for &(m, at) in &c.calls[n] {
                if let Some(p) = path.iter().position(|&x| x == m) {
                    let mut names: Vec<&str> = path[p..]
                        .iter()
                        .map(|&k| c.prog.chains[k].name.as_str())
                        .collect();
                    names.push(&c.prog.chains[m].name);
                    return c.err(
                        at,
                        format!("recursion is not supported: {}", names.join(" -> ")),
                        "chain calls are inlined; use a loop instead",
                    );
                }
                path.push(m);
                visit(c, m, path, done)?;
                path.pop();
            }
            done[n] = true;
            Ok(())
        }
        let mut done = vec![false; self.calls.len()];
        for n in 0..self.calls.len() {
            let mut path = vec![n];
            visit(self, n, &mut path, &mut done)?;
        }
        Ok(())
    }

    fn block(&mut self, body: &[ast::Stmt], sc: &mut Scope) -> R<Vec<Stmt>> {
        let mut out = Vec::new();
        for s in body {
            self.stmt(s, sc, &mut out)?;
        }
        Ok(out)
    }

    fn mk(&self, at: usize, kind: StmtKind) -> Stmt {
        let (line, col) = self.line_of(at);
        Stmt { line, col, kind }
    }

    fn stmt(&mut self, s: &ast::Stmt, sc: &mut Scope, out: &mut Vec<Stmt>) -> R<()> {
        let at = off(s);
        match s {
            ast::Stmt::Pass(_) => {}
            ast::Stmt::Expr(e) => {
                if let ast::Expr::Constant(ast::ExprConstant {
                    value: Constant::Str(_),
                    ..
                }) = e.value.as_ref()
                {
                    return Ok(()); // a docstring
                }
                if let ast::Expr::Call(call) = e.value.as_ref() {
                    if let Some(st) = self.packet_write(call, sc)? {
                        out.push(self.mk(at, st));
                        return Ok(());
                    }
                    let v = self.expr(&e.value, sc)?;
                    let v = self.typed(v, Ty::U64)?;
                    out.push(self.mk(at, StmtKind::Expr(v)));
                    return Ok(());
                }
                return self.err(
                    off(e.value.as_ref()),
                    format!("{} as a statement has no effect", expr_name(&e.value)),
                    "statements are assignments, calls, if/while/for, return",
                );
            }
            ast::Stmt::AnnAssign(a) => {
                let ast::Expr::Name(n) = a.target.as_ref() else {
                    return self.err(
                        at,
                        "only names can be declared with a type",
                        "x: u32 = value",
                    );
                };
                let ty = self.type_of(&a.annotation)?;
                let Some(v) = &a.value else {
                    return self.err(
                        at,
                        format!("local '{}' needs a value", n.id.as_str()),
                        &format!("{}: {ty} = 0", n.id.as_str()),
                    );
                };
                let name = n.id.as_str();
                self.check_local_name(name, off(n))?;
                if let Some(&l) = sc.by_name.get(name) {
                    if sc.locals[l].1 != ty {
                        return self.err(
                            off(n),
                            format!("'{name}' is already a {} local", sc.locals[l].1),
                            "a local keeps the type of its first declaration; use another name or a cast",
                        );
                    }
                }
                let e = self.expr(v, sc)?;
                let e = self.convert(e, ty)?;
                let l = match sc.by_name.get(name) {
                    Some(&l) => l,
                    None => sc.add(name, ty),
                };
                out.push(self.mk(at, StmtKind::Assign { local: l, value: e }));
            }
            ast::Stmt::Assign(a) => {
                if a.targets.len() != 1 {
                    return self.err(
                        at,
                        "chained assignment is not supported",
                        "assign each name separately",
                    );
                }
                match &a.targets[0] {
                    ast::Expr::Name(n) => {
                        let name = n.id.as_str();
                        let e = self.expr(&a.value, sc)?;
                        let l = match sc.by_name.get(name) {
                            Some(&l) => l,
                            None => {
                                self.check_local_name(name, off(n))?;
                                let ty = match &e {
                                    TE::Typed(x) => x.ty,
                                    TE::Lit(v, _) => {
                                        if *v < 0 {
                                            Ty::S64
                                        } else {
                                            Ty::U64
                                        }
                                    }
                                };
                                sc.add(name, ty)
                            }
                        };
                        let ty = sc.locals[l].1;
                        let e = self.convert(e, ty)?;
                        out.push(self.mk(at, StmtKind::Assign { local: l, value: e }));
                    }
                    ast::Expr::Subscript(sub) => {
                        let (map, key) = self.map_key(sub, sc)?;
                        let vt = self.prog.maps[map].value;
                        let v = self.expr(&a.value, sc)?;
                        let v = self.convert(v, vt)?;
                        out.push(self.mk(at, StmtKind::MapSet { map, key, value: v }));
                    }
                    ast::Expr::Attribute(attr) => {
                        return self.err(
                            off(attr),
                            format!("cannot assign to '{}'", attr.attr.as_str()),
                            "write packet bytes with Packet.write_u8/u16/u32/u64(off, value)",
                        )
                    }
                    ast::Expr::Tuple(_) | ast::Expr::List(_) => {
                        return self.err(
                            at,
                            "unpacking assignment is not supported",
                            "assign each name separately",
                        )
                    }
                    other => {
                        return self.err(
                            off(other),
                            format!("cannot assign to {}", expr_name(other)),
                            "assign to a local name or a map entry m[k]",
                        )
                    }
                }
            }
            ast::Stmt::AugAssign(a) => match a.target.as_ref() {
                ast::Expr::Name(n) => {
                    let name = n.id.as_str();
                    let Some(&l) = sc.by_name.get(name) else {
                        return self.err(
                            off(n),
                            format!("unknown local '{name}'"),
                            &format!("declare it first: {name}: u32 = 0"),
                        );
                    };
                    let ty = sc.locals[l].1;
                    let cur = TE::Typed(Expr {
                        ty,
                        kind: ExprKind::Local(l),
                    });
                    let rhs = self.expr(&a.value, sc)?;
                    let r = self.binop(a.op, cur, rhs, at)?;
                    let r = self.convert(r, ty)?;
                    out.push(self.mk(at, StmtKind::Assign { local: l, value: r }));
                }
                ast::Expr::Subscript(sub) => {
                    let (map, key) = self.map_key(sub, sc)?;
                    let op = match a.op {
                        ast::Operator::Add => MapRmw::Add,
                        ast::Operator::Sub => MapRmw::Sub,
                        ast::Operator::BitOr => MapRmw::Or,
                        ast::Operator::BitAnd => MapRmw::And,
                        ast::Operator::BitXor => MapRmw::Xor,
                        _ => {
                            return self.err(
                                at,
                                "this operator cannot update a map value in place",
                                "map values support += -= |= &= ^= (atomic); otherwise m[k] = m[k] OP v",
                            )
                        }
                    };
                    let vt = self.prog.maps[map].value;
                    let v = self.expr(&a.value, sc)?;
                    let v = self.convert(v, vt)?;
                    out.push(self.mk(
                        at,
                        StmtKind::MapRmw {
                            map,
                            key,
                            op,
                            value: v,
                        },
                    ));
                }
                other => {
                    return self.err(
                        off(other),
                        format!("cannot assign to {}", expr_name(other)),
                        "assign to a local name or a map entry m[k]",
                    )
                }
            },
            ast::Stmt::If(i) => {
                let cond = self.cond(&i.test, sc)?;
                let then = self.block(&i.body, sc)?;
                let els = self.block(&i.orelse, sc)?;
                out.push(self.mk(at, StmtKind::If { cond, then, els }));
            }
            ast::Stmt::While(w) => {
                if !w.orelse.is_empty() {
                    return self.err(
                        at,
                        "'while ... else' is not supported",
                        "test the condition after the loop",
                    );
                }
                let cond = self.cond(&w.test, sc)?;
                let cap = self.loop_cap;
                self.warn(
                    at,
                    format!("'while' loop: the compiler cannot prove a bound; an iteration cap of {cap} applies (exceeding it is a fault){}", bpf_loop_note(cap)),
                    "set the cap with LOOP_CAP = N at module level, or use 'for i in range(CONST)'",
                );
                let counter = sc.add(&format!("$cap{}", sc.locals.len()), Ty::U32);
                let outer = self.enter_loop(at, cap)?;
                sc.loops += 1;
                let body = self.block(&w.body, sc);
                sc.loops -= 1;
                self.in_bpf_loop = outer;
                let body = body?;
                out.push(self.mk(
                    at,
                    StmtKind::Loop {
                        cond,
                        body,
                        step: Vec::new(),
                        cap: Some((cap, counter)),
                        trips: cap,
                    },
                ));
            }
            ast::Stmt::For(f) => self.for_loop(f, sc, out)?,
            ast::Stmt::Break(_) | ast::Stmt::Continue(_) => {
                if sc.loops == 0 {
                    return self.err(
                        at,
                        format!("{} outside a loop", stmt_name(s)),
                        "use it inside 'while' or 'for'",
                    );
                }
                let k = if matches!(s, ast::Stmt::Break(_)) {
                    StmtKind::Break
                } else {
                    StmtKind::Continue
                };
                out.push(self.mk(at, k));
            }
            ast::Stmt::Return(r) => {
                let st = match &r.value {
                    None => StmtKind::Return(Expr::konst(sc.ret, 0)),
                    Some(v) => match self.verdict(v, sc)? {
                        Some(vd) => StmtKind::Verdict(vd),
                        None => {
                            let e = self.expr(v, sc)?;
                            StmtKind::Return(self.convert(e, sc.ret)?)
                        }
                    },
                };
                out.push(self.mk(at, st));
            }
            ast::Stmt::Delete(d) => {
                for t in &d.targets {
                    let ast::Expr::Subscript(sub) = t else {
                        return self.err(off(t), "only map entries can be deleted", "del m[k]");
                    };
                    let (map, key) = self.map_key(sub, sc)?;
                    out.push(self.mk(off(t), StmtKind::MapDel { map, key }));
                }
            }
            other => {
                let help = match other {
                    ast::Stmt::FunctionDef(_) => "define chains at module level",
                    ast::Stmt::ClassDef(_) => "chains use integer locals and maps",
                    ast::Stmt::With(_) | ast::Stmt::AsyncWith(_) => "chains have no resources to manage",
                    ast::Stmt::Try(_) | ast::Stmt::TryStar(_) | ast::Stmt::Raise(_) => "return a verdict (e.g. return DROP); faults go to the classifier's fault action",
                    ast::Stmt::Global(_) | ast::Stmt::Nonlocal(_) => "keep state across packets in a map",
                    ast::Stmt::Assert(_) => "test with 'if' and return a verdict",
                    ast::Stmt::Import(_) | ast::Stmt::ImportFrom(_) => "import at module level",
                    ast::Stmt::Match(_) => "use if/elif/else",
                    _ => "see docs/language.md for the supported statements",
                };
                return self.err(
                    at,
                    format!("{} is not supported in a chain", stmt_name(other)),
                    help,
                );
            }
        }
        Ok(())
    }

    fn check_local_name(&self, name: &str, at: usize) -> R<()> {
        if self.syms.contains_key(name) || is_builtin(name) {
            return self.err(
                at,
                format!("'{name}' is a module-level name and cannot be assigned in a chain"),
                "use another name for the local",
            );
        }
        Ok(())
    }

    fn for_loop(&mut self, f: &ast::StmtFor, sc: &mut Scope, out: &mut Vec<Stmt>) -> R<()> {
        let at = off(f);
        let help =
            "for i in range(n), range(a, b) or range(a, b, step); cap=N sets the iteration cap";
        if !f.orelse.is_empty() {
            return self.err(
                at,
                "'for ... else' is not supported",
                "test the condition after the loop",
            );
        }
        let ast::Expr::Name(var) = f.target.as_ref() else {
            return self.err(
                off(f.target.as_ref()),
                "the loop variable must be a name",
                help,
            );
        };
        let ast::Expr::Call(call) = f.iter.as_ref() else {
            return self.err(
                off(f.iter.as_ref()),
                format!("loops over {} are not supported", expr_name(&f.iter)),
                help,
            );
        };
        if !matches!(call.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "range") {
            return self.err(off(call), "'for' loops only iterate over range(...)", help);
        }
        if call.args.is_empty() || call.args.len() > 3 {
            return self.err(
                off(call),
                format!("range takes 1 to 3 arguments, got {}", call.args.len()),
                help,
            );
        }
        let mut cap_kw = None;
        for k in &call.keywords {
            match k.arg.as_ref().map(|a| a.as_str()) {
                Some("cap") => {
                    let v = self.const_expr(&k.value)?;
                    if !(1..=MAX_LOOP_CAP).contains(&v) {
                        return self.err(
                            off(&k.value),
                            format!("cap {v} is out of range"),
                            "use 1 .. 8388607",
                        );
                    }
                    cap_kw = Some(v as u32);
                }
                _ => return self.err(off(k), "range takes only the keyword 'cap'", help),
            }
        }
        let args: Vec<TE> = call
            .args
            .iter()
            .map(|a| self.expr(a, sc))
            .collect::<R<_>>()?;
        let (start, end, step) = match args.len() {
            1 => (TE::Lit(0, at), args[0].clone(), TE::Lit(1, at)),
            2 => (args[0].clone(), args[1].clone(), TE::Lit(1, at)),
            _ => (args[0].clone(), args[1].clone(), args[2].clone()),
        };
        let step_v = match &step {
            TE::Lit(v, _) => *v,
            TE::Typed(e) => match e.as_const() {
                Some(c) => e.ty.value(c),
                None => {
                    return self.err(
                        off(&call.args[2]),
                        "the range step must be a constant",
                        help,
                    )
                }
            },
        };
        if step_v == 0 {
            return self.err(
                off(&call.args[call.args.len() - 1]),
                "range step 0 never ends",
                "use a non-zero constant step",
            );
        }
        let name = var.id.as_str();
        let ty = match sc.by_name.get(name) {
            Some(&l) => sc.locals[l].1,
            None => {
                let typed = [&start, &end].iter().find_map(|t| match t {
                    TE::Typed(e) => Some(e.ty),
                    _ => None,
                });
                let neg = [&start, &end, &step]
                    .iter()
                    .any(|t| matches!(t, TE::Lit(v, _) if *v < 0));
                typed.unwrap_or(if neg { Ty::S64 } else { Ty::U64 })
            }
        };
        if ty == Ty::Bool {
            return self.err(off(var), "the loop variable must be an integer", help);
        }
        let konst = |t: &TE| match t {
            TE::Lit(v, _) => Some(*v),
            TE::Typed(e) => e.as_const().map(|c| e.ty.value(c)),
        };
        let trips = match (konst(&start), konst(&end)) {
            (Some(a), Some(b)) => {
                let n = if step_v > 0 {
                    (b - a + step_v - 1) / step_v
                } else {
                    (a - b + (-step_v) - 1) / (-step_v)
                };
                Some(n.max(0))
            }
            _ => None,
        };
        let start = self.convert(start, ty)?;
        let end = self.convert(end, ty)?;
        let l = match sc.by_name.get(name) {
            Some(&l) => l,
            None => {
                self.check_local_name(name, off(var))?;
                sc.add(name, ty)
            }
        };
        let end_l = sc.add(&format!("$end{}", sc.locals.len()), ty);
        let stepc = Expr::konst(ty, step_v as u64);
        let cap = match (trips, cap_kw) {
            // A large proven bound becomes the cap of a bpf_loop (never
            // exceeded).
            (Some(n), None) if n > BPF_LOOP_ABOVE as i128 && n <= MAX_LOOP_CAP => Some(n as u32),
            (Some(_), None) => None,
            (Some(n), Some(c)) => {
                if n > c as i128 {
                    self.warn(
                        at,
                        format!(
                            "this loop runs {n} times but cap={c} stops it (a fault) after {c}{}",
                            bpf_loop_note(c)
                        ),
                        "raise the cap or shorten the range",
                    );
                }
                Some(c)
            }
            (None, c) => {
                let cap = c.unwrap_or(self.loop_cap);
                self.warn(
                    at,
                    format!("loop bound is not a constant: an iteration cap of {cap} applies (exceeding it is a fault){}", bpf_loop_note(cap)),
                    if c.is_some() { "the cap comes from cap=" } else { "set it with range(..., cap=N) or LOOP_CAP = N" },
                );
                Some(cap)
            }
        };
        let var_e = Expr {
            ty,
            kind: ExprKind::Local(l),
        };
        let end_e = Expr {
            ty,
            kind: ExprKind::Local(end_l),
        };
        let cmp = if step_v > 0 { CmpOp::Lt } else { CmpOp::Gt };
        let cond = Expr {
            ty: Ty::Bool,
            kind: ExprKind::Cmp(cmp, Box::new(var_e.clone()), Box::new(end_e)),
        };
        out.push(self.mk(
            at,
            StmtKind::Assign {
                local: l,
                value: start,
            },
        ));
        out.push(self.mk(
            at,
            StmtKind::Assign {
                local: end_l,
                value: end,
            },
        ));
        let max_trips = match (trips, cap) {
            (Some(n), Some(c)) => (n.min(c as i128)).clamp(0, u32::MAX as i128) as u32,
            (Some(n), None) => n.clamp(0, u32::MAX as i128) as u32,
            (None, Some(c)) => c,
            (None, None) => self.loop_cap,
        };
        let cap = cap.map(|c| (c, sc.add(&format!("$cap{}", sc.locals.len()), Ty::U32)));
        let outer = self.enter_loop(at, cap.map_or(0, |c| c.0))?;
        sc.loops += 1;
        let body = self.block(&f.body, sc);
        sc.loops -= 1;
        self.in_bpf_loop = outer;
        let body = body?;
        let step = vec![self.mk(
            at,
            StmtKind::Assign {
                local: l,
                value: Expr {
                    ty,
                    kind: ExprKind::Bin(BinOp::Add, Box::new(var_e), Box::new(stepc)),
                },
            },
        )];
        out.push(self.mk(
            at,
            StmtKind::Loop {
                cond,
                body,
                step,
                cap,
                trips: max_trips,
            },
        ));
        Ok(())
    }

    /// Starts the body of a loop with iteration cap `cap` (0: none); the
    /// previous `in_bpf_loop`, to restore after the body. A `bpf_loop`
    /// inside another one's body is an error.
    fn enter_loop(&mut self, at: usize, cap: u32) -> R<bool> {
        let outer = self.in_bpf_loop;
        if cap > BPF_LOOP_ABOVE {
            if outer {
                return self.err(
                    at,
                    format!("this loop (cap {cap}) is compiled to bpf_loop inside the body of another bpf_loop, which is not supported"),
                    &format!("give one of the two loops a cap of at most {BPF_LOOP_ABOVE} (a counted loop), or merge them into one loop"),
                );
            }
            self.in_bpf_loop = true;
        }
        Ok(outer)
    }

    /// A verdict expression (`DROP`, `REDIRECT(x)`), if `e` is one.
    fn verdict(&mut self, e: &ast::Expr, sc: &mut Scope) -> R<Option<Expr>> {
        match e {
            ast::Expr::Name(n) => {
                let id = n.id.as_str();
                if sc.by_name.contains_key(id) {
                    return Ok(None);
                }
                if let Some(a) = VERDICT_NAMES.iter().position(|v| *v == id) {
                    let act = verdict::NAMES
                        .iter()
                        .position(|v| *v == VERDICT_NAMES[a])
                        .unwrap_or(0) as u64;
                    return Ok(Some(Expr::konst(Ty::U64, verdict::encode(act, 0))));
                }
                if VERDICT_CALLS.contains(&id) {
                    return self.err(
                        off(e),
                        format!("{id} needs an argument"),
                        &format!("return {id}(n)"),
                    );
                }
                Ok(None)
            }
            ast::Expr::Call(c) => {
                let ast::Expr::Name(n) = c.func.as_ref() else {
                    return Ok(None);
                };
                let id = n.id.as_str();
                if !VERDICT_CALLS.contains(&id) || sc.by_name.contains_key(id) {
                    return Ok(None);
                }
                if c.args.len() != 1 || !c.keywords.is_empty() {
                    return self.err(
                        off(e),
                        format!("{id} takes one argument"),
                        &format!("return {id}(n)"),
                    );
                }
                let act = verdict::NAMES.iter().position(|v| *v == id).unwrap_or(0) as u64;
                let a = self.expr(&c.args[0], sc)?;
                let a = self.convert(a, Ty::U32)?;
                let base = verdict::encode(act, 0);
                if let Some(v) = a.as_const() {
                    return Ok(Some(Expr::konst(Ty::U64, base | v)));
                }
                Ok(Some(Expr {
                    ty: Ty::U64,
                    kind: ExprKind::Bin(
                        BinOp::Or,
                        Box::new(a.cast(Ty::U64)),
                        Box::new(Expr::konst(Ty::U64, base)),
                    ),
                }))
            }
            _ => Ok(None),
        }
    }

    fn packet_write(&mut self, call: &ast::ExprCall, sc: &mut Scope) -> R<Option<StmtKind>> {
        let ast::Expr::Attribute(a) = call.func.as_ref() else {
            return Ok(None);
        };
        let ast::Expr::Name(base) = a.value.as_ref() else {
            return Ok(None);
        };
        if base.id.as_str() != "Packet" {
            return Ok(None);
        }
        let Some(suffix) = a.attr.as_str().strip_prefix("write_") else {
            return Ok(None);
        };
        let Some((size, ty)) = size_of_suffix(suffix) else {
            return self.err(
                off(call),
                format!("Packet has no method '{}'", a.attr.as_str()),
                "Packet.write_u8/u16/u32/u64(off, value)",
            );
        };
        if self.hook == Hook::Socket {
            return self.err(
                off(call),
                "socket filters cannot write the packet",
                "socket filters are read-only: attach to xdp or tc to rewrite packets",
            );
        }
        if call.args.len() != 2 || !call.keywords.is_empty() {
            return self.err(
                off(call),
                format!(
                    "Packet.{} takes 2 arguments (offset, value)",
                    a.attr.as_str()
                ),
                "Packet.write_u16(off, value)",
            );
        }
        let o = self.expr(&call.args[0], sc)?;
        let o = self.offset(o)?;
        let v = self.expr(&call.args[1], sc)?;
        let v = self.convert(v, ty)?;
        Ok(Some(StmtKind::PktWrite {
            size,
            off: o,
            value: v,
        }))
    }

    fn offset(&self, o: TE) -> R<Expr> {
        match o {
            TE::Lit(v, at) if v < 0 => self.err(
                at,
                format!("packet offset {v} is negative"),
                "offsets count from 0",
            ),
            TE::Lit(v, at) if v > 0x7fff => self.err(
                at,
                format!("packet offset {v} is beyond any packet"),
                "offsets are at most 32767 (a larger offset is a fault)",
            ),
            o => {
                let e = self.typed(o, Ty::U64)?;
                if e.ty == Ty::Bool {
                    return self.err(
                        0,
                        "a packet offset must be an integer",
                        "use an integer expression",
                    );
                }
                Ok(e.cast(Ty::U64))
            }
        }
    }

    fn map_key(&mut self, sub: &ast::ExprSubscript, sc: &mut Scope) -> R<(usize, Expr)> {
        let map = self.map_ref(&sub.value)?;
        let kt = self.prog.maps[map].key;
        let k = self.expr(&sub.slice, sc)?;
        Ok((map, self.convert(k, kt)?))
    }

    fn map_ref(&self, e: &ast::Expr) -> R<usize> {
        if let ast::Expr::Name(n) = e {
            if let Some(Sym::Map(m)) = self.syms.get(n.id.as_str()) {
                return Ok(*m);
            }
            return self.err(
                off(e),
                format!("'{}' is not a map", n.id.as_str()),
                "declare maps at module level: m = HashMap(u32, u64, 1024)",
            );
        }
        self.err(
            off(e),
            format!("{} cannot be indexed", expr_name(e)),
            "index maps: m[k]",
        )
    }

    // ------------------------------------------------------------------
    // Expressions.

    /// A condition: any integer or bool; truthiness.
    fn cond(&mut self, e: &ast::Expr, sc: &mut Scope) -> R<Expr> {
        let t = self.expr(e, sc)?;
        Ok(self.truth(t))
    }

    fn truth(&self, t: TE) -> Expr {
        match t {
            TE::Lit(v, _) => Expr::konst(Ty::Bool, (v != 0) as u64),
            TE::Typed(e) => e.cast(Ty::Bool),
        }
    }

    /// Gives a literal the type `default` (must fit); typed expressions unchanged.
    fn typed(&self, t: TE, default: Ty) -> R<Expr> {
        match t {
            TE::Typed(e) => Ok(e),
            TE::Lit(v, at) => {
                let ty = if v < 0 && !default.signed() {
                    Ty::S64
                } else {
                    default
                };
                if !ty.fits(v) {
                    return self.err(at, format!("{v} does not fit {ty}"), &fit_help(ty));
                }
                Ok(Expr::konst(ty, v as u64))
            }
        }
    }

    /// Converts to `ty` (assignment, arguments): literals must fit,
    /// typed values wrap.
    fn convert(&self, t: TE, ty: Ty) -> R<Expr> {
        match t {
            TE::Lit(v, at) => {
                if !ty.fits(v) {
                    return self.err(at, format!("{v} does not fit {ty}"), &fit_help(ty));
                }
                Ok(Expr::konst(ty, v as u64))
            }
            TE::Typed(e) => Ok(e.cast(ty)),
        }
    }

    fn expr(&mut self, e: &ast::Expr, sc: &mut Scope) -> R<TE> {
        let at = off(e);
        match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Int(b) => Ok(TE::Lit(self.big(b, at)?, at)),
                Constant::Bool(b) => Ok(TE::Typed(Expr::konst(Ty::Bool, *b as u64))),
                _ => self.unsupported_expr(e),
            },
            ast::Expr::Name(n) => self.name(n.id.as_str(), at, sc),
            ast::Expr::BinOp(b) => {
                let l = self.expr(&b.left, sc)?;
                let r = self.expr(&b.right, sc)?;
                self.binop(b.op, l, r, at)
            }
            ast::Expr::UnaryOp(u) => {
                let v = self.expr(&u.operand, sc)?;
                match (u.op, v) {
                    (ast::UnaryOp::Not, v) => {
                        let t = self.truth(v);
                        Ok(TE::Typed(fold_not(t)))
                    }
                    (ast::UnaryOp::USub, TE::Lit(v, _)) => Ok(TE::Lit(-v, at)),
                    (ast::UnaryOp::UAdd, v) => Ok(v),
                    (ast::UnaryOp::Invert, TE::Lit(v, _)) => Ok(TE::Lit(!v, at)),
                    (op, TE::Typed(x)) => {
                        if x.ty == Ty::Bool {
                            return self.err(
                                at,
                                "arithmetic on bool is not supported",
                                "convert first: u8(flag)",
                            );
                        }
                        if let Some(c) = x.as_const() {
                            let v = if op == ast::UnaryOp::USub {
                                c.wrapping_neg()
                            } else {
                                !c
                            };
                            return Ok(TE::Typed(Expr::konst(x.ty, v)));
                        }
                        let ty = x.ty;
                        let kind = if op == ast::UnaryOp::USub {
                            ExprKind::Neg(Box::new(x))
                        } else {
                            ExprKind::Inv(Box::new(x))
                        };
                        Ok(TE::Typed(Expr { ty, kind }))
                    }
                }
            }
            ast::Expr::BoolOp(b) => {
                let mut acc: Option<Expr> = None;
                for v in &b.values {
                    let t = self.expr(v, sc)?;
                    let t = self.truth(t);
                    acc = Some(match acc {
                        None => t,
                        Some(a) => {
                            let kind = match b.op {
                                ast::BoolOp::And => ExprKind::And(Box::new(a), Box::new(t)),
                                ast::BoolOp::Or => ExprKind::Or(Box::new(a), Box::new(t)),
                            };
                            Expr { ty: Ty::Bool, kind }
                        }
                    });
                }
                Ok(TE::Typed(acc.unwrap_or_else(|| Expr::konst(Ty::Bool, 0))))
            }
            ast::Expr::Compare(c) => {
                if c.ops.len() != 1 {
                    return self.err(
                        at,
                        "chained comparisons are not supported",
                        "combine with 'and': a < b and b < c",
                    );
                }
                let op = c.ops[0];
                let rhs = &c.comparators[0];
                if matches!(op, ast::CmpOp::In | ast::CmpOp::NotIn) {
                    let map = self.map_ref(rhs)?;
                    let kt = self.prog.maps[map].key;
                    let k = self.expr(&c.left, sc)?;
                    let k = self.convert(k, kt)?;
                    return Ok(TE::Typed(Expr {
                        ty: Ty::Bool,
                        kind: ExprKind::MapHas {
                            map,
                            key: Box::new(k),
                            negate: op == ast::CmpOp::NotIn,
                        },
                    }));
                }
                let cop = match op {
                    ast::CmpOp::Eq => CmpOp::Eq,
                    ast::CmpOp::NotEq => CmpOp::Ne,
                    ast::CmpOp::Lt => CmpOp::Lt,
                    ast::CmpOp::LtE => CmpOp::Le,
                    ast::CmpOp::Gt => CmpOp::Gt,
                    ast::CmpOp::GtE => CmpOp::Ge,
                    _ => {
                        return self.err(
                            at,
                            "'is' / 'is not' are not supported",
                            "compare values with == and !=",
                        )
                    }
                };
                let l = self.expr(&c.left, sc)?;
                let r = self.expr(rhs, sc)?;
                if let (TE::Lit(a, _), TE::Lit(b, _)) = (&l, &r) {
                    let v = match cop {
                        CmpOp::Eq => a == b,
                        CmpOp::Ne => a != b,
                        CmpOp::Lt => a < b,
                        CmpOp::Le => a <= b,
                        CmpOp::Gt => a > b,
                        CmpOp::Ge => a >= b,
                    };
                    return Ok(TE::Typed(Expr::konst(Ty::Bool, v as u64)));
                }
                let (l, r) = self.unify(l, r, at, true)?;
                if l.ty == Ty::Bool && !matches!(cop, CmpOp::Eq | CmpOp::Ne) {
                    return self.err(
                        at,
                        "bools are compared with == and != only",
                        "convert first: u8(flag)",
                    );
                }
                Ok(TE::Typed(Expr {
                    ty: Ty::Bool,
                    kind: ExprKind::Cmp(cop, Box::new(l), Box::new(r)),
                }))
            }
            ast::Expr::IfExp(i) => {
                let c = self.cond(&i.test, sc)?;
                let a = self.expr(&i.body, sc)?;
                let b = self.expr(&i.orelse, sc)?;
                let (a, b) = self.unify(a, b, at, true)?;
                let ty = a.ty;
                Ok(TE::Typed(Expr {
                    ty,
                    kind: ExprKind::IfExp(Box::new(c), Box::new(a), Box::new(b)),
                }))
            }
            ast::Expr::Call(call) => self.call(call, sc),
            ast::Expr::Attribute(a) => {
                let ast::Expr::Name(base) = a.value.as_ref() else {
                    return self.err(
                        at,
                        "attributes are not supported here",
                        "Packet.len, Packet.l3_off, ...",
                    );
                };
                if base.id.as_str() != "Packet" {
                    return self.err(
                        at,
                        format!("'{}' has no attributes", base.id.as_str()),
                        "attributes exist only on Packet: Packet.len, Packet.l3_off, ...",
                    );
                }
                let attr = a.attr.as_str();
                if attr == "len" {
                    return Ok(TE::Typed(Expr {
                        ty: Ty::U32,
                        kind: ExprKind::PktLen,
                    }));
                }
                if let Some(&(_, o, size, ty)) = PKT_FIELDS.iter().find(|f| f.0 == attr) {
                    return Ok(TE::Typed(Expr {
                        ty,
                        kind: ExprKind::PktInfo { off: o, size },
                    }));
                }
                let names: Vec<&str> = PKT_FIELDS.iter().map(|f| f.0).collect();
                self.err(
                    at,
                    format!("Packet has no attribute '{attr}'"),
                    &format!(
                        "Packet.len, Packet.{}; methods read_u8..read_u64, write_u8..write_u64",
                        names.join(", Packet.")
                    ),
                )
            }
            ast::Expr::Subscript(sub) => {
                let (map, key) = self.map_key(sub, sc)?;
                let ty = self.prog.maps[map].value;
                Ok(TE::Typed(Expr {
                    ty,
                    kind: ExprKind::MapGet {
                        map,
                        key: Box::new(key),
                        default: None,
                    },
                }))
            }
            _ => self.unsupported_expr(e),
        }
    }

    fn name(&mut self, id: &str, at: usize, sc: &Scope) -> R<TE> {
        if let Some(&l) = sc.by_name.get(id) {
            return Ok(TE::Typed(Expr {
                ty: sc.locals[l].1,
                kind: ExprKind::Local(l),
            }));
        }
        match self.syms.get(id) {
            Some(Sym::Const(None, v)) => Ok(TE::Lit(*v, at)),
            Some(Sym::Const(Some(t), v)) => Ok(TE::Typed(Expr::konst(*t, *v as u64))),
            Some(Sym::Map(_)) => self.err(at, format!("map '{id}' is not a value"), &format!("read an entry: {id}[key]")),
            Some(Sym::Nf(_)) | Some(Sym::Chain(_)) => self.err(at, format!("'{id}' must be called"), &format!("{id}(...)")),
            Some(Sym::Classifier(_)) => self.err(at, format!("classifier '{id}' is configured at module level"), &format!("{id}(chain) at module level")),
            None => match id {
                "True" => Ok(TE::Typed(Expr::konst(Ty::Bool, 1))),
                "False" => Ok(TE::Typed(Expr::konst(Ty::Bool, 0))),
                v if VERDICT_NAMES.contains(&v) || VERDICT_CALLS.contains(&v) => self.err(at, format!("verdict {v} can only be returned"), &format!("return {v}")),
                "Packet" => self.err(at, "Packet is not a value", "use Packet.len or Packet.read_u8(off)"),
                _ => self.err(at, format!("unknown name '{id}'"), "declare locals with a type (x: u32 = 0), import NFs (from nf.MODULE import name), or define constants at module level"),
            },
        }
    }

    /// Gives two operands one type: a literal takes the other's type;
    /// otherwise same signedness, wider width.
    fn unify(&self, l: TE, r: TE, at: usize, allow_bool: bool) -> R<(Expr, Expr)> {
        let (l, r) = match (l, r) {
            (TE::Lit(a, aat), TE::Lit(b, _)) => {
                let ty = if a < 0 || b < 0 { Ty::S64 } else { Ty::U64 };
                (
                    self.convert(TE::Lit(a, aat), ty)?,
                    self.convert(TE::Lit(b, at), ty)?,
                )
            }
            (TE::Lit(a, aat), TE::Typed(e)) => (self.lit_as(a, aat, e.ty)?, e),
            (TE::Typed(e), TE::Lit(b, bat)) => {
                let t = e.ty;
                (e, self.lit_as(b, bat, t)?)
            }
            (TE::Typed(a), TE::Typed(b)) => (a, b),
        };
        if (l.ty == Ty::Bool) != (r.ty == Ty::Bool) {
            return self.err(
                at,
                format!("cannot combine {} and {}", l.ty, r.ty),
                "convert explicitly: u8(flag) or bool(x)",
            );
        }
        if l.ty == Ty::Bool {
            if !allow_bool {
                return self.err(
                    at,
                    "arithmetic on bool is not supported",
                    "convert first: u8(flag)",
                );
            }
            return Ok((l, r));
        }
        if l.ty.signed() != r.ty.signed() {
            return self.err(
                at,
                format!(
                    "cannot mix signed and unsigned operands ({} and {})",
                    l.ty, r.ty
                ),
                &format!("cast one side: {}(x) or {}(x)", l.ty, r.ty),
            );
        }
        let ty = if l.ty.bits() >= r.ty.bits() {
            l.ty
        } else {
            r.ty
        };
        Ok((l.cast(ty), r.cast(ty)))
    }

    fn lit_as(&self, v: i128, at: usize, ty: Ty) -> R<Expr> {
        if ty == Ty::Bool {
            if v == 0 || v == 1 {
                return Ok(Expr::konst(Ty::Bool, v as u64));
            }
            return self.err(at, format!("{v} is not a bool"), "use True or False");
        }
        if !ty.fits(v) {
            return self.err(at, format!("literal {v} does not fit {ty}"), &fit_help(ty));
        }
        Ok(Expr::konst(ty, v as u64))
    }

    fn binop(&mut self, op: ast::Operator, l: TE, r: TE, at: usize) -> R<TE> {
        use ast::Operator::*;
        let bop = match op {
            Add => BinOp::Add,
            Sub => BinOp::Sub,
            Mult => BinOp::Mul,
            FloorDiv => BinOp::Div,
            Mod => BinOp::Mod,
            BitAnd => BinOp::And,
            BitOr => BinOp::Or,
            BitXor => BinOp::Xor,
            LShift => BinOp::Shl,
            RShift => BinOp::Shr,
            Div => return self.div_err(at),
            Pow => return self.pow_err(at),
            MatMult => {
                return self.err(
                    at,
                    "'@' is not supported",
                    "chains use integer arithmetic: + - * // % & | ^ << >>",
                )
            }
        };
        if let (TE::Lit(a, _), TE::Lit(b, _)) = (&l, &r) {
            return Ok(TE::Lit(self.fold(op, *a, *b, at)?, at));
        }
        // Shifts: the count takes the value's type (modulo its width).
        let (a, b) = if matches!(bop, BinOp::Shl | BinOp::Shr) {
            let a = match l {
                TE::Typed(e) => e,
                TE::Lit(v, lat) => self.typed(TE::Lit(v, lat), Ty::U64)?,
            };
            if a.ty == Ty::Bool {
                return self.err(
                    at,
                    "arithmetic on bool is not supported",
                    "convert first: u8(flag)",
                );
            }
            let b = match r {
                TE::Lit(v, _) => Expr::konst(a.ty, (v.rem_euclid(a.ty.bits() as i128)) as u64),
                TE::Typed(e) => {
                    if e.ty == Ty::Bool {
                        return self.err(
                            at,
                            "arithmetic on bool is not supported",
                            "convert first: u8(flag)",
                        );
                    }
                    e.cast(a.ty)
                }
            };
            (a, b)
        } else {
            self.unify(l, r, at, false)?
        };
        let ty = a.ty;
        if matches!(bop, BinOp::Div | BinOp::Mod) {
            let sym = if bop == BinOp::Div { "//" } else { "%" };
            if ty.signed() {
                self.warn(
                    at,
                    format!("signed '{sym}' truncates toward zero (Python floors)"),
                    "results differ from Python for negative operands",
                );
            }
            if b.as_const().is_none_or(|v| v == 0) {
                let what = if bop == BinOp::Div {
                    "x // 0 == 0"
                } else {
                    "x % 0 == x"
                };
                self.warn(
                    at,
                    format!("the divisor may be 0: {what} here (Python raises)"),
                    "test the divisor first if 0 needs other handling",
                );
            }
        }
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
            return Ok(TE::Typed(Expr::konst(
                ty,
                crate::eval::binop(bop, ty, x, y),
            )));
        }
        Ok(TE::Typed(Expr {
            ty,
            kind: ExprKind::Bin(bop, Box::new(a), Box::new(b)),
        }))
    }

    fn call(&mut self, call: &ast::ExprCall, sc: &mut Scope) -> R<TE> {
        let at = off(call);
        if let ast::Expr::Attribute(a) = call.func.as_ref() {
            return self.method(call, a, sc);
        }
        let ast::Expr::Name(n) = call.func.as_ref() else {
            return self.err(
                at,
                format!("{} cannot be called", expr_name(&call.func)),
                "call NFs, chains, casts and Packet methods by name",
            );
        };
        let id = n.id.as_str();
        if !call.keywords.is_empty() {
            return self.err(
                off(&call.keywords[0]),
                "keyword arguments are not supported",
                "pass arguments by position",
            );
        }
        for a in &call.args {
            if let ast::Expr::Starred(_) = a {
                return self.unsupported_expr(a);
            }
        }
        if let Some(ty) = Ty::from_name(id) {
            if call.args.len() != 1 {
                return self.err(
                    at,
                    format!("{id}(...) takes one argument"),
                    &format!("{id}(x)"),
                );
            }
            let v = self.expr(&call.args[0], sc)?;
            return Ok(TE::Typed(match v {
                TE::Lit(v, _) => Expr::konst(ty, v as u64),
                TE::Typed(e) => e.cast(ty),
            }));
        }
        match self.syms.get(id).cloned() {
            Some(Sym::Nf(i)) => {
                let nf = self.prog.nfs[i].clone();
                if call.args.len() != nf.arity {
                    return self.err(
                        at,
                        format!(
                            "{} takes {} argument{}, got {}",
                            nf.name,
                            nf.arity,
                            if nf.arity == 1 { "" } else { "s" },
                            call.args.len()
                        ),
                        &format!("see 'nfkit nf show {}.{}'", nf.module, nf.name),
                    );
                }
                let mut args = Vec::new();
                for a in &call.args {
                    let v = self.expr(a, sc)?;
                    args.push(self.convert(v, Ty::U64)?);
                }
                Ok(TE::Typed(Expr {
                    ty: Ty::U64,
                    kind: ExprKind::CallNf { nf: i, args },
                }))
            }
            Some(Sym::Chain(i)) => {
                let (params, ret, name) = {
                    let c = &self.prog.chains[i];
                    (c.params.clone(), c.ret, c.name.clone())
                };
                if call.args.len() != params.len() {
                    return self.err(
                        at,
                        format!(
                            "chain {name} takes {} argument{}, got {}",
                            params.len(),
                            if params.len() == 1 { "" } else { "s" },
                            call.args.len()
                        ),
                        &format!(
                            "def {name}({})",
                            params
                                .iter()
                                .map(|(n, t)| format!("{n}: {t}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
                let mut args = Vec::new();
                for (a, (_, t)) in call.args.iter().zip(&params) {
                    let v = self.expr(a, sc)?;
                    args.push(self.convert(v, *t)?);
                }
                self.calls[sc.chain].push((i, at));
                Ok(TE::Typed(Expr {
                    ty: ret,
                    kind: ExprKind::CallChain { chain: i, args },
                }))
            }
            Some(Sym::Classifier(_)) => self.err(
                at,
                format!("classifier '{id}' is configured at module level"),
                &format!("{id}(chain) at module level"),
            ),
            Some(Sym::Map(_)) => self.err(
                at,
                format!("map '{id}' cannot be called"),
                &format!("read an entry: {id}[key]"),
            ),
            Some(Sym::Const(..)) => self.err(
                at,
                format!("constant '{id}' cannot be called"),
                "use it as a value",
            ),
            None => {
                if VERDICT_CALLS.contains(&id) {
                    return self.err(
                        at,
                        format!("verdict {id}(...) can only be returned"),
                        &format!("return {id}(n)"),
                    );
                }
                let help = match id {
                    "range" => "range(...) is only used in 'for i in range(...)'",
                    "len" => "use Packet.len for the packet length",
                    "int" => "cast with u64(x) or s64(x)",
                    "print" => "count events in a map instead",
                    "attach" => "attach(\"eth0\", \"xdp\") at module level",
                    "abs" | "min" | "max" => "write it with a conditional expression: a if a < b else b",
                    _ => "call imported NFs, chains of this script, casts u8(x)..s64(x)/bool(x) and Packet methods",
                };
                self.err(at, format!("unknown function '{id}'"), help)
            }
        }
    }

    fn method(&mut self, call: &ast::ExprCall, a: &ast::ExprAttribute, sc: &mut Scope) -> R<TE> {
        let at = off(call);
        let ast::Expr::Name(base) = a.value.as_ref() else {
            return self.err(
                at,
                "method calls are only supported on Packet and maps",
                "Packet.read_u8(off), m.get(k, default)",
            );
        };
        let m = a.attr.as_str();
        if base.id.as_str() == "Packet" {
            if m.starts_with("write_") {
                return self.err(
                    at,
                    format!("Packet.{m} is a statement, not a value"),
                    "call it on its own line",
                );
            }
            let Some((size, ty)) = m.strip_prefix("read_").and_then(size_of_suffix) else {
                return self.err(
                    at,
                    format!("Packet has no method '{m}'"),
                    "Packet.read_u8/u16/u32/u64(off), Packet.write_u8/u16/u32/u64(off, value)",
                );
            };
            if call.args.len() != 1 || !call.keywords.is_empty() {
                return self.err(
                    at,
                    format!("Packet.{m} takes 1 argument (offset)"),
                    "Packet.read_u16(12)",
                );
            }
            let o = self.expr(&call.args[0], sc)?;
            let o = self.offset(o)?;
            return Ok(TE::Typed(Expr {
                ty,
                kind: ExprKind::PktRead {
                    size,
                    off: Box::new(o),
                },
            }));
        }
        let map = self.map_ref(&a.value)?;
        if m != "get" {
            return self.err(
                at,
                format!("maps have no method '{m}'"),
                "m[k], m.get(k, default), k in m, del m[k]",
            );
        }
        if call.args.len() != 2 || !call.keywords.is_empty() {
            return self.err(at, "get takes 2 arguments (key, default)", "m.get(k, 0)");
        }
        let (kt, vt) = (self.prog.maps[map].key, self.prog.maps[map].value);
        let k = self.expr(&call.args[0], sc)?;
        let k = self.convert(k, kt)?;
        let d = self.expr(&call.args[1], sc)?;
        let d = self.convert(d, vt)?;
        Ok(TE::Typed(Expr {
            ty: vt,
            kind: ExprKind::MapGet {
                map,
                key: Box::new(k),
                default: Some(Box::new(d)),
            },
        }))
    }

    // ------------------------------------------------------------------
    // The classifier.

    fn chain_arg(&self, e: &ast::Expr) -> R<usize> {
        if let ast::Expr::Name(n) = e {
            if let Some(Sym::Chain(i)) = self.syms.get(n.id.as_str()) {
                return Ok(*i);
            }
            return self.err(
                off(e),
                format!("'{}' is not a chain of this script", n.id.as_str()),
                "name a chain defined with 'def'",
            );
        }
        self.err(
            off(e),
            "expected a chain name",
            "name a chain defined with 'def'",
        )
    }

    fn const_verdict(&self, e: &ast::Expr) -> R<u64> {
        let help = "DROP, PASS, ABORTED, TX, FLOOD, REDIRECT(n), CONTROLLER(n), HOST(n)";
        match e {
            ast::Expr::Name(n) => {
                if let Some(v) = VERDICT_NAMES.iter().find(|v| **v == n.id.as_str()) {
                    let a = verdict::NAMES.iter().position(|x| x == v).unwrap_or(0) as u64;
                    return Ok(verdict::encode(a, 0));
                }
                self.err(
                    off(e),
                    format!("'{}' is not a verdict", n.id.as_str()),
                    help,
                )
            }
            ast::Expr::Call(c) => {
                if let ast::Expr::Name(n) = c.func.as_ref() {
                    if VERDICT_CALLS.contains(&n.id.as_str()) && c.args.len() == 1 {
                        let v = self.const_expr(&c.args[0])?;
                        if !Ty::U32.fits(v) {
                            return self.err(
                                off(&c.args[0]),
                                format!("{v} does not fit u32"),
                                "verdict arguments are u32",
                            );
                        }
                        let a = verdict::NAMES
                            .iter()
                            .position(|x| *x == n.id.as_str())
                            .unwrap_or(0) as u64;
                        return Ok(verdict::encode(a, v as u32));
                    }
                }
                self.err(off(e), "expected a verdict", help)
            }
            _ => self.err(off(e), "expected a verdict", help),
        }
    }

    fn classifier(&mut self, call: &ast::ExprCall) -> R<()> {
        let at = off(call);
        let ast::Expr::Name(n) = call.func.as_ref() else {
            return Ok(());
        };
        let Some(Sym::Classifier(name)) = self.syms.get(n.id.as_str()).cloned() else {
            return Ok(());
        };
        let mut default = verdict::encode(verdict::PASS, 0);
        let mut fault = verdict::encode(verdict::DROP, 0);
        for k in &call.keywords {
            match k.arg.as_ref().map(|a| a.as_str()) {
                Some("default") => default = self.const_verdict(&k.value)?,
                Some("fault") => fault = self.const_verdict(&k.value)?,
                _ => {
                    return self.err(
                        off(k),
                        "classifiers take the keywords 'default' and 'fault'",
                        "by_dscp({46: voice}, default=PASS, fault=DROP)",
                    )
                }
            }
        }
        let mut entries = Vec::new();
        if name == "every_packet" {
            if call.args.len() != 1 {
                return self.err(at, "every_packet takes one chain", "every_packet(chain)");
            }
            entries.push((ClsKey::All, self.chain_arg(&call.args[0])?));
        } else {
            let help = match name.as_str() {
                "by_l4_dport" => "by_l4_dport({53: dns, 80: web}, default=PASS)",
                "by_dscp" => "by_dscp({46: voice, 0: best_effort}, default=PASS)",
                "by_ipv6_dst" | "by_ipv6_src" => {
                    "by_ipv6_dst({\"2001:db8::/32\": a}, default=PASS)"
                }
                _ => "by_ipv4_dst({\"198.18.0.0/24\": a, \"198.18.1.1\": b}, default=PASS)",
            };
            let [ast::Expr::Dict(d)] = call.args.as_slice() else {
                return self.err(at, format!("{name} takes a dict of keys to chains"), help);
            };
            for (k, v) in d.keys.iter().zip(&d.values) {
                let Some(k) = k else {
                    return self.err(off(v), "'**' in a classifier dict is not supported", help);
                };
                let key = self.cls_key(&name, k, help)?;
                if entries.iter().any(|(x, _)| *x == key) {
                    return self.err(off(k), "duplicate classifier key", help);
                }
                entries.push((key, self.chain_arg(v)?));
            }
        }
        let (line, _) = self.line_of(at);
        let c = Classifier {
            name,
            entries,
            default,
            fault,
            line,
        };
        self.prog.classifier = Some(c);
        if self.prog.dispatched().len() > MAX_CHAINS {
            return self.err(
                at,
                format!("a classifier dispatches at most {MAX_CHAINS} chains"),
                "merge chains or dispatch inside a chain",
            );
        }
        Ok(())
    }

    fn cls_key(&self, cls: &str, k: &ast::Expr, help: &str) -> R<ClsKey> {
        match cls {
            "by_l4_dport" | "by_dscp" => {
                let v = self.const_expr(k)?;
                if cls == "by_dscp" {
                    if !(0..64).contains(&v) {
                        return self.err(
                            off(k),
                            format!("DSCP {v} is out of range"),
                            "DSCP values are 0..63",
                        );
                    }
                    Ok(ClsKey::Dscp(v as u8))
                } else {
                    if !(0..65536).contains(&v) {
                        return self.err(
                            off(k),
                            format!("port {v} is out of range"),
                            "ports are 0..65535",
                        );
                    }
                    Ok(ClsKey::Port(v as u16))
                }
            }
            _ => {
                let ast::Expr::Constant(ast::ExprConstant {
                    value: Constant::Str(s),
                    ..
                }) = k
                else {
                    return self.err(off(k), "classifier address keys are strings", help);
                };
                let (a, p) = match s.split_once('/') {
                    Some((a, p)) => (a, Some(p)),
                    None => (s.as_str(), None),
                };
                let v6 = cls.starts_with("by_ipv6");
                let bad = || {
                    self.err(
                        off(k),
                        format!(
                            "'{s}' is not an IPv{} address or prefix",
                            if v6 { 6 } else { 4 }
                        ),
                        help,
                    )
                };
                let max = if v6 { 128 } else { 32 };
                let prefix = match p {
                    None => max,
                    Some(p) => match p.parse::<u8>() {
                        Ok(p) if p <= max => p,
                        _ => return bad(),
                    },
                };
                if v6 {
                    match a.parse::<std::net::Ipv6Addr>() {
                        Ok(ip) => Ok(ClsKey::Ipv6 {
                            addr: ip.octets(),
                            prefix,
                        }),
                        Err(_) => bad(),
                    }
                } else {
                    match a.parse::<std::net::Ipv4Addr>() {
                        Ok(ip) => Ok(ClsKey::Ipv4 {
                            addr: ip.octets(),
                            prefix,
                        }),
                        Err(_) => bad(),
                    }
                }
            }
        }
    }
}

fn fold_not(t: Expr) -> Expr {
    match t.as_const() {
        Some(v) => Expr::konst(Ty::Bool, (v == 0) as u64),
        None => Expr {
            ty: Ty::Bool,
            kind: ExprKind::Not(Box::new(t)),
        },
    }
}

fn fit_help(ty: Ty) -> String {
    if ty == Ty::Bool {
        return "use True or False".into();
    }
    let (lo, hi) = if ty.signed() {
        (-(1i128 << (ty.bits() - 1)), (1i128 << (ty.bits() - 1)) - 1)
    } else {
        (0, (1i128 << ty.bits()) - 1)
    };
    format!("{ty} holds {lo} .. {hi}; use a wider type or wrap explicitly: {ty}(x)")
}

fn is_builtin(name: &str) -> bool {
    Ty::from_name(name).is_some()
        || VERDICT_NAMES.contains(&name)
        || VERDICT_CALLS.contains(&name)
        || matches!(name, "Packet" | "range" | "attach" | "True" | "False")
        || MAP_CTORS.iter().any(|(n, _, _)| *n == name)
}

/// Renumbers the NF, map and chain references of an imported script's
/// IR into the importing script's tables.
struct Renumber<'a> {
    nfs: &'a [usize],
    maps: &'a [usize],
    chain_base: usize,
}

impl Renumber<'_> {
    fn map(&self, m: usize) -> usize {
        self.maps.get(m).copied().unwrap_or(m)
    }
}

impl VisitMut for Renumber<'_> {
    fn visit_stmt(&mut self, s: &mut Stmt) {
        if let StmtKind::MapSet { map, .. }
        | StmtKind::MapRmw { map, .. }
        | StmtKind::MapDel { map, .. } = &mut s.kind
        {
            *map = self.map(*map);
        }
        walk_stmt_mut(self, s);
    }

    fn visit_expr(&mut self, x: &mut Expr) {
        match &mut x.kind {
            ExprKind::CallNf { nf, .. } => *nf = self.nfs.get(*nf).copied().unwrap_or(*nf),
            ExprKind::CallChain { chain, .. } => *chain += self.chain_base,
            ExprKind::MapGet { map, .. } | ExprKind::MapHas { map, .. } => *map = self.map(*map),
            _ => {}
        }
        walk_expr_mut(self, x);
    }
}
