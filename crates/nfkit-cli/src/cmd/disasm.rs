//! `nfkit disasm FILE [--section NAME] [--syntax llvm|conformance]`: FILE
//! is raw instructions (a multiple of 8 bytes) or an eBPF ELF object. For
//! an object, every code section is printed under a `SECTION:` header with
//! its functions as labels and map/function symbols in place of relocated
//! immediates; `--section` prints one section, in text that re-assembles.

use super::asm::SyntaxArg;
use anyhow::{anyhow, bail, Context};
use nfkit_isa::{disassemble, Annotation, DisasmOptions, Insn, Syntax};
use nfkit_object::object::{FuncRef, ObjFunction, RelocTarget};
use nfkit_object::Object;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Raw instructions or an ELF object.
    file: PathBuf,
    /// Only this section of an ELF object.
    #[arg(long)]
    section: Option<String>,
    /// Output syntax.
    #[arg(long, value_enum, default_value = "llvm")]
    syntax: SyntaxArg,
    /// Numeric jump offsets instead of labels.
    #[arg(long)]
    no_labels: bool,
    /// Interleave source lines (from the object's line info) as comments.
    #[arg(short = 'S', long)]
    source: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let shown = a.file.display().to_string();
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {shown}"))?;
    let syntax = Syntax::from(a.syntax);
    if !bytes.starts_with(b"\x7fELF") {
        if a.section.is_some() {
            bail!("{shown}: --section needs an ELF object; this is raw instructions");
        }
        let insns = nfkit_isa::decode_bytes(&bytes).map_err(|e| anyhow!("{shown}: {e}"))?;
        let opts = DisasmOptions {
            syntax,
            labels: !a.no_labels,
            ..Default::default()
        };
        print!("{}", disassemble(&insns, &opts));
        return Ok(ExitCode::SUCCESS);
    }
    let object = nfkit_object::read_object(&bytes, &shown).map_err(|e| anyhow!("{shown}: {e}"))?;
    let sections = code_sections(&object);
    let chosen: Vec<&(String, Vec<&ObjFunction>)> = match &a.section {
        Some(name) => {
            let Some(s) = sections.iter().find(|(n, _)| n == name) else {
                let names: Vec<&str> = sections.iter().map(|(n, _)| n.as_str()).collect();
                bail!(
                    "{shown}: no code section `{name}`; available: {}",
                    if names.is_empty() {
                        "(none)".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            };
            vec![s]
        }
        None => sections.iter().collect(),
    };
    let mut out = String::new();
    for (i, (name, funcs)) in chosen.iter().enumerate() {
        if a.section.is_none() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&format!("{name}:\n"));
        }
        out.push_str(&section_text(
            &object,
            funcs,
            syntax,
            !a.no_labels,
            a.source,
        ));
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Code sections in object order, each with its functions by offset.
fn code_sections(object: &Object) -> Vec<(String, Vec<&ObjFunction>)> {
    let mut out: Vec<(String, Vec<&ObjFunction>)> = Vec::new();
    for f in &object.functions {
        match out.iter_mut().find(|(n, _)| *n == f.section) {
            Some((_, v)) => v.push(f),
            None => out.push((f.section.clone(), vec![f])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|f| f.section_slot);
    }
    out
}

fn func_name(object: &Object, r: &FuncRef) -> String {
    match r {
        FuncRef::Index(i) => object
            .functions
            .get(*i)
            .map_or_else(|| format!("func#{i}"), |f| f.name.clone()),
        FuncRef::Named(n) => n.clone(),
    }
}

/// The symbol a relocation names.
fn reloc_symbol(object: &Object, t: &RelocTarget) -> String {
    let map_name = |m: usize| {
        object
            .maps
            .get(m)
            .map_or_else(|| format!("map#{m}"), |s| s.name.clone())
    };
    match t {
        RelocTarget::Map(m) => map_name(*m),
        RelocTarget::MapValue { map, offset } => object
            .data_symbols
            .iter()
            .find(|d| d.map == *map && d.offset == *offset)
            .map_or_else(
                || format!("{}+{offset}", map_name(*map)),
                |d| d.name.clone(),
            ),
        RelocTarget::Call(f) | RelocTarget::FuncAddr(f) => func_name(object, f),
    }
}

/// A function name usable as a label in the output.
fn label_ok(name: &str) -> bool {
    let mut c = name.chars();
    let digits_after = |p: char| {
        name.strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !digits_after('L')
        && !digits_after('r')
        && !digits_after('w')
        && !matches!(name, "ll" | "local" | "kfunc" | "helper" | "skb" | "exit")
}

/// One section's functions, concatenated in section order.
fn section_text(
    object: &Object,
    funcs: &[&ObjFunction],
    syntax: Syntax,
    labels: bool,
    source: bool,
) -> String {
    let mut insns: Vec<Insn> = Vec::new();
    let mut symbols = BTreeMap::new();
    let mut notes: BTreeMap<usize, Vec<Annotation>> = BTreeMap::new();
    for f in funcs {
        let base = nfkit_isa::slot_count(&insns);
        let offs = nfkit_isa::slot_offsets(&f.insns);
        let a = notes.entry(base).or_default();
        if label_ok(&f.name) {
            a.push(Annotation::Label(f.name.clone()));
        } else {
            a.push(Annotation::Comment(format!("function {}", f.name)));
        }
        for r in &f.relocs {
            if let Some(&s) = offs.get(r.insn) {
                symbols.insert(base + s, reloc_symbol(object, &r.target));
            }
        }
        for r in &f.core_relos {
            let note = nfkit_object::co_re::note(object.btf.as_ref(), r);
            let at = base + offs.get(r.insn).copied().unwrap_or(0);
            notes.entry(at).or_default().push(Annotation::Comment(note));
        }
        if source {
            // One comment per change of source line.
            let mut last: Option<(&str, u32)> = None;
            for li in &f.line_info {
                if last == Some((li.file.as_str(), li.line)) {
                    continue;
                }
                last = Some((li.file.as_str(), li.line));
                let text = li.text.trim();
                let c = if text.is_empty() {
                    format!("{}:{}", li.file, li.line)
                } else {
                    format!("{}:{}: {text}", li.file, li.line)
                };
                notes
                    .entry(base + li.slot)
                    .or_default()
                    .push(Annotation::Comment(c));
            }
        }
        insns.extend_from_slice(&f.insns);
    }
    let annotate = |slot: usize| notes.get(&slot).cloned().unwrap_or_default();
    let opts = DisasmOptions {
        syntax,
        labels,
        helper_names: true,
        symbols,
        annotate: Some(&annotate),
    };
    disassemble(&insns, &opts)
}
