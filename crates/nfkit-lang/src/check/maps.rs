//! Maps (docs/language.md, "Maps"): declarations and keys.

use super::errors::{expr_name, Dest};
use super::{off, Checker, Scope, Sym, R, TE};
use crate::ir::{key_layout, Expr, ExprKind, Key, MapDecl, MapRmw, Stmt, StmtKind, MAX_KEY_BYTES};
use crate::types::Ty;
use nfkit_object::MapType;
use rustpython_parser::ast;

/// Map constructors: (name, map type, keyed).
pub(super) const MAP_CTORS: [(&str, MapType, bool); 6] = [
    ("HashMap", MapType::Hash, true),
    ("LpmTrieMap", MapType::LpmTrie, true),
    ("LruHashMap", MapType::LruHash, true),
    ("PercpuHashMap", MapType::PercpuHash, true),
    ("ArrayMap", MapType::Array, false),
    ("PercpuArrayMap", MapType::PercpuArray, false),
];

impl Checker<'_> {
    /// `m = HashMap(K, V, N)` and the other constructors.
    pub(super) fn map_decl(
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
                self.key_types(&call.args[0])?,
                self.type_of(&call.args[1])?,
                &call.args[2],
            )
        } else {
            (vec![Ty::U32], self.type_of(&call.args[0])?, &call.args[1])
        };
        let key_at = |i: usize| match &call.args[0] {
            ast::Expr::Tuple(t) if keyed => &t.elts[i],
            _ => &call.args[0],
        };
        for (i, &t) in key.iter().enumerate() {
            if t == Ty::Bool {
                return self.err(
                    off(key_at(i)),
                    "map keys and values are integer types",
                    &help,
                );
            }
        }
        if value == Ty::Bool {
            let e = &call.args[if keyed { 1 } else { 0 }];
            return self.err(off(e), "map keys and values are integer types", &help);
        }
        let (_, key_bytes) = key_layout(&key);
        if key_bytes > MAX_KEY_BYTES {
            return self.err(
                off(&call.args[0]),
                format!(
                    "the key {} is {key_bytes} bytes; map keys are at most {MAX_KEY_BYTES} bytes",
                    tuple_name(&key)
                ),
                "use fewer or narrower fields (the key is a C struct of the fields in order, each at a multiple of its size)",
            );
        }
        // A tuple key: its fields; `key` u64 for tools that show keys as
        // one integer.
        let (key, tuple) = match call.args.first() {
            Some(ast::Expr::Tuple(_)) if keyed => (Ty::U64, key),
            _ => (key[0], Vec::new()),
        };
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
            tuple,
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

    /// The types of a map key: an integer type, or a tuple of them
    /// (`(u32, u32)`, at least two).
    fn key_types(&self, e: &ast::Expr) -> R<Vec<Ty>> {
        let ast::Expr::Tuple(t) = e else {
            return Ok(vec![self.type_of(e)?]);
        };
        if t.elts.len() < 2 {
            return self.err(
                off(e),
                "a tuple key has at least two fields",
                "use the integer type itself: HashMap(u32, u64, 1024)",
            );
        }
        t.elts.iter().map(|x| self.type_of(x)).collect()
    }

    /// The map and the checked key of `m[k]`.
    fn map_key(&mut self, sub: &ast::ExprSubscript, sc: &mut Scope) -> R<(usize, Key)> {
        let map = self.map_ref(&sub.value)?;
        Ok((map, self.key_of(map, &sub.slice, sc)?))
    }

    /// The key `k` of map `map`, checked: one value per key field, each
    /// converted to the field's type.
    fn key_of(&mut self, map: usize, k: &ast::Expr, sc: &mut Scope) -> R<Key> {
        let d = &self.prog.maps[map];
        let (name, fields) = (d.name.clone(), d.key_fields());
        let elts: Vec<&ast::Expr> = match k {
            ast::Expr::Tuple(t) => t.elts.iter().collect(),
            _ => vec![k],
        };
        let is_tuple = matches!(k, ast::Expr::Tuple(_));
        let tuple_map = !d.tuple.is_empty();
        if is_tuple != tuple_map || elts.len() != fields.len() {
            let (what, help) = if d.tuple.is_empty() {
                (
                    format!("{} keys", d.key),
                    format!("index it with one value: {name}[k]"),
                )
            } else {
                let vars: Vec<String> = (0..fields.len()).map(|i| format!("k{i}")).collect();
                (
                    format!("tuple keys {}", tuple_name(&fields)),
                    format!(
                        "index it with {} values: {name}[({})]",
                        fields.len(),
                        vars.join(", ")
                    ),
                )
            };
            let this = if is_tuple {
                format!("a tuple of {}", elts.len())
            } else {
                "one value".to_string()
            };
            return self.err(
                off(k),
                format!("map '{name}' has {what}; this key is {this}"),
                &help,
            );
        }
        let mut key = Vec::with_capacity(fields.len());
        for (e, ty) in elts.into_iter().zip(fields) {
            let v = self.expr(e, sc)?;
            key.push(self.convert(v, ty)?);
        }
        Ok(key)
    }

    /// The map a name refers to.
    pub(super) fn map_ref(&self, e: &ast::Expr) -> R<usize> {
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

    /// `m[k] = v`.
    pub(super) fn map_set(
        &mut self,
        sub: &ast::ExprSubscript,
        value: &ast::Expr,
        sc: &mut Scope,
    ) -> R<StmtKind> {
        let (map, key) = self.map_key(sub, sc)?;
        let vt = self.prog.maps[map].value;
        let v = self.expr(value, sc)?;
        let v = self.store(v, vt, value, Dest::Value)?;
        Ok(StmtKind::MapSet { map, key, value: v })
    }

    /// `m[k] op= v` (atomic for `+= -= |= &= ^=`).
    pub(super) fn map_update(
        &mut self,
        sub: &ast::ExprSubscript,
        op: ast::Operator,
        value: &ast::Expr,
        at: usize,
        sc: &mut Scope,
    ) -> R<StmtKind> {
        let (map, key) = self.map_key(sub, sc)?;
        let op = match op {
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
        let v = self.expr(value, sc)?;
        let v = self.store(v, vt, value, Dest::Value)?;
        Ok(StmtKind::MapRmw {
            map,
            key,
            op,
            value: v,
        })
    }

    /// `del m[k], ...`: one statement per target.
    pub(super) fn del(
        &mut self,
        d: &ast::StmtDelete,
        sc: &mut Scope,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        for t in &d.targets {
            let ast::Expr::Subscript(sub) = t else {
                return self.err(off(t), "only map entries can be deleted", "del m[k]");
            };
            let (map, key) = self.map_key(sub, sc)?;
            out.push(self.mk(off(t), StmtKind::MapDel { map, key }));
        }
        Ok(())
    }

    /// `m[k]`: the value, 0 when `k` is absent.
    pub(super) fn map_get(&mut self, sub: &ast::ExprSubscript, sc: &mut Scope) -> R<TE> {
        let (map, key) = self.map_key(sub, sc)?;
        let ty = self.prog.maps[map].value;
        Ok(TE::Typed(Expr {
            ty,
            kind: ExprKind::MapGet {
                map,
                key,
                default: None,
            },
        }))
    }

    /// `k in m` (`negate`: `k not in m`).
    pub(super) fn map_has(
        &mut self,
        key: &ast::Expr,
        m: &ast::Expr,
        negate: bool,
        sc: &mut Scope,
    ) -> R<TE> {
        let map = self.map_ref(m)?;
        let k = self.key_of(map, key, sc)?;
        Ok(TE::Typed(Expr {
            ty: Ty::Bool,
            kind: ExprKind::MapHas {
                map,
                key: k,
                negate,
            },
        }))
    }

    /// `m.get(k, default)` (the only map method).
    pub(super) fn map_method(
        &mut self,
        call: &ast::ExprCall,
        map: usize,
        m: &str,
        sc: &mut Scope,
    ) -> R<TE> {
        let at = off(call);
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
        let vt = self.prog.maps[map].value;
        let k = self.key_of(map, &call.args[0], sc)?;
        let d = self.expr(&call.args[1], sc)?;
        let d = self.convert(d, vt)?;
        Ok(TE::Typed(Expr {
            ty: vt,
            kind: ExprKind::MapGet {
                map,
                key: k,
                default: Some(Box::new(d)),
            },
        }))
    }
}

/// `(u32, u32)`.
fn tuple_name(tys: &[Ty]) -> String {
    let names: Vec<&str> = tys.iter().map(|t| t.name()).collect();
    format!("({})", names.join(", "))
}
