//! `nfkit object show FILE.o [--json]`: the programs, subprograms, maps
//! and global data of an eBPF ELF object (see `nfkit_object::summary`),
//! and a note for each part nfkit cannot load or run (CO-RE, kfuncs,
//! unknown sections, ...) naming what it touches. Any object that is a
//! sound ELF file is shown, with exit 0.

use anyhow::{anyhow, Context as _};
use nfkit_object::summary::NoteSummary;
use nfkit_object::ObjectSummary;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List an object's programs (name, section, type, instruction count),
    /// maps (name, type, key/value size, max entries) and globals.
    Show(ShowArgs),
}

#[derive(clap::Args)]
pub struct ShowArgs {
    /// The ELF object (as `clang -O2 -g -target bpf` writes it).
    file: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Show(a) => show(a),
    }
}

#[derive(Serialize)]
struct Shown<'a> {
    file: String,
    #[serde(flatten)]
    summary: &'a ObjectSummary,
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let shown = a.file.display().to_string();
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {shown}"))?;
    // One line: "FILE: section '...', symbol '...', offset 0x..: what".
    let inspection = nfkit_object::inspect_object(&bytes, &shown)
        .map_err(|e| anyhow!("{shown}: {}", nfkit_object::error::one_line(&e.to_string())))?;
    let summary = ObjectSummary::of_inspection(&inspection);
    if a.json {
        let shown = Shown {
            file: a.file.display().to_string(),
            summary: &summary,
        };
        println!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        print!("{}", text(&a.file.display().to_string(), &summary));
    }
    Ok(ExitCode::SUCCESS)
}

/// Left-aligned columns, two spaces apart, indented by two.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        out.push_str("  (none)\n");
        return;
    }
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut line = |cells: Vec<&str>| {
        let mut l = String::from(" ");
        for (c, w) in cells.iter().zip(&width) {
            let _ = write!(l, " {c:<w$} ");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".into())
}

fn text(file: &str, s: &ObjectSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{file}: license {}, {}",
        if s.license.is_empty() {
            "none"
        } else {
            &s.license
        },
        if s.btf { "BTF" } else { "no BTF" }
    );
    let _ = writeln!(out, "\nprograms ({}):", s.programs.len());
    let rows: Vec<Vec<String>> = s
        .programs
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.section.clone(),
                p.prog_type.clone(),
                p.insns.to_string(),
                p.size.to_string(),
            ]
        })
        .collect();
    table(
        &mut out,
        &["NAME", "SECTION", "TYPE", "INSNS", "BYTES"],
        &rows,
    );
    if !s.functions.is_empty() {
        let _ = writeln!(out, "\nfunctions ({}):", s.functions.len());
        let rows: Vec<Vec<String>> = s
            .functions
            .iter()
            .map(|f| {
                vec![
                    f.name.clone(),
                    f.section.clone(),
                    f.binding.to_string(),
                    f.insns.to_string(),
                    f.size.to_string(),
                ]
            })
            .collect();
        table(
            &mut out,
            &["NAME", "SECTION", "BINDING", "INSNS", "BYTES"],
            &rows,
        );
    }
    maps_text(&mut out, s);
    globals_text(&mut out, s);
    notes_text(&mut out, s);
    out
}

/// The maps table, and each map of maps' inner definition.
fn maps_text(out: &mut String, s: &ObjectSummary) {
    let _ = writeln!(out, "\nmaps ({}):", s.maps.len());
    let rows: Vec<Vec<String>> = s
        .maps
        .iter()
        .map(|m| {
            vec![
                m.name.clone(),
                m.map_type.clone(),
                m.key_size.to_string(),
                m.value_size.to_string(),
                m.max_entries.to_string(),
                format!("0x{:x}", m.flags),
                opt(&m.key_type),
                opt(&m.value_type),
            ]
        })
        .collect();
    table(
        out,
        &[
            "NAME",
            "TYPE",
            "KEY",
            "VALUE",
            "MAX_ENTRIES",
            "FLAGS",
            "KEY_TYPE",
            "VALUE_TYPE",
        ],
        &rows,
    );
    for m in &s.maps {
        if let Some(inner) = &m.inner {
            let _ = writeln!(out, "  {}", inner_line(&m.name, inner));
        }
    }
}

/// Each global data section with its variables.
fn globals_text(out: &mut String, s: &ObjectSummary) {
    let _ = writeln!(out, "\nglobals ({} sections):", s.globals.len());
    for g in &s.globals {
        let _ = writeln!(
            out,
            "  {} ({} bytes{})",
            g.section,
            g.size,
            if g.read_only { ", read-only" } else { "" }
        );
        let rows: Vec<Vec<String>> = g
            .vars
            .iter()
            .map(|v| {
                vec![
                    v.name.clone(),
                    v.offset.to_string(),
                    v.size.to_string(),
                    v.linkage.to_string(),
                    opt(&v.c_type),
                ]
            })
            .collect();
        if !rows.is_empty() {
            let mut t = String::new();
            table(
                &mut t,
                &["NAME", "OFFSET", "SIZE", "LINKAGE", "TYPE"],
                &rows,
            );
            for l in t.lines() {
                let _ = writeln!(out, "  {l}");
            }
        }
    }
}

/// CO-RE relocations with their values, and what nfkit cannot load or run.
fn notes_text(out: &mut String, s: &ObjectSummary) {
    if !s.core_relos.is_empty() {
        let _ = writeln!(out, "\nCO-RE relocations ({}):", s.core_relos.len());
        for c in &s.core_relos {
            let _ = writeln!(out, "  {}+{}  {}", c.function, c.slot, c.note);
        }
    }
    if !s.notes.is_empty() {
        let _ = writeln!(
            out,
            "\nnotes ({}): not loadable or runnable by nfkit",
            s.notes.len()
        );
        for n in &s.notes {
            let _ = writeln!(out, "  {}: {}", note_place(n), n.what);
        }
    }
}

/// `by_slot: maps of struct counters (array key 4 value 8 max_entries 4);
/// slots 0 = counts_a, 2 = counts_b`.
fn inner_line(outer: &str, inner: &nfkit_object::summary::InnerSummary) -> String {
    let t = &inner.template;
    let mut line = format!(
        "{outer}: maps of struct {} ({} key {} value {} max_entries {})",
        t.name, t.map_type, t.key_size, t.value_size, t.max_entries
    );
    if inner.slots.is_empty() {
        line.push_str("; no initial slots");
    } else {
        let slots: Vec<String> = inner
            .slots
            .iter()
            .map(|sl| format!("{} = {}", sl.slot, sl.map))
            .collect();
        line.push_str(&format!("; slots {}", slots.join(", ")));
    }
    line
}

/// What a note touches: `section+0xOFFSET (symbol)`.
pub fn note_place(n: &NoteSummary) -> String {
    let mut p = n.section.clone().unwrap_or_else(|| "object".into());
    if let Some(o) = n.offset {
        let _ = write!(p, "+0x{o:x}");
    }
    if let Some(s) = &n.symbol {
        let _ = write!(p, " ({s})");
    }
    p
}
