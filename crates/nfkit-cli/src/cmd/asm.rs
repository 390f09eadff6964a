//! `nfkit asm IN [-o OUT] [--syntax llvm|conformance]`: assemble eBPF
//! assembly (either syntax, detected unless named) into raw little-endian
//! instructions, or print them as hex (one 8-byte slot per line).

use anyhow::{anyhow, Context};
use nfkit_isa::Syntax;
use std::fmt::Write as _;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// An assembly syntax on the command line.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SyntaxArg {
    /// llvm-objdump / clang inline asm: `r0 = *(u32 *)(r1 + 4)`.
    Llvm,
    /// bpf_conformance / uBPF: `ldxw %r0, [%r1+4]`.
    Conformance,
}

impl From<SyntaxArg> for Syntax {
    fn from(s: SyntaxArg) -> Syntax {
        match s {
            SyntaxArg::Llvm => Syntax::Llvm,
            SyntaxArg::Conformance => Syntax::Conformance,
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The assembly file (`-` reads standard input).
    input: String,
    /// Write the raw instructions here (else print them as hex).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The syntax (detected from the text when not given).
    #[arg(long, value_enum)]
    syntax: Option<SyntaxArg>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (name, text) = if a.input == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading standard input")?;
        ("<stdin>".to_string(), s)
    } else {
        let s =
            std::fs::read_to_string(&a.input).with_context(|| format!("reading {}", a.input))?;
        (a.input.clone(), s)
    };
    let prog = nfkit_isa::assemble_program(&text, a.syntax.map(Syntax::from))
        .map_err(|e| anyhow!("{name}:{}:{}: {}", e.line, e.col, e.message))?;
    for r in &prog.relocs {
        eprintln!(
            "warning: {name}: slot {} refers to undefined symbol `{}` (left unresolved: raw instructions carry no relocations)",
            r.slot, r.symbol
        );
    }
    let bytes = nfkit_isa::encode_bytes(&prog.insns);
    match a.output {
        Some(out) => {
            std::fs::write(&out, &bytes).with_context(|| format!("writing {}", out.display()))?
        }
        None => print!("{}", hex_lines(&bytes)),
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of 16 hex digits per 8-byte slot, bytes in file order.
fn hex_lines(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() / 8 * 17);
    for slot in bytes.chunks(8) {
        for b in slot {
            let _ = write!(out, "{b:02x}");
        }
        out.push('\n');
    }
    out
}
