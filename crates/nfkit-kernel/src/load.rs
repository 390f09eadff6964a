//! Loading an [`Image`] into the kernel ([`load_image`]) or an ELF object
//! through libbpf ([`load_object_file`]); the loaded set ([`Loaded`]) and
//! its programs ([`Prog`]).

use crate::error::{KernelError, SourceLine};
use crate::layout;
use crate::maps::{self, KMap};
use crate::sys;
use libbpf_rs::{MapCore, MapHandle, ObjectBuilder};
use nfkit_object::{Image, MapKind, ProgType};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;

/// `BPF_F_XDP_HAS_FRAGS`: the program handles multi-buffer frames.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// How to load an Image.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Verifier log level of the first attempt (0: no log unless the
    /// program is refused, then libbpf retries with level 1).
    pub log_level: u32,
    /// Initial size of the verifier log buffer (grown to fit the log);
    /// 0 means 1 MiB.
    pub log_size: usize,
    /// Load only these entry programs (all when `None`).
    pub entries: Option<Vec<String>>,
    /// Global variables to set before the maps are created (and
    /// `.rodata` frozen): `(variable name, bytes)`, found through the
    /// Image's BTF (`DATASEC` variables).
    pub globals: Vec<(String, Vec<u8>)>,
    /// Existing maps to use instead of creating the Image's maps of the
    /// same name (maps shared between separately loaded Images).
    pub reuse_maps: Vec<KMap>,
}

impl LoadOptions {
    /// Sets global variable `name` to `bytes` before loading.
    pub fn global(mut self, name: &str, bytes: &[u8]) -> LoadOptions {
        self.globals.push((name.to_string(), bytes.to_vec()));
        self
    }
}

/// A program loaded in the kernel.
#[derive(Debug)]
pub struct Prog {
    name: String,
    prog_type: ProgType,
    fd: OwnedFd,
    /// The verifier log of a successful load at `log_level` > 0.
    log: String,
}

impl Prog {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn prog_type(&self) -> ProgType {
        self.prog_type
    }

    /// The program's fd (valid while the `Prog` lives).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The fd, borrowed (for attach calls and prog-array updates).
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The kernel's id of the program.
    pub fn id(&self) -> Result<u32, KernelError> {
        libbpf_rs::Program::id_from_fd(self.fd.as_fd()).map_err(|e| KernelError::Os {
            what: format!("id of program '{}': {e}", self.name),
            errno: libc::EBADF,
        })
    }

    /// What the kernel made of the program: instructions after the
    /// verifier's rewrites, bytes of machine code, instructions the
    /// verifier processed.
    pub fn info(&self) -> Result<ProgInfo, KernelError> {
        use std::os::fd::AsRawFd;
        let (xlated, jited, verified) =
            crate::sys::prog_info(self.fd.as_raw_fd()).map_err(|errno| KernelError::Os {
                what: format!("info of program '{}'", self.name),
                errno,
            })?;
        Ok(ProgInfo {
            xlated_insns: xlated / 8,
            jited_bytes: jited,
            verified_insns: verified,
        })
    }

    /// The verifier log kept from loading (empty unless `log_level` > 0).
    pub fn verifier_log(&self) -> &str {
        &self.log
    }

    /// Runs the program once (or `repeat` times) on a packet with
    /// `BPF_PROG_TEST_RUN`.
    ///
    /// What the kernel does (and tests must expect): input shorter than
    /// an Ethernet header (14 bytes) is refused with `EINVAL` for XDP and
    /// skb programs; XDP gets 256 bytes of headroom and a linear area
    /// capped at 4096 - 256 - 320 bytes; `repeat` runs re-run on the
    /// packet as the previous run left it (XDP); the output of XDP starts
    /// at `data_meta` (metadata, then the frame); socket filters run on
    /// the packet from the network header but the output includes the
    /// Ethernet header; `cpu` may only be non-zero for program types that
    /// take `BPF_F_TEST_RUN_ON_CPU` (not XDP or skb programs: pin the
    /// calling thread instead, [`pin_thread_to_cpu`](crate::pin_thread_to_cpu)).
    pub fn test_run(&self, t: &TestRun) -> Result<TestRunOut, KernelError> {
        let cap = if t.data_size_out == 0 {
            t.data.len() + 4096
        } else {
            t.data_size_out as usize
        };
        let mut data_out = vec![0u8; cap];
        let mut ctx_out = t.ctx_in.as_ref().map(|c| vec![0u8; c.len()]);
        let raw = sys::test_run(
            self.fd.as_raw_fd(),
            sys::RawTestRun {
                data_in: &t.data,
                data_out: &mut data_out,
                ctx_in: t.ctx_in.as_deref(),
                ctx_out: ctx_out.as_deref_mut(),
                repeat: t.repeat,
                cpu: t.cpu,
                flags: if t.cpu != 0 { 1 } else { 0 },
            },
        )
        .map_err(|errno| KernelError::TestRun {
            prog: self.name.clone(),
            errno,
        })?;
        data_out.truncate(raw.data_len);
        if let Some(c) = ctx_out.as_mut() {
            c.truncate(raw.ctx_len);
        }
        Ok(TestRunOut {
            retval: raw.retval,
            data: data_out,
            ctx_out,
            duration_ns: raw.duration,
        })
    }
}

/// [`Prog::info`]: the program as the kernel holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgInfo {
    /// Instructions after the verifier's rewrites (`bpftool prog dump xlated`).
    pub xlated_insns: u32,
    /// Bytes of JIT-compiled code (`bpftool prog dump jited`).
    pub jited_bytes: u32,
    /// Instructions the verifier processed (its cost of verifying).
    pub verified_insns: u32,
}

/// Input of one `BPF_PROG_TEST_RUN`.
#[derive(Clone, Debug, Default)]
pub struct TestRun {
    /// The packet (from the Ethernet header).
    pub data: Vec<u8>,
    /// Context to start from (`struct xdp_md` / `struct __sk_buff`).
    pub ctx_in: Option<Vec<u8>>,
    /// Runs (0 and 1 both mean once).
    pub repeat: u32,
    /// Output buffer size; 0 means the input size plus 4096.
    pub data_size_out: u32,
    /// CPU to run on (`BPF_F_TEST_RUN_ON_CPU`); 0 = the calling CPU.
    pub cpu: u32,
}

impl TestRun {
    /// One run on `data`.
    pub fn packet(data: &[u8]) -> TestRun {
        TestRun {
            data: data.to_vec(),
            ..TestRun::default()
        }
    }
}

/// Output of one `BPF_PROG_TEST_RUN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRunOut {
    /// The program's return value (of the last run).
    pub retval: u32,
    /// The packet afterwards (XDP: from `data_meta`).
    pub data: Vec<u8>,
    /// The context afterwards, when one was given.
    pub ctx_out: Option<Vec<u8>>,
    /// Mean time of one run, in nanoseconds.
    pub duration_ns: u32,
}

/// Programs and maps loaded together.
#[derive(Debug)]
pub struct Loaded {
    progs: Vec<Prog>,
    maps: Vec<KMap>,
    /// Why the Image's BTF was not used, if it was not.
    btf_error: Option<String>,
    _btf: Option<OwnedFd>,
    _object: Option<libbpf_rs::Object>,
}

impl Loaded {
    /// The program called `name`.
    pub fn prog(&self, name: &str) -> Option<&Prog> {
        self.progs.iter().find(|p| p.name == name)
    }

    /// Every loaded program.
    pub fn progs(&self) -> &[Prog] {
        &self.progs
    }

    /// The map called `name` (a new handle on it).
    pub fn map(&self, name: &str) -> Option<KMap> {
        self.maps.iter().find(|m| m.name() == name).cloned()
    }

    /// Every map, in the Image's order.
    pub fn maps(&self) -> &[KMap] {
        &self.maps
    }

    /// Why the Image's BTF was not loaded (no func/line info then).
    pub fn btf_error(&self) -> Option<&str> {
        self.btf_error.as_deref()
    }
}

/// `expected_attach_type` and program flags of an entry, from its
/// section name (libbpf's conventions).
fn attach_of(section: &str) -> (u32, u32) {
    use libbpf_sys as s;
    let (t, flags) = match section {
        x if x.starts_with("xdp.frags/devmap") => (s::BPF_XDP_DEVMAP, BPF_F_XDP_HAS_FRAGS),
        x if x.starts_with("xdp.frags/cpumap") => (s::BPF_XDP_CPUMAP, BPF_F_XDP_HAS_FRAGS),
        x if x.starts_with("xdp.frags") => (s::BPF_XDP, BPF_F_XDP_HAS_FRAGS),
        x if x.starts_with("xdp/devmap") => (s::BPF_XDP_DEVMAP, 0),
        x if x.starts_with("xdp/cpumap") => (s::BPF_XDP_CPUMAP, 0),
        x if x.starts_with("xdp") => (s::BPF_XDP, 0),
        "tcx/ingress" => (s::BPF_TCX_INGRESS, 0),
        "tcx/egress" => (s::BPF_TCX_EGRESS, 0),
        "netkit/primary" => (s::BPF_NETKIT_PRIMARY, 0),
        "netkit/peer" => (s::BPF_NETKIT_PEER, 0),
        "cgroup_skb/ingress" => (s::BPF_CGROUP_INET_INGRESS, 0),
        "cgroup_skb/egress" => (s::BPF_CGROUP_INET_EGRESS, 0),
        _ => (0, 0),
    };
    (t, flags)
}

/// Sets global variable `name` (a `DATASEC` variable of the Image's
/// BTF) to `bytes` in the initial data of its global-data map spec
/// (in `specs`, the Image's maps or a copy of them). The VM and the
/// kernel then start from the same values.
pub fn set_global(
    image: &Image,
    specs: &mut [nfkit_object::MapSpec],
    name: &str,
    bytes: &[u8],
) -> Result<(), KernelError> {
    let gerr = |msg: String| KernelError::Global {
        name: name.to_string(),
        msg,
    };
    let btf = image
        .btf
        .as_ref()
        .ok_or_else(|| gerr("the Image has no BTF".into()))?;
    for spec in specs.iter_mut() {
        let MapKind::Global { section, .. } = &spec.kind else {
            continue;
        };
        let Some(var) = btf
            .datasec_vars(section)
            .into_iter()
            .find(|v| v.name == name)
        else {
            continue;
        };
        if bytes.len() != var.size as usize {
            return Err(gerr(format!(
                "is {} bytes, {} given",
                var.size,
                bytes.len()
            )));
        }
        let data = spec.data.get_or_insert_with(Vec::new);
        let end = (var.offset + var.size) as usize;
        if data.len() < end {
            data.resize(end.max(spec.value_size as usize), 0);
        }
        if let Some(dst) = data.get_mut(var.offset as usize..end) {
            dst.copy_from_slice(bytes);
        }
        return Ok(());
    }
    Err(gerr("no such variable in the Image's global data".into()))
}

/// The Image's BTF as the kernel takes it: `extern` declarations that
/// linking left behind (a caller's declaration of a function another
/// object defines) become typedefs of their prototypes and extern
/// `VAR`s global (the kernel refuses extern `FUNC`s and `VAR`s); a `DATASEC` that no map uses as its value
/// type (`.maps`) whose variables overlap after merging gets them laid
/// out one after the other (the kernel checks the layout, nothing reads it).
fn sanitize_btf(btf: &nfkit_object::Btf, maps: &[nfkit_object::MapSpec]) -> nfkit_object::Btf {
    use nfkit_object::btf::{Kind, Linkage};
    let mut out = btf.clone();
    for id in 1..out.len() {
        let is_value = maps.iter().any(|m| m.value_type_id == Some(id));
        if let Some(t) = out.get_mut(id) {
            match &mut t.kind {
                Kind::Datasec { size, vars } if !is_value => {
                    let ordered = vars
                        .windows(2)
                        .all(|w| w[0].offset.saturating_add(w[0].size) <= w[1].offset);
                    if !ordered {
                        let mut off = 0u32;
                        for v in vars.iter_mut() {
                            v.offset = off;
                            off = off.saturating_add(v.size);
                        }
                        *size = off;
                    }
                }
                Kind::Func { linkage, proto }
                    if !matches!(linkage, Linkage::Static | Linkage::Global) =>
                {
                    // A typedef of the prototype: kept for ids, never checked
                    // as a function (its parameters may have no names).
                    t.kind = Kind::Typedef { ty: *proto };
                }
                Kind::Var { linkage, .. }
                    if !matches!(linkage, Linkage::Static | Linkage::Global) =>
                {
                    *linkage = Linkage::Global
                }
                _ => {}
            }
        }
    }
    out
}

/// Loads `image` into the kernel: its BTF, its maps (with initial
/// data), then every entry program (or those of `opts.entries`) with
/// its program type, expected attach type, func info and line info;
/// finally fills prog arrays declared with initial values.
pub fn load_image(image: &Image, opts: &LoadOptions) -> Result<Loaded, KernelError> {
    let log_size = if opts.log_size == 0 {
        1 << 20
    } else {
        opts.log_size
    };
    let btf = KernelBtf::load(image, log_size);
    let maps = create_maps(image, opts, btf.raw_fd())?;
    let map_fds: Vec<RawFd> = maps.iter().map(|m| m.fd()).collect();
    let loader = ProgLoader {
        image,
        opts,
        log_size,
        btf: &btf,
        map_fds: &map_fds,
    };
    let mut progs = Vec::new();
    for (i, e) in image.entries.iter().enumerate() {
        if let Some(only) = &opts.entries {
            if !only.iter().any(|n| n == &e.name) {
                continue;
            }
        }
        progs.push(loader.load(i)?);
    }
    fill_prog_arrays(image, &maps, &progs)?;
    Ok(Loaded {
        progs,
        maps,
        btf_error: btf.error,
        _btf: btf.fd,
        _object: None,
    })
}

/// The Image's BTF in the kernel, or why it is not there (the programs
/// then load without func and line info).
struct KernelBtf {
    fd: Option<OwnedFd>,
    error: Option<String>,
    /// Per line-info record of the Image: the offsets of its file name
    /// and source text in the loaded BTF's string table.
    line_strs: Vec<(u32, u32)>,
}

impl KernelBtf {
    /// Loads the Image's BTF (sanitized for the kernel), with the
    /// line-info strings added to its string table.
    fn load(image: &Image, log_size: usize) -> KernelBtf {
        let mut out = KernelBtf {
            fd: None,
            error: None,
            line_strs: Vec::new(),
        };
        let Some(btf) = &image.btf else {
            return out;
        };
        let btf = sanitize_btf(btf, &image.maps);
        let (bytes, strs) = btf.encode_with(|st| {
            image
                .line_info
                .iter()
                .map(|l| (st.add(&l.file), st.add(&l.text)))
                .collect::<Vec<_>>()
        });
        match sys::btf_load(&bytes, log_size) {
            Ok(fd) => {
                out.fd = Some(fd);
                out.line_strs = strs;
            }
            Err((errno, log)) => {
                out.error = Some(format!(
                    "{}: {}",
                    std::io::Error::from_raw_os_error(errno),
                    crate::error::log_tail(&log, 3)
                ))
            }
        }
        out
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }
}

/// The Image's maps, in its order: those of `opts.reuse_maps` (which must
/// match in type, key and value size) and new ones, created with the
/// globals of `opts.globals` set in their initial data.
fn create_maps(
    image: &Image,
    opts: &LoadOptions,
    raw_btf: Option<RawFd>,
) -> Result<Vec<KMap>, KernelError> {
    let mut specs = image.maps.clone();
    for (name, bytes) in &opts.globals {
        set_global(image, &mut specs, name, bytes)?;
    }
    let reuse: HashMap<&str, &KMap> = opts.reuse_maps.iter().map(|m| (m.name(), m)).collect();
    let mut maps = Vec::with_capacity(specs.len());
    let mut fresh = Vec::with_capacity(specs.len());
    for spec in &specs {
        if let Some(m) = reuse.get(spec.name.as_str()) {
            if m.key_size() != spec.key_size
                || m.value_size() != spec.value_size
                || m.map_type() != spec.map_type
            {
                return Err(KernelError::ReuseShape(spec.name.clone()));
            }
            // New initial contents replace the old (new DFA tables).
            maps::refill(spec, m)?;
            maps.push((*m).clone());
            // A reused map of maps keeps the slots it has.
            fresh.push(false);
            continue;
        }
        maps.push(maps::create(spec, raw_btf)?);
        fresh.push(true);
    }
    maps::fill_outer(&specs, &maps, &fresh)?;
    Ok(maps)
}

/// What loading each entry program of an Image needs.
struct ProgLoader<'a> {
    image: &'a Image,
    opts: &'a LoadOptions,
    log_size: usize,
    btf: &'a KernelBtf,
    /// The fds of the Image's maps, by map index.
    map_fds: &'a [RawFd],
}

impl ProgLoader<'_> {
    /// Lays out and loads entry `i`; a refusal by the verifier names the
    /// source line of the instruction it stopped at.
    fn load(&self, i: usize) -> Result<Prog, KernelError> {
        let image = self.image;
        let e = &image.entries[i];
        let code = layout::build(image, i, self.map_fds).map_err(|msg| KernelError::Image {
            entry: e.name.clone(),
            msg,
        })?;
        let raw_btf = self.btf.raw_fd();
        let line_info = if raw_btf.is_some() {
            self.line_info(&code)
        } else {
            Vec::new()
        };
        // A program given another type than its section's (an explicit
        // type, as for legacy section names) takes nothing from the name.
        let (attach, flags) =
            if nfkit_object::progtype::prog_type_of_section(&e.section) == Some(e.prog_type) {
                attach_of(&e.section)
            } else {
                (0, 0)
            };
        let load = sys::ProgLoad {
            prog_type: e.prog_type.kernel_id(),
            expected_attach_type: attach,
            prog_flags: flags,
            name: &maps::kernel_name(&e.name),
            license: &image.license,
            insns: &code.insns,
            btf_fd: raw_btf,
            func_info: if raw_btf.is_some() {
                &code.func_info
            } else {
                &[]
            },
            line_info: &line_info,
            log_level: self.opts.log_level,
            log_size: self.log_size,
        };
        match sys::prog_load(&load) {
            Ok((fd, log)) => Ok(Prog {
                name: e.name.clone(),
                prog_type: e.prog_type,
                fd,
                log,
            }),
            Err(f) if f.log.trim().is_empty() => Err(KernelError::ProgLoad {
                entry: e.name.clone(),
                errno: f.errno,
            }),
            Err(mut f) => {
                let slot = layout::last_insn_in_log(&f.log).and_then(|k| code.slot_map.get(k));
                // A poisoned instruction (unresolved CO-RE relocation): the
                // verifier only says "invalid func unknown#195896080".
                if let Some(why) = slot.and_then(|&s| image.core_site(s)?.error()) {
                    f.log = format!("{}\nnfkit: {why}\n", f.log.trim_end());
                }
                let line = slot
                    .and_then(|&slot| image.line_of(slot))
                    .map(|l| SourceLine {
                        file: l.file.clone(),
                        line: l.line,
                        col: l.col,
                        text: l.text.clone(),
                    });
                Err(KernelError::Verifier {
                    entry: e.name.clone(),
                    log: f.log,
                    line,
                })
            }
        }
    }

    /// The `bpf_line_info` records of a laid-out program, with the string
    /// offsets of the loaded BTF.
    fn line_info(&self, code: &layout::ProgCode) -> Vec<[u32; 4]> {
        code.lines
            .iter()
            .filter_map(|&(off, idx)| {
                let l = self.image.line_info.get(idx)?;
                let &(file, text) = self.btf.line_strs.get(idx)?;
                Some([off, file, text, (l.line << 10) | (l.col & 0x3ff)])
            })
            .collect()
    }
}

/// Fills the prog arrays declared with initial contents (`map_inits`)
/// with the fds of the loaded programs (entries not loaded are skipped).
fn fill_prog_arrays(image: &Image, maps: &[KMap], progs: &[Prog]) -> Result<(), KernelError> {
    for init in &image.map_inits {
        let (Some(map), Some(entry)) = (maps.get(init.map), image.entries.get(init.entry)) else {
            continue;
        };
        let Some(p) = progs.iter().find(|p| p.name == entry.name) else {
            continue;
        };
        map.update(&init.slot.to_le_bytes(), &(p.fd() as u32).to_le_bytes(), 0)?;
    }
    Ok(())
}

/// Loads an ELF object with libbpf (its own relocation, BTF and map
/// handling), for comparison with [`load_image`].
pub fn load_object_file(path: impl AsRef<Path>) -> Result<Loaded, KernelError> {
    let path = path.as_ref();
    let oerr = |source| KernelError::Object {
        path: path.display().to_string(),
        cause: source,
    };
    let open = ObjectBuilder::default().open_file(path).map_err(oerr)?;
    let object = open.load().map_err(oerr)?;
    let mut progs = Vec::new();
    for p in object.progs() {
        let name = p.name().to_string_lossy().into_owned();
        let fd = p
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| KernelError::Os {
                what: format!("dup of program '{name}'"),
                errno: e.raw_os_error().unwrap_or(libc::EBADF),
            })?;
        let prog_type = prog_type_of(p.prog_type());
        progs.push(Prog {
            name,
            prog_type,
            fd,
            log: String::new(),
        });
    }
    let mut maps = Vec::new();
    for m in object.maps() {
        let name = m.name().to_string_lossy().into_owned();
        if m.as_fd().as_raw_fd() < 0 {
            continue;
        }
        let h = MapHandle::try_from(&m).map_err(oerr)?;
        maps.push(KMap::new(&name, h));
    }
    Ok(Loaded {
        progs,
        maps,
        btf_error: None,
        _btf: None,
        _object: Some(object),
    })
}

/// nfkit's program type for libbpf's (the packet types nfkit runs).
fn prog_type_of(t: libbpf_rs::ProgramType) -> ProgType {
    use libbpf_rs::ProgramType as L;
    match t {
        L::SocketFilter => ProgType::SocketFilter,
        L::SchedCls => ProgType::SchedCls,
        L::SchedAct => ProgType::SchedAct,
        L::Xdp => ProgType::Xdp,
        L::CgroupSkb => ProgType::CgroupSkb,
        L::SkSkb => ProgType::SkSkb,
        L::LwtIn => ProgType::LwtIn,
        L::LwtOut => ProgType::LwtOut,
        L::LwtXmit => ProgType::LwtXmit,
        L::FlowDissector => ProgType::FlowDissector,
        L::Syscall => ProgType::Syscall,
        _ => ProgType::Unspec,
    }
}
