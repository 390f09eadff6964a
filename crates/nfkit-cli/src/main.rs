//! `nfkit`: the command line. Thin by design: every command parses its
//! arguments, calls the library crates, and prints. Each command lives in
//! its own module under `cmd/`.
//!
//! Exit codes: 0 success, 1 the work failed (bad input, rejected program,
//! failed check), 2 usage error (clap).

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "nfkit", version, about = "Programmable eBPF packet processing")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Assemble eBPF assembly (either syntax) into raw instructions.
    Asm(cmd::asm::Args),
    /// Disassemble raw instructions or an ELF object.
    Disasm(cmd::disasm::Args),
    /// Inspect ELF objects.
    #[command(subcommand)]
    Object(cmd::object::Command),
    /// The NF catalogue: list NFs, show one's documentation and code.
    #[command(subcommand)]
    Nf(cmd::nf::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Asm(a) => cmd::asm::run(a),
        Command::Disasm(a) => cmd::disasm::run(a),
        Command::Object(c) => cmd::object::run(c),
        Command::Nf(c) => cmd::nf::run(c),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
