//! The NF search path: users' NF objects first, then the embedded
//! catalogue.
//!
//! Directories come from `--nf-path` and then `NFKIT_NF_PATH`, each a
//! colon-separated list. Module `M` for hook `H` is, in each directory in
//! order, `M.H.o`, else `M.o` (one object for every hook its NFs' ctx type
//! fits); a module named `nf.X` is also found as `X.H.o` / `X.o`. When no
//! directory has it, the embedded catalogue answers. A user module's
//! documentation comes from `M.c` next to the object when that file has
//! nfkit doc blocks, else from the object's BTF: every global function
//! `nf_<name>` with five parameters is an NF whose arguments are the
//! parameter names not starting with `_`.

use crate::catalogue::{self, docs_of, ArgDoc, NfDoc, NfKind};
use crate::docblock;
use crate::error::NfError;
use crate::hook::Hook;
use nfkit_object::btf::{Kind, Linkage};
use nfkit_object::image::MapKind;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// The environment variable holding extra NF directories.
pub const NF_PATH_ENV: &str = "NFKIT_NF_PATH";

/// Where a module's object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Embedded,
    File(PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Embedded => f.write_str("embedded"),
            Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A module's object for one hook.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub module: String,
    pub hook: Hook,
    pub origin: Origin,
    /// The ELF object.
    pub bytes: Cow<'static, [u8]>,
}

/// Ordered NF directories in front of the embedded catalogue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchPath {
    dirs: Vec<PathBuf>,
}

fn split_path(s: &str) -> impl Iterator<Item = PathBuf> + '_ {
    s.split(':').filter(|p| !p.is_empty()).map(PathBuf::from)
}

impl SearchPath {
    /// Only the embedded catalogue.
    pub fn embedded() -> SearchPath {
        SearchPath::default()
    }

    /// These directories, in order, then the embedded catalogue.
    pub fn new(dirs: Vec<PathBuf>) -> SearchPath {
        SearchPath { dirs }
    }

    /// `--nf-path` (colon-separated, may be given several times) first,
    /// then the `NFKIT_NF_PATH` value `env`.
    pub fn from_parts(nf_path: &[String], env: Option<&str>) -> SearchPath {
        let mut dirs: Vec<PathBuf> = nf_path.iter().flat_map(|p| split_path(p)).collect();
        if let Some(env) = env {
            dirs.extend(split_path(env));
        }
        SearchPath { dirs }
    }

    /// `--nf-path` values first, then the process's `NFKIT_NF_PATH`.
    pub fn from_env(nf_path: &[String]) -> SearchPath {
        let env = std::env::var(NF_PATH_ENV).ok();
        SearchPath::from_parts(nf_path, env.as_deref())
    }

    /// The user directories, in search order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// File stems module `module` may have on disk.
    fn stems(module: &str) -> Vec<&str> {
        let mut v = vec![module];
        if let Some(s) = module.strip_prefix("nf.") {
            v.push(s);
        }
        v
    }

    /// The file of `module` for `hook` in the user directories.
    fn user_file(&self, module: &str, hook: Hook) -> Option<PathBuf> {
        for dir in &self.dirs {
            for stem in Self::stems(module) {
                // The switch takes a `.switch.o` build, else the XDP one.
                for h in [hook, hook.ctx_hook()] {
                    let per_hook = dir.join(format!("{stem}.{}.o", h.name()));
                    if per_hook.is_file() {
                        return Some(per_hook);
                    }
                }
                let any = dir.join(format!("{stem}.o"));
                if any.is_file() {
                    return Some(any);
                }
            }
        }
        None
    }

    /// The object of `module` for `hook`: the first user directory that has
    /// it, else the embedded catalogue; `None` when neither has it.
    pub fn resolve(&self, module: &str, hook: Hook) -> Result<Option<Resolved>, NfError> {
        if let Some(path) = self.user_file(module, hook) {
            let bytes = std::fs::read(&path).map_err(|source| NfError::Io {
                path: path.display().to_string(),
                cause: source,
            })?;
            return Ok(Some(Resolved {
                module: module.to_string(),
                hook,
                origin: Origin::File(path),
                bytes: Cow::Owned(bytes),
            }));
        }
        Ok(catalogue::object(module, hook).map(|b| Resolved {
            module: catalogue::module(module)
                .map(|m| m.module.to_string())
                .unwrap_or_else(|| module.to_string()),
            hook,
            origin: Origin::Embedded,
            bytes: Cow::Borrowed(b),
        }))
    }

    /// Just the bytes of [`resolve`](Self::resolve).
    pub fn object(&self, module: &str, hook: Hook) -> Result<Option<Cow<'static, [u8]>>, NfError> {
        Ok(self.resolve(module, hook)?.map(|r| r.bytes))
    }

    /// User modules on the path: `(module, files)` in search order, the
    /// first directory holding a module shadowing later ones.
    fn user_modules(&self) -> Result<Vec<(String, Vec<PathBuf>)>, NfError> {
        let mut out: Vec<(String, Vec<PathBuf>)> = Vec::new();
        for dir in &self.dirs {
            let rd = std::fs::read_dir(dir).map_err(|source| NfError::Dir {
                path: dir.display().to_string(),
                cause: source,
            })?;
            let mut here: Vec<(String, Vec<PathBuf>)> = Vec::new();
            let mut files: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "o") && p.is_file())
                .collect();
            files.sort();
            for f in files {
                let Some(stem) = f.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                let module = match stem.rsplit_once('.') {
                    Some((m, h)) if h.parse::<Hook>().is_ok() => m,
                    _ => stem,
                };
                // A file named like a catalogue module replaces it.
                let module = match catalogue::module(module) {
                    Some(m) => m.module.to_string(),
                    None => module.to_string(),
                };
                if out.iter().any(|(m, _)| *m == module) {
                    continue;
                }
                match here.iter_mut().find(|(m, _)| *m == module) {
                    Some((_, v)) => v.push(f),
                    None => here.push((module, vec![f])),
                }
            }
            out.extend(here);
        }
        Ok(out)
    }

    /// Documentation of a user module from its files.
    fn user_docs(module: &str, files: &[PathBuf]) -> Result<Vec<NfDoc>, NfError> {
        let origin = files
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if let Some(first) = files.first() {
            let stem = module.strip_prefix("nf.").unwrap_or(module);
            let src = first.with_file_name(format!("{stem}.c"));
            if let Ok(text) = std::fs::read_to_string(&src) {
                if text.contains("@module") {
                    let doc = docblock::parse_source_with(
                        &src.display().to_string(),
                        &text,
                        &[catalogue::header()],
                    )?;
                    return Ok(docs_of(module, &doc, &origin));
                }
            }
        }
        let mut docs: Vec<NfDoc> = Vec::new();
        for f in files {
            for d in btf_docs(module, f)? {
                match docs.iter_mut().find(|x| x.name == d.name) {
                    Some(x) => {
                        for h in d.hooks {
                            if !x.hooks.contains(&h) {
                                x.hooks.push(h);
                            }
                        }
                    }
                    None => docs.push(d),
                }
            }
        }
        Ok(docs)
    }

    /// Every NF on the path: user modules first (in search order), then the
    /// embedded modules no user module shadows. Classifiers are included
    /// (kind [`NfKind::Classifier`]) only with `classifiers`.
    pub fn list_all(&self, classifiers: bool) -> Result<Vec<NfDoc>, NfError> {
        let user = self.user_modules()?;
        let mut out = Vec::new();
        for (module, files) in &user {
            out.extend(Self::user_docs(module, files)?);
        }
        let shadowed =
            |m: &catalogue::ModuleObj| user.iter().any(|(u, _)| u == m.module || u == m.name);
        for m in catalogue::catalogue() {
            if shadowed(m) {
                continue;
            }
            if let Some(doc) = m.doc() {
                out.extend(docs_of(m.module, doc, "embedded"));
            }
        }
        Ok(out
            .into_iter()
            .filter(|d| classifiers || d.kind == NfKind::Nf)
            .collect())
    }

    /// Every NF on the path (no classifiers).
    pub fn list(&self) -> Result<Vec<NfDoc>, NfError> {
        self.list_all(false)
    }

    /// The NF or classifier `name` of `module`, resolved like objects.
    pub fn find(&self, module: &str, name: &str) -> Result<Option<NfDoc>, NfError> {
        Ok(self.lookup(&format!("{module}.{name}"))?.into_iter().next())
    }

    /// Every NF or classifier called `name` (`tb_dst`) or `module.name`
    /// (`nf.meter.tb_dst`, `meter.tb_dst`), in search order.
    pub fn lookup(&self, name: &str) -> Result<Vec<NfDoc>, NfError> {
        if name.is_empty() || name.ends_with('.') || name.starts_with('.') {
            return Err(NfError::BadName(name.to_string()));
        }
        let (module, n) = catalogue::parse_name(name);
        let all = self.list_all(true)?;
        Ok(all
            .into_iter()
            .filter(|d| {
                d.name == n
                    && module
                        .is_none_or(|m| d.module == m || d.module.strip_prefix("nf.") == Some(m))
            })
            .collect())
    }
}

/// The hooks an NF with context parameter type `ctx` (C spelling) fits.
fn hooks_for_ctx(ctx: &str) -> Vec<Hook> {
    if ctx.contains("xdp_md") {
        vec![Hook::Xdp]
    } else if ctx.contains("__sk_buff") {
        vec![Hook::Tc, Hook::Socket]
    } else {
        Vec::new()
    }
}

/// NFs of a user object, read from its BTF (no doc blocks available).
fn btf_docs(module: &str, path: &Path) -> Result<Vec<NfDoc>, NfError> {
    let obj = nfkit_object::read_file(path).map_err(|e| NfError::Object {
        path: path.display().to_string(),
        cause: Box::new(e),
    })?;
    let Some(btf) = &obj.btf else {
        return Ok(Vec::new());
    };
    let file_hook = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.rsplit_once('.'))
        .and_then(|(_, h)| h.parse::<Hook>().ok());
    let maps: Vec<String> = obj
        .maps
        .iter()
        .filter(|m| m.kind == MapKind::Declared && !m.name.starts_with("nfkit_"))
        .map(|m| m.name.clone())
        .collect();
    let mut out = Vec::new();
    for (id, t) in btf.types().iter().enumerate() {
        let Kind::Func { linkage, .. } = &t.kind else {
            continue;
        };
        let Some(name) = t.name.strip_prefix("nf_") else {
            continue;
        };
        if linkage != &Linkage::Global || name.is_empty() {
            continue;
        }
        let Ok(sig) = btf.func_signature(id as u32) else {
            continue;
        };
        if sig.params.len() != 5 {
            continue;
        }
        let hooks = match file_hook {
            Some(h) => vec![h],
            None => sig
                .params
                .first()
                .map(|p| hooks_for_ctx(&p.c_type))
                .unwrap_or_default(),
        };
        out.push(NfDoc {
            module: module.to_string(),
            name: name.to_string(),
            symbol: t.name.clone(),
            kind: NfKind::Nf,
            args: sig
                .params
                .iter()
                .skip(1)
                .filter(|p| !p.name.is_empty() && !p.name.starts_with('_'))
                .map(|p| ArgDoc {
                    name: p.name.clone(),
                    doc: String::new(),
                })
                .collect(),
            returns: format!("{} (undocumented: from BTF)", sig.ret_c_type),
            maps: maps.clone(),
            doc: format!("{} (from the BTF of {})", sig.c_decl, path.display()),
            bad: String::new(),
            hooks,
            origin: path.display().to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nf_path_comes_before_the_environment() {
        let p = SearchPath::from_parts(&["/a:/b".into(), "/c".into()], Some("/d::/e"));
        let dirs: Vec<&str> = p.dirs().iter().filter_map(|d| d.to_str()).collect();
        assert_eq!(dirs, ["/a", "/b", "/c", "/d", "/e"]);
    }

    #[test]
    fn embedded_only_resolves_the_catalogue() {
        let p = SearchPath::embedded();
        let r = p.resolve("nf.meter", Hook::Tc).unwrap().unwrap();
        assert_eq!(r.origin, Origin::Embedded);
        assert_eq!(r.module, "nf.meter");
        assert!(p.resolve("nf.meter", Hook::Socket).unwrap().is_none());
        assert!(p.resolve("nope", Hook::Xdp).unwrap().is_none());
        let found = p.lookup("tb_dst").unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(p.lookup("meter.tb_dst").unwrap(), found);
        assert_eq!(p.lookup("nf.meter.tb_dst").unwrap(), found);
        assert!(p.lookup("nf.sets.tb_dst").unwrap().is_empty());
        assert!(p.lookup("").is_err());
        assert!(p.list().unwrap().len() >= 29);
    }
}
