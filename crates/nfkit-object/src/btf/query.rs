//! Questions asked of a [`Btf`]: sizes, names, C spellings, function
//! signatures and the variables of data sections.

use super::*;

/// Longest modifier/typedef/array chain followed before giving up (BTF
/// from a file can be cyclic).
const MAX_DEPTH: usize = 64;

/// A parameter of a function signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncParam {
    pub name: String,
    pub ty: u32,
    /// The parameter's type spelled in C (`struct xdp_md *`).
    pub c_type: String,
}

/// A `FUNC`'s signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSignature {
    pub name: String,
    pub linkage: Linkage,
    /// Return type id (0: void).
    pub ret: u32,
    pub ret_c_type: String,
    pub params: Vec<FuncParam>,
    /// Variadic (`...` as the last parameter).
    pub variadic: bool,
    /// The whole declaration in C: `int f(struct xdp_md *ctx)`.
    pub c_decl: String,
}

/// A variable of a `DATASEC`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecVar {
    pub name: String,
    /// The variable's type (not the `VAR`).
    pub ty: u32,
    pub var_id: u32,
    pub offset: u32,
    pub size: u32,
    pub linkage: Linkage,
}

impl Btf {
    /// The first type called `name` for which `pred` holds.
    pub fn find(&self, name: &str, pred: impl Fn(&Kind) -> bool) -> Option<u32> {
        self.types
            .iter()
            .position(|t| t.name == name && pred(&t.kind))
            .map(|i| i as u32)
    }

    /// The `FUNC` called `name`.
    pub fn find_func(&self, name: &str) -> Option<u32> {
        self.find(name, |k| matches!(k, Kind::Func { .. }))
    }

    /// The `DATASEC` called `name` (`.rodata`, `.maps`, ...).
    pub fn find_datasec(&self, name: &str) -> Option<u32> {
        self.find(name, |k| matches!(k, Kind::Datasec { .. }))
    }

    /// Follows `CONST`/`VOLATILE`/`RESTRICT`/`TYPE_TAG` from `id`.
    pub fn skip_modifiers(&self, mut id: u32) -> Result<u32, BtfError> {
        for _ in 0..MAX_DEPTH {
            match &self.ty(id)?.kind {
                Kind::Const { ty }
                | Kind::Volatile { ty }
                | Kind::Restrict { ty }
                | Kind::TypeTag { ty, .. } => id = *ty,
                _ => return Ok(id),
            }
        }
        Err(BtfError::Cycle(id))
    }

    /// Follows modifiers and typedefs from `id` to the underlying type.
    pub fn strip(&self, mut id: u32) -> Result<u32, BtfError> {
        for _ in 0..MAX_DEPTH {
            match &self.ty(id)?.kind {
                Kind::Const { ty }
                | Kind::Volatile { ty }
                | Kind::Restrict { ty }
                | Kind::TypeTag { ty, .. }
                | Kind::Typedef { ty } => id = *ty,
                _ => return Ok(id),
            }
        }
        Err(BtfError::Cycle(id))
    }

    /// The size in bytes of a value of type `id`.
    pub fn size_of(&self, id: u32) -> Result<u32, BtfError> {
        self.size_rec(id, 0)
    }

    fn size_rec(&self, id: u32, depth: usize) -> Result<u32, BtfError> {
        if depth > MAX_DEPTH {
            return Err(BtfError::Cycle(id));
        }
        let t = self.ty(id)?;
        match &t.kind {
            Kind::Int { size, .. }
            | Kind::Float { size }
            | Kind::Struct { size, .. }
            | Kind::Union { size, .. }
            | Kind::Enum { size, .. }
            | Kind::Enum64 { size, .. }
            | Kind::Datasec { size, .. } => Ok(*size),
            Kind::Ptr { .. } => Ok(8),
            Kind::Array { elem, nelems, .. } => {
                let e = self.size_rec(*elem, depth + 1)?;
                e.checked_mul(*nelems).ok_or_else(|| BtfError::Invalid {
                    type_id: id,
                    why: format!("array size {e} x {nelems} overflows"),
                })
            }
            Kind::Typedef { ty }
            | Kind::Const { ty }
            | Kind::Volatile { ty }
            | Kind::Restrict { ty }
            | Kind::TypeTag { ty, .. }
            | Kind::Var { ty, .. } => self.size_rec(*ty, depth + 1),
            k => Err(BtfError::NoSize {
                type_id: id,
                kind: k.name(),
            }),
        }
    }

    /// The name of type `id` (empty for anonymous types and `void`).
    pub fn name_of(&self, id: u32) -> &str {
        self.get(id).map(|t| t.name.as_str()).unwrap_or("")
    }

    /// Type `id` spelled in C as an abstract declarator: `__u32`,
    /// `struct foo`, `const char *`, `__u8[4]`, `int (*)[32]`.
    pub fn c_type(&self, id: u32) -> String {
        self.c_decl(id, "")
    }

    /// A C declaration of `name` with type `id` (`__u8 addr[4]`).
    pub fn c_decl(&self, id: u32, name: &str) -> String {
        self.decl(id, name.to_string(), 0)
    }

    fn decl(&self, id: u32, inner: String, depth: usize) -> String {
        let with = |base: String, inner: &str| {
            if inner.is_empty() {
                base
            } else if inner.starts_with('[') || inner.starts_with('(') {
                format!("{base}{inner}")
            } else {
                format!("{base} {inner}")
            }
        };
        if depth > MAX_DEPTH {
            return with("<cycle>".into(), &inner);
        }
        let Some(t) = self.get(id) else {
            return with(format!("<bad type {id}>"), &inner);
        };
        let named = |prefix: &str| {
            if t.name.is_empty() {
                format!("{prefix} {{...}}")
            } else {
                format!("{prefix} {}", t.name)
            }
        };
        match &t.kind {
            Kind::Void => with("void".into(), &inner),
            Kind::Int { .. } | Kind::Float { .. } | Kind::Typedef { .. } => {
                with(t.name.clone(), &inner)
            }
            Kind::Struct { .. } => with(named("struct"), &inner),
            Kind::Union { .. } => with(named("union"), &inner),
            Kind::Enum { .. } | Kind::Enum64 { .. } => with(named("enum"), &inner),
            Kind::Fwd { union } => with(named(if *union { "union" } else { "struct" }), &inner),
            Kind::Ptr { ty } => {
                let target = self.skip_modifiers(*ty).ok().and_then(|i| self.get(i));
                let star = match target.map(|t| &t.kind) {
                    Some(Kind::Array { .. }) | Some(Kind::FuncProto { .. }) => {
                        format!("(*{inner})")
                    }
                    _ => format!("*{inner}"),
                };
                self.decl(*ty, star, depth + 1)
            }
            Kind::Const { ty } | Kind::Volatile { ty } | Kind::Restrict { ty } => {
                let q = match t.kind {
                    Kind::Const { .. } => "const",
                    Kind::Volatile { .. } => "volatile",
                    _ => "restrict",
                };
                let is_ptr = matches!(
                    self.skip_modifiers(*ty)
                        .ok()
                        .and_then(|i| self.get(i))
                        .map(|t| &t.kind),
                    Some(Kind::Ptr { .. })
                );
                if is_ptr {
                    let inner = if inner.is_empty() {
                        q.to_string()
                    } else {
                        format!("{q} {inner}")
                    };
                    self.decl(*ty, inner, depth + 1)
                } else {
                    format!("{q} {}", self.decl(*ty, inner, depth + 1))
                }
            }
            Kind::TypeTag { ty, .. } => self.decl(*ty, inner, depth + 1),
            Kind::Array { elem, nelems, .. } => {
                self.decl(*elem, format!("{inner}[{nelems}]"), depth + 1)
            }
            Kind::FuncProto { ret, params } => {
                let ps = self.params_c(params, depth);
                self.decl(*ret, format!("{inner}({ps})"), depth + 1)
            }
            Kind::Func { proto, .. } => {
                let name = if inner.is_empty() {
                    t.name.clone()
                } else {
                    inner
                };
                self.decl(*proto, name, depth + 1)
            }
            Kind::Var { ty, .. } => self.decl(*ty, t.name.clone(), depth + 1),
            Kind::Datasec { .. } => format!("SEC(\"{}\")", t.name),
            Kind::DeclTag { .. } => format!("__attribute__((btf_decl_tag(\"{}\")))", t.name),
        }
    }

    fn params_c(&self, params: &[Param], depth: usize) -> String {
        if params.is_empty() {
            return "void".into();
        }
        params
            .iter()
            .map(|p| {
                if p.ty == 0 && p.name.is_empty() {
                    "...".to_string()
                } else {
                    self.decl(p.ty, p.name.clone(), depth + 1)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The signature of `FUNC` `id`.
    pub fn func_signature(&self, id: u32) -> Result<FuncSignature, BtfError> {
        let t = self.ty(id)?;
        let Kind::Func { proto, linkage } = &t.kind else {
            return Err(BtfError::Invalid {
                type_id: id,
                why: format!("is a {}, not a FUNC", t.kind.name()),
            });
        };
        let p = self.ty(*proto)?;
        let Kind::FuncProto { ret, params } = &p.kind else {
            return Err(BtfError::Invalid {
                type_id: id,
                why: format!("FUNC refers to a {}, not a FUNC_PROTO", p.kind.name()),
            });
        };
        let variadic = params
            .last()
            .is_some_and(|p| p.ty == 0 && p.name.is_empty());
        let fixed = if variadic {
            &params[..params.len() - 1]
        } else {
            &params[..]
        };
        Ok(FuncSignature {
            name: t.name.clone(),
            linkage: *linkage,
            ret: *ret,
            ret_c_type: self.c_type(*ret),
            params: fixed
                .iter()
                .map(|p| FuncParam {
                    name: p.name.clone(),
                    ty: p.ty,
                    c_type: self.c_type(p.ty),
                })
                .collect(),
            variadic,
            c_decl: self.c_decl(id, ""),
        })
    }

    /// The variables of `DATASEC` `section`, in offset order.
    pub fn datasec_vars(&self, section: &str) -> Vec<SecVar> {
        let Some(id) = self.find_datasec(section) else {
            return Vec::new();
        };
        let Some(Kind::Datasec { vars, .. }) = self.get(id).map(|t| &t.kind) else {
            return Vec::new();
        };
        let mut out: Vec<SecVar> = vars
            .iter()
            .filter_map(|v| {
                let t = self.get(v.ty)?;
                let (ty, linkage) = match &t.kind {
                    Kind::Var { ty, linkage } => (*ty, *linkage),
                    Kind::Func { proto, linkage } => (*proto, *linkage),
                    _ => return None,
                };
                Some(SecVar {
                    name: t.name.clone(),
                    ty,
                    var_id: v.ty,
                    offset: v.offset,
                    size: v.size,
                    linkage,
                })
            })
            .collect();
        out.sort_by_key(|v| v.offset);
        out
    }

    /// Members of the struct or union `id` (after modifiers/typedefs).
    pub fn members(&self, id: u32) -> Result<&[Member], BtfError> {
        let sid = self.strip(id)?;
        match &self.ty(sid)?.kind {
            Kind::Struct { members, .. } | Kind::Union { members, .. } => Ok(members),
            k => Err(BtfError::Invalid {
                type_id: id,
                why: format!("is a {}, not a struct or union", k.name()),
            }),
        }
    }
}
