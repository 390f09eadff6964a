//! The text of `nfkit nf show`: an NF's documentation and the
//! disassembly of its function, with the maps and functions its
//! relocations name. The CLI prints it; NfService/ShowNf returns it.

use nfkit_nf::{Hook, NfDoc, NfKind, Origin, SearchPath};
use std::fmt::Write as _;

/// Why an NF cannot be shown.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ShowError(String);

fn err(e: impl std::fmt::Display) -> ShowError {
    ShowError(e.to_string())
}

pub fn hooks_text(hooks: &[Hook]) -> String {
    hooks.iter().map(|h| h.name()).collect::<Vec<_>>().join(" ")
}

pub fn maps_text(maps: &[String]) -> String {
    if maps.is_empty() {
        "none".to_string()
    } else {
        maps.join(", ")
    }
}

/// The NF `name` found on `path` and its `nf show` text, for the build
/// of `hook` (default: the NF's first hook).
pub fn show(
    path: &SearchPath,
    name: &str,
    hook: Option<&str>,
) -> Result<(NfDoc, String), ShowError> {
    let found = path.lookup(name).map_err(err)?;
    let Some(d) = found.first() else {
        return Err(ShowError(format!(
            "no NF called `{name}` (see `nfkit nf list`; user objects are found through --nf-path and NFKIT_NF_PATH)"
        )));
    };
    let hook = match hook {
        Some(h) => {
            let h: Hook = h.parse().map_err(err)?;
            if !d.hooks.contains(&h) {
                return Err(ShowError(format!(
                    "{} is not built for hook {h} (hooks: {})",
                    d.full_name(),
                    hooks_text(&d.hooks)
                )));
            }
            h
        }
        None => *d.hooks.first().ok_or_else(|| {
            ShowError(format!("{} has no hook it can be built for", d.full_name()))
        })?,
    };
    let mut out = describe(d);
    if found.len() > 1 {
        let others: Vec<String> = found[1..]
            .iter()
            .map(|o| format!("{} ({})", o.full_name(), o.origin))
            .collect();
        let _ = writeln!(
            out,
            "also found (shadowed or other modules): {}",
            others.join(", ")
        );
    }
    let r = path
        .resolve(&d.module, hook)
        .map_err(err)?
        .ok_or_else(|| ShowError(format!("no object of module {} for hook {hook}", d.module)))?;
    let obj = nfkit_object::read_object(&r.bytes, &r.origin.to_string())
        .map_err(|e| ShowError(format!("reading {}: {e}", r.origin)))?;
    let f = obj
        .function(&d.symbol)
        .ok_or_else(|| ShowError(format!("{} has no function {}", r.origin, d.symbol)))?;
    let origin = match &r.origin {
        Origin::Embedded => format!(
            "nf/{}.c, built for {hook}",
            d.module.trim_start_matches("nf.")
        ),
        Origin::File(p) => p.display().to_string(),
    };
    let _ = writeln!(
        out,
        "\ndisassembly of {} ({origin}, section {}, {} instructions):",
        d.symbol,
        f.section,
        f.insns.len()
    );
    let opts = nfkit_isa::DisasmOptions {
        symbols: reloc_symbols(&obj, f),
        ..Default::default()
    };
    out.push_str(&nfkit_isa::disassemble(&f.insns, &opts));
    Ok((d.clone(), out))
}

/// The symbols of `f`'s relocations by slot: the maps its `lddw`s load
/// (`map+offset` for global data) and the functions it calls.
fn reloc_symbols(
    obj: &nfkit_object::Object,
    f: &nfkit_object::object::ObjFunction,
) -> std::collections::BTreeMap<usize, String> {
    use nfkit_object::object::{FuncRef, RelocTarget};
    let func = |r: &FuncRef| match r {
        FuncRef::Index(k) => obj
            .functions
            .get(*k)
            .map(|f| f.name.clone())
            .unwrap_or_default(),
        FuncRef::Named(n) => n.clone(),
    };
    let map = |k: usize| obj.maps.get(k).map(|m| m.name.clone()).unwrap_or_default();
    let slots = nfkit_isa::slot_offsets(&f.insns);
    f.relocs
        .iter()
        .filter_map(|r| {
            let slot = *slots.get(r.insn)?;
            let sym = match &r.target {
                RelocTarget::Map(k) => map(*k),
                RelocTarget::MapValue { map: k, offset } => format!("{}+{offset}", map(*k)),
                RelocTarget::Call(t) | RelocTarget::FuncAddr(t) => func(t),
            };
            Some((slot, sym))
        })
        .collect()
}

/// The documentation part of `nf show`.
pub fn describe(d: &NfDoc) -> String {
    let mut out = String::new();
    let what = match d.kind {
        NfKind::Nf => format!("NF {}", d.full_name()),
        NfKind::Classifier => format!("classifier {}", d.full_name()),
    };
    let _ = writeln!(
        out,
        "{what}   (symbol {}, hooks: {})",
        d.symbol,
        hooks_text(&d.hooks)
    );
    if d.kind == NfKind::Nf {
        let _ = writeln!(
            out,
            "  u64 {}(ctx{})",
            d.symbol,
            d.args
                .iter()
                .map(|a| format!(", u64 {}", a.name))
                .collect::<String>()
        );
    }
    let _ = writeln!(out, "\n{}\n", d.doc);
    if !d.args.is_empty() {
        out.push_str("arguments:\n");
        for a in &d.args {
            let _ = writeln!(out, "  {:<10} {}", a.name, a.doc);
        }
    }
    let _ = writeln!(out, "returns: {}", d.returns);
    let _ = writeln!(out, "maps: {}", maps_text(&d.maps));
    if let Some(m) = nfkit_nf::module(&d.module).filter(|_| d.origin == "embedded") {
        if let Some(doc) = m.doc() {
            for name in &d.maps {
                if let Some(md) = doc.maps.iter().find(|x| &x.name == name) {
                    let _ = writeln!(out, "  {name}: {}", md.doc);
                }
            }
            let consts: Vec<String> = doc
                .consts
                .iter()
                .map(|c| format!("  {} = {}: {}", c.name, c.value, c.doc))
                .collect();
            if !consts.is_empty() {
                let _ = writeln!(out, "constants of {}:\n{}", d.module, consts.join("\n"));
            }
        }
    }
    if !d.bad.is_empty() {
        let _ = writeln!(out, "bad arguments: {}", d.bad);
    }
    out
}

/// The text of `nfkit nf list`: NFs by module, then classifiers.
pub fn list(all: &[NfDoc]) -> String {
    let mut out = String::new();
    let mut module = "";
    for kind in [NfKind::Nf, NfKind::Classifier] {
        if kind == NfKind::Classifier {
            out.push_str("\nclassifiers (entry programs that pick a chain per packet):\n");
            module = "";
        }
        for d in all.iter().filter(|d| d.kind == kind) {
            if d.module != module {
                module = &d.module;
                let origin = if d.origin == "embedded" {
                    String::new()
                } else {
                    format!("  ({})", d.origin)
                };
                let _ = writeln!(out, "{module}{origin}");
            }
            let _ = writeln!(out, "  {:<28} [{}]", d.signature(), hooks_text(&d.hooks));
            for arg in &d.args {
                if !arg.doc.is_empty() {
                    let _ = writeln!(out, "      {}: {}", arg.name, arg.doc);
                }
            }
            let _ = writeln!(out, "      returns: {}", d.returns);
            let _ = writeln!(out, "      maps: {}", maps_text(&d.maps));
        }
    }
    out
}
