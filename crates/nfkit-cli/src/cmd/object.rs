//! `nfkit object ...` (being written: toolchain issue).

use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {}
}
