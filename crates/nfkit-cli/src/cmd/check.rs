//! `nfkit check SCRIPT`: errors and warnings only (exit 1 on errors).

use anyhow::Context;
use nfkit_lang::{compile, diag, CompileError, Options};
use nfkit_nf::SearchPath;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The chain script (.chain or .py).
    script: PathBuf,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let shown = a.script.display().to_string();
    let source = std::fs::read_to_string(&a.script).with_context(|| format!("reading {shown}"))?;
    let opts = Options {
        search: SearchPath::from_env(&a.nf_path),
        hook: None,
    };
    // The whole compilation runs: stack budgets and links are checked too.
    match compile(&shown, &source, &opts) {
        Ok(c) => {
            eprint!("{}", diag::render(&c.warnings));
            Ok(ExitCode::SUCCESS)
        }
        Err(CompileError::Script(d)) => {
            eprintln!("{d}");
            Ok(ExitCode::from(1))
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
