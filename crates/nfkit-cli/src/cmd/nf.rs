//! `nfkit nf list [--json]` and `nfkit nf show NAME`: the NF catalogue
//! (embedded, plus users' objects found through `--nf-path` and
//! `NFKIT_NF_PATH`) with each NF's documentation and disassembly
//! (`nf show` through nfkitd when one runs, see [`super::daemon`]).

use anyhow::bail;
use nfkit_nf::{Hook, NfKind, SearchPath};
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List every NF with its module, arguments, return values and maps.
    List(ListArgs),
    /// Show an NF's documentation and the disassembly of its function.
    Show(ShowArgs),
}

#[derive(clap::Args)]
pub struct PathArgs {
    /// Extra NF directories (colon-separated, searched before
    /// NFKIT_NF_PATH and the built-in catalogue) holding <module>.<hook>.o
    /// or <module>.o files.
    #[arg(long = "nf-path", value_name = "DIRS")]
    nf_path: Vec<String>,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Print JSON (an array of NFs and classifiers) instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    path: PathArgs,
}

#[derive(clap::Args)]
pub struct ShowArgs {
    /// The NF: `tb_dst`, `meter.tb_dst` or `nf.meter.tb_dst`.
    name: String,
    /// Hook of the build to disassemble (xdp, tc, socket); default: the NF's first.
    #[arg(long)]
    hook: Option<String>,
    #[command(flatten)]
    path: PathArgs,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::List(a) => list(a),
        Command::Show(a) => show(a),
    }
}

fn hooks_text(hooks: &[Hook]) -> String {
    hooks.iter().map(|h| h.name()).collect::<Vec<_>>().join(" ")
}

fn maps_text(maps: &[String]) -> String {
    if maps.is_empty() {
        "none".to_string()
    } else {
        maps.join(", ")
    }
}

fn list(a: ListArgs) -> anyhow::Result<ExitCode> {
    let path = SearchPath::from_env(&a.path.nf_path);
    let all = path.list_all(true)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    let mut module = "";
    for kind in [NfKind::Nf, NfKind::Classifier] {
        if kind == NfKind::Classifier {
            out.push_str("\nclassifiers (entry programs that pick a chain per packet):\n");
            module = "";
        }
        for d in all.iter().filter(|d| d.kind == kind) {
            if d.module != module {
                module = &d.module;
                let origin = if d.origin == "embedded" {
                    String::new()
                } else {
                    format!("  ({})", d.origin)
                };
                let _ = writeln!(out, "{module}{origin}");
            }
            let _ = writeln!(out, "  {:<28} [{}]", d.signature(), hooks_text(&d.hooks));
            for arg in &d.args {
                if !arg.doc.is_empty() {
                    let _ = writeln!(out, "      {}: {}", arg.name, arg.doc);
                }
            }
            let _ = writeln!(out, "      returns: {}", d.returns);
            let _ = writeln!(out, "      maps: {}", maps_text(&d.maps));
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    if let Some(c) = a.daemon.client()? {
        use nfkit_daemon::proto::{nf_service_client::NfServiceClient, ShowNfRequest};
        if !a.path.nf_path.is_empty() {
            bail!(
                "--nf-path is not sent to nfkitd (it reads NFs from its own nf_path); \
                 NFKIT_DAEMON=off shows the NF directly"
            );
        }
        let r = c
            .block_on(NfServiceClient::new(c.channel()).show_nf(ShowNfRequest {
                name: a.name.clone(),
                hook: a.hook.clone().unwrap_or_default(),
            }))
            .map_err(super::daemon::status_error)?
            .into_inner();
        print!("{}", r.text);
        return Ok(ExitCode::SUCCESS);
    }
    let path = SearchPath::from_env(&a.path.nf_path);
    let (_, text) = nfkit_daemon::nf_text::show(&path, &a.name, a.hook.as_deref())?;
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
