//! One module per top-level command (or command group).

pub mod asm;
pub mod bag;
pub mod check;
pub mod compile;
pub mod daemon;
pub mod deploy;
pub mod disasm;
pub mod dpi;
pub mod graph;
pub mod map;
pub mod nf;
pub mod object;
pub mod offload;
pub mod offload_check;
pub mod prog;
pub mod prog_vm;
pub mod recv;
pub mod rtl;
pub mod run;
pub mod run_script;
pub mod send;
pub mod switch;
pub mod switch_ctl;
pub mod switch_trace;
pub mod switch_via;
pub mod top;
pub mod vm;

use anyhow::anyhow;
use nfkit_abi::Hook;
use nfkit_object::{Image, ProgType, ReadErrorKind};

/// The hook a program type runs at, for its return codes
/// ([`Hook::code_name`], [`Hook::keeps_packet`]); `None` for types
/// nfkit does not run on packets.
pub fn hook_of(t: ProgType) -> Option<Hook> {
    match t {
        ProgType::Xdp => Some(Hook::Xdp),
        ProgType::SchedCls | ProgType::SchedAct => Some(Hook::Tc),
        ProgType::SocketFilter => Some(Hook::Socket),
        _ => None,
    }
}

/// A pcap error that names the file once: I/O errors name it already,
/// the others (bad magic, truncated record, ...) get it as a prefix.
pub fn pcap_error(path: &std::path::Path) -> impl Fn(nfkit_pcap::PcapError) -> anyhow::Error + '_ {
    move |e| match e {
        nfkit_pcap::PcapError::Io { .. } => anyhow::Error::new(e),
        e => anyhow::anyhow!("{}: {e}", path.display()),
    }
}

/// `--engine jit|interp` ([`nfkit_vm::Engine`]'s names): anything else
/// is a usage error that says what is accepted.
pub fn parse_engine(s: &str) -> Result<nfkit_vm::Engine, String> {
    s.parse()
}

/// `--type`: the type a program of an object is run as, whatever its
/// section's name says (libbpf's explicit program type).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunType {
    /// XDP (`struct xdp_md`).
    Xdp,
    /// TC classifier (`struct __sk_buff`, sched_cls).
    Tc,
    /// Socket filter (`struct __sk_buff`).
    Socket,
}

impl RunType {
    pub fn prog_type(self) -> ProgType {
        match self {
            RunType::Xdp => ProgType::Xdp,
            RunType::Tc => ProgType::SchedCls,
            RunType::Socket => ProgType::SocketFilter,
        }
    }
}

/// The Image of ELF object `bytes` (named `origin`). With `ty`, the
/// programs of sections whose name gives no type (`xdp_foo`, `prog`)
/// are of that type; without it, such a section's error says to give
/// `--type`.
pub fn read_image(bytes: &[u8], origin: &str, ty: Option<RunType>) -> anyhow::Result<Image> {
    Image::from_elf_as(bytes, origin, ty.map(RunType::prog_type)).map_err(|e| {
        let unknown = matches!(
            &e,
            nfkit_object::Error::Read { cause, .. }
                if matches!(cause.kind, ReadErrorKind::UnknownSection(_))
        );
        if unknown {
            anyhow!("{e}; run its programs as one type with --type xdp|tc|socket")
        } else {
            anyhow::Error::new(e)
        }
    })
}

/// Every map of `image` after a VM run, as `run --json` shows them
/// ([`nfkit_control::maps::snapshot_json`]; maps of maps with the name
/// of the map in each slot).
pub fn vm_maps_json(image: &Image, vm: &nfkit_vm::Vm) -> Vec<serde_json::Value> {
    use nfkit_control::maps::{outer_snapshot_json, snapshot_json, MapInfo, VmMap};
    let name_of = |i: u32| image.maps.get(i as usize).map(|m| m.name.clone());
    image
        .maps
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| {
            let map = vm.maps().by_index(i)?;
            let info = MapInfo::from_spec(spec, image.btf.as_ref(), None);
            let m = VmMap::new(map, info, None);
            Some(match spec.inner {
                Some(_) => outer_snapshot_json(&m, spec.map_type, &name_of),
                None => snapshot_json(&m, spec.map_type),
            })
        })
        .collect()
}

/// Every map of `image` after a kernel test run, as `prog test --json`
/// shows them (the same form as [`vm_maps_json`]).
pub fn kernel_maps_json(image: &Image, loaded: &nfkit_kernel::Loaded) -> Vec<serde_json::Value> {
    use nfkit_control::maps::{outer_snapshot_json, snapshot_json, KernelMap, MapInfo};
    let name_of = |id: u32| {
        loaded
            .maps()
            .iter()
            .find(|m| m.id().ok() == Some(id))
            .map(|m| m.name().to_string())
    };
    image
        .maps
        .iter()
        .filter_map(|spec| {
            let map = loaded.map(&spec.name)?;
            let info = MapInfo::from_spec(spec, image.btf.as_ref(), None);
            let m = KernelMap::new(map, info);
            Some(match spec.inner {
                Some(_) => outer_snapshot_json(&m, spec.map_type, &name_of),
                None => snapshot_json(&m, spec.map_type),
            })
        })
        .collect()
}
