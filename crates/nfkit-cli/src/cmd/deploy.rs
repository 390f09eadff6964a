//! `nfkit deploy SCRIPT --dev IFACE [--hook H] [--mode static|dynamic]`,
//! `nfkit deploy FILE.o --dev IFACE [--section NAME] [--type xdp|tc]`,
//! `nfkit status [--json]`, `nfkit undeploy [--dev IFACE]`: chains on
//! real interfaces through pinned bpf_links (see `nfkit_kernel::deploy`).
//! Pins live under /sys/fs/bpf/nfkit (`NFKIT_PIN_ROOT`), the state file
//! in /run/nfkit (`NFKIT_STATE_DIR`). With nfkitd running (see
//! [`super::daemon`]) scripts and objects are deployed, listed and
//! removed through it, with the same output.

use anyhow::Context;
use nfkit_abi::AttachPoint;
use nfkit_control::deploy::{deploy_script, DeploySpec, Deployed, Mode};
use nfkit_control::ControlError;
use nfkit_control::{deploy_object, ObjectSpec};
use nfkit_kernel::deploy::{self, Paths};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--hook`: where to attach.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum HookArg {
    /// XDP in the driver (native).
    Xdp,
    /// XDP in the generic (skb) path.
    XdpGeneric,
    /// TC ingress.
    TcIngress,
    /// TC egress.
    TcEgress,
}

impl From<HookArg> for AttachPoint {
    fn from(h: HookArg) -> AttachPoint {
        match h {
            HookArg::Xdp => AttachPoint::Xdp,
            HookArg::XdpGeneric => AttachPoint::XdpGeneric,
            HookArg::TcIngress => AttachPoint::TcIngress,
            HookArg::TcEgress => AttachPoint::TcEgress,
        }
    }
}

/// `--mode`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ModeArg {
    /// Classifier, chains and NFs linked into one program.
    Static,
    /// NFs loaded once and kept; a chain change loads only the chain's
    /// segments and switches it with one prog-array update.
    Dynamic,
}

#[derive(clap::Args)]
pub struct Args {
    /// The chain script (.chain or .py), or an eBPF ELF object whose
    /// program (`--section`) is deployed as it is.
    script: PathBuf,
    /// Interface to attach to (default: the script's attach("IFACE", ...)).
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// The named network namespace (`ip netns`) IFACE is in. Prefer this
    /// to `ip netns exec`, whose fresh /sys hides the bpffs pins.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Where to attach (default: the script's attach(), else xdp or
    /// tc-ingress by the script's hook).
    #[arg(long, value_enum)]
    hook: Option<HookArg>,
    /// static or dynamic.
    #[arg(long, value_enum, default_value = "static")]
    mode: ModeArg,
    /// A pipeline script's output devices (repeat for each): its `post`
    /// program runs at TC egress of each (with --hook tc-ingress).
    #[arg(long = "post-dev", value_name = "IFACE")]
    post_dev: Vec<String>,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
    /// Object only: the program to deploy, by section or function name
    /// (default: the only one).
    #[arg(long, value_name = "NAME")]
    section: Option<String>,
    /// Object only: take programs of sections whose name gives no type
    /// (`xdp_foo`, `prog`) as this type, as libbpf's explicit program
    /// type does.
    #[arg(long = "type", value_enum)]
    prog_type: Option<super::RunType>,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

/// Does `bytes` start like an ELF file?
fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// `nfkit deploy FILE.o`: one program of an object.
fn deploy_elf(a: &Args, shown: &str, bytes: &[u8]) -> anyhow::Result<Deployed> {
    let image = super::read_image(bytes, shown, a.prog_type)?;
    let entry = super::run::pick_entry(&image, a.section.as_deref())?;
    let Some(dev) = a.dev.as_deref() else {
        anyhow::bail!("{shown}: no interface: give --dev IFACE");
    };
    let source_path = std::fs::canonicalize(&a.script).unwrap_or(a.script.clone());
    let spec = ObjectSpec {
        file: shown,
        image: &image,
        entry: &image.entries[entry].name,
        source_path: &source_path.display().to_string(),
        dev,
        netns: a.netns.as_deref(),
        attach: a.hook.map(AttachPoint::from),
    };
    Ok(deploy_object(&Paths::from_env(), &spec)?)
}

/// Compiles a script for `hook`, printing warnings and errors to stderr;
/// `None` when the script has errors.
pub fn compile_script(
    file: &str,
    source: &str,
    nf_path: &[String],
    hook: Option<nfkit_nf::Hook>,
) -> anyhow::Result<Option<nfkit_lang::Compiled>> {
    let search = nfkit_nf::SearchPath::from_env(nf_path);
    match nfkit_control::deploy::compile(file, source, &search, hook) {
        Ok(c) => {
            eprint!("{}", nfkit_lang::diag::render(&c.warnings));
            Ok(Some(c))
        }
        Err(ControlError::Script(d)) => {
            eprintln!("{d}");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let shown = a.script.display().to_string();
    let bytes = std::fs::read(&a.script).with_context(|| format!("reading {shown}"))?;
    if is_elf(&bytes) {
        if let Some(c) = a.daemon.client()? {
            return deploy_elf_via(&c, &a, &shown, bytes);
        }
        let done = deploy_elf(&a, &shown, &bytes)?;
        return report(&a, &shown, &done);
    }
    if a.section.is_some() || a.prog_type.is_some() {
        anyhow::bail!("{shown}: --section and --type are for eBPF objects, not scripts");
    }
    let source = String::from_utf8(bytes).with_context(|| format!("reading {shown}"))?;
    let source_path = std::fs::canonicalize(&a.script).unwrap_or(a.script.clone());
    let source_path = source_path.display().to_string();
    if let Some(c) = a.daemon.client()? {
        return deploy_via(&c, &a, &shown, source, source_path);
    }
    let spec = DeploySpec {
        file: &shown,
        source: &source,
        source_path: &source_path,
        dev: a.dev.as_deref(),
        netns: a.netns.as_deref(),
        attach: a.hook.map(AttachPoint::from),
        mode: match a.mode {
            ModeArg::Static => Mode::Static,
            ModeArg::Dynamic => Mode::Dynamic,
        },
        search: nfkit_nf::SearchPath::from_env(&a.nf_path),
        post_devs: &a.post_dev,
    };
    let done = match deploy_script(&Paths::from_env(), &spec) {
        Ok(d) => d,
        Err(ControlError::Script(d)) => {
            eprintln!("{d}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    report(&a, &shown, &done)
}

/// Prints what a deploy did (text or `--json`) and its warnings.
fn report(a: &Args, shown: &str, done: &Deployed) -> anyhow::Result<ExitCode> {
    let out = &done.outcome;
    print_deployed(
        a.json,
        shown,
        &nfkit_lang::diag::render(&done.warnings),
        &done.notes,
        &Outcome {
            deployment: &out.deployment,
            swapped: out.swapped,
            reused_maps: &out.reused_maps,
            load_us: out.load_time.as_micros() as u64,
            switch_us: out.switch_time.as_micros() as u64,
            load_ms: out.load_time.as_secs_f64() * 1e3,
            switch_ms: out.switch_time.as_secs_f64() * 1e3,
            posts: &done.posts,
        },
    )
}

/// What a deploy did, from the deployer or from nfkitd's reply.
struct Outcome<'a> {
    deployment: &'a deploy::Deployment,
    swapped: bool,
    reused_maps: &'a [String],
    load_us: u64,
    switch_us: u64,
    load_ms: f64,
    switch_ms: f64,
    /// A pipeline's `post` programs (TC egress of its output devices).
    posts: &'a [nfkit_kernel::deploy::DeployOutcome],
}

/// Prints a deploy's outcome: warnings on stderr, then text or JSON.
fn print_deployed(
    json: bool,
    shown: &str,
    warnings: &str,
    notes: &[String],
    out: &Outcome<'_>,
) -> anyhow::Result<ExitCode> {
    eprint!("{warnings}");
    for n in notes {
        eprintln!("warning: {n}");
    }
    let d = out.deployment;
    if json {
        let v = json!({
            "deployment": d,
            "swapped": out.swapped,
            "reused_maps": out.reused_maps,
            "load_us": out.load_us,
            "switch_us": out.switch_us,
            "warnings": notes,
            "posts": out.posts.iter().map(|p| &p.deployment).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{} {} on {} ({}, {}): link {} prog {} generation {}",
            if out.swapped { "swapped" } else { "deployed" },
            shown,
            d.dev,
            d.hook.name(),
            attach_text(d),
            d.link_id,
            d.prog_id,
            d.generation
        );
        if !out.reused_maps.is_empty() {
            println!("  maps kept: {}", out.reused_maps.join(", "));
        }
        print_dynamic(d);
        for p in out.posts {
            let p = &p.deployment;
            println!(
                "  post on {} ({}, {}): prog {}",
                p.dev,
                p.hook.name(),
                attach_text(p),
                p.prog_id
            );
        }
        println!(
            "  load+attach {:.3} ms, switch {:.3} ms",
            out.load_ms, out.switch_ms
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `nfkit deploy FILE.o` through nfkitd: the object is read here first
/// (the same errors as directly), then sent with the program's name.
fn deploy_elf_via(
    c: &nfkit_daemon::Client,
    a: &Args,
    shown: &str,
    bytes: Vec<u8>,
) -> anyhow::Result<ExitCode> {
    use nfkit_daemon::proto;
    let image = super::read_image(&bytes, shown, a.prog_type)?;
    let entry = super::run::pick_entry(&image, a.section.as_deref())?;
    if a.dev.is_none() {
        anyhow::bail!("{shown}: no interface: give --dev IFACE");
    }
    let source_path = std::fs::canonicalize(&a.script).unwrap_or(a.script.clone());
    let script = proto::ScriptSource {
        kind: Some(proto::script_source::Kind::Object(proto::ObjectFile {
            file: shown.to_string(),
            elf: bytes,
            entry: image.entries[entry].name.clone(),
            prog_type: a
                .prog_type
                .map(|t| match t {
                    super::RunType::Xdp => "xdp",
                    super::RunType::Tc => "tc",
                    super::RunType::Socket => "socket",
                })
                .unwrap_or_default()
                .to_string(),
            source_path: source_path.display().to_string(),
        })),
    };
    send_deploy(c, a, shown, script)
}

/// `nfkit deploy SCRIPT` through nfkitd.
fn deploy_via(
    c: &nfkit_daemon::Client,
    a: &Args,
    shown: &str,
    source: String,
    source_path: String,
) -> anyhow::Result<ExitCode> {
    use nfkit_daemon::proto;
    if !a.nf_path.is_empty() {
        anyhow::bail!(
            "--nf-path is not sent to nfkitd (it reads NFs from its own nf_path); \
             configure it there, or NFKIT_DAEMON=off to deploy directly"
        );
    }
    let script = proto::ScriptSource {
        kind: Some(proto::script_source::Kind::Inline(proto::InlineScript {
            file: shown.to_string(),
            source,
            source_path,
        })),
    };
    send_deploy(c, a, shown, script)
}

/// Sends a deploy of `script` to nfkitd and prints what it did.
fn send_deploy(
    c: &nfkit_daemon::Client,
    a: &Args,
    shown: &str,
    script: nfkit_daemon::proto::ScriptSource,
) -> anyhow::Result<ExitCode> {
    use nfkit_daemon::proto::{self, deployment_service_client::DeploymentServiceClient};
    let req = proto::DeployRequest {
        script: Some(script),
        dev: a.dev.clone().unwrap_or_default(),
        netns: a.netns.clone().unwrap_or_default(),
        attach: a.hook.map_or(0, |h| {
            nfkit_daemon::validate::attach_wire(AttachPoint::from(h))
        }),
        mode: match a.mode {
            ModeArg::Static => proto::DeployMode::Static,
            ModeArg::Dynamic => proto::DeployMode::Dynamic,
        } as i32,
        post_devs: a.post_dev.clone(),
    };
    let r = match c.block_on(DeploymentServiceClient::new(c.channel()).deploy(req)) {
        Ok(r) => r.into_inner(),
        Err(s) if super::daemon::is_script_error(&s) => {
            eprint!("{}", s.message());
            if !s.message().ends_with('\n') {
                eprintln!();
            }
            return Ok(ExitCode::from(1));
        }
        Err(s) => return Err(super::daemon::status_error(s)),
    };
    let pd = r
        .deployment
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("nfkitd's reply has no deployment"))?;
    let d = nfkit_daemon::client::record(pd)?;
    let posts = r
        .posts
        .iter()
        .map(|p| {
            Ok(nfkit_kernel::deploy::DeployOutcome {
                deployment: nfkit_daemon::client::record(p)?,
                swapped: false,
                reused_maps: Vec::new(),
                load_time: Default::default(),
                switch_time: Default::default(),
            })
        })
        .collect::<Result<Vec<_>, nfkit_daemon::client::ClientError>>()?;
    print_deployed(
        a.json,
        shown,
        &r.warnings_rendered,
        &r.notes,
        &Outcome {
            deployment: &d,
            swapped: r.swapped,
            reused_maps: &r.reused_maps,
            load_us: r.load_us,
            switch_us: r.switch_us,
            load_ms: r.load_us as f64 / 1e3,
            posts: &posts,
            switch_ms: r.switch_us as f64 / 1e3,
        },
    )
}

/// Dynamic mode: the NFs kept loaded and the running segments.
fn print_dynamic(d: &deploy::Deployment) {
    let Some(r) = &d.dynamic else {
        return;
    };
    let nfs: Vec<String> = r
        .nfs
        .iter()
        .map(|n| format!("{} (slot {}, prog {})", n.entry, n.slot, n.prog_id))
        .collect();
    if !nfs.is_empty() {
        println!("  NFs: {}", nfs.join(", "));
    }
    let segs: Vec<String> = r
        .segments
        .iter()
        .map(|(s, slot)| format!("{s}@{slot}"))
        .collect();
    println!("  segments (bank {}): {}", r.bank, segs.join(" "));
}

/// How a deployment is attached, in words: `via xdp-link`, `via tcx`,
/// `via clsact (handle 1 pref 49152, qdisc made by nfkit)`.
fn attach_text(d: &deploy::Deployment) -> String {
    let kind = nfkit_kernel::tc::attach_kind(d.hook, &d.attach);
    match d.attach {
        nfkit_kernel::tc::Attach::Clsact {
            handle,
            priority,
            qdisc_created,
        } => format!(
            "via {kind} (handle {handle:#x} pref {priority}, qdisc {})",
            if qdisc_created {
                "made by nfkit"
            } else {
                "not nfkit's"
            }
        ),
        nfkit_kernel::tc::Attach::Link => format!("via {kind}"),
    }
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

pub fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    if let Some(c) = a.daemon.client()? {
        use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
        use nfkit_daemon::proto::ListDeploymentsRequest;
        let r = c
            .block_on(
                DeploymentServiceClient::new(c.channel())
                    .list_deployments(ListDeploymentsRequest {}),
            )
            .map_err(super::daemon::status_error)?
            .into_inner();
        let rows = r
            .deployments
            .iter()
            .map(nfkit_daemon::client::StatusRow::from_reply)
            .collect::<Result<Vec<_>, _>>()?;
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({ "deployments": rows }))?
            );
            return Ok(ExitCode::SUCCESS);
        }
        let shown: Vec<Shown<'_>> = rows
            .iter()
            .map(|r| Shown {
                d: &r.deployment,
                attached: r.attached,
                live_prog_id: r.live_prog_id,
                verdicts: r
                    .verdicts
                    .iter()
                    .map(|c| (c.chain.as_str(), &c.counts))
                    .collect(),
            })
            .collect();
        print_status(&shown);
        return Ok(ExitCode::SUCCESS);
    }
    let mut st = nfkit_control::status::status(&Paths::from_env())?;
    // Packets flower rules decided never reached the program: their
    // folded counts go into the deployment's counters.
    let offload_state = super::offload::state_path();
    for ds in st.iter_mut() {
        let d = &ds.status.deployment;
        let add = nfkit_kernel::netns::in_netns(d.netns.as_deref(), || {
            Ok(nfkit_offload::fold::installed_verdict_additions(
                &offload_state,
                &d.dev,
                d.netns.as_deref(),
            ))
        });
        match add {
            Ok(Ok(add)) => add_folded(&mut ds.verdicts, &d.chains, &add),
            Ok(Err(e)) => eprintln!("warning: {}: offloaded rules' counts not read: {e}", d.dev),
            Err(e) => eprintln!("warning: {}: offloaded rules' counts not read: {e}", d.dev),
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "deployments": st }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let shown: Vec<Shown<'_>> = st
        .iter()
        .map(|ds| Shown {
            d: &ds.status.deployment,
            attached: ds.status.attached,
            live_prog_id: ds.status.live_prog_id,
            verdicts: ds
                .verdicts
                .iter()
                .map(|c| (c.chain.as_str(), &c.counts))
                .collect(),
        })
        .collect();
    print_status(&shown);
    Ok(ExitCode::SUCCESS)
}

/// Adds what offloaded rules decided (`add`) to the chains' counters.
pub fn add_folded(
    verdicts: &mut Vec<nfkit_kernel::stats::ChainCounters>,
    chains: &[String],
    add: &[nfkit_offload::fold::VerdictAddition],
) {
    for (chain, column, packets) in nfkit_offload::fold::by_chain(add, chains) {
        let pos = match verdicts.iter().position(|c| c.chain == chain) {
            Some(p) => p,
            None => {
                verdicts.push(nfkit_kernel::stats::ChainCounters {
                    chain,
                    counts: Default::default(),
                });
                verdicts.len() - 1
            }
        };
        let n = verdicts[pos].counts.entry(column).or_default();
        *n = n.wrapping_add(packets);
    }
}

/// One deployment as `status` prints it.
struct Shown<'a> {
    d: &'a deploy::Deployment,
    attached: bool,
    live_prog_id: u32,
    verdicts: Vec<(&'a str, &'a std::collections::BTreeMap<String, u64>)>,
}

fn print_status(st: &[Shown<'_>]) {
    if st.is_empty() {
        println!("nothing deployed");
    }
    for s in st {
        let d = s.d;
        let dev = match &d.netns {
            Some(ns) => format!("{} (netns {ns})", d.dev),
            None => d.dev.clone(),
        };
        println!(
            "{} {} {}: {} (entry {}) {} link {} prog {} {} generation {}",
            dev,
            d.hook.name(),
            d.mode,
            d.source,
            d.entry,
            attach_text(d),
            d.link_id,
            s.live_prog_id,
            if s.attached { "attached" } else { "DETACHED" },
            d.generation
        );
        print_dynamic(d);
        for (chain, counts) in &s.verdicts {
            let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
            println!("  chain {}: {}", chain, counts.join(", "));
        }
        for m in &d.maps {
            println!(
                "  map {} {} key {} value {} max {}",
                m.name,
                m.map_type,
                m.key_type.as_deref().unwrap_or("?"),
                m.value_type.as_deref().unwrap_or("?"),
                m.max_entries
            );
        }
    }
}

#[derive(clap::Args)]
pub struct UndeployArgs {
    /// Only this interface (default: everything nfkit deployed).
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

pub fn undeploy(a: UndeployArgs) -> anyhow::Result<ExitCode> {
    let gone = match a.daemon.client()? {
        Some(c) => {
            use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
            use nfkit_daemon::proto::UndeployRequest;
            let r = c
                .block_on(
                    DeploymentServiceClient::new(c.channel()).undeploy(UndeployRequest {
                        dev: a.dev.clone().unwrap_or_default(),
                    }),
                )
                .map_err(super::daemon::status_error)?
                .into_inner();
            r.removed
                .iter()
                .map(nfkit_daemon::client::record)
                .collect::<Result<Vec<_>, _>>()?
        }
        None => nfkit_control::status::undeploy(&Paths::from_env(), a.dev.as_deref())?,
    };
    if gone.is_empty() {
        println!("nothing to undeploy");
    }
    for d in &gone {
        println!("undeployed {} {} ({})", d.dev, d.hook.name(), d.source);
    }
    Ok(ExitCode::SUCCESS)
}
