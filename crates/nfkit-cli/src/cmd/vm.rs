//! `nfkit vm ...`: the userspace VM's own commands.
//!
//! `nfkit vm plugin [MEMORY_HEX] [--elf]` speaks the bpf_conformance
//! plugin protocol, so the suite's runner can drive nfkit
//! (`bpf_conformance_runner --plugin_path nfkit-plugin.sh ...` with a
//! wrapper that runs `nfkit vm plugin "$@"`): the program comes as hex
//! bytes on standard input (raw instructions, or an ELF object with
//! `--elf`), the initial memory as hex bytes in the first argument; the
//! program runs with r1 = that memory and r2 = its length, helper 5 being
//! the suite's unwind helper; r0 is printed in lowercase hex (no `0x`) on
//! standard output. Errors go to standard error with a non-zero exit.

use anyhow::{anyhow, bail, Context as _};
use nfkit_object::{Image, ProgType};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig};
use std::io::Read;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// bpf_conformance plugin: program hex on stdin, memory hex as the
    /// argument, r0 in hex on stdout.
    Plugin(PluginArgs),
}

#[derive(clap::Args)]
pub struct PluginArgs {
    /// Initial memory as hex bytes (whitespace between bytes allowed).
    #[arg(value_name = "MEMORY_HEX", allow_hyphen_values = false)]
    pub memory: Option<String>,
    /// Plugin options the suite's runner passes after the memory (empty,
    /// or `--elf`).
    #[arg(hide = true)]
    pub options: Vec<String>,
    /// Standard input holds an ELF object rather than raw instructions.
    #[arg(long)]
    pub elf: bool,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Plugin(a) => plugin(a),
    }
}

/// Bytes of a hex string; whitespace anywhere is ignored.
pub fn parse_hex(s: &str) -> anyhow::Result<Vec<u8>> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        bail!("odd number of hex digits ({})", digits.len());
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let text = String::from_utf8_lossy(pair);
            u8::from_str_radix(&text, 16).map_err(|_| anyhow!("byte {i}: `{text}` is not hex"))
        })
        .collect()
}

fn plugin(a: PluginArgs) -> anyhow::Result<ExitCode> {
    let mut elf = a.elf;
    for o in a.options.iter().flat_map(|o| o.split_whitespace()) {
        match o {
            "--elf" => elf = true,
            _ => bail!("unknown plugin option `{o}`"),
        }
    }
    let memory = parse_hex(a.memory.as_deref().unwrap_or("")).context("memory argument")?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the program from standard input")?;
    let program = parse_hex(&input).context("program on standard input")?;
    let config = VmConfig::conformance();
    let vm = if elf {
        let image = Image::from_elf(&program, "<stdin>")?;
        if image.entries.is_empty() {
            bail!("the ELF object has no programs");
        }
        Vm::new(&image, config)?
    } else {
        Vm::from_bytes(&program, ProgType::Unspec, config)?
    };
    let res = vm.run(0, Context::Raw(&memory), &RunOptions::default());
    let r0 = res.result?;
    println!("{r0:x}");
    Ok(ExitCode::SUCCESS)
}
