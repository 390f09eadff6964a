//! `nfkit`: the command line. Thin by design: every command parses its
//! arguments, calls the library crates, and prints. Each command lives in
//! its own module under `cmd/`.
//!
//! Exit codes: 0 success, 1 the work failed (bad input, rejected program,
//! failed check), 2 usage error (clap), 3 `prog test` completed but the
//! kernel refused some packets (with `--vm`: some runs faulted).

//!
//! Errors are printed with anyhow's `{:#}` (each context, then its
//! cause). The libraries' errors carry their cause's text in their own
//! message (a `cause` field) and do not return it from `source()`, so
//! each text is printed once.

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
    /// Compile a chain script into an eBPF object (or --emit asm).
    Compile(cmd::compile::Args),
    /// Check a chain script: errors and warnings only.
    Check(cmd::check::Args),
    /// Run a program (or chain script) in the userspace VM on a pcap.
    Run(cmd::run::Args),
    /// The userspace VM: `vm plugin` for the bpf_conformance runner.
    #[command(subcommand)]
    Vm(cmd::vm::Command),
    /// Deploy a chain script on an interface (or swap the deployed one live).
    Deploy(cmd::deploy::Args),
    /// What nfkit has deployed (from its pins and state file).
    Status(cmd::deploy::StatusArgs),
    /// Remove what nfkit deployed (links, pins, state).
    Undeploy(cmd::deploy::UndeployArgs),
    /// Maps of deployed chains: list, dump, get, set, delete.
    #[command(subcommand)]
    Map(cmd::map::Command),
    /// An XDP program's stateless paths as tc flower rules (`offload
    /// status`, `offload remove`).
    Offload(cmd::offload::Args),
    /// Programs in the kernel: `prog test` (BPF_PROG_TEST_RUN; `--vm`: in
    /// nfkit's VM, to compare).
    #[command(subcommand)]
    Prog(cmd::prog::Command),
    /// Send raw Ethernet frames (pcap or flows) on an interface.
    Send(cmd::send::Args),
    /// Count the frames arriving on an interface (sources, sequence numbers).
    Recv(cmd::recv::Args),
    /// The bag-server experiment: `bag serve`, `bag client`, `bag experiment`.
    #[command(subcommand)]
    Bag(cmd::bag::Command),
    /// The software switch: `switch run` runs a chain script on ports.
    #[command(subcommand)]
    Switch(cmd::switch::Command),
    /// The RTL eBPF processor: `rtl run` simulates it on a pcap (cycles,
    /// CPI, stalls), `rtl synth` estimates its resources.
    #[command(subcommand)]
    Rtl(cmd::rtl::Command),
    /// A live view of chains, verdict rates and top map entries (`--once`: one frame).
    Top(cmd::top::Args),
    /// Deep packet inspection: `dpi compile` a pattern set (DFA stats),
    /// `dpi test` it on a capture with the dpi NF in the VM.
    #[command(subcommand)]
    Dpi(cmd::dpi::Command),
    /// The classifier → chains → NFs → maps graph of a script or of what
    /// is deployed, as Graphviz DOT (or SVG).
    Graph(cmd::graph::Args),
    /// nfkitd, the control-plane daemon: `daemon start|stop|status`.
    #[command(subcommand)]
    Daemon(cmd::daemon::Command),
}

/// `nfkit … | head` closes our standard output early: `println!` then
/// panics with "Broken pipe". Leave quietly instead, with the status a
/// shell gives a process killed by SIGPIPE (128 + 13).
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Asm(a) => cmd::asm::run(a),
        Command::Disasm(a) => cmd::disasm::run(a),
        Command::Object(c) => cmd::object::run(c),
        Command::Nf(c) => cmd::nf::run(c),
        Command::Compile(a) => cmd::compile::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Vm(c) => cmd::vm::run(c),
        Command::Deploy(a) => cmd::deploy::run(a),
        Command::Status(a) => cmd::deploy::status(a),
        Command::Undeploy(a) => cmd::deploy::undeploy(a),
        Command::Map(c) => cmd::map::run(c),
        Command::Offload(a) => cmd::offload::run(a),
        Command::Prog(c) => cmd::prog::run(c),
        Command::Send(a) => cmd::send::run(a),
        Command::Recv(a) => cmd::recv::run(a),
        Command::Bag(c) => cmd::bag::run(c),
        Command::Switch(c) => cmd::switch::run(c),
        Command::Rtl(c) => cmd::rtl::run(c),
        Command::Daemon(c) => cmd::daemon::run(c),
        Command::Top(a) => cmd::top::run(a),
        Command::Graph(a) => cmd::graph::run(a),
        Command::Dpi(c) => cmd::dpi::run(c),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
