//! The crate's XDP programs (C in `bpf/`, compiled by `build.rs`) and
//! what loads and drives them:
//! * [`Generator`] (`bpf/gen.c`): the live-frame sender. Templates (one
//!   per flow, or the frames of a pcap) and a schedule (template per
//!   frame, repeated) live in maps; each run of the program writes one
//!   whole frame, its sequence stamp and UDP checksum, and redirects it
//!   to the target device (`BPF_PROG_TEST_RUN` with
//!   `BPF_F_TEST_XDP_LIVE_FRAMES`, batches of runs).
//! * [`Counter`] (`bpf/count.c`): the counting receiver attached at a
//!   device's XDP hook (per-stream bitmaps of sequence numbers, totals,
//!   sources, an optional ring buffer of stamps).
//! * [`FWD_OBJECT`] (`bpf/fwd.c`): a devmap forwarder and a pass-all
//!   program, for benchmarks and tests.
//! * [`veth_peer_without_xdp`]: whether a veth's peer would drop
//!   redirected frames (no XDP program in driver mode).

use crate::error::TrafficError;
use crate::sys;
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};
use serde_json::Value;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The generator's object file.
pub static GEN_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/gen.o"));
/// The counting receiver's object file.
pub static COUNT_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/count.o"));
/// `nfkit_fwd` (every frame to devmap `out` slot 0, MACs from `fwdcfg`)
/// and `nfkit_pass` (XDP_PASS).
pub static FWD_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fwd.o"));

/// Largest frame the live engine sends (a template's room).
pub const TMPL_MAX: usize = 2048;
/// Most distinct frames in the generator's map at once: a longer pcap
/// is sent in windows of this many frames, loaded between runs.
pub const MAX_TEMPLATES: usize = 1 << 16;
/// Most entries of the live engine's schedule (sum of flow weights).
pub const MAX_SCHEDULE: usize = 1 << 24;
/// Streams the XDP receiver tracks (more are counted as `untracked`).
pub const XDP_STREAMS: usize = 8;
/// Sequence numbers the XDP receiver tracks per stream (0 to this - 1;
/// others are `out_of_range`): a 2 MiB bitmap per stream.
pub const XDP_WINDOW: u64 = 1 << 24;

/// The sequence log's ring buffer (16-byte records): 64 MiB, four
/// million stamps between two reads.
pub const XDP_LOG_BYTES: u32 = 1 << 26;

fn bpf(what: impl Into<String>) -> impl FnOnce(libbpf_rs::Error) -> TrafficError {
    let what = what.into();
    move |e| TrafficError::Bpf {
        what,
        cause: e.to_string(),
    }
}

/// Opens `object`, sets the given maps' sizes and loads it.
pub fn load(object: &[u8], sizes: &[(&str, u32)]) -> Result<Object, TrafficError> {
    let mut open = ObjectBuilder::default()
        .open_memory(object)
        .map_err(bpf("opening an XDP object"))?;
    for mut m in open.maps_mut() {
        let name = m.name().to_string_lossy().into_owned();
        if let Some((_, n)) = sizes.iter().find(|(s, _)| *s == name) {
            m.set_max_entries(*n)
                .map_err(bpf(format!("sizing map {name}")))?;
        }
    }
    open.load()
        .map_err(bpf("loading an XDP program (verifier)"))
}

/// A handle on map `name` of `obj`.
pub fn map(obj: &Object, name: &str) -> Result<MapHandle, TrafficError> {
    let m = obj
        .maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| TrafficError::Bpf {
            what: format!("map {name}"),
            cause: "not in the object".into(),
        })?;
    MapHandle::try_from(&m).map_err(bpf(format!("map {name}")))
}

/// Attaches program `name` of `obj` at the XDP hook of `ifindex` (the
/// calling thread's namespace) through a bpf_link: driver mode where
/// the device has it, else generic; detached when the link is dropped.
pub fn attach(obj: &Object, name: &str, ifindex: u32) -> Result<Link, TrafficError> {
    let p = obj
        .progs_mut()
        .find(|p| p.name() == name)
        .ok_or_else(|| TrafficError::Bpf {
            what: format!("program {name}"),
            cause: "not in the object".into(),
        })?;
    p.attach_xdp(ifindex as i32).map_err(|e| {
        let busy = format!("{e:#}").to_lowercase().contains("busy");
        TrafficError::Bpf {
            what: format!("attaching {name} to ifindex {ifindex}"),
            cause: if busy {
                format!(
                    "{e}: the device already has an XDP program (`ip link set DEV xdp off` \
                     removes one attached with ip; or receive with --engine packet)"
                )
            } else {
                e.to_string()
            },
        }
    })
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_ne_bytes)
        .unwrap_or(0)
}

/// One frame of a live run: the bytes (stamped with sequence 0 when
/// numbered) and where the program writes the sequence number.
#[derive(Clone, Debug)]
pub struct Template {
    pub frame: Vec<u8>,
    /// Offset of the 8-byte sequence number (0: not stamped).
    pub stamp_off: u32,
    /// Offset of the UDP checksum.
    pub csum_off: u32,
    /// The UDP checksum for sequence 0.
    pub csum: u16,
    /// Leave the checksum alone (an IPv4 UDP checksum of 0: none).
    pub keep: bool,
}

impl Template {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16 + TMPL_MAX);
        v.extend((self.frame.len() as u32).to_ne_bytes());
        v.extend(self.stamp_off.to_ne_bytes());
        v.extend(self.csum_off.to_ne_bytes());
        v.extend(self.csum.to_ne_bytes());
        v.extend(u16::from(self.keep).to_ne_bytes());
        v.extend_from_slice(&self.frame);
        v.resize(16 + TMPL_MAX, 0);
        v
    }
}

/// Writes `templates` into map `tm` from index 0 (batches of 1024).
fn write_templates(tm: &MapHandle, templates: &[Template]) -> Result<(), TrafficError> {
    for (at, chunk) in templates.chunks(1024).enumerate() {
        let keys: Vec<u8> = (0..chunk.len())
            .flat_map(|i| ((at * 1024 + i) as u32).to_ne_bytes())
            .collect();
        let values: Vec<u8> = chunk.iter().flat_map(Template::encode).collect();
        tm.update_batch(
            &keys,
            &values,
            chunk.len() as u32,
            MapFlags::ANY,
            MapFlags::ANY,
        )
        .map_err(bpf("writing the templates"))?;
    }
    Ok(())
}

/// The live-frame generator, loaded with its templates and schedule.
pub struct Generator {
    obj: Object,
    state: MapHandle,
    templates: MapHandle,
    data: Vec<u8>,
    ifindex: u32,
    sched_len: u32,
    /// A pcap longer than [`MAX_TEMPLATES`]: all its frames, sent a
    /// window of `MAX_TEMPLATES` at a time (see [`Generator::windows`]).
    all: Vec<Template>,
}

/// The generator's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenCounters {
    pub frames: u64,
    /// Sequence numbers stamped.
    pub stamped: u64,
    pub bytes: u64,
}

impl Generator {
    /// Loads the generator for `templates` sent in the order of
    /// `schedule` (indices into `templates`, repeated) to `ifindex`.
    pub fn new(
        templates: &[Template],
        schedule: &[u32],
        ifindex: u32,
    ) -> Result<Generator, TrafficError> {
        if templates.is_empty() || schedule.is_empty() {
            return Err(TrafficError::Empty("no frames".into()));
        }
        // A long pcap (its frames in order): windows of MAX_TEMPLATES.
        let windowed = templates.len() > MAX_TEMPLATES
            && schedule.len() == templates.len()
            && schedule.iter().enumerate().all(|(i, t)| *t as usize == i);
        let all = if windowed {
            templates.to_vec()
        } else {
            Vec::new()
        };
        let ident: Vec<u32>;
        let (templates, schedule) = if windowed {
            ident = (0..MAX_TEMPLATES as u32).collect();
            (&templates[..MAX_TEMPLATES], &ident[..])
        } else {
            (templates, schedule)
        };
        if templates.len() > MAX_TEMPLATES || schedule.len() > MAX_SCHEDULE {
            return Err(TrafficError::Live(format!(
                "{} distinct frames in a schedule of {} (the live engine takes up to {MAX_TEMPLATES} and {MAX_SCHEDULE})",
                templates.len(),
                schedule.len()
            )));
        }
        let every = if windowed { &all[..] } else { templates };
        let longest = every.iter().map(|t| t.frame.len()).max().unwrap_or(0);
        if let Some(t) = every
            .iter()
            .find(|t| t.frame.len() > TMPL_MAX || t.frame.len() < 14)
        {
            return Err(TrafficError::Live(format!(
                "a frame of {} bytes (the live engine sends 14 to {TMPL_MAX})",
                t.frame.len()
            )));
        }
        let obj = load(
            GEN_OBJECT,
            &[
                ("templates", templates.len() as u32),
                ("schedule", schedule.len() as u32),
            ],
        )?;
        let tm = map(&obj, "templates")?;
        write_templates(&tm, templates)?;
        let sm = map(&obj, "schedule")?;
        for (at, chunk) in schedule.chunks(1 << 16).enumerate() {
            let keys: Vec<u8> = (0..chunk.len())
                .flat_map(|i| ((at * (1 << 16) + i) as u32).to_ne_bytes())
                .collect();
            let values: Vec<u8> = chunk.iter().flat_map(|t| t.to_ne_bytes()).collect();
            sm.update_batch(
                &keys,
                &values,
                chunk.len() as u32,
                MapFlags::ANY,
                MapFlags::ANY,
            )
            .map_err(bpf("writing the schedule"))?;
        }
        let state = map(&obj, "state")?;
        let g = Generator {
            obj,
            state,
            templates: tm,
            // Every frame starts as the longest template; the program
            // trims it to its own.
            data: vec![0u8; longest.max(60)],
            ifindex,
            sched_len: schedule.len() as u32,
            all,
        };
        Ok(g)
    }

    /// For a pcap longer than [`MAX_TEMPLATES`]: (its frames, frames per
    /// window). The window loaded at first is the first; the sender
    /// loads the next ones ([`Generator::load_window`]) between runs.
    pub fn windows(&self) -> Option<(usize, usize)> {
        (!self.all.is_empty()).then_some((self.all.len(), MAX_TEMPLATES))
    }

    /// Loads the window of the pcap's frames from `start` (no run may be
    /// in progress); the counters carry on.
    pub fn load_window(&self, start: usize) -> Result<(), TrafficError> {
        let end = (start + MAX_TEMPLATES).min(self.all.len());
        let Some(w) = self.all.get(start..end) else {
            return Err(TrafficError::Live(format!("no frame {start} in the pcap")));
        };
        write_templates(&self.templates, w)?;
        let mut v = self
            .state
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("reading the generator's state"))?
            .unwrap_or_default();
        if v.len() < 12 {
            return Err(TrafficError::Live("the generator's state is short".into()));
        }
        v[4..8].copy_from_slice(&(w.len() as u32).to_ne_bytes());
        v[8..12].copy_from_slice(&0u32.to_ne_bytes());
        self.state
            .update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
            .map_err(bpf("writing the generator's state"))
    }

    fn set_state(&self, ifindex: u32) -> Result<(), TrafficError> {
        let mut v = Vec::with_capacity(40);
        v.extend(ifindex.to_ne_bytes());
        v.extend(self.sched_len.to_ne_bytes());
        v.extend([0u8; 8 + 24]);
        self.state
            .update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
            .map_err(bpf("writing the generator's state"))
    }

    fn prog(&self) -> Result<libbpf_rs::Program<'_>, TrafficError> {
        self.obj
            .progs()
            .find(|p| p.name() == "nfkit_gen")
            .ok_or_else(|| TrafficError::Live("no generator program".into()))
    }

    /// Does this kernel run live-frame test runs on the device? One
    /// frame, dropped by the program; the counters start from zero
    /// afterwards. Returns how long the run took (a run that redirects
    /// takes longer: tens of ms in setup and teardown here).
    pub fn probe(&self) -> Result<Duration, TrafficError> {
        self.set_state(0)?;
        let t0 = Instant::now();
        let r = sys::xdp_live_run(self.prog()?.as_fd(), &self.data, self.ifindex, 1, 0);
        let took = t0.elapsed();
        self.set_state(self.ifindex)?;
        r.map_err(|e| {
            TrafficError::Live(format!(
                "live-frame test runs (BPF_F_TEST_XDP_LIVE_FRAMES) refused: {e}"
            ))
        })?;
        Ok(took)
    }

    /// The target device's XDP features as the kernel reports them
    /// (`NETDEV_XDP_ACT_*`, kernel 6.3 on; `None` when the query fails).
    pub fn target_features(&self) -> Option<u64> {
        let p = self.prog().ok()?;
        let q = libbpf_rs::Xdp::new(p.as_fd())
            .query(self.ifindex as i32, libbpf_rs::XdpFlags::NONE)
            .ok()?;
        Some(q.feature_flags)
    }

    /// Attaches the generator to `ifindex` (the namespace's loopback),
    /// where it passes every frame: attached, it stays in the kernel's
    /// XDP dispatcher, and a live test run no longer waits some 25 ms
    /// for the dispatcher's update at its start and end (see
    /// `bpf/gen.c`). Detached when the link is dropped.
    pub fn keep_dispatched(&self, ifindex: u32) -> Result<Link, TrafficError> {
        attach(&self.obj, "nfkit_gen", ifindex)
    }

    /// A handle that runs the generator from another thread (in the
    /// same network namespace).
    pub fn runner(&self) -> Result<LiveRunner, TrafficError> {
        let prog = self
            .prog()?
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| TrafficError::os("duplicating the generator's fd", e))?;
        Ok(LiveRunner {
            prog,
            data: self.data.clone().into(),
            ifindex: self.ifindex,
        })
    }

    /// Generates `n` frames (`batch` per kernel batch, at most 256; 0:
    /// the kernel's default).
    pub fn run(&self, n: u32, batch: u32) -> Result<(), TrafficError> {
        sys::xdp_live_run(self.prog()?.as_fd(), &self.data, self.ifindex, n, batch)
            .map_err(|e| TrafficError::os("live-frame test run", e))
    }

    /// What the program has generated so far.
    pub fn counters(&self) -> Result<GenCounters, TrafficError> {
        let v = self
            .state
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("reading the generator's state"))?
            .unwrap_or_default();
        Ok(GenCounters {
            frames: u64_at(&v, 16),
            stamped: u64_at(&v, 24),
            bytes: u64_at(&v, 32),
        })
    }
}

/// Runs the generator (see [`Generator::runner`]); usable from any
/// thread of the namespace the generator targets.
pub struct LiveRunner {
    prog: OwnedFd,
    data: Arc<[u8]>,
    ifindex: u32,
}

impl LiveRunner {
    /// Generates `n` frames (`batch` per kernel batch, at most 256; 0:
    /// the kernel's default).
    pub fn run(&self, n: u32, batch: u32) -> Result<(), TrafficError> {
        sys::xdp_live_run(self.prog.as_fd(), &self.data, self.ifindex, n, batch)
            .map_err(|e| TrafficError::os("live-frame test run", e))
    }
}

/// Per-stream counts read from the counting receiver.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamCounts {
    pub stream: u32,
    pub received: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Highest sequence number + 1 (0: none).
    pub highest1: u64,
    pub out_of_range: u64,
}

/// Totals read from the counting receiver.
#[derive(Clone, Debug, Default)]
pub struct CountTotals {
    pub frames: u64,
    pub bytes: u64,
    pub unstamped: u64,
    pub untracked: u64,
    pub log_lost: u64,
    pub other: u64,
    /// Coarse clock (ns, a few ms resolution) of the first and the
    /// latest frame (0: none).
    pub first_ns: u64,
    pub last_ns: u64,
    pub sources: Vec<(std::net::IpAddr, u64)>,
    pub streams: Vec<StreamCounts>,
}

/// The counting receiver attached to a device (detached on drop).
pub struct Counter {
    // Declared first: detached before the object goes.
    _link: Link,
    obj: Object,
    totals: MapHandle,
    sstats: MapHandle,
    slots: MapHandle,
    sources: MapHandle,
}

impl Counter {
    /// Loads the counter and attaches it to `ifindex` (the calling
    /// thread's namespace); `pass`: let stamped frames through;
    /// `log`: write stamps to the ring buffer (see [`Counter::object`]);
    /// `limit`: count that many frames, then let the rest pass uncounted.
    pub fn attach(
        ifindex: u32,
        pass: bool,
        log: bool,
        limit: Option<u64>,
    ) -> Result<Counter, TrafficError> {
        let words = XDP_WINDOW / 64;
        let ring = if log { XDP_LOG_BYTES } else { 4096 };
        let obj = load(
            COUNT_OBJECT,
            &[
                ("bitmap", (words * XDP_STREAMS as u64) as u32),
                ("seqlog", ring),
            ],
        )?;
        let cfg = map(&obj, "config")?;
        let mut v = Vec::new();
        v.extend(u32::from(pass).to_ne_bytes());
        v.extend(u32::from(log).to_ne_bytes());
        v.extend(XDP_WINDOW.to_ne_bytes());
        v.extend(words.to_ne_bytes());
        v.extend(limit.unwrap_or(0).to_ne_bytes());
        cfg.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
            .map_err(bpf("writing the counter's config"))?;
        let link = attach(&obj, "nfkit_count", ifindex)?;
        Ok(Counter {
            totals: map(&obj, "totals")?,
            sstats: map(&obj, "sstats")?,
            slots: map(&obj, "slots")?,
            sources: map(&obj, "sources")?,
            _link: link,
            obj,
        })
    }

    /// The loaded object (its `seqlog` ring buffer holds `stream u32,
    /// pad u32, seq u64` records).
    pub fn object(&self) -> &Object {
        &self.obj
    }

    /// Everything counted so far.
    pub fn read(&self) -> Result<CountTotals, TrafficError> {
        let mut t = CountTotals::default();
        let per_cpu = self
            .totals
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf("reading the counter's totals"))?
            .unwrap_or_default();
        for v in per_cpu {
            t.frames += u64_at(&v, 0);
            t.bytes += u64_at(&v, 8);
            t.unstamped += u64_at(&v, 16);
            t.untracked += u64_at(&v, 24);
            t.log_lost += u64_at(&v, 32);
            t.other += u64_at(&v, 40);
            let (f, l) = (u64_at(&v, 48), u64_at(&v, 56));
            if f != 0 && (t.first_ns == 0 || f < t.first_ns) {
                t.first_ns = f;
            }
            t.last_ns = t.last_ns.max(l);
        }
        for i in 0..XDP_STREAMS as u32 {
            let k = i.to_ne_bytes();
            let slot = self
                .slots
                .lookup(&k, MapFlags::ANY)
                .map_err(bpf("reading the counter's streams"))?
                .map(|v| u64_at(&v, 0))
                .unwrap_or(0);
            if slot >> 32 == 0 {
                continue;
            }
            let s = self
                .sstats
                .lookup(&k, MapFlags::ANY)
                .map_err(bpf("reading the counter's streams"))?
                .unwrap_or_default();
            t.streams.push(StreamCounts {
                stream: slot as u32,
                received: u64_at(&s, 0),
                duplicates: u64_at(&s, 8),
                reordered: u64_at(&s, 16),
                highest1: u64_at(&s, 24),
                out_of_range: u64_at(&s, 32),
            });
        }
        for key in self.sources.keys() {
            let Some(v) = self
                .sources
                .lookup(&key, MapFlags::ANY)
                .map_err(bpf("reading the counter's sources"))?
            else {
                continue;
            };
            let fam = key
                .get(..4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
            let addr: std::net::IpAddr = match (fam, key.get(4..20)) {
                (Some(4), Some(a)) => std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).into(),
                (Some(6), Some(a)) => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(a);
                    std::net::Ipv6Addr::from(b).into()
                }
                _ => continue,
            };
            t.sources.push((addr, u64_at(&v, 0)));
        }
        Ok(t)
    }
}

/// `ip [-n NS] -j ARGS` as JSON.
fn ip_json(netns: Option<&str>, args: &[&str]) -> Result<Value, TrafficError> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    cmd.arg("-j").args(args);
    let what = format!(
        "ip {}-j {}",
        netns.map(|n| format!("-n {n} ")).unwrap_or_default(),
        args.join(" ")
    );
    let out = cmd
        .output()
        .map_err(|e| TrafficError::os(what.clone(), e))?;
    if !out.status.success() {
        return Err(TrafficError::Live(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| TrafficError::Live(format!("{what}: {e}")))
}

/// Has this `ip -j link` entry an XDP program in driver mode?
fn native_xdp(link: &Value) -> bool {
    let xdp = &link["xdp"];
    xdp["mode"] == 1
        || xdp["attached"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p["mode"] == 1))
}

/// Is `dev` (in `netns`) a veth without an XDP program? Such a device
/// drops the frames a live-engine sender on its peer redirects to it.
pub fn veth_without_xdp(dev: &str, netns: Option<&str>) -> Result<bool, TrafficError> {
    let links = ip_json(netns, &["-d", "link", "show", "dev", dev])?;
    let link = &links[0];
    Ok(link["linkinfo"]["info_kind"] == "veth" && link.get("xdp").is_none())
}

/// Has `dev` (in `netns`) an XDP program?
pub fn has_xdp(dev: &str, netns: Option<&str>) -> Result<bool, TrafficError> {
    let links = ip_json(netns, &["link", "show", "dev", dev])?;
    Ok(links[0].get("xdp").is_some())
}

/// A veth whose peer has no XDP program in driver mode drops the
/// frames redirected to it without a trace. For such a `dev` (in
/// `netns`), the peer's name and namespace (`None`: the same as
/// `dev`'s); `None` for other devices, or when the peer cannot be
/// looked at (a namespace without a name).
pub fn veth_peer_without_xdp(
    dev: &str,
    netns: Option<&str>,
) -> Result<Option<(String, Option<String>)>, TrafficError> {
    let links = ip_json(netns, &["-d", "link", "show", "dev", dev])?;
    let link = &links[0];
    if link["linkinfo"]["info_kind"] != "veth" {
        return Ok(None);
    }
    let Some(peer_index) = link["link_index"].as_u64() else {
        return Ok(None);
    };
    let peer_ns = match link["link_netnsid"].as_u64() {
        None => netns.map(str::to_string),
        Some(id) => {
            let ids = ip_json(netns, &["netns", "list-id"])?;
            let name = ids.as_array().and_then(|a| {
                a.iter()
                    .find(|e| e["nsid"].as_u64() == Some(id))
                    .and_then(|e| e["name"].as_str())
            });
            match name {
                Some(n) => Some(n.to_string()),
                None => return Ok(None),
            }
        }
    };
    let peers = ip_json(peer_ns.as_deref(), &["link", "show"])?;
    let Some(peer) = peers
        .as_array()
        .and_then(|a| a.iter().find(|l| l["ifindex"].as_u64() == Some(peer_index)))
    else {
        return Ok(None);
    };
    if native_xdp(peer) {
        return Ok(None);
    }
    let name = peer["ifname"].as_str().unwrap_or("?").to_string();
    Ok(Some((name, peer_ns)))
}

/// A program of one of the crate's objects attached at a device's XDP
/// hook (driver mode where the device has it); detached on drop.
pub struct Attached {
    // Declared first: detached before the object goes.
    _link: Link,
    obj: Object,
}

impl Attached {
    /// Loads `object`, attaches its program `prog` to `dev` in namespace
    /// `netns` (the caller's when `None`), from a thread of its own.
    pub fn new(
        object: &'static [u8],
        prog: &str,
        dev: &str,
        netns: Option<&str>,
    ) -> Result<Attached, TrafficError> {
        Attached::new_with(object, prog, dev, netns, |_| Ok(()))
    }

    /// As [`Attached::new`], running `setup` on the loaded object first,
    /// in the namespace (e.g. to fill a devmap: its ifindexes are those
    /// of the namespace that writes them; see [`ifindex`]).
    pub fn new_with(
        object: &'static [u8],
        prog: &str,
        dev: &str,
        netns: Option<&str>,
        setup: impl FnOnce(&Object) -> Result<(), TrafficError> + Send + 'static,
    ) -> Result<Attached, TrafficError> {
        let (prog, dev, ns) = (prog.to_string(), dev.to_string(), netns.map(str::to_string));
        std::thread::spawn(move || -> Result<Attached, TrafficError> {
            if let Some(ns) = &ns {
                sys::enter_netns(ns)
                    .map_err(|e| TrafficError::os(format!("entering network namespace {ns}"), e))?;
            }
            let ifindex = ifindex(&dev)?;
            let obj = load(object, &[])?;
            setup(&obj)?;
            let link = attach(&obj, &prog, ifindex)?;
            Ok(Attached { _link: link, obj })
        })
        .join()
        .map_err(|_| TrafficError::Empty("the attaching thread panicked".into()))?
    }

    /// The kernel's run-time statistics of program `prog` (total ns,
    /// runs), counted while [`enable_run_time_stats`] is on.
    pub fn run_stats(&self, prog: &str) -> Option<(u64, u64)> {
        let p = self.obj.progs().find(|p| p.name() == prog)?;
        let id = libbpf_rs::Program::id_from_fd(p.as_fd()).ok()?;
        libbpf_rs::query::ProgInfoIter::default()
            .find(|i| i.id == id)
            .map(|i| (i.run_time_ns, i.run_cnt))
    }

    /// The loaded object (its maps).
    pub fn object(&self) -> &Object {
        &self.obj
    }
}

/// Attaches `nfkit_pass` (every frame to the stack) to `dev`: a veth
/// peer then takes frames the live engine redirects, for a packet
/// receiver or the host's stack.
pub fn attach_pass(dev: &str, netns: Option<&str>) -> Result<Attached, TrafficError> {
    Attached::new(FWD_OBJECT, "nfkit_pass", dev, netns)
}

/// The index of interface `dev` in the calling thread's namespace.
pub fn ifindex(dev: &str) -> Result<u32, TrafficError> {
    sys::ifindex(dev).map_err(|e| TrafficError::os(format!("interface {dev}"), e))
}

/// Turns on the kernel's run-time statistics of BPF programs while the
/// returned fd is open (reference-counted by the kernel).
pub fn enable_run_time_stats() -> Result<OwnedFd, TrafficError> {
    sys::enable_bpf_stats().map_err(|e| TrafficError::os("enabling BPF run-time statistics", e))
}
