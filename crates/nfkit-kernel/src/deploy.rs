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
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// The state file records an attach point by its name (`xdp-generic`).
mod attach_point_name {
    use super::AttachPoint;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(a: &AttachPoint, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(a.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AttachPoint, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Where nfkit keeps its pins and its state file.
#[derive(Clone, Debug)]
pub struct Paths {
    /// bpffs directory holding one directory per device.
    pub pin_root: PathBuf,
    /// The JSON state file.
    pub state_file: PathBuf,
}

impl Paths {
    /// The defaults (`/sys/fs/bpf/nfkit`, `/run/nfkit/state.json`),
    /// overridden by `NFKIT_PIN_ROOT` and `NFKIT_STATE_DIR` (tests use
    /// their own, so they never touch a real deployment).
    pub fn from_env() -> Paths {
        let pin_root = std::env::var_os("NFKIT_PIN_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(crate::PIN_DIR));
        let dir = std::env::var_os("NFKIT_STATE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/run/nfkit"));
        Paths {
            pin_root,
            state_file: dir.join("state.json"),
        }
    }

    /// Makes sure the pin root exists (mounting bpffs for the default).
    fn prepare(&self) -> Result<(), KernelError> {
        if self.pin_root == Path::new(crate::PIN_DIR) {
            let mnt = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
            let private = mnt("self").is_some() && mnt("self") != mnt("1");
            if private && !crate::bpffs::is_bpffs(Path::new(crate::BPFFS)) {
                return Err(KernelError::Bpffs {
                    path: crate::BPFFS.into(),
                    msg: "not bpffs in this mount namespace (ip netns exec?): pins made \
                          here would vanish with this process; run from the host with \
                          --netns NAME, or set NFKIT_PIN_ROOT to a bpffs mount the host sees"
                        .into(),
                });
            }
            crate::ensure_bpffs()?;
        }
        std::fs::create_dir_all(&self.pin_root).map_err(|e| KernelError::File {
            what: "create",
            path: self.pin_root.clone(),
            source: e,
        })
    }
}

/// A pinned map of a deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapRecord {
    pub name: String,
    pub pin: PathBuf,
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    /// BTF names of the key and value types, when known (`u16`, `u32`, ...).
    pub key_type: Option<String>,
    pub value_type: Option<String>,
    /// Typed descriptions of key and value for display and parsing
    /// (nfkit-control's `maps::ValueType`, JSON text), set by whoever
    /// deploys; absent in older state files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_desc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_desc: Option<String>,
}

/// One deployment, as the state file records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub dev: String,
    /// The named network namespace of `dev` (`ip netns`), if not ours.
    #[serde(default)]
    pub netns: Option<String>,
    pub ifindex: u32,
    #[serde(with = "attach_point_name")]
    pub hook: AttachPoint,
    pub mode: String,
    /// The script (or object) deployed.
    pub source: String,
    /// The entry program's name.
    pub entry: String,
    /// The deployment's directory on bpffs.
    pub pin_dir: PathBuf,
    pub link_id: u32,
    pub prog_id: u32,
    /// How many times this device/hook was deployed (1 = first).
    pub generation: u32,
    /// Unix time of the last deploy, in seconds.
    pub deployed_at: u64,
    pub maps: Vec<MapRecord>,
    /// How it is attached (bpf_link, or a clsact filter for TC hooks).
    #[serde(default)]
    pub attach: crate::tc::Attach,
    /// Dynamic mode: what sits in `nfkit_progs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<crate::dynamic::DynRecord>,
    /// The script's chains by chain id (statistics slot - 1), as the
    /// deploy request named them; names for `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<String>,
}

impl Deployment {
    fn link_pin(&self) -> PathBuf {
        self.pin_dir.join("link")
    }
}

/// The state file: every deployment nfkit made.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub deployments: Vec<Deployment>,
}

impl State {
    /// Reads the state file (empty when it does not exist).
    pub fn load(paths: &Paths) -> Result<State, KernelError> {
        let f = &paths.state_file;
        match std::fs::read_to_string(f) {
            Ok(s) => serde_json::from_str(&s).map_err(|source| KernelError::StateFile {
                path: f.clone(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(source) => Err(KernelError::File {
                what: "read state file",
                path: f.clone(),
                source,
            }),
        }
    }

    /// Writes the state file atomically (temporary file, rename); an
    /// empty state removes the file.
    pub fn save(&self, paths: &Paths) -> Result<(), KernelError> {
        let f = &paths.state_file;
        let err = |source: std::io::Error| KernelError::File {
            what: "write state file",
            path: f.clone(),
            source,
        };
        if self.deployments.is_empty() {
            return match std::fs::remove_file(f) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            };
        }
        if let Some(dir) = f.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = f.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|source| KernelError::StateFile {
            path: f.clone(),
            source,
        })?;
        std::fs::write(&tmp, text + "\n").map_err(err)?;
        std::fs::rename(&tmp, f).map_err(err)
    }

    /// The deployment on `dev`/`hook`, if any.
    pub fn find(&self, dev: &str, hook: AttachPoint) -> Option<&Deployment> {
        self.deployments
            .iter()
            .find(|d| d.dev == dev && d.hook == hook)
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
            source,
        }),
        _ => Ok(()),
    }
}

/// Opens the map pinned at `path` as `name`.
pub fn open_pinned_map(name: &str, path: &Path) -> Result<KMap, KernelError> {
    let h = MapHandle::from_pinned_path(path).map_err(|source| KernelError::MapOp {
        map: name.to_string(),
        op: "open pinned",
        source,
    })?;
    Ok(KMap::new(name, h))
}

fn btf_name(image: &Image, id: Option<u32>) -> Option<String> {
    let btf = image.btf.as_ref()?;
    let name = btf.c_type(id?);
    (!name.is_empty()).then_some(name)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
}

/// Deploys (or redeploys, swapping atomically) `req` and records it.
pub fn deploy(paths: &Paths, req: &DeployRequest<'_>) -> Result<DeployOutcome, KernelError> {
    paths.prepare()?;
    if let Some(ns) = req.netns {
        enter_netns(ns)?;
    }
    let ifindex = sys::if_nametoindex(req.dev).ok_or_else(|| KernelError::NoInterface {
        dev: req.dev.to_string(),
        netns: req.netns.map(str::to_string),
        elsewhere: netns_with_interface(req.dev),
    })?;
    let mut state = State::load(paths)?;
    let dir = paths
        .pin_root
        .join(pin_name(req.dev))
        .join(pin_dir_name(req.hook));
    let maps_dir = dir.join("maps");
    std::fs::create_dir_all(&maps_dir).map_err(|source| KernelError::File {
        what: "create",
        path: maps_dir.clone(),
        source,
    })?;
    let previous = state.find(req.dev, req.hook).cloned();

    let prev_dyn = previous.as_ref().and_then(|p| p.dynamic.as_ref());
    // Maps of the previous version with the same name and shape (from
    // dynamic to dynamic: every declared map, the prog array and the
    // classifier tables included, since loaded NFs keep using them).
    let mut reuse = Vec::new();
    if let Some(prev) = &previous {
        for spec in &req.image.maps {
            let shared = if req.dynamic.is_some() && prev_dyn.is_some() {
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
                && m.max_entries() == spec.max_entries
            {
                reuse.push(m);
            }
        }
    }
    let reused_maps: Vec<String> = reuse.iter().map(|m| m.name().to_string()).collect();
    let t0 = Instant::now();
    let plan = crate::dynamic::Plan::new(req, prev_dyn, &dir);
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
    for (map, key, value) in req.map_writes {
        let m = loaded.map(map).ok_or_else(|| KernelError::Missing {
            what: "map",
            name: map.clone(),
            why: "written by the control plane is not in the image",
        })?;
        m.update(key, value, 0)?;
    }

    // Pin the new maps and program before switching, so a failure
    // leaves the old version running.
    let mut records = Vec::new();
    for (spec, m) in req.image.maps.iter().zip(loaded.maps()) {
        let pin = maps_dir.join(pin_name(&spec.name));
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
            max_entries: spec.max_entries,
            key_type: btf_name(req.image, spec.key_type_id),
            value_type: btf_name(req.image, spec.value_type_id),
            key_desc: None,
            value_desc: None,
        });
    }
    // Pins of maps the new version no longer has.
    if let Some(prev) = &previous {
        for old in &prev.maps {
            if !records.iter().any(|r| r.pin == old.pin) {
                unpin(&old.pin)?;
            }
        }
    }
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

    let link_pin = dir.join("link");
    let link_path = path_str(&link_pin)?;
    let (attach_type, flags) =
        link_attach(req.hook).ok_or(KernelError::NotInterfaceHook(req.hook))?;
    let clsact = crate::tc::use_clsact(req.hook, previous.as_ref())?;
    let t1 = Instant::now();
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
    let (attach, link_id, prog_id, swapped) =
        if let (Some(prev), true) = (&previous, kept_prog.is_some()) {
            // The dynamic classifier stays attached: the chain change was
            // the prog-array update above.
            (prev.attach, prev.link_id, prev.prog_id, true)
        } else if clsact {
            let prev = previous.as_ref().map(|p| &p.attach);
            let c = crate::tc::attach_clsact(req.dev, ifindex, req.hook, prog_fd, prev)?;
            (c.attach, 0, c.prog_id, c.swapped)
        } else {
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
            let info = sys::link_info(link.as_raw_fd())
                .map_err(os(format!("info of link {}", link_path)))?;
            (crate::tc::Attach::Link, info.id, info.prog_id, swapped)
        };
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
            "dynamic"
        } else {
            "static"
        }
        .into(),
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
    let (gone, kept): (Vec<Deployment>, Vec<Deployment>) = state
        .deployments
        .into_iter()
        .partition(|d| dev.is_none_or(|x| d.dev == x));
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

    #[test]
    fn state_file_round_trips_and_empty_state_removes_it() {
        let dir = std::env::temp_dir().join(format!("nfkit-state-{}", std::process::id()));
        let paths = Paths {
            pin_root: dir.join("bpf"),
            state_file: dir.join("s").join("state.json"),
        };
        assert!(State::load(&paths).is_ok_and(|s| s.deployments.is_empty()));
        let d = Deployment {
            dev: "veth0".into(),
            netns: None,
            ifindex: 7,
            hook: AttachPoint::TcEgress,
            mode: "static".into(),
            source: "x.py".into(),
            entry: "every_packet".into(),
            pin_dir: dir.join("bpf/veth0/tc_egress"),
            link_id: 3,
            prog_id: 40,
            generation: 2,
            deployed_at: 1,
            maps: vec![],
            attach: crate::tc::Attach::Clsact {
                handle: 1,
                priority: 49152,
                qdisc_created: true,
            },
            dynamic: Some(crate::dynamic::DynRecord {
                classifier: "dyn_every_packet".into(),
                bank: 1,
                nfs: vec![crate::dynamic::DynNf {
                    symbol: "nf_count".into(),
                    entry: "dyn_count".into(),
                    slot: 64,
                    prog_id: 99,
                }],
                segments: vec![("c0s0_x".into(), 0), ("c0s1_x".into(), 640)],
            }),
            chains: vec!["count".into()],
        };
        let st = State {
            deployments: vec![d.clone()],
        };
        st.save(&paths).expect("save");
        let back = State::load(&paths).expect("load");
        assert_eq!(back.deployments, vec![d]);
        assert!(back.find("veth0", AttachPoint::TcEgress).is_some());
        assert!(back.find("veth0", AttachPoint::TcIngress).is_none());
        State::default().save(&paths).expect("save empty");
        assert!(!paths.state_file.exists());
        std::fs::write(&paths.state_file, "{not json").expect("write");
        let e = State::load(&paths).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("state file")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
