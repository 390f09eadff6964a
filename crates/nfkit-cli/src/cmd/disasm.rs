//! `nfkit disasm FILE [--section NAME] [--syntax llvm|conformance]`: FILE
//! is raw instructions (a multiple of 8 bytes) or an eBPF ELF object. For
//! an object, every code section is printed under a `SECTION:` header with
//! its functions as labels and map/function symbols in place of relocated
//! immediates; `--section` prints one section, in text that re-assembles.
//! Every code section of any sound ELF file is shown: what nfkit cannot
//! load or run (CO-RE, kfuncs, externs, unknown section names, ...) is a
//! `unsupported` comment beside the instruction, function or section it
//! touches (see `nfkit_object::inspect_object`).

use super::asm::SyntaxArg;
use anyhow::{anyhow, bail, Context};
use nfkit_isa::{disassemble, Annotation, DisasmOptions, Insn, Syntax};
use nfkit_object::error::one_line;
use nfkit_object::object::{FuncRef, ObjFunction, RelocTarget};
use nfkit_object::{Object, ReadError};
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
    let inspection =
        nfkit_object::inspect_object(&bytes, &shown).map_err(|e| anyhow!("{shown}: {e}"))?;
    let object = &inspection.object;
    let notes = &inspection.notes;
    let sections = code_sections(object);
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
    if a.section.is_none() {
        // Notes about no code section shown (maps, BTF, sections that
        // could not be decoded).
        for n in notes.iter().filter(|n| {
            !sections
                .iter()
                .any(|(s, _)| n.location.section.as_deref() == Some(s))
        }) {
            if let Annotation::Comment(c) = note_comment(n) {
                let mut place = n.location.section.clone().unwrap_or("object".into());
                if let Some(o) = n.location.offset {
                    place.push_str(&format!("+0x{o:x}"));
                }
                out.push_str(&format!("; {place}: {c}\n"));
            }
        }
    }
    for (i, (name, funcs)) in chosen.iter().enumerate() {
        if a.section.is_none() {
            if i > 0 || !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("{name}:\n"));
        }
        let here: Vec<&ReadError> = notes
            .iter()
            .filter(|n| n.location.section.as_deref() == Some(name.as_str()))
            .collect();
        let view = SectionView {
            object,
            funcs,
            notes: &here,
        };
        out.push_str(&view.text(syntax, !a.no_labels, a.source));
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

/// One code section's functions and what nfkit noted about it.
struct SectionView<'a> {
    object: &'a Object,
    funcs: &'a [&'a ObjFunction],
    notes: &'a [&'a ReadError],
}

/// A note as a comment: what is unsupported, and the symbol it names.
fn note_comment(n: &ReadError) -> Annotation {
    let sym = n
        .location
        .symbol
        .as_ref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    let what = n.kind.to_string();
    let what = what.strip_prefix("unsupported: ").unwrap_or(&what);
    Annotation::Comment(one_line(&format!("unsupported{sym}: {what}")))
}

impl SectionView<'_> {
    /// The slot (in the concatenated text) of section byte `offset`.
    fn slot_of(&self, base_of: &[usize], offset: u64) -> Option<usize> {
        let slot = usize::try_from(offset / 8).ok()?;
        self.funcs.iter().zip(base_of).find_map(|(f, &base)| {
            (slot >= f.section_slot && slot < f.section_slot + f.slot_len())
                .then(|| base + slot - f.section_slot)
        })
    }

    /// The section's functions, concatenated in section order.
    fn text(&self, syntax: Syntax, labels: bool, source: bool) -> String {
        let object = self.object;
        let mut insns: Vec<Insn> = Vec::new();
        let mut symbols = BTreeMap::new();
        let mut notes: BTreeMap<usize, Vec<Annotation>> = BTreeMap::new();
        let mut base_of = Vec::new();
        for f in self.funcs {
            let base = nfkit_isa::slot_count(&insns);
            base_of.push(base);
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
                source_lines(f, base, &mut notes);
            }
            insns.extend_from_slice(&f.insns);
        }
        // Notes beside their instruction; the others at the top.
        let mut head = String::new();
        for n in self.notes {
            match n.location.offset.and_then(|o| self.slot_of(&base_of, o)) {
                Some(slot) => notes.entry(slot).or_default().push(note_comment(n)),
                None => {
                    if let Annotation::Comment(c) = note_comment(n) {
                        head.push_str(&format!("; {c}\n"));
                    }
                }
            }
        }
        let annotate = |slot: usize| notes.get(&slot).cloned().unwrap_or_default();
        let opts = DisasmOptions {
            syntax,
            labels,
            helper_names: true,
            symbols,
            annotate: Some(&annotate),
        };
        head + &disassemble(&insns, &opts)
    }
}

/// One comment per change of source line of `f` (placed at `base`).
fn source_lines(f: &ObjFunction, base: usize, notes: &mut BTreeMap<usize, Vec<Annotation>>) {
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
