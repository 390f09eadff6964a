//! Deploying one program of a plain eBPF object (not a chain script) on
//! a kernel hook: `nfkit deploy FILE.o --dev IFACE [--section NAME]
//! [--type xdp|tc]`. The object's Image (CO-RE resolved, maps created or
//! kept across a redeploy) goes through the same deployer as scripts, so
//! `status`, `undeploy`, `map` and live swaps work the same way.

use crate::deploy::{attach_notes, Deployed};
use crate::error::ControlError;
use crate::maps::MapInfo;
use nfkit_abi::{AttachPoint, Hook};
use nfkit_kernel::deploy::{self as kdeploy, DeployRequest, MapDesc, Paths};
use nfkit_object::{Image, ProgType};

/// Which program of which object to deploy, and where.
pub struct ObjectSpec<'a> {
    /// The object's name in messages.
    pub file: &'a str,
    /// The object, read (with `--type` applied to sections whose name
    /// gives no type).
    pub image: &'a Image,
    /// The entry program to attach (a name of `image.entries`).
    pub entry: &'a str,
    /// What `status` records as the deployed source (a canonical path).
    pub source_path: &'a str,
    pub dev: &'a str,
    pub netns: Option<&'a str>,
    /// `--hook`; `None`: native XDP for XDP programs, TC ingress for TC.
    pub attach: Option<AttachPoint>,
}

/// The hook a program of type `t` attaches to on an interface.
fn hook_of(t: ProgType) -> Option<Hook> {
    match t {
        ProgType::Xdp => Some(Hook::Xdp),
        ProgType::SchedCls | ProgType::SchedAct => Some(Hook::Tc),
        ProgType::SocketFilter => Some(Hook::Socket),
        _ => None,
    }
}

/// Loads and attaches `spec.entry` (a live swap when something is
/// deployed on the same device and hook already).
pub fn deploy_object(paths: &Paths, spec: &ObjectSpec<'_>) -> Result<Deployed, ControlError> {
    let file = spec.file;
    let entry = spec
        .image
        .entries
        .iter()
        .find(|e| e.name == spec.entry)
        .ok_or_else(|| ControlError::NoProgram {
            file: file.to_string(),
            name: spec.entry.to_string(),
        })?;
    let hook = hook_of(entry.prog_type).ok_or_else(|| ControlError::ProgramType {
        file: file.to_string(),
        name: entry.name.clone(),
        prog_type: entry.prog_type.name().to_string(),
    })?;
    if hook == Hook::Socket {
        return Err(ControlError::SocketScript(format!(
            "{file}: program '{}'",
            entry.name
        )));
    }
    let attach = spec
        .attach
        .unwrap_or_else(|| AttachPoint::default_for(hook));
    if attach.hook() != hook {
        return Err(ControlError::AttachPoint {
            file: format!("{file}: program '{}'", entry.name),
            hook,
            attach,
        });
    }
    let descs = map_descs(spec.image);
    let req = DeployRequest {
        image: spec.image,
        entry: &entry.name,
        map_writes: &[],
        dev: spec.dev,
        netns: spec.netns,
        hook: attach,
        source: spec.source_path,
        dynamic: None,
        chains: &[],
        map_descs: &descs,
        post_of: None,
    };
    let outcome = kdeploy::deploy(paths, &req).map_err(|e| ControlError::Kernel {
        file: file.to_string(),
        cause: Box::new(e),
    })?;
    Ok(Deployed {
        outcome,
        attach,
        warnings: Vec::new(),
        notes: attach_notes(spec.dev, spec.netns, attach),
        posts: Vec::new(),
    })
}

/// Typed map keys and values from the object's BTF, for `nfkit map`.
fn map_descs(image: &Image) -> Vec<MapDesc> {
    image
        .maps
        .iter()
        .filter_map(|spec| {
            let info = MapInfo::from_spec(spec, image.btf.as_ref(), None);
            Some(MapDesc {
                name: spec.name.clone(),
                key: serde_json::to_string(&info.key).ok()?,
                value: serde_json::to_string(&info.value).ok()?,
            })
        })
        .collect()
}
