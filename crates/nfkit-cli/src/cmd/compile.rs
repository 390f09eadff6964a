//! `nfkit compile SCRIPT -o OUT.o [--emit asm] [--hook H] [--nf-path DIR]`:
//! a chain script into an eBPF ELF object (chains, NFs and classifier
//! linked, with BTF, and the script's manifest: a chain object,
//! [`nfkit_lang::chain_object`], which a switch takes as an update), or with `--emit asm` the generated code with the
//! script lines as comments. Errors and warnings go to stderr.

use anyhow::{anyhow, bail, Context};
use nfkit_lang::{compile, diag, CompileError, Compiled, Options};
use nfkit_nf::{Hook, SearchPath};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The chain script (.chain or .py).
    script: PathBuf,
    /// Output object.
    #[arg(short = 'o', long = "output", value_name = "OUT.o")]
    output: Option<PathBuf>,
    /// `asm`: print the generated code instead of (or besides) the object.
    #[arg(long, value_name = "asm")]
    emit: Option<String>,
    /// Compile for this hook (xdp, tc, socket) instead of the script's attach().
    #[arg(long)]
    hook: Option<String>,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
}

/// Compiles, printing warnings and errors to stderr; `None` on errors.
pub fn compile_or_report(
    file: &str,
    source: &str,
    nf_path: &[String],
) -> anyhow::Result<Option<Compiled>> {
    compile_with(file, source, nf_path, None)
}

pub fn compile_with(
    file: &str,
    source: &str,
    nf_path: &[String],
    hook: Option<Hook>,
) -> anyhow::Result<Option<Compiled>> {
    let opts = Options {
        search: SearchPath::from_env(nf_path),
        hook,
    };
    match compile(file, source, &opts) {
        Ok(c) => {
            eprint!("{}", diag::render(&c.warnings));
            Ok(Some(c))
        }
        Err(CompileError::Script(d)) => {
            eprintln!("{d}");
            Ok(None)
        }
        Err(e) => bail!("{e}"),
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let shown = a.script.display().to_string();
    let source = std::fs::read_to_string(&a.script).with_context(|| format!("reading {shown}"))?;
    let hook = match &a.hook {
        Some(h) => Some(
            h.parse::<Hook>()
                .map_err(|_| anyhow!("unknown hook `{h}` (xdp, tc, socket, switch)"))?,
        ),
        None => None,
    };
    let Some(c) = compile_with(&shown, &source, &a.nf_path, hook)? else {
        return Ok(ExitCode::from(1));
    };
    match a.emit.as_deref() {
        None => {}
        Some("asm") => print!("{}", nfkit_lang::listing::listing(&c)),
        Some(other) => bail!("--emit {other}: only `asm` is supported"),
    }
    if let Some(out) = &a.output {
        let opts = Options {
            search: SearchPath::from_env(&a.nf_path),
            hook: Some(c.hook),
        };
        let bytes = nfkit_lang::chain_object::write(&c, &opts)
            .map_err(|e| anyhow!("writing {}: {e}", out.display()))?;
        std::fs::write(out, bytes).with_context(|| format!("writing {}", out.display()))?;
    } else if a.emit.is_none() {
        bail!("give -o OUT.o (or --emit asm)");
    }
    Ok(ExitCode::SUCCESS)
}
