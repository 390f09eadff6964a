//! `nfkit dpi compile PATTERNS [-o FILE] [--json]` and `nfkit dpi test
//! PATTERNS --pcap F [--limit N] [--hook xdp|tc] [--json]`: a pattern set
//! (a catalogue set's name or a pattern file, see
//! [`nfkit_dpi::patterns`]) compiled to its DFA (stats, or refused with
//! the error naming the pattern), and run over a capture by the
//! catalogue's `dpi` NF in the VM: per packet, which pattern matched and
//! where it ends in the TCP/UDP payload.
//!
//! `-o NF.o` writes an eBPF object for `--hook` (xdp, tc, socket) that
//! carries its tables (the initial contents of the dpi NF's maps), see
//! [`nfkit_lang::patterns::filter_image`]. `-o FILE.dfa` (or `--dfa`) writes the DFA file
//! of [`nfkit_dpi::file`] instead, which `test --tables FILE` loads.

use anyhow::{anyhow, bail, Context};
use nfkit_dpi::{catalogue, compile, Dfa, Match, Options, Tables};
use nfkit_nf::{Hook, SearchPath};
use nfkit_vm::{Context as VmContext, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Compile a pattern set to its DFA: stats, or the pattern that fails.
    Compile(CompileArgs),
    /// Run the dpi NF with a pattern set over a capture, in the VM.
    Test(TestArgs),
}

#[derive(clap::Args)]
pub struct CompileArgs {
    /// A catalogue set (sqli, bittorrent, protocols, tls_sni) or a pattern file.
    patterns: String,
    /// Write an NF object that carries its tables (NF.o), or with --dfa
    /// (or a FILE ending in .dfa) the DFA file `dpi test --tables` loads.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The hook of the NF object (xdp, tc or socket).
    #[arg(long, default_value = "xdp")]
    hook: String,
    /// Payload bytes the NF object scans per packet (0: the NF's default, 2048).
    #[arg(long, default_value_t = 0)]
    limit: u64,
    /// -o writes the DFA file, not an NF object.
    #[arg(long)]
    dfa: bool,
    /// Most DFA states the set may take.
    #[arg(long = "max-states", default_value_t = nfkit_dpi::tables::STATES - 1)]
    max_states: usize,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// A catalogue set or a pattern file (not with --tables).
    #[arg(required_unless_present = "tables", conflicts_with = "tables")]
    patterns: Option<String>,
    /// A DFA file written by `nfkit dpi compile -o`.
    #[arg(long, value_name = "FILE")]
    tables: Option<PathBuf>,
    /// The capture to scan.
    #[arg(long, value_name = "F")]
    pcap: PathBuf,
    /// Payload bytes scanned per packet (0: the NF's default, 2048).
    #[arg(long, default_value_t = 0)]
    limit: u64,
    /// The hook the NF runs at (xdp, tc or socket).
    #[arg(long, default_value = "xdp")]
    hook: String,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Compile(a) => compile_cmd(a),
        Command::Test(a) => test_cmd(a),
    }
}

/// The patterns `arg` names: a catalogue set, else a pattern file.
fn load_patterns(arg: &str) -> anyhow::Result<Vec<String>> {
    if let Some(set) = catalogue::find(arg) {
        return Ok(set.patterns.iter().map(|p| p.to_string()).collect());
    }
    let text = std::fs::read_to_string(arg).map_err(|e| {
        let names: Vec<&str> = catalogue::ALL.iter().map(|s| s.name).collect();
        anyhow!(
            "`{arg}` is not a catalogue set ({}) and cannot be read as a pattern file: {e}",
            names.join(", ")
        )
    })?;
    let pats = nfkit_dpi::patterns::parse(&text);
    if pats.is_empty() {
        bail!("{arg}: no patterns (one regular expression a line, `#` comments)");
    }
    Ok(pats.into_iter().map(|(_, p)| p).collect())
}

fn compile_patterns(arg: &str, max_states: usize) -> anyhow::Result<Dfa> {
    let pats = load_patterns(arg)?;
    let opts = Options {
        max_states,
        ..Options::default()
    };
    compile(&pats, &opts).map_err(|e| anyhow!("{arg}: {e}"))
}

/// Bytes the DFA takes in the NF's tables (transitions and accepts).
fn table_bytes(d: &Dfa) -> usize {
    d.states() * (nfkit_dpi::dfa::COLUMNS + 1) * 2
}

fn stats_json(d: &Dfa) -> serde_json::Value {
    json!({
        "states": d.states(),
        "table_bytes": table_bytes(d),
        "patterns": d.patterns,
    })
}

fn stats_text(d: &Dfa) -> String {
    let mut s = format!(
        "{} patterns, {} DFA states, {} table bytes\n",
        d.patterns.len(),
        d.states(),
        table_bytes(d)
    );
    for (i, p) in d.patterns.iter().enumerate() {
        s += &format!("  {i}: {p}\n");
    }
    s
}

fn compile_cmd(a: CompileArgs) -> anyhow::Result<ExitCode> {
    let d = compile_patterns(&a.patterns, a.max_states)?;
    let hook = parse_hook(&a.hook)?;
    if let Some(out) = &a.output {
        let bytes = if a.dfa || out.extension().is_some_and(|e| e == "dfa") {
            d.to_bytes()
        } else {
            nf_object(&d, hook, a.limit)?
        };
        std::fs::write(out, bytes).with_context(|| format!("writing {}", out.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&stats_json(&d))?);
    } else {
        print!("{}", stats_text(&d));
    }
    Ok(ExitCode::SUCCESS)
}

/// `xdp`, `tc` or `socket`.
fn parse_hook(h: &str) -> anyhow::Result<Hook> {
    match h {
        "xdp" | "tc" | "socket" => h.parse().map_err(|_| anyhow!("bad hook {h}")),
        _ => bail!("--hook {h}: the dpi NF runs at xdp, tc or socket"),
    }
}

/// The NF object of `d` for `hook` ([`nfkit_lang::patterns::filter_image`]).
fn nf_object(d: &Dfa, hook: Hook, limit: u64) -> anyhow::Result<Vec<u8>> {
    let image =
        nfkit_lang::patterns::filter_image(&d.patterns, hook, limit, &SearchPath::from_env(&[]))
            .map_err(|e| anyhow!("compiling the dpi filter chain: {e}"))?;
    nfkit_object::write_object(&image).map_err(|e| anyhow!("writing the NF object: {e}"))
}

/// The chain the NF runs in: every packet, `match(0, limit)` into `out[0]`.
fn probe_script(limit: u64, hook: &str) -> String {
    format!(
        "from nf.classify import every_packet\n\
         from nf.dpi import match\n\
         out = ArrayMap(u64, 1)\n\
         def scan() -> u64:\n    out[0] = match(0, {limit})\n    return PASS\n\
         every_packet(scan)\n\
         attach(\"dpi0\", \"{hook}\")\n"
    )
}

fn test_cmd(a: TestArgs) -> anyhow::Result<ExitCode> {
    let dfa = match (&a.tables, &a.patterns) {
        (Some(f), _) => {
            let b = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
            Dfa::from_bytes(&b).map_err(|e| anyhow!("{}: {e}", f.display()))?
        }
        (None, Some(p)) => compile_patterns(p, nfkit_dpi::tables::STATES - 1)?,
        (None, None) => bail!("give PATTERNS or --tables FILE"),
    };
    let hook = parse_hook(&a.hook)?;
    let tables = Tables::build(std::slice::from_ref(&dfa))?;
    let packets = nfkit_pcap::read_file(&a.pcap).map_err(super::pcap_error(&a.pcap))?;

    let opts = nfkit_lang::Options {
        search: SearchPath::from_env(&[]),
        hook: Some(hook),
    };
    let c = nfkit_lang::compile("<dpi test>", &probe_script(a.limit, &a.hook), &opts)
        .map_err(|e| anyhow!("compiling the dpi probe chain: {e}"))?;
    let entry = c
        .entry()
        .ok_or_else(|| anyhow!("the dpi probe chain has no entry"))?
        .to_string();
    let vm = Vm::new(&c.image, VmConfig::kernel()).map_err(|e| anyhow!("loading the VM: {e}"))?;
    let map = |name: &str| {
        vm.map(name)
            .ok_or_else(|| anyhow!("the dpi probe has no map {name}"))
    };
    for (m, k, v) in c.control_plane() {
        map(&m)?
            .update(&k, &v, 0)
            .map_err(|e| anyhow!("{m}: {e}"))?;
    }
    let zero = 0u32.to_ne_bytes();
    map("nf_dpi_next")?
        .update(&zero, &tables.next, 0)
        .map_err(|e| anyhow!("nf_dpi_next: {e}"))?;
    map("nf_dpi_accept")?
        .update(&zero, &tables.accept, 0)
        .map_err(|e| anyhow!("nf_dpi_accept: {e}"))?;
    for (i, e) in tables.sets.iter().enumerate() {
        map("nf_dpi_sets")?
            .update(&(i as u32).to_ne_bytes(), e, 0)
            .map_err(|e| anyhow!("nf_dpi_sets: {e}"))?;
    }

    let mut results: Vec<Result<Option<Match>, String>> = Vec::new();
    for p in &packets {
        map("out")?
            .update(&zero, &[0u8; 8], 0)
            .map_err(|e| anyhow!("out: {e}"))?;
        let ctx = match hook {
            Hook::Xdp => VmContext::Xdp(XdpMd::new(&p.data)),
            _ => VmContext::Skb(SkBuff::new(&p.data)),
        };
        let res = vm.run(entry.as_str(), ctx, &RunOptions::default());
        if let Err(e) = &res.result {
            results.push(Err(e.to_string()));
            continue;
        }
        let got = map("out")?
            .lookup(&zero)
            .map_err(|e| anyhow!("out: {e}"))?
            .and_then(|v| {
                v.get(..8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
            })
            .unwrap_or(0);
        results.push(Ok(Match::from_result(got)));
    }

    let mut per_pattern = vec![0usize; dfa.patterns.len()];
    let faults = results.iter().filter(|r| r.is_err()).count();
    for m in results.iter().flatten().flatten() {
        if let Some(c) = per_pattern.get_mut(m.pattern) {
            *c += 1;
        }
    }
    if a.json {
        let pk: Vec<serde_json::Value> = results
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Ok(Some(m)) => {
                    json!({"packet": i + 1, "match": {"pattern": m.pattern, "end": m.end}})
                }
                Ok(None) => json!({"packet": i + 1, "match": null}),
                Err(e) => json!({"packet": i + 1, "fault": e}),
            })
            .collect();
        let v = json!({
            "dfa": stats_json(&dfa),
            "packets": pk,
            "matches": per_pattern,
            "faults": faults,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", stats_text(&dfa));
        for (i, r) in results.iter().enumerate() {
            match r {
                Ok(Some(m)) => println!(
                    "packet {}: pattern {} `{}` ends at payload byte {}",
                    i + 1,
                    m.pattern,
                    dfa.patterns.get(m.pattern).map_or("?", String::as_str),
                    m.end
                ),
                Ok(None) => println!("packet {}: no match", i + 1),
                Err(e) => println!("packet {}: VM fault: {e}", i + 1),
            }
        }
        let matched: usize = per_pattern.iter().sum();
        println!(
            "{} packets, {matched} matched, {faults} faulted",
            results.len()
        );
    }
    Ok(if faults > 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}
