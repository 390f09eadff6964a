//! The embedded catalogue: every `nf/*.c` module compiled for each of its
//! hooks at build time, its source, and the documentation parsed from it.

use crate::docblock::{self, ModuleDoc};
use crate::hook::Hook;
use serde::Serialize;
use std::sync::OnceLock;

/// One compiled object of a module: the module built for `hook`.
#[derive(Clone, Copy, Debug)]
pub struct HookObj {
    pub hook: Hook,
    /// The ELF object clang produced.
    pub object: &'static [u8],
    /// Where that object is on disk (the build's OUT_DIR), for tools such
    /// as `bpftool` and `llvm-objdump`.
    pub path: &'static str,
}

/// One module of the catalogue (`nf/meter.c` is module `nf.meter`).
#[derive(Clone, Copy, Debug)]
pub struct ModuleObj {
    /// File stem: `meter`.
    pub name: &'static str,
    /// Script module name: `nf.meter`.
    pub module: &'static str,
    /// The C source.
    pub source: &'static str,
    /// One object per hook the module is built for (its `@hooks`).
    pub objects: &'static [HookObj],
}

static CATALOGUE: &[ModuleObj] = include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));
static HEADER: &str = include!(concat!(env!("OUT_DIR"), "/header.rs"));
static DOCS: OnceLock<Vec<Option<ModuleDoc>>> = OnceLock::new();

impl ModuleObj {
    /// The object of this module built for `hook`.
    pub fn object(&self, hook: Hook) -> Option<&'static [u8]> {
        self.hook_obj(hook).map(|o| o.object)
    }

    /// The on-disk path of the object built for `hook`.
    pub fn object_path(&self, hook: Hook) -> Option<&'static str> {
        self.hook_obj(hook).map(|o| o.path)
    }

    /// The switch's own build where there is one (the classifier), else
    /// the build of its context hook (XDP).
    fn hook_obj(&self, hook: Hook) -> Option<&'static HookObj> {
        self.objects
            .iter()
            .find(|o| o.hook == hook)
            .or_else(|| self.objects.iter().find(|o| o.hook == hook.ctx_hook()))
    }

    /// The hooks the module is built for (the switch, which uses XDP
    /// builds, is not listed).
    pub fn hooks(&self) -> Vec<Hook> {
        self.objects
            .iter()
            .map(|o| o.hook)
            .filter(|h| *h != Hook::Switch)
            .collect()
    }

    /// The module's parsed documentation (checked by the build, so present
    /// for every embedded module).
    pub fn doc(&self) -> Option<&'static ModuleDoc> {
        let docs = DOCS.get_or_init(|| {
            CATALOGUE
                .iter()
                .map(|m| {
                    docblock::parse_source_with(&format!("nf/{}.c", m.name), m.source, &[HEADER])
                        .ok()
                })
                .collect()
        });
        let i = CATALOGUE.iter().position(|m| m.name == self.name)?;
        docs.get(i)?.as_ref()
    }
}

/// Every embedded module, sorted by name.
pub fn catalogue() -> &'static [ModuleObj] {
    CATALOGUE
}

/// The C header NF authors include (`nf/include/nfkit.h` followed by the
/// parts it includes, `nfkit/abi.h`, `parse.h`, `export.h`).
pub fn header() -> &'static str {
    HEADER
}

/// The embedded module `module`: `nf.meter` or `meter`.
pub fn module(module: &str) -> Option<&'static ModuleObj> {
    let stem = module.strip_prefix("nf.").unwrap_or(module);
    CATALOGUE.iter().find(|m| m.name == stem)
}

/// The ELF object of embedded `module` (`nf.meter` or `meter`) for `hook`.
pub fn object(module: &str, hook: Hook) -> Option<&'static [u8]> {
    self::module(module)?.object(hook)
}

/// What a documented entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NfKind {
    /// A network function: `u64 nf_<name>(ctx, a1, a2, a3, a4)`.
    Nf,
    /// A classifier: an entry program of a hook (programs `<name>` and `dyn_<name>`).
    Classifier,
}

/// One documented argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArgDoc {
    pub name: String,
    pub doc: String,
}

/// The documentation of one NF (or classifier), as the CLI and the chain
/// compiler see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NfDoc {
    /// Script module: `nf.meter` (a user module: its file stem).
    pub module: String,
    /// Script name: `tb_dst`.
    pub name: String,
    /// C / ELF symbol: `nf_tb_dst` (a classifier: its static program `by_dscp`).
    pub symbol: String,
    pub kind: NfKind,
    /// The used arguments, in order (at most 4).
    pub args: Vec<ArgDoc>,
    /// What it returns.
    pub returns: String,
    /// Maps it uses (its own and shared `nfkit_*` ones).
    pub maps: Vec<String>,
    /// What it does.
    pub doc: String,
    /// Defined behaviour for bad arguments.
    pub bad: String,
    /// Hooks it is built for.
    #[serde(serialize_with = "crate::hook::serialize_hooks")]
    pub hooks: Vec<Hook>,
    /// `embedded` or the object's path.
    pub origin: String,
}

impl NfDoc {
    /// `nf.meter.tb_dst`.
    pub fn full_name(&self) -> String {
        format!("{}.{}", self.module, self.name)
    }

    /// `tb_dst(rate, burst)`.
    pub fn signature(&self) -> String {
        let args: Vec<&str> = self.args.iter().map(|a| a.name.as_str()).collect();
        format!("{}({})", self.name, args.join(", "))
    }
}

pub(crate) fn hooks_of(names: &[String]) -> Vec<Hook> {
    names.iter().filter_map(|h| h.parse().ok()).collect()
}

/// The NfDocs of one parsed module (`module`: the script module name).
pub(crate) fn docs_of(module: &str, doc: &ModuleDoc, origin: &str) -> Vec<NfDoc> {
    let nfs = doc.nfs.iter().map(|n| NfDoc {
        module: module.to_string(),
        name: n.name.clone(),
        symbol: format!("nf_{}", n.name),
        kind: NfKind::Nf,
        args: n
            .args
            .iter()
            .map(|(name, doc)| ArgDoc {
                name: name.clone(),
                doc: doc.clone(),
            })
            .collect(),
        returns: n.returns.clone(),
        maps: n.maps.clone(),
        doc: n.doc.clone(),
        bad: n.bad.clone(),
        hooks: hooks_of(&n.hooks),
        origin: origin.to_string(),
    });
    let cls = doc.classifiers.iter().map(|c| NfDoc {
        module: module.to_string(),
        name: c.name.clone(),
        symbol: c.name.clone(),
        kind: NfKind::Classifier,
        args: Vec::new(),
        returns: format!(
            "the hook's return code of the chain picked by {} (default action when none)",
            if c.key.is_empty() {
                "the classifier"
            } else {
                &c.key
            }
        ),
        maps: c.maps.clone(),
        doc: c.doc.clone(),
        bad: String::new(),
        hooks: hooks_of(&doc.hooks),
        origin: origin.to_string(),
    });
    nfs.chain(cls).collect()
}

fn all_embedded() -> Vec<NfDoc> {
    CATALOGUE
        .iter()
        .filter_map(|m| Some(docs_of(m.module, m.doc()?, "embedded")))
        .flatten()
        .collect()
}

/// Every NF of the embedded catalogue (not the classifiers), by module.
pub fn list() -> Vec<NfDoc> {
    all_embedded()
        .into_iter()
        .filter(|d| d.kind == NfKind::Nf)
        .collect()
}

/// Every classifier of the embedded catalogue (`nf.classify`).
pub fn classifiers() -> Vec<NfDoc> {
    all_embedded()
        .into_iter()
        .filter(|d| d.kind == NfKind::Classifier)
        .collect()
}

/// The NF or classifier `name` of embedded `module` (`nf.meter` or `meter`).
pub fn find(module: &str, name: &str) -> Option<NfDoc> {
    let m = self::module(module)?;
    docs_of(m.module, m.doc()?, "embedded")
        .into_iter()
        .find(|d| d.name == name)
}

/// Splits `tb_dst` into `(None, "tb_dst")` and `nf.meter.tb_dst` into
/// `(Some("nf.meter"), "tb_dst")`.
pub fn parse_name(name: &str) -> (Option<&str>, &str) {
    match name.rsplit_once('.') {
        Some((m, n)) => (Some(m), n),
        None => (None, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_is_documented_and_built_for_its_hooks() {
        assert!(catalogue().len() >= 11);
        for m in catalogue() {
            let doc = m.doc().expect("doc");
            assert_eq!(doc.name, m.name);
            assert_eq!(hooks_of(&doc.hooks), m.hooks(), "{}", m.name);
            for o in m.objects {
                assert_eq!(
                    o.object.get(..4),
                    Some(&b"\x7fELF"[..]),
                    "{} {}",
                    m.name,
                    o.hook
                );
            }
        }
    }

    #[test]
    fn find_by_either_module_spelling() {
        let d = find("nf.meter", "tb_dst").expect("tb_dst");
        assert_eq!(d.symbol, "nf_tb_dst");
        assert_eq!(d.module, "nf.meter");
        assert_eq!(d.signature(), "tb_dst(rate, burst)");
        assert_eq!(d.maps, ["nf_meter_tb_dst"]);
        assert_eq!(find("meter", "tb_dst"), Some(d));
        assert!(find("nf.meter", "nope").is_none());
        assert!(object("nf.meter", Hook::Socket).is_none());
        assert!(object("meter", Hook::Xdp).is_some());
        let c = find("nf.classify", "by_dscp").expect("by_dscp");
        assert_eq!(c.kind, NfKind::Classifier);
        assert_eq!(c.maps, ["nfkit_cls_dscp"]);
    }

    #[test]
    fn doc_parser_never_panics_on_cut_or_damaged_sources() {
        for m in catalogue() {
            let lines: Vec<&str> = m.source.lines().collect();
            for n in 0..lines.len() {
                let cut = lines[..n].join("\n");
                let _ = docblock::parse_source_with("cut.c", &cut, &[HEADER]);
                let mut damaged = lines.clone();
                damaged.remove(n);
                let _ = docblock::parse_source("damaged.c", &damaged.join("\n"));
            }
            let mangled = m
                .source
                .replace("*/", "")
                .replace('(', "")
                .replace('@', "@@");
            let _ = docblock::parse_source("mangled.c", &mangled);
        }
        for weird in [
            "/**",
            "/** @nf",
            "/** @nf (\n */\nNF(",
            "/**/ /** @module */",
            "@module x",
        ] {
            let _ = docblock::parse_source("weird.c", weird);
        }
    }

    #[test]
    fn names_split_on_the_last_dot() {
        assert_eq!(parse_name("tb_dst"), (None, "tb_dst"));
        assert_eq!(parse_name("nf.meter.tb_dst"), (Some("nf.meter"), "tb_dst"));
    }
}
