//! `nfkit nf list [--json]`, `nfkit nf show NAME` and `nfkit nf add
//! FILE.o`: the NF catalogue (embedded, plus users' objects found
//! through `--nf-path` and `NFKIT_NF_PATH`) with each NF's
//! documentation and disassembly, and adding a user's object to it.
//! Through nfkitd when one runs (see [`super::daemon`]): the daemon's
//! catalogue, and `nf add` registers the object with the daemon.

use anyhow::{bail, Context as _};
use nfkit_nf::SearchPath;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List every NF with its module, arguments, return values and maps.
    List(ListArgs),
    /// Show an NF's documentation and the disassembly of its function.
    Show(ShowArgs),
    /// Add an NF object (clang -target bpf) to an NF directory, or
    /// register it with nfkitd: scripts can then import its NFs.
    Add(AddArgs),
}

#[derive(clap::Args)]
pub struct AddArgs {
    /// The ELF object.
    object: PathBuf,
    /// The module scripts import as `nf.MODULE` (default: the file's stem).
    #[arg(long)]
    module: Option<String>,
    /// The hook this build is for (xdp, tc, socket); default: every
    /// hook its NFs fit.
    #[arg(long)]
    hook: Option<String>,
    /// Its C source with NF doc blocks (default: FILE.c beside the
    /// object, when there).
    #[arg(long, value_name = "FILE.c")]
    source: Option<PathBuf>,
    /// Directly: the NF directory to add it to (default: the first
    /// directory of NFKIT_NF_PATH).
    #[arg(long, value_name = "DIR")]
    to: Option<PathBuf>,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
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
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
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
        Command::Add(a) => add(a),
    }
}

fn list(a: ListArgs) -> anyhow::Result<ExitCode> {
    if let Some(c) = a.daemon.client()? {
        use nfkit_daemon::proto::{nf_service_client::NfServiceClient, ListNfsRequest};
        if !a.path.nf_path.is_empty() {
            bail!(
                "--nf-path is not sent to nfkitd (it reads NFs from its own nf_path); \
                 NFKIT_DAEMON=off lists NFs directly"
            );
        }
        let r = c
            .block_on(NfServiceClient::new(c.channel()).list_nfs(ListNfsRequest {}))
            .map_err(super::daemon::status_error)?
            .into_inner();
        if a.json {
            println!("{}", r.json);
        } else {
            print!("{}", r.text);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let path = SearchPath::from_env(&a.path.nf_path);
    let all = path.list_all(true)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        print!("{}", nfkit_daemon::nf_text::list(&all));
    }
    Ok(ExitCode::SUCCESS)
}

fn add(a: AddArgs) -> anyhow::Result<ExitCode> {
    let shown = a.object.display().to_string();
    let object = std::fs::read(&a.object).with_context(|| format!("reading {shown}"))?;
    let stem = a
        .object
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let module = a.module.clone().unwrap_or_else(|| stem.to_string());
    let source_file = a
        .source
        .clone()
        .or_else(|| Some(a.object.with_extension("c")).filter(|p| p.is_file()));
    let source = match &source_file {
        Some(p) => {
            Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?)
        }
        None => None,
    };
    if let Some(c) = a.daemon.client()? {
        use nfkit_daemon::proto::{nf_service_client::NfServiceClient, RegisterNfRequest};
        if a.to.is_some() {
            bail!("--to is for adding directly; nfkitd keeps registered NFs in its own directory");
        }
        let r = c
            .block_on(
                NfServiceClient::new(c.channel()).register_nf(RegisterNfRequest {
                    module,
                    hook: a.hook.clone().unwrap_or_default(),
                    object,
                    source: source.unwrap_or_default(),
                    file: shown,
                }),
            )
            .map_err(super::daemon::status_error)?
            .into_inner();
        print!("{}", r.text);
        return Ok(ExitCode::SUCCESS);
    }
    let hook = a
        .hook
        .as_deref()
        .map(str::parse::<nfkit_nf::Hook>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--hook: {e}"))?;
    let dir = match &a.to {
        Some(d) => d.clone(),
        None => std::env::var(nfkit_nf::NF_PATH_ENV)
            .ok()
            .and_then(|v| v.split(':').find(|p| !p.is_empty()).map(PathBuf::from))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no NF directory: give --to DIR or set NFKIT_NF_PATH (or start nfkitd, \
                     which keeps registered NFs itself)"
                )
            })?,
    };
    let added =
        nfkit_daemon::nf_store::add(&dir, &module, hook, &object, source.as_deref(), &shown)?;
    let names: Vec<String> = added.nfs.iter().map(|d| d.name.clone()).collect();
    print!(
        "{}",
        nfkit_daemon::nf_store::Added::text(
            &added.module,
            &added.path.display().to_string(),
            added.unchanged,
            &names
        )
    );
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
