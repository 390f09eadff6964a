//! Deploying a chain script on a kernel hook: the whole sequence —
//! compile, plan the `nfkit_progs` slots (dynamic mode), compile again
//! for those slots, load and attach — in one call.
//!
//! The attach point is `--hook` if given, else the script's
//! `attach("IFACE", "HOOK")`, else the default of the script's hook (XDP:
//! native, TC: ingress). A native-XDP deploy on a veth whose peer has no
//! XDP program gets a warning: frames it sends with REDIRECT or TX are
//! dropped silently there.

use crate::error::ControlError;
use crate::maps::MapInfo;
use nfkit_abi::{AttachPoint, Hook};
use nfkit_kernel::deploy::{self as kdeploy, DeployOutcome, DeployRequest, MapDesc, Paths};
use nfkit_kernel::dynamic::DynParts;
use nfkit_lang::{Compiled, Diagnostic, DynSlots, Options};
use nfkit_nf::SearchPath;

/// Static (one program) or dynamic (NFs loaded once, chains switched by
/// one prog-array update).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Static,
    Dynamic,
}

impl Mode {
    /// `static` or `dynamic`, as the state file and the CLI say it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::Dynamic => "dynamic",
        }
    }
}

/// What to deploy and where.
pub struct DeploySpec<'a> {
    /// The script's name in messages.
    pub file: &'a str,
    /// The script's text.
    pub source: &'a str,
    /// What `status` records as the deployed source (a canonical path).
    pub source_path: &'a str,
    /// The interface; `None`: the script's `attach(...)`.
    pub dev: Option<&'a str>,
    /// The named network namespace of the interface.
    pub netns: Option<&'a str>,
    /// `--hook`; `None`: the script's `attach(...)`, else the hook's default.
    pub attach: Option<AttachPoint>,
    pub mode: Mode,
    pub search: SearchPath,
    /// A pipeline's output devices, where its `post` program runs at TC
    /// egress (a TC ingress deploy only; none: `post` is not attached).
    pub post_devs: &'a [String],
}

/// What a deploy did, and what the user should know.
pub struct Deployed {
    pub outcome: DeployOutcome,
    /// Where it is attached.
    pub attach: AttachPoint,
    /// The script's warnings.
    pub warnings: Vec<Diagnostic>,
    /// Warnings about the deployment itself (targets that cannot work).
    pub notes: Vec<String>,
    /// A pipeline's `post` program at TC egress of each output device.
    pub posts: Vec<DeployOutcome>,
}

/// The attach point a script's `attach(IFACE, HOOK)` names.
pub fn script_attach(c: &Compiled) -> Option<ScriptAttach> {
    let (dev, hook) = c.program.attach.as_ref()?;
    let at = match hook.as_str() {
        "tc" => AttachPoint::TcIngress,
        h => h.parse().ok()?,
    };
    Some(ScriptAttach {
        dev: dev.clone(),
        at,
    })
}

/// Where a script's `attach("IFACE", "HOOK")` says to deploy it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptAttach {
    pub dev: String,
    pub at: AttachPoint,
}

/// A script compiled for dynamic mode, with what the deployer needs.
struct DynBuild {
    /// (NF symbol, dynamic entry, slot), as [`DynParts`] takes them.
    nfs: Vec<(String, String, u32)>,
    /// (segment program, slot).
    segments: Vec<(String, u32)>,
    bank: u32,
    compiled: nfkit_lang::DynCompiled,
}

/// Compiles `source` for `hook` (`None`: the script's own).
pub fn compile(
    file: &str,
    source: &str,
    search: &SearchPath,
    hook: Option<Hook>,
) -> Result<Compiled, ControlError> {
    let opts = Options {
        search: search.clone(),
        hook,
    };
    nfkit_lang::compile(file, source, &opts).map_err(script_error)
}

fn script_error(e: nfkit_lang::CompileError) -> ControlError {
    match e {
        nfkit_lang::CompileError::Script(d) => ControlError::Script(d),
        e => ControlError::Compile(e),
    }
}

/// Compiles, plans and deploys `spec` (a live swap when something is
/// deployed on the same device and hook already).
pub fn deploy_script(paths: &Paths, spec: &DeploySpec<'_>) -> Result<Deployed, ControlError> {
    let file = spec.file;
    let c = compile(
        file,
        spec.source,
        &spec.search,
        spec.attach.map(AttachPoint::hook),
    )?;
    if c.hook == Hook::Socket {
        return Err(ControlError::SocketScript(file.to_string()));
    }
    if c.hook == Hook::Switch {
        return Err(ControlError::SwitchScript(file.to_string()));
    }
    let scripted = script_attach(&c);
    let attach = spec
        .attach
        .or_else(|| scripted.as_ref().map(|s| s.at))
        .unwrap_or_else(|| AttachPoint::default_for(c.hook));
    if attach.hook() != c.hook {
        return Err(ControlError::AttachPoint {
            file: file.to_string(),
            hook: c.hook,
            attach,
        });
    }
    let dev = match (spec.dev, &scripted) {
        (Some(d), _) => d.to_string(),
        (None, Some(s)) => s.dev.clone(),
        (None, None) => return Err(ControlError::NoDevice(file.to_string())),
    };
    let entry = c
        .entry()
        .ok_or_else(|| ControlError::NoClassifier(file.to_string()))?
        .to_string();
    let kernel = |source| ControlError::Kernel {
        file: file.to_string(),
        cause: Box::new(source),
    };
    let writes = c.control_plane();
    let chains = c.program.chain_names();
    let dynamic = match spec.mode {
        Mode::Static => None,
        Mode::Dynamic => {
            let plan = nfkit_kernel::dynamic::next_slots(paths, &dev, attach).map_err(kernel)?;
            let slots = DynSlots {
                nfs: plan.nfs,
                seg_first: plan.seg_first,
                seg_end: plan.seg_end,
                ..DynSlots::default()
            };
            let opts = Options {
                search: spec.search.clone(),
                hook: Some(c.hook),
            };
            let d = nfkit_lang::compile_dynamic(file, spec.source, &opts, &slots)
                .map_err(script_error)?;
            Some(DynBuild {
                nfs: d.nf_entries(),
                segments: d.segments(),
                bank: plan.bank,
                compiled: d,
            })
        }
    };
    let notes = attach_notes(&dev, spec.netns, attach);
    let image = dynamic.as_ref().map_or(&c.image, |d| &d.compiled.image);
    let descs = map_descs(image, &c.program);
    let req = DeployRequest {
        image,
        entry: dynamic
            .as_ref()
            .map_or(entry.as_str(), |d| d.compiled.entry.as_str()),
        map_writes: &writes,
        dev: &dev,
        netns: spec.netns,
        hook: attach,
        source: spec.source_path,
        dynamic: dynamic.as_ref().map(|d| DynParts {
            nfs: &d.nfs,
            segments: &d.segments,
            bank: d.bank,
        }),
        chains: &chains,
        map_descs: &descs,
        post_of: None,
    };
    let outcome = kdeploy::deploy(paths, &req).map_err(kernel)?;
    let mut notes = notes;
    let posts = deploy_posts(paths, spec, &c, &outcome.deployment, &mut notes)?;
    Ok(Deployed {
        outcome,
        attach,
        warnings: c.warnings,
        notes,
        posts,
    })
}

/// A pipeline's `post` position in the kernel (docs/language.md,
/// "Pipelines"): the post program, compiled for TC, attached at TC
/// egress of every output device (`post_devs`; the ingress at TC: frames
/// XDP redirects skip TC egress) with the ingress deployment's maps;
/// the post programs of an earlier deploy on devices no longer listed
/// (all, when the script has no `post`) are removed.
fn deploy_posts(
    paths: &Paths,
    spec: &DeploySpec<'_>,
    c: &Compiled,
    ingress: &kdeploy::Deployment,
    notes: &mut Vec<String>,
) -> Result<Vec<DeployOutcome>, ControlError> {
    let file = spec.file;
    let kernel = |source| ControlError::Kernel {
        file: file.to_string(),
        cause: Box::new(source),
    };
    let opts = Options {
        search: spec.search.clone(),
        hook: Some(Hook::Tc),
    };
    let post = nfkit_lang::pipeline::post_of(c, &opts).map_err(script_error)?;
    let Some(post) = post else {
        kdeploy::undeploy_posts(paths, &ingress.key(), &[]).map_err(kernel)?;
        return Ok(Vec::new());
    };
    let xdp = matches!(ingress.hook, AttachPoint::Xdp | AttachPoint::XdpGeneric);
    if spec.post_devs.is_empty() || xdp {
        notes.push(if xdp {
            "`post` is not attached: it runs at TC egress, which the frames an XDP program \
             redirects skip; deploy at tc-ingress (--hook tc-ingress) with --post-dev for \
             every output device"
                .to_string()
        } else {
            "`post` is not attached: name the pipeline's output devices with --post-dev IFACE"
                .to_string()
        });
        kdeploy::undeploy_posts(paths, &ingress.key(), &[]).map_err(kernel)?;
        return Ok(Vec::new());
    }
    let devs = spec.post_devs;
    let entry = post
        .entry()
        .ok_or_else(|| ControlError::NoClassifier(file.to_string()))?
        .to_string();
    let writes = post.control_plane();
    let chains = post.program.chain_names();
    let descs = map_descs(&post.image, &post.program);
    let source = format!("{} (post)", spec.source_path);
    let mut out = Vec::new();
    for dev in devs {
        let req = DeployRequest {
            image: &post.image,
            entry: &entry,
            map_writes: &writes,
            dev,
            netns: spec.netns,
            hook: AttachPoint::TcEgress,
            source: &source,
            dynamic: None,
            chains: &chains,
            map_descs: &descs,
            post_of: Some(ingress),
        };
        out.push(kdeploy::deploy(paths, &req).map_err(kernel)?);
    }
    kdeploy::undeploy_posts(paths, &ingress.key(), devs).map_err(kernel)?;
    Ok(out)
}

/// The typed descriptions of every map's key and value in `image`, from
/// the script's declarations and the image's BTF, for `nfkit map`.
fn map_descs(image: &nfkit_object::Image, program: &nfkit_lang::ir::Program) -> Vec<MapDesc> {
    image
        .maps
        .iter()
        .filter_map(|spec| {
            let decl = program.maps.iter().find(|d| d.name == spec.name);
            let info = MapInfo::from_spec(spec, image.btf.as_ref(), decl);
            Some(MapDesc {
                name: spec.name.clone(),
                key: serde_json::to_string(&info.key).ok()?,
                value: serde_json::to_string(&info.value).ok()?,
            })
        })
        .collect()
}

/// Warnings about where a program is attached: native XDP on a veth
/// whose peer has no XDP program drops the frames the program sends with
/// REDIRECT or TX (generic XDP does not).
pub fn attach_notes(dev: &str, netns: Option<&str>, attach: AttachPoint) -> Vec<String> {
    if attach != AttachPoint::Xdp {
        return Vec::new();
    }
    let Some(link) = ip_link(netns, dev) else {
        return Vec::new();
    };
    if link.kind.as_deref() != Some("veth") {
        return Vec::new();
    }
    let peer = match (link.peer_index, link.peer_elsewhere) {
        (Some(i), false) => ip_links(netns).into_iter().find(|l| l.index == i),
        _ => None,
    };
    if peer.as_ref().is_some_and(|p| p.has_xdp) {
        return Vec::new();
    }
    let whose = match &peer {
        Some(p) => format!("its peer `{}` has no XDP program", p.name),
        None => "its peer may have no XDP program (it is in another namespace)".to_string(),
    };
    vec![format!(
        "native XDP on veth `{dev}`: {whose}; frames this chain sends with REDIRECT or TX \
         toward a veth without an XDP program are dropped silently. Use xdp-generic \
         (--hook xdp-generic, or attach(\"{dev}\", \"xdp-generic\")) or give the peer an \
         XDP program"
    )]
}

/// What `ip -d -j link` says of an interface.
struct Link {
    index: u32,
    name: String,
    kind: Option<String>,
    peer_index: Option<u32>,
    peer_elsewhere: bool,
    has_xdp: bool,
}

fn ip_links(netns: Option<&str>) -> Vec<Link> {
    ip_link_json(netns, None)
}

fn ip_link(netns: Option<&str>, dev: &str) -> Option<Link> {
    ip_link_json(netns, Some(dev)).into_iter().next()
}

/// `ip [-n NS] -d -j link show [dev DEV]`, parsed; empty when `ip` fails.
fn ip_link_json(netns: Option<&str>, dev: Option<&str>) -> Vec<Link> {
    let mut cmd = std::process::Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    cmd.args(["-d", "-j", "link", "show"]);
    if let Some(d) = dev {
        cmd.args(["dev", d]);
    }
    let Ok(out) = cmd.output() else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
        return Vec::new();
    };
    let Some(links) = v.as_array() else {
        return Vec::new();
    };
    links
        .iter()
        .map(|l| Link {
            index: l["ifindex"].as_u64().unwrap_or(0) as u32,
            name: l["ifname"].as_str().unwrap_or("").to_string(),
            kind: l["linkinfo"]["info_kind"].as_str().map(str::to_string),
            peer_index: l["link_index"].as_u64().map(|i| i as u32),
            peer_elsewhere: l.get("link_netnsid").is_some(),
            has_xdp: l.get("xdp").is_some(),
        })
        .collect()
}
