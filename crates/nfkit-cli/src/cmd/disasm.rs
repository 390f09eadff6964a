//! `nfkit disasm` (being written: toolchain issue).

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("nfkit disasm is not built yet")
}
