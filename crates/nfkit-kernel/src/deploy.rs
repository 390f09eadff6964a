//! Deployments: an Image's entry program attached to an interface
//! through a pinned bpf_link, its maps pinned next to it, and a JSON
//! state file, so that `status` and `undeploy` work after the deploying
//! process has exited.
//!
//! Layout on bpffs (names without '.', which bpffs refuses):
//! `<pin root>/<dev>/<hook>/{link,prog,maps/<map>}`. Redeploying on the
//! same device and hook loads the new program, reuses pinned maps of the
//! same name and shape, then swaps the program with `BPF_LINK_UPDATE`:
//! packets see either the old or the new program, never a mix.

use crate::error::KernelError;
use crate::load::{load_image, LoadOptions};
use crate::maps::KMap;
pub use crate::netns::enter_netns;
use crate::netns::netns_with_interface;
use crate::sys;
use libbpf_rs::MapHandle;
use nfkit_object::{Image, MapKind};
use serde::Serialize;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::state::unix_now;
pub use crate::state::{DeployMode, Deployment, MapRecord, Paths, State};
pub use nfkit_abi::AttachPoint;

/// `XDP_FLAGS_SKB_MODE` / `XDP_FLAGS_DRV_MODE`.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The directory of attach point `a` on bpffs (bpffs refuses '-').
fn pin_dir_name(a: AttachPoint) -> &'static str {
    match a {
        AttachPoint::Xdp => "xdp",
        AttachPoint::XdpGeneric => "xdp_generic",
        AttachPoint::TcIngress => "tc_ingress",
        AttachPoint::TcEgress => "tc_egress",
        AttachPoint::Socket => "socket",
    }
}

/// `(attach type, flags)` of a bpf_link at `a`; `None` for a socket,
/// which has no interface to attach to.
fn link_attach(a: AttachPoint) -> Option<(u32, u32)> {
    match a {
        AttachPoint::Xdp => Some((libbpf_sys::BPF_XDP, XDP_FLAGS_DRV_MODE)),
        AttachPoint::XdpGeneric => Some((libbpf_sys::BPF_XDP, XDP_FLAGS_SKB_MODE)),
        AttachPoint::TcIngress => Some((libbpf_sys::BPF_TCX_INGRESS, 0)),
        AttachPoint::TcEgress => Some((libbpf_sys::BPF_TCX_EGRESS, 0)),
        AttachPoint::Socket => None,
    }
}

/// What to deploy.
pub struct DeployRequest<'a> {
    pub image: &'a Image,
    /// The entry program to attach.
    pub entry: &'a str,
    /// Map writes to do before attaching: (map, key, value).
    pub map_writes: &'a [(String, Vec<u8>, Vec<u8>)],
    pub dev: &'a str,
    /// The named network namespace (`/run/netns/NAME`) `dev` lives in;
    /// the calling thread enters it (its mounts stay, so pins persist).
    pub netns: Option<&'a str>,
    pub hook: AttachPoint,
    /// What is deployed (a script path), for `status`.
    pub source: &'a str,
    /// Dynamic mode (`None`: static, `entry` is the whole program).
    pub dynamic: Option<crate::dynamic::DynParts<'a>>,
    /// The chains by chain id, for the per-chain counters of `status`
    /// (empty: shown as `chain N`).
    pub chains: &'a [String],
    /// Typed descriptions of map keys and values to record (maps not
    /// listed are shown by size).
    pub map_descs: &'a [MapDesc],
    /// A pipeline's `post` program: the ingress deployment whose state
    /// maps it uses (same name and shape; not recorded here, so `nfkit
    /// map` finds them once) and with which it is undeployed.
    pub post_of: Option<&'a Deployment>,
}

/// What a map's key and value mean, as the deployer describes them
/// (JSON text of nfkit-control's `maps::ValueType`), kept in the state
/// file for `nfkit map`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDesc {
    pub name: String,
    pub key: String,
    pub value: String,
}

/// What a deploy did.
#[derive(Clone, Debug)]
pub struct DeployOutcome {
    pub deployment: Deployment,
    /// The link existed and was updated (a live swap).
    pub swapped: bool,
    /// Maps reused from the previous version.
    pub reused_maps: Vec<String>,
    /// Time from the start of loading to the attach or link update.
    pub load_time: Duration,
    /// Time of the attach or link update alone.
    pub switch_time: Duration,
}

fn os(what: String) -> impl FnOnce(i32) -> KernelError {
    move |errno| KernelError::Os { what, errno }
}

/// bpffs refuses '.' in names; other characters are kept.
fn pin_name(name: &str) -> String {
    name.replace('.', "_")
}

fn path_str(p: &Path) -> Result<&str, KernelError> {
    p.to_str()
        .ok_or_else(|| KernelError::PathNotUtf8(p.to_path_buf()))
}

/// Removes a pin (a file on bpffs) if it exists.
fn unpin(p: &Path) -> Result<(), KernelError> {
    match std::fs::remove_file(p) {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => Err(KernelError::File {
            what: "remove pin",
            path: p.to_path_buf(),
            cause: source,
        }),
        _ => Ok(()),
    }
}

/// Opens the map pinned at `path` as `name`.
pub fn open_pinned_map(name: &str, path: &Path) -> Result<KMap, KernelError> {
    let h = MapHandle::from_pinned_path(path).map_err(|source| KernelError::MapOp {
        map: name.to_string(),
        op: "open pinned",
        cause: source,
    })?;
    Ok(KMap::new(name, h))
}

fn btf_name(image: &Image, id: Option<u32>) -> Option<String> {
    let btf = image.btf.as_ref()?;
    let name = btf.c_type(id?);
    (!name.is_empty()).then_some(name)
}

/// Is a map kept across versions when its name and shape match? State
/// maps are; global data (constants of one version), prog arrays (they
/// hold one version's programs) and the control-plane tables (written
/// for the new version before the swap: `nfkit_cls_*`, `nfkit_config`)
/// are not.
fn shared_across_versions(spec: &nfkit_object::MapSpec) -> bool {
    matches!(spec.kind, MapKind::Declared)
        && spec.map_type != nfkit_object::MapType::ProgArray
        && !spec.name.starts_with("nfkit_cls_")
        && spec.name != "nfkit_config"
        // Initial contents (DFA tables) belong to the version: a fresh
        // map takes the new ones at the atomic swap.
        && spec.data.is_none()
}

/// Maps of the previous version with the same name and shape (from
/// dynamic to dynamic: every declared map, the prog array and the
/// classifier tables included, since loaded NFs keep using them).
fn reusable_maps(req: &DeployRequest<'_>, previous: Option<&Deployment>) -> Vec<KMap> {
    if let Some(ingress) = req.post_of {
        return matching_maps(req, ingress, false);
    }
    let Some(prev) = previous else {
        return Vec::new();
    };
    let both_dynamic = req.dynamic.is_some() && prev.dynamic.is_some();
    matching_maps(req, prev, both_dynamic)
}

/// The maps pinned by `prev` that `req`'s image has with the same name
/// and shape (`all_declared`: every declared map, else the state maps).
fn matching_maps(req: &DeployRequest<'_>, prev: &Deployment, all_declared: bool) -> Vec<KMap> {
    let mut reuse = Vec::new();
    for spec in &req.image.maps {
        let shared = if all_declared {
            matches!(spec.kind, MapKind::Declared)
        } else {
            shared_across_versions(spec)
        };
        if !shared {
            continue;
        }
        let Some(rec) = prev.maps.iter().find(|m| m.name == spec.name) else {
            continue;
        };
        let Ok(m) = open_pinned_map(&spec.name, &rec.pin) else {
            continue;
        };
        if m.map_type() == spec.map_type
            && m.key_size() == spec.key_size
            && m.value_size() == spec.value_size
            && crate::maps::max_entries_of(spec).is_ok_and(|n| m.max_entries() == n)
        {
            reuse.push(m);
        }
    }
    reuse
}

/// Pins the loaded maps (the reused ones are pinned already), removes
/// the pins of maps the new version no longer has, and records them.
fn pin_maps(
    req: &DeployRequest<'_>,
    loaded: &crate::Loaded,
    maps_dir: &Path,
    reused_maps: &[String],
    previous: Option<&Deployment>,
) -> Result<Vec<MapRecord>, KernelError> {
    let mut records = Vec::new();
    for (spec, m) in req.image.maps.iter().zip(loaded.maps()) {
        if req.post_of.is_some() && reused_maps.contains(&spec.name) {
            // The ingress deployment's: pinned and recorded there.
            continue;
        }
        let pin = maps_dir.join(pin_name(&spec.name));
        let desc = req.map_descs.iter().find(|d| d.name == spec.name);
        if !reused_maps.contains(&spec.name) {
            unpin(&pin)?;
            m.pin(&pin)?;
        }
        records.push(MapRecord {
            name: spec.name.clone(),
            pin,
            map_type: format!("{:?}", spec.map_type),
            key_size: spec.key_size,
            value_size: spec.value_size,
            max_entries: m.max_entries(),
            key_type: btf_name(req.image, spec.key_type_id),
            value_type: btf_name(req.image, spec.value_type_id),
            key_desc: desc.map(|d| d.key.clone()),
            value_desc: desc.map(|d| d.value.clone()),
        });
    }
    if let Some(prev) = previous {
        for old in &prev.maps {
            if !records.iter().any(|r| r.pin == old.pin) {
                unpin(&old.pin)?;
            }
        }
    }
    Ok(records)
}

/// How the new version got attached.
struct Attached {
    attach: crate::tc::Attach,
    link_id: u32,
    prog_id: u32,
    /// An existing attachment was switched to the new program.
    swapped: bool,
}

/// Attaches `prog_fd` at the request's hook: nothing to do when the
/// dynamic classifier stays (`kept_classifier`: the switch was the
/// prog-array update), a clsact filter when tcx is not used, else a
/// pinned bpf_link, updated in place when one exists.
fn attach(
    req: &DeployRequest<'_>,
    ifindex: u32,
    prog_fd: i32,
    dir: &Path,
    previous: Option<&Deployment>,
    kept_classifier: bool,
) -> Result<Attached, KernelError> {
    if let (Some(prev), true) = (previous, kept_classifier) {
        return Ok(Attached {
            attach: prev.attach,
            link_id: prev.link_id,
            prog_id: prev.prog_id,
            swapped: true,
        });
    }
    let (attach_type, flags) =
        link_attach(req.hook).ok_or(KernelError::NotInterfaceHook(req.hook))?;
    if crate::tc::use_clsact(req.hook, previous)? {
        let prev = previous.map(|p| &p.attach);
        let c = crate::tc::attach_clsact(req.dev, ifindex, req.hook, prog_fd, prev)?;
        return Ok(Attached {
            attach: c.attach,
            link_id: 0,
            prog_id: c.prog_id,
            swapped: c.swapped,
        });
    }
    let link_pin = dir.join("link");
    let link_path = path_str(&link_pin)?;
    let create = || -> Result<std::os::fd::OwnedFd, KernelError> {
        let link =
            sys::link_create(prog_fd, ifindex as i32, attach_type, flags).map_err(os(format!(
                "attach `{}` to {} ({})",
                req.entry,
                req.dev,
                req.hook.name()
            )))?;
        sys::obj_pin(link.as_raw_fd(), link_path)
            .map_err(os(format!("pin link at {}", link_pin.display())))?;
        Ok(link)
    };
    let (link, swapped) = match sys::obj_get(link_path) {
        Ok(link) => match sys::link_update(link.as_raw_fd(), prog_fd) {
            Ok(()) => (link, true),
            // The pinned link lost its device (it was deleted and made
            // again): attach afresh.
            Err(libc::ENOLINK) => {
                drop(link);
                unpin(&link_pin)?;
                (create()?, false)
            }
            Err(errno) => {
                return Err(KernelError::Os {
                    what: format!("update link {}", link_pin.display()),
                    errno,
                })
            }
        },
        Err(_) => (create()?, false),
    };
    let info =
        sys::link_info(link.as_raw_fd()).map_err(os(format!("info of link {}", link_path)))?;
    Ok(Attached {
        attach: crate::tc::Attach::Link,
        link_id: info.id,
        prog_id: info.prog_id,
        swapped,
    })
}

/// Enters the request's namespace, finds its interface and makes the
/// pin directory of its hook: (ifindex, pin directory).
fn prepare(paths: &Paths, req: &DeployRequest<'_>) -> Result<(u32, PathBuf), KernelError> {
    paths.prepare()?;
    if let Some(ns) = req.netns {
        enter_netns(ns)?;
    }
    let ifindex = sys::if_nametoindex(req.dev).ok_or_else(|| KernelError::NoInterface {
        dev: req.dev.to_string(),
        netns: req.netns.map(str::to_string),
        elsewhere: netns_with_interface(req.dev),
    })?;
    let dir = paths
        .pin_root
        .join(pin_name(req.dev))
        .join(pin_dir_name(req.hook));
    let maps_dir = dir.join("maps");
    std::fs::create_dir_all(&maps_dir).map_err(|source| KernelError::File {
        what: "create",
        path: maps_dir,
        cause: source,
    })?;
    Ok((ifindex, dir))
}

/// Loads the new version (reusing `reuse`) and does the control plane's
/// map writes.
fn load_new(
    req: &DeployRequest<'_>,
    plan: &crate::dynamic::Plan,
    reuse: Vec<KMap>,
) -> Result<crate::Loaded, KernelError> {
    let opts = LoadOptions {
        entries: Some(plan.entries.clone()),
        reuse_maps: reuse,
        ..LoadOptions::default()
    };
    let loaded = if req.dynamic.is_some() {
        // The deployer fills nfkit_progs itself, in switching order.
        let mut image = req.image.clone();
        image.map_inits.clear();
        load_image(&image, &opts)?
    } else {
        load_image(req.image, &opts)?
    };
    for (map, key, value) in req.map_writes {
        let m = loaded.map(map).ok_or_else(|| KernelError::Missing {
            what: "map",
            name: map.clone(),
            why: "written by the control plane is not in the image",
        })?;
        m.update(key, value, 0)?;
    }
    Ok(loaded)
}

/// Deploys (or redeploys, swapping atomically) `req` and records it.
pub fn deploy(paths: &Paths, req: &DeployRequest<'_>) -> Result<DeployOutcome, KernelError> {
    let (ifindex, dir) = prepare(paths, req)?;
    let mut state = State::load(paths)?;
    let maps_dir = dir.join("maps");
    let previous = state.find(req.dev, req.hook).cloned();

    let prev_dyn = previous.as_ref().and_then(|p| p.dynamic.as_ref());
    let reuse = reusable_maps(req, previous.as_ref());
    let reused_maps: Vec<String> = reuse.iter().map(|m| m.name().to_string()).collect();
    let t0 = Instant::now();
    let plan = crate::dynamic::Plan::new(req, prev_dyn, &dir);
    let loaded = load_new(req, &plan, reuse)?;
    let kept_prog = plan
        .keep_classifier
        .then(|| crate::dynamic::pinned_prog(&dir.join("prog")))
        .transpose()?;
    let prog_fd = match (&kept_prog, loaded.prog(req.entry)) {
        (Some(fd), _) => fd.as_raw_fd(),
        (None, Some(p)) => p.fd(),
        (None, None) => {
            return Err(KernelError::Missing {
                what: "entry program",
                name: req.entry.to_string(),
                why: "is not in the image",
            })
        }
    };
    // Pin the new maps and program before switching, so a failure
    // leaves the old version running.
    let records = pin_maps(req, &loaded, &maps_dir, &reused_maps, previous.as_ref())?;
    let prog_pin = dir.join("prog");
    if kept_prog.is_none() {
        unpin(&prog_pin)?;
        sys::obj_pin(prog_fd, path_str(&prog_pin)?)
            .map_err(os(format!("pin program at {}", prog_pin.display())))?;
    }
    // Dynamic mode: NFs pinned, then nfkit_progs filled (NFs, later
    // segments, each chain's entry last: the switch).
    let t_switch = Instant::now();
    let dyn_record = match &req.dynamic {
        Some(d) => Some(crate::dynamic::install(
            &plan,
            d,
            req.entry,
            &loaded,
            prev_dyn,
            &dir,
            req.map_writes,
        )?),
        None => {
            crate::dynamic::remove_pins(&dir)?;
            None
        }
    };
    let dyn_switch = t_switch.elapsed();

    let t1 = Instant::now();
    let Attached {
        attach,
        link_id,
        prog_id,
        swapped,
    } = attach(
        req,
        ifindex,
        prog_fd,
        &dir,
        previous.as_ref(),
        kept_prog.is_some(),
    )?;
    let switch_time = if kept_prog.is_some() {
        dyn_switch
    } else {
        t1.elapsed()
    };
    let load_time = t0.elapsed();
    let deployment = Deployment {
        dev: req.dev.to_string(),
        netns: req.netns.map(str::to_string),
        ifindex,
        hook: req.hook,
        mode: if req.dynamic.is_some() {
            DeployMode::Dynamic
        } else {
            DeployMode::Static
        },
        source: req.source.to_string(),
        entry: req.entry.to_string(),
        pin_dir: dir,
        link_id,
        prog_id,
        generation: previous.as_ref().map_or(1, |p| p.generation + 1),
        deployed_at: unix_now(),
        maps: records,
        attach,
        dynamic: dyn_record,
        chains: req.chains.to_vec(),
        post_of: req.post_of.map(Deployment::key),
    };
    state
        .deployments
        .retain(|d| !(d.dev == req.dev && d.hook == req.hook));
    state.deployments.push(deployment.clone());
    state.save(paths)?;
    Ok(DeployOutcome {
        deployment,
        swapped,
        reused_maps,
        load_time,
        switch_time,
    })
}

/// A deployment as found now: the recorded state and what the kernel says.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    #[serde(flatten)]
    pub deployment: Deployment,
    /// The pinned link is there, runs a program and still has its device.
    pub attached: bool,
    /// The link's current program id (0 when not attached).
    pub live_prog_id: u32,
    /// `xdp-link`, `tcx` or `clsact`.
    pub attach_kind: &'static str,
}

/// Every recorded deployment, checked against its pins.
pub fn status(paths: &Paths) -> Result<Vec<Status>, KernelError> {
    let state = State::load(paths)?;
    Ok(state
        .deployments
        .into_iter()
        .map(|d| {
            let kind = crate::tc::attach_kind(d.hook, &d.attach);
            if let crate::tc::Attach::Clsact { .. } = d.attach {
                let live = crate::tc::clsact_prog_id(&d);
                return Status {
                    attached: live != 0,
                    live_prog_id: live,
                    attach_kind: kind,
                    deployment: d,
                };
            }
            let info = path_str(&d.link_pin())
                .ok()
                .and_then(|p| sys::obj_get(p).ok())
                .and_then(|fd| sys::link_info(fd.as_raw_fd()).ok());
            Status {
                attached: info.is_some_and(|i| i.prog_id != 0 && i.ifindex != 0),
                live_prog_id: info.map_or(0, |i| i.prog_id),
                attach_kind: kind,
                deployment: d,
            }
        })
        .collect())
}

/// Removes the deployments on `dev` (all when `None`): links (which
/// detaches the programs), pins and state entries. Returns what was removed.
pub fn undeploy(paths: &Paths, dev: Option<&str>) -> Result<Vec<Deployment>, KernelError> {
    let mut state = State::load(paths)?;
    let removed: Vec<String> = state
        .deployments
        .iter()
        .filter(|d| dev.is_none_or(|x| d.dev == x))
        .map(Deployment::key)
        .collect();
    // A pipeline's `post` programs go with their ingress deployment.
    let (gone, kept): (Vec<Deployment>, Vec<Deployment>) = std::mem::take(&mut state.deployments)
        .into_iter()
        .partition(|d| {
            removed.contains(&d.key()) || d.post_of.as_ref().is_some_and(|p| removed.contains(p))
        });
    remove(paths, state, gone, kept)
}

/// Removes the `post` deployments of the ingress deployment `ingress`
/// (`DEV/HOOK`) except those on `keep` (devices): a redeploy whose
/// script has fewer (or no) output devices with `post`.
pub fn undeploy_posts(
    paths: &Paths,
    ingress: &str,
    keep: &[String],
) -> Result<Vec<Deployment>, KernelError> {
    let mut state = State::load(paths)?;
    let (gone, kept): (Vec<Deployment>, Vec<Deployment>) = std::mem::take(&mut state.deployments)
        .into_iter()
        .partition(|d| d.post_of.as_deref() == Some(ingress) && !keep.contains(&d.dev));
    remove(paths, state, gone, kept)
}

/// Detaches and unpins `gone`, and saves `state` with `kept`.
fn remove(
    paths: &Paths,
    mut state: State,
    gone: Vec<Deployment>,
    kept: Vec<Deployment>,
) -> Result<Vec<Deployment>, KernelError> {
    crate::tc::undeploy_clsact(&gone, &kept)?;
    for d in &gone {
        for m in &d.maps {
            unpin(&m.pin)?;
        }
        unpin(&d.pin_dir.join("prog"))?;
        crate::dynamic::remove_pins(&d.pin_dir)?;
        unpin(&d.link_pin())?;
        for p in [d.pin_dir.join("maps"), d.pin_dir.clone()] {
            let _ = std::fs::remove_dir(&p);
        }
        if let Some(devdir) = d.pin_dir.parent() {
            let _ = std::fs::remove_dir(devdir);
        }
    }
    state.deployments = kept;
    state.save(paths)?;
    Ok(gone)
}

/// A deployed map found by name (and device when several have it).
pub fn find_map(
    paths: &Paths,
    name: &str,
    dev: Option<&str>,
) -> Result<(Deployment, MapRecord, KMap), KernelError> {
    find_map_at(paths, name, dev, None)
}

/// A deployed map found by name, device and hook (when several
/// deployments have it).
pub fn find_map_at(
    paths: &Paths,
    name: &str,
    dev: Option<&str>,
    hook: Option<AttachPoint>,
) -> Result<(Deployment, MapRecord, KMap), KernelError> {
    let state = State::load(paths)?;
    let hits: Vec<(&Deployment, &MapRecord)> = state
        .deployments
        .iter()
        .filter(|d| dev.is_none_or(|x| d.dev == x) && hook.is_none_or(|h| d.hook == h))
        .flat_map(|d| d.maps.iter().map(move |m| (d, m)))
        .filter(|(_, m)| m.name == name)
        .collect();
    match hits.as_slice() {
        [] => Err(KernelError::NoDeployedMap {
            name: name.to_string(),
            dev: dev.map(str::to_string),
            hook,
        }),
        [(d, m)] => {
            let k = open_pinned_map(name, &m.pin)?;
            Ok(((*d).clone(), (*m).clone(), k))
        }
        _ => Err(KernelError::AmbiguousMap {
            name: name.to_string(),
            places: hits
                .iter()
                .map(|(d, _)| format!("{} {}", d.dev, d.hook))
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_parse_by_their_names_only() {
        for h in AttachPoint::ALL {
            assert_eq!(h.name().parse::<AttachPoint>().ok(), Some(h));
            assert!(!pin_dir_name(h).contains('.'));
        }
        let e = "tc".parse::<AttachPoint>().err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("unknown hook `tc`")));
    }
}
