//! `nfkit vm ...`: the userspace VM's own commands.
//!
//! `nfkit vm plugin [MEMORY_HEX] [OPTION...]` speaks the bpf_conformance
//! plugin protocol, so the suite's runner can drive nfkit
//! (`bpf_conformance_runner --plugin_path nfkit-plugin.sh ...` with a
//! wrapper that runs `nfkit vm plugin "$@"`). The runner passes the
//! initial memory as hex bytes (absent when empty), then its
//! `--plugin_options`, then `--elf` in `--elf true` mode; the program
//! comes as hex bytes on standard input: raw instructions, or with `--elf`
//! the runner's ELF object (a global `main` in `.text`, or in `xdp` with
//! `--xdp_prolog true`). A program of type XDP (section `xdp`, or raw
//! instructions with the plugin option `--xdp_prolog true`) runs with an
//! `xdp_md` whose packet is the memory, as the runner's XDP prolog
//! expects; any other with r1 = the memory and r2 = its length. Helper 5
//! is the suite's unwind helper; r0 is printed in lowercase hex (no `0x`)
//! on standard output. Errors go to standard error with a non-zero exit.
//!
//! `--jit` (before the memory, `nfkit vm plugin --jit "$@"`, or among the
//! plugin options) runs the program on the JIT instead of the
//! interpreter; when the JIT cannot compile it, the interpreter runs it
//! and a line on standard error says why (`nfkit: JIT fallback: ...`;
//! the runner reads only standard output).

use anyhow::{anyhow, bail, Context as _};
use nfkit_object::{Image, ProgType};
use nfkit_vm::ctx::{XdpMd, ETH_HLEN};
use nfkit_vm::{Context, Engine, EngineUse, RunOptions, Vm, VmConfig};
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
    /// Run on the JIT (default: the interpreter, the reference).
    #[arg(long)]
    pub jit: bool,
    /// As the suite's runner passes them: the initial memory as hex bytes
    /// (whitespace between bytes allowed; absent when there is none), the
    /// runner's `--plugin_options` (`--xdp_prolog [true|false]`: raw
    /// instructions are an XDP program; `--jit`: run on the JIT), then
    /// `--elf` when standard input holds an ELF object (`--elf
    /// true|false` is accepted too).
    #[arg(
        value_name = "MEMORY_HEX | OPTION",
        allow_hyphen_values = true,
        trailing_var_arg = true
    )]
    pub args: Vec<String>,
}

/// What the plugin's arguments ask for.
#[derive(Debug, Default, PartialEq)]
struct PluginOptions {
    memory: Vec<u8>,
    /// Standard input is an ELF object.
    elf: bool,
    /// Raw instructions run as an XDP program (the runner's
    /// `--xdp_prolog true` adds a prolog that reads `xdp_md`).
    xdp: bool,
    /// Run on the JIT (`--jit` among the plugin options).
    jit: bool,
}

/// `--NAME` optionally followed by `true`/`false`.
fn bool_option<'a>(tokens: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>) -> bool {
    match tokens.peek().copied() {
        Some("true" | "1") => {
            tokens.next();
            true
        }
        Some("false" | "0") => {
            tokens.next();
            false
        }
        _ => true,
    }
}

/// The memory (the first argument, unless it is an option) and the
/// options; unknown options are refused by name.
fn plugin_options(args: &[String]) -> anyhow::Result<PluginOptions> {
    let (memory, rest) = match args.split_first() {
        Some((m, rest)) if !m.trim_start().starts_with("--") => (m.as_str(), rest),
        _ => ("", args),
    };
    let mut o = PluginOptions {
        memory: parse_hex(memory).context("memory argument")?,
        ..Default::default()
    };
    let mut tokens = rest.iter().flat_map(|a| a.split_whitespace()).peekable();
    while let Some(t) = tokens.next() {
        match t {
            "--elf" => o.elf = bool_option(&mut tokens),
            "--xdp_prolog" | "--xdp" => o.xdp = bool_option(&mut tokens),
            "--jit" => o.jit = bool_option(&mut tokens),
            _ => bail!("unknown plugin option `{t}` (known: --elf, --xdp_prolog, --jit)"),
        }
    }
    Ok(o)
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
    let o = plugin_options(&a.args)?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the program from standard input")?;
    let program = parse_hex(&input).context("program on standard input")?;
    let engine = if a.jit || o.jit {
        Engine::Jit
    } else {
        Engine::Interp
    };
    let config = VmConfig::conformance().with_engine(engine);
    let (vm, prog_type) = if o.elf {
        let image = Image::from_elf(&program, "<stdin>")?;
        let Some(entry) = image.entries.first() else {
            bail!("the ELF object has no programs");
        };
        let pt = entry.prog_type;
        (Vm::new(&image, config)?, pt)
    } else {
        let pt = if o.xdp {
            ProgType::Xdp
        } else {
            ProgType::Unspec
        };
        (Vm::from_bytes(&program, pt, config)?, pt)
    };
    // An XDP program (section `xdp`, or `--xdp_prolog`) gets the memory as
    // its packet, at least ETH_HLEN bytes long as the kernel's test run
    // needs (and the suite's libbpf plugin pads it).
    let mut packet = o.memory.clone();
    if packet.len() < ETH_HLEN {
        packet.resize(ETH_HLEN, 0);
    }
    let ctx = match prog_type {
        ProgType::Xdp => Context::Xdp(XdpMd::new(&packet)),
        _ => Context::Raw(&o.memory),
    };
    if let Some(EngineUse::Fallback(why)) = vm.engine(0) {
        eprintln!("nfkit: JIT fallback: {why}");
    }
    let res = vm.run(0, ctx, &RunOptions::default());
    let r0 = res.result?;
    println!("{r0:x}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> anyhow::Result<PluginOptions> {
        plugin_options(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn runner_arguments() {
        let o = opts(&["01  02  ", "--elf"]).expect("ok");
        assert_eq!((o.memory, o.elf, o.xdp), (vec![1, 2], true, false));
        let o = opts(&["--elf"]).expect("ok");
        assert_eq!((o.memory.len(), o.elf), (0, true));
        let o = opts(&["aa", "--xdp_prolog", "true", "", "--elf", "false"]).expect("ok");
        assert_eq!((o.elf, o.xdp), (false, true));
        let o = opts(&["aa", "--xdp_prolog true"]).expect("ok");
        assert!(o.xdp && !o.elf && !o.jit);
        let o = opts(&["aa", "--jit", "--elf"]).expect("ok");
        assert!(o.jit && o.elf);
        assert!(opts(&["", "--bogus"]).is_err());
        assert!(opts(&["zz"]).is_err());
    }
}
