//! `nfkit graph SCRIPT|--deployed [-o FILE] [--format dot|svg]`: the
//! classifier → chains → NFs → maps graph of a script, or of every
//! deployment (one cluster per device and hook), as Graphviz DOT; SVG
//! through Graphviz's `dot` program when it is installed.
//!
//! Nodes: the classifier (a diamond), chains (rounded boxes), NFs
//! (components), maps (cylinders; an NF's own maps dashed). Edges: the
//! classifier's entries to their chains (labelled with the key), calls,
//! and map accesses (`reads`, `writes`, `uses` for an NF's maps).

use anyhow::{bail, Context as _};
use nfkit_lang::ir::{self, walk, ClsKey, ExprKind, StmtKind};
use nfkit_nf::SearchPath;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The chain script (.chain or .py).
    #[arg(required_unless_present = "deployed", conflicts_with = "deployed")]
    script: Option<PathBuf>,
    /// Graph what is deployed (through nfkitd when it runs).
    #[arg(long)]
    deployed: bool,
    /// Write here (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// `dot` (default) or `svg` (needs Graphviz's `dot` program).
    #[arg(long, value_enum, default_value = "dot")]
    format: Format,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Svg,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let search = SearchPath::from_env(&a.nf_path);
    let mut g = Dot::default();
    match &a.script {
        Some(script) => {
            let shown = script.display().to_string();
            let source =
                std::fs::read_to_string(script).with_context(|| format!("reading {shown}"))?;
            // A script's errors are printed as `nfkit check` prints them.
            let p = match check(&shown, &source, &search) {
                Ok(p) => p,
                Err(d) => {
                    eprintln!("{d}");
                    return Ok(ExitCode::from(1));
                }
            };
            script_graph(&mut g, "", &p, &search);
        }
        None => deployed_graph(&mut g, &a.daemon, &search)?,
    }
    let text = g.render(&match &a.script {
        Some(s) => format!("nfkit graph {}", s.display()),
        None => "nfkit graph --deployed".into(),
    });
    let out = match a.format {
        Format::Dot => text.into_bytes(),
        Format::Svg => svg(&text)?,
    };
    match &a.output {
        Some(f) => std::fs::write(f, &out).with_context(|| format!("writing {}", f.display()))?,
        None => {
            use std::io::Write as _;
            std::io::stdout().write_all(&out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The checked script, or its diagnostic.
fn check(
    file: &str,
    source: &str,
    search: &SearchPath,
) -> Result<ir::Program, Box<nfkit_lang::Diagnostic>> {
    let opts = nfkit_lang::Options {
        search: search.clone(),
        hook: None,
    };
    nfkit_lang::check(file, source, &opts).map(|c| c.program)
}

/// `dot -Tsvg` of `text`.
fn svg(text: &str) -> anyhow::Result<Vec<u8>> {
    use std::io::Write as _;
    let mut child = match std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "--format svg needs Graphviz's `dot` program, which is not installed \
             (apt-get install graphviz); --format dot writes the graph without it"
        ),
        Err(e) => return Err(e).context("running dot"),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(text.as_bytes()).context("writing to dot")?;
    }
    let out = child.wait_with_output().context("running dot")?;
    if !out.status.success() {
        bail!(
            "dot -Tsvg failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// A DOT graph being built: nodes (id → attributes) and edges, in the
/// order added, each once; clusters of node ids.
#[derive(Default)]
struct Dot {
    nodes: Vec<(String, String)>,
    seen: BTreeSet<String>,
    edges: BTreeMap<(String, String), BTreeSet<String>>,
    edge_order: Vec<(String, String)>,
    clusters: Vec<(String, Vec<String>)>,
}

/// A DOT quoted string.
fn q(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl Dot {
    fn node(&mut self, id: &str, label: &str, attrs: &str) {
        if self.seen.insert(id.to_string()) {
            self.nodes
                .push((id.to_string(), format!("label={}, {attrs}", q(label))));
            if let Some(c) = self.clusters.last_mut() {
                c.1.push(id.to_string());
            }
        }
    }

    /// An edge; a second one between the same nodes adds its label.
    fn edge(&mut self, from: &str, to: &str, label: &str) {
        let k = (from.to_string(), to.to_string());
        if !self.edges.contains_key(&k) {
            self.edge_order.push(k.clone());
        }
        let e = self.edges.entry(k).or_default();
        if !label.is_empty() {
            e.insert(label.to_string());
        }
    }

    fn render(&self, title: &str) -> String {
        let mut in_cluster = BTreeSet::new();
        for (_, ids) in &self.clusters {
            in_cluster.extend(ids.iter().cloned());
        }
        let attrs: BTreeMap<&str, &str> = self
            .nodes
            .iter()
            .map(|(i, a)| (i.as_str(), a.as_str()))
            .collect();
        let mut o = String::new();
        let _ = writeln!(o, "// {title}");
        o.push_str("digraph nfkit {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=11];\n  edge [fontname=\"Helvetica\", fontsize=9];\n");
        for (i, (name, ids)) in self.clusters.iter().enumerate() {
            let _ = writeln!(o, "  subgraph cluster_{i} {{\n    label={};", q(name));
            for id in ids {
                let _ = writeln!(o, "    {} [{}];", q(id), attrs[id.as_str()]);
            }
            o.push_str("  }\n");
        }
        for (id, a) in &self.nodes {
            if !in_cluster.contains(id) {
                let _ = writeln!(o, "  {} [{a}];", q(id));
            }
        }
        for k in &self.edge_order {
            let labels = &self.edges[k];
            let label = labels.iter().cloned().collect::<Vec<_>>().join(", ");
            let _ = if label.is_empty() {
                writeln!(o, "  {} -> {};", q(&k.0), q(&k.1))
            } else {
                writeln!(o, "  {} -> {} [label={}];", q(&k.0), q(&k.1), q(&label))
            };
        }
        o.push_str("}\n");
        o
    }
}

/// `10.0.0.0/8`, `port 80`, `dscp 46`, `every packet`.
fn key_text(k: &ClsKey) -> String {
    match k {
        ClsKey::All => "every packet".into(),
        ClsKey::Ipv4 { addr, prefix } => format!("{}/{prefix}", std::net::Ipv4Addr::from(*addr)),
        ClsKey::Ipv6 { addr, prefix } => format!("{}/{prefix}", std::net::Ipv6Addr::from(*addr)),
        ClsKey::Port(p) => format!("port {p}"),
        ClsKey::Dscp(d) => format!("dscp {d}"),
    }
}

/// `DROP`, `REDIRECT(7)`, or the number.
fn verdict_text(v: u64) -> String {
    match nfkit_abi::verdict::decode(v) {
        Some((a, arg)) if a.takes_arg() => format!("{}({arg})", a.name()),
        Some((a, _)) => a.name().to_string(),
        None => v.to_string(),
    }
}

/// What one chain's body calls and touches.
#[derive(Default)]
struct Uses {
    nfs: BTreeSet<usize>,
    chains: BTreeSet<usize>,
    reads: BTreeSet<usize>,
    writes: BTreeSet<usize>,
}

impl walk::Visit for Uses {
    fn visit_stmt(&mut self, s: &ir::Stmt) {
        match &s.kind {
            StmtKind::MapSet { map, .. }
            | StmtKind::MapRmw { map, .. }
            | StmtKind::MapDel { map, .. } => {
                self.writes.insert(*map);
            }
            _ => {}
        }
        walk::walk_stmt(self, s)
    }

    fn visit_expr(&mut self, e: &ir::Expr) {
        match &e.kind {
            ExprKind::CallNf { nf, .. } => {
                self.nfs.insert(*nf);
            }
            ExprKind::CallChain { chain, .. } => {
                self.chains.insert(*chain);
            }
            ExprKind::MapGet { map, .. } | ExprKind::MapHas { map, .. } => {
                self.reads.insert(*map);
            }
            _ => {}
        }
        walk::walk_expr(self, e)
    }
}

/// Adds the graph of `p` to `g`; node ids start with `prefix` (one per
/// deployment, so that two deployments' maps stay apart).
fn script_graph(g: &mut Dot, prefix: &str, p: &ir::Program, search: &SearchPath) {
    let chain_id = |i: usize| format!("{prefix}chain:{}", p.chains[i].name);
    let map_id = |name: &str| format!("{prefix}map:{name}");
    let nf_id = |n: &ir::NfRef| format!("{prefix}nf:{}.{}", n.module, n.name);
    if let Some(c) = &p.classifier {
        let cid = format!("{prefix}classifier:{}", c.name);
        g.node(
            &cid,
            &format!("classifier {}", c.name),
            "shape=diamond, style=filled, fillcolor=\"#fde9c9\"",
        );
        for (key, ch) in &c.entries {
            g.node(
                &chain_id(*ch),
                &format!("chain {}", p.chains[*ch].name),
                "shape=box, style=rounded",
            );
            g.edge(&cid, &chain_id(*ch), &key_text(key));
        }
        let did = format!("{prefix}default");
        g.node(
            &did,
            &format!(
                "unclaimed: {}\nfault: {}",
                verdict_text(c.default),
                verdict_text(c.fault)
            ),
            "shape=note",
        );
        g.edge(&cid, &did, "otherwise");
    }
    for m in &p.maps {
        g.node(
            &map_id(&m.name),
            &format!("{}\n{:?} {}", m.name, m.map_type, m.size),
            "shape=cylinder",
        );
    }
    for (i, ch) in p.chains.iter().enumerate() {
        g.node(
            &chain_id(i),
            &format!("chain {}", ch.name),
            "shape=box, style=rounded",
        );
        let mut u = Uses::default();
        walk::walk_block(&mut u, &ch.body);
        for c in &u.chains {
            g.edge(&chain_id(i), &chain_id(*c), "calls");
        }
        for n in &u.nfs {
            let nf = &p.nfs[*n];
            g.node(
                &nf_id(nf),
                &format!("NF {}.{}", nf.module, nf.name),
                "shape=component, style=filled, fillcolor=\"#dcebf7\"",
            );
            g.edge(&chain_id(i), &nf_id(nf), "calls");
        }
        for m in &u.reads {
            g.edge(&chain_id(i), &map_id(&p.maps[*m].name), "reads");
        }
        for m in &u.writes {
            g.edge(&chain_id(i), &map_id(&p.maps[*m].name), "writes");
        }
    }
    // The maps each NF uses, from its documentation.
    for nf in &p.nfs {
        if !g.seen.contains(&nf_id(nf)) {
            continue;
        }
        let Ok(Some(doc)) = search.find(&nf.module, &nf.name) else {
            continue;
        };
        for m in &doc.maps {
            g.node(&map_id(m), m, "shape=cylinder, style=dashed");
            g.edge(&nf_id(nf), &map_id(m), "uses");
        }
    }
}

/// One deployment: where, its script (when still readable) or what its
/// record says.
fn deployment_graph(
    g: &mut Dot,
    d: &nfkit_kernel::deploy::Deployment,
    search: &SearchPath,
    notes: &mut Vec<String>,
) {
    let where_ = match &d.netns {
        Some(ns) => format!("{} (netns {ns}) {}", d.dev, d.hook.name()),
        None => format!("{} {}", d.dev, d.hook.name()),
    };
    let prefix = format!("{where_}/");
    g.clusters.push((
        format!(
            "{where_}: {} ({:?}, generation {})",
            d.source, d.mode, d.generation
        ),
        Vec::new(),
    ));
    let script = Path::new(&d.source);
    let program = std::fs::read_to_string(script)
        .ok()
        .filter(|_| {
            script
                .extension()
                .is_some_and(|x| x == "py" || x == "chain")
        })
        .map(|src| check(&d.source, &src, search));
    match program {
        Some(Ok(p)) => script_graph(g, &prefix, &p, search),
        other => {
            if let Some(Err(e)) = other {
                notes.push(format!("{where_}: {}: {e}", d.source));
            }
            // From the record: the entry, its chains, its maps.
            let eid = format!("{prefix}classifier:{}", d.entry);
            g.node(
                &eid,
                &format!("entry {}", d.entry),
                "shape=diamond, style=filled, fillcolor=\"#fde9c9\"",
            );
            for c in &d.chains {
                let cid = format!("{prefix}chain:{c}");
                g.node(&cid, &format!("chain {c}"), "shape=box, style=rounded");
                g.edge(&eid, &cid, "");
            }
            for m in &d.maps {
                let mid = format!("{prefix}map:{}", m.name);
                g.node(&mid, &m.name, "shape=cylinder");
                g.edge(&eid, &mid, "uses");
            }
        }
    }
}

/// Every deployment, each in a cluster: through nfkitd when it runs,
/// else from nfkit's state.
fn deployed_graph(
    g: &mut Dot,
    daemon: &super::daemon::DaemonArg,
    search: &SearchPath,
) -> anyhow::Result<()> {
    let deployments: Vec<nfkit_kernel::deploy::Deployment> = match daemon.client()? {
        Some(c) => {
            use nfkit_daemon::proto::deployment_service_client::DeploymentServiceClient;
            use nfkit_daemon::proto::ListDeploymentsRequest;
            let r = c
                .block_on(
                    DeploymentServiceClient::new(c.channel())
                        .list_deployments(ListDeploymentsRequest {}),
                )
                .map_err(super::daemon::status_error)?
                .into_inner();
            r.deployments
                .iter()
                .map(nfkit_daemon::client::record)
                .collect::<Result<_, _>>()?
        }
        None => nfkit_control::status::status(&nfkit_kernel::deploy::Paths::from_env())?
            .into_iter()
            .map(|s| s.status.deployment)
            .collect(),
    };
    let mut notes = Vec::new();
    for d in &deployments {
        deployment_graph(g, d, search, &mut notes);
    }
    for n in notes {
        eprintln!("warning: {n} (graphed from the deployment record)");
    }
    if deployments.is_empty() {
        eprintln!("nothing is deployed: the graph is empty");
    }
    Ok(())
}
