//! Shared parts of nfkit's kernel-backend benchmarks (`benches/`):
//! the C objects that `build.rs` compiled, packets, loading the variants
//! of one program, per-packet cost through `BPF_PROG_TEST_RUN`, veth
//! throughput on a namespace testbed, a private bpffs for deployments,
//! and the summary tables.
//!
//! * `benches/ddos.rs`: the DDoS example as hand-written C, static chain,
//!   dynamic chain and tail-call pipeline: ns per packet (test runs) and
//!   Mpps through a veth.
//! * `benches/calls.rs`: N calls to a no-op NF as chain calls against N
//!   tail calls.
//! * `benches/redeploy.rs`: the time to apply a chain change.
//!
//! Everything that needs the kernel is skipped, with a message, when not
//! run as root.

use nfkit_abi::NfConfig;
use nfkit_kernel::{KMap, Loaded, Netns, Prog, TestRun};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Errors of the benchmarks' set-up, as text (they are printed, not handled).
pub type Res<T> = Result<T, String>;

/// Turns any error into the bench's text error.
pub fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub use nfkit_kernel::is_root;

/// The repository's `examples/` directory.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The directory holding `bnop.xdp.o` (put it on the NF search path).
pub fn nf_dir() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("nf")
}

/// `c/tail_nop.c`'s object.
pub fn tail_nop_object() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("tail_nop.o")
}

/// `c/ddos_tail.c`'s object.
pub fn ddos_tail_object() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("ddos_tail.o")
}

/// `examples/c/ddos.c`'s object, when it existed (and compiled) at build time.
pub fn hand_c_object() -> Option<PathBuf> {
    let p = env!("NFKIT_BENCH_HAND_C");
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// An Ethernet + IPv4 + UDP frame of 64 bytes (without FCS) from `src`
/// to `dst`, inside 198.18.0.0/15.
pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let spec = udp4_spec(
        src,
        dst,
        sport,
        dport,
        nfkit_traffic::Mac([0x02, 0, 0, 0, 0, 0x02]),
    );
    nfkit_traffic::build(&spec).unwrap_or_default()
}

/// The 64-byte IPv4/UDP frame of [`udp4`] and [`flow_spec`], to `dst_mac`.
fn udp4_spec(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    dst_mac: nfkit_traffic::Mac,
) -> nfkit_traffic::FrameSpec {
    nfkit_traffic::FrameSpec {
        src_mac: nfkit_traffic::Mac([0x02, 0, 0, 0, 0, 0x01]),
        dst_mac,
        src: IpAddr::V4(Ipv4Addr::from(src)),
        dst: IpAddr::V4(Ipv4Addr::from(dst)),
        proto: nfkit_traffic::Proto::Udp,
        sport,
        dport,
        ttl: 64,
        tos: 0,
        payload: vec![0; 18],
    }
}

/// The flows of the throughput runs as `nfkit send --flows` specs.
pub fn flow_spec(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> nfkit_traffic::flows::Flow {
    nfkit_traffic::flows::Flow {
        spec: udp4_spec(src, dst, sport, dport, nfkit_traffic::Mac::BROADCAST),
        src_mac_given: false,
        weight: 1,
    }
}

/// Loads a clang-built object with libbpf and fills its prog array
/// `array` with `progs` (slot i gets program `progs[i]`).
pub fn load_c(path: &Path, array: Option<(&str, &[&str])>) -> Res<Loaded> {
    let loaded = nfkit_kernel::load_object_file(path).map_err(err(&path.display().to_string()))?;
    if let Some((array, progs)) = array {
        fill_prog_array(&loaded, array, progs)?;
    }
    Ok(loaded)
}

/// Sets slots 0.. of prog array `array` to `progs` and clears the rest.
pub fn fill_prog_array(loaded: &Loaded, array: &str, progs: &[&str]) -> Res<()> {
    let map = loaded
        .map(array)
        .ok_or_else(|| format!("no prog array `{array}`"))?;
    for slot in 0..map.max_entries() {
        let _ = map.delete(&slot.to_le_bytes());
    }
    for (slot, name) in progs.iter().enumerate() {
        let p = loaded
            .prog(name)
            .ok_or_else(|| format!("no program `{name}`"))?;
        map.update(
            &(slot as u32).to_le_bytes(),
            &(p.fd() as u32).to_le_bytes(),
            0,
        )
        .map_err(err(array))?;
    }
    Ok(())
}

/// nfkit's `nfkit_config` as it is now (defaults when unset).
fn config(cfg: &KMap) -> Res<NfConfig> {
    let old = cfg
        .lookup(&0u32.to_le_bytes())
        .map_err(err("nfkit_config"))?;
    Ok(old
        .as_deref()
        .and_then(NfConfig::from_bytes)
        .unwrap_or_default())
}

/// Pins nfkit's clock at `now_ns`, keeping the other fields.
pub fn pin_clock(cfg: &KMap, now_ns: u64) -> Res<()> {
    let v = config(cfg)?.pinned_at(now_ns);
    cfg.update(&0u32.to_le_bytes(), &v.to_bytes(), 0)
        .map_err(err("nfkit_config"))
}

/// Unpins nfkit's clock (`clock_pinned` = 0): `nf_now()` is the kernel's.
pub fn unpin_clock(cfg: &KMap) -> Res<()> {
    let v = NfConfig {
        clock_pinned: 0,
        ..config(cfg)?
    };
    cfg.update(&0u32.to_le_bytes(), &v.to_bytes(), 0)
        .map_err(err("nfkit_config"))
}

/// A program under test with its loaded set (which keeps its maps and
/// the programs it tail-calls alive).
pub struct Subject {
    pub name: String,
    pub loaded: Loaded,
    pub entry: String,
    /// Called before each batch of test runs with the batch number (pins
    /// a clock, resets state), so every batch takes the same path.
    pub prepare: Option<Box<dyn FnMut(u64) -> Res<()>>>,
}

impl Subject {
    pub fn prog(&self) -> Res<&Prog> {
        self.loaded
            .prog(&self.entry)
            .ok_or_else(|| format!("{}: no program `{}`", self.name, self.entry))
    }

    /// Runs `frame` `batches` times `repeat` times each; the total of the
    /// kernel's own times (ns) and the XDP code of the last run.
    pub fn run_batches(&mut self, frame: &[u8], batches: u64, repeat: u32) -> Res<(u64, u32)> {
        let mut total = 0u64;
        let mut code = 0;
        for b in 0..batches {
            if let Some(p) = self.prepare.as_mut() {
                p(b)?;
            }
            let prog = self
                .loaded
                .prog(&self.entry)
                .ok_or_else(|| format!("{}: no program `{}`", self.name, self.entry))?;
            let t = TestRun {
                data: frame.to_vec(),
                repeat,
                ..TestRun::default()
            };
            let out = prog.test_run(&t).map_err(err(&self.name))?;
            total += out.duration_ns as u64 * repeat.max(1) as u64;
            code = out.retval;
        }
        Ok((total, code))
    }

    /// Median over `rounds` of the kernel's mean ns per run, each round
    /// `batches` x `repeat` runs.
    pub fn ns_per_packet(
        &mut self,
        frame: &[u8],
        rounds: usize,
        batches: u64,
        repeat: u32,
    ) -> Res<f64> {
        let mut v = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let (ns, _) = self.run_batches(frame, batches, repeat)?;
            v.push(ns as f64 / (batches * repeat.max(1) as u64) as f64);
        }
        Ok(median(&mut v))
    }
}

/// The median of `v` (NaN when empty).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The mean of the middle half of `v` (NaN when empty): robust like the
/// median, but it averages, so it resolves differences finer than the
/// samples' own step (the kernel gives a test run's time per run in
/// whole ns).
pub fn interquartile_mean(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let (lo, hi) = (n / 4, n - n / 4);
    let mid = &v[lo..hi.max(lo)];
    if mid.is_empty() {
        return f64::NAN;
    }
    mid.iter().sum::<f64>() / mid.len() as f64
}

/// XDP return codes by name.
pub fn xdp_code(code: u32) -> &'static str {
    match code {
        0 => "ABORTED",
        1 => "DROP",
        2 => "PASS",
        3 => "TX",
        4 => "REDIRECT",
        _ => "?",
    }
}

/// Receive counters of `dev` in `ns` (`ip -s -j link`): (packets, dropped).
pub fn rx_stats(ns: &Netns, dev: &str) -> Res<(u64, u64)> {
    let out = ns
        .ip(&["-s", "-j", "link", "show", "dev", dev])
        .map_err(err("ip -s link"))?;
    let v: serde_json::Value = serde_json::from_str(&out).map_err(err("ip -s -j link"))?;
    let rx = &v[0]["stats64"]["rx"];
    Ok((
        rx["packets"].as_u64().unwrap_or(0),
        rx["dropped"].as_u64().unwrap_or(0),
    ))
}

/// An XDP program attached (by netlink) to `dev` in `ns`, detached on drop.
pub struct Attached<'a> {
    prog: &'a Prog,
    ns: String,
    ifindex: i32,
    generic: bool,
}

fn xdp_flags(generic: bool) -> libbpf_rs::XdpFlags {
    if generic {
        libbpf_rs::XdpFlags::SKB_MODE
    } else {
        libbpf_rs::XdpFlags::DRV_MODE
    }
}

/// Runs `f` in a thread that entered network namespace `ns`.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> Res<T> + Send) -> Res<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            nfkit_kernel::deploy::enter_netns(ns).map_err(err("setns"))?;
            f()
        })
        .join()
        .map_err(|_| "thread panicked".to_string())?
    })
}

impl<'a> Attached<'a> {
    /// Attaches `prog` to `dev` in `ns`, native (driver) XDP or generic.
    pub fn new(prog: &'a Prog, ns: &Netns, dev: &str, generic: bool) -> Res<Attached<'a>> {
        let ifindex = ns.ifindex(dev).map_err(err("ifindex"))? as i32;
        in_netns(ns.name(), || {
            libbpf_rs::Xdp::new(prog.as_fd())
                .attach(ifindex, xdp_flags(generic))
                .map_err(err("XDP attach"))
        })?;
        Ok(Attached {
            prog,
            ns: ns.name().to_string(),
            ifindex,
            generic,
        })
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        let (ns, ifindex, flags, prog) =
            (&self.ns, self.ifindex, xdp_flags(self.generic), self.prog);
        let _ = in_netns(ns, || {
            libbpf_rs::Xdp::new(prog.as_fd())
                .detach(ifindex, flags)
                .map_err(err("XDP detach"))
        });
    }
}

/// One throughput measurement: frames sent and received per second.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rate {
    /// Frames the sender put on the wire, per second.
    pub sent_pps: f64,
    /// Frames the SUT's veth received (its XDP program ran on them), per second.
    pub rx_pps: f64,
}

/// Blasts `flows` from `ns_a`'s end of the testbed for `secs` seconds
/// (nfkit's AF_PACKET sender, no rate limit) and counts what `dev_b`
/// received in `ns_b`.
pub fn blast(
    tb: &nfkit_kernel::Testbed,
    flows: &[nfkit_traffic::flows::Flow],
    secs: f64,
) -> Res<Rate> {
    let (rx0, _) = rx_stats(&tb.ns_b, &tb.veth.b.dev)?;
    let rep = nfkit_traffic::send(
        &nfkit_traffic::Source::Flows(flows.to_vec()),
        &nfkit_traffic::SendOptions {
            dev: tb.veth.a.dev.clone(),
            netns: Some(tb.ns_a.name().to_string()),
            duration: Some(Duration::from_secs_f64(secs)),
            ..nfkit_traffic::SendOptions::default()
        },
    )
    .map_err(err("send"))?;
    // Let the receiver drain its queue.
    std::thread::sleep(Duration::from_millis(50));
    let (rx1, _) = rx_stats(&tb.ns_b, &tb.veth.b.dev)?;
    let secs = rep.seconds.max(1e-9);
    Ok(Rate {
        sent_pps: rep.sent as f64 / secs,
        rx_pps: rx1.saturating_sub(rx0) as f64 / secs,
    })
}

/// A private bpffs mount and state directory for deployments
/// (`NFKIT_PIN_ROOT` / `NFKIT_STATE_DIR` of the deploy tests), unmounted
/// and removed on drop.
pub struct Scratch {
    dir: PathBuf,
    mounted: bool,
}

impl Scratch {
    pub fn new(tag: &str) -> Res<Scratch> {
        let dir = std::env::temp_dir().join(format!("nfkit-bench-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bpf")).map_err(err("scratch dir"))?;
        let mut s = Scratch {
            dir,
            mounted: false,
        };
        let ok = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(s.dir.join("bpf"))
            .status()
            .map_err(err("mount"))?
            .success();
        if !ok {
            return Err("mount -t bpf failed".into());
        }
        s.mounted = true;
        Ok(s)
    }

    /// The deploy paths inside this scratch directory.
    pub fn paths(&self) -> nfkit_kernel::deploy::Paths {
        nfkit_kernel::deploy::Paths {
            pin_root: self.dir.join("bpf"),
            state_file: self.dir.join("state").join("state.json"),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let paths = self.paths();
        let _ = nfkit_kernel::deploy::undeploy(&paths, None);
        if self.mounted {
            let _ = Command::new("umount").arg(self.dir.join("bpf")).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Prints a table: a header row and rows of cells, columns aligned.
pub fn print_table(title: &str, header: &[&str], rows: &[Vec<String>]) {
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.len());
        }
    }
    println!("\n{title}");
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == 0 {
                s.push_str(&format!("{c:<width$}", width = w[i]));
            } else {
                s.push_str(&format!("  {c:>width$}", width = w[i]));
            }
        }
        println!("{}", s.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

/// `a / b` as "x.xx", or "-" when either is missing.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

/// Time since `t` in ms.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Map writes of the control plane: (map, key, value).
pub type MapWrites = Vec<(String, Vec<u8>, Vec<u8>)>;

/// A compiled script ready to load: its Image, the entry program to run
/// and the control-plane writes.
pub type Program = (nfkit_object::Image, String, MapWrites);

/// Loads a linked Image with nfkit's loader and applies the control
/// plane's map writes (classifier table, actions).
pub fn load_compiled(
    image: &nfkit_object::Image,
    writes: &[(String, Vec<u8>, Vec<u8>)],
) -> Res<Loaded> {
    let loaded = nfkit_kernel::load_image(image, &nfkit_kernel::LoadOptions::default())
        .map_err(err("load"))?;
    for (m, k, v) in writes {
        let map = loaded
            .map(m)
            .ok_or_else(|| format!("control plane: no map `{m}`"))?;
        map.update(k, v, 0).map_err(err(m))?;
    }
    Ok(loaded)
}

/// Compiles a chain script (NF search path: the bench's own NFs, then
/// the catalogue) for the static mode: the Image, its entry and the
/// control-plane writes.
pub fn compile_static(file: &str, src: &str) -> Res<Program> {
    compile_static_with(file, src, nfkit_lang::link::Inline::On)
}

/// [`compile_static`] with inlining on or off (docs/cost.md).
pub fn compile_static_with(
    file: &str,
    src: &str,
    inline: nfkit_lang::link::Inline,
) -> Res<Program> {
    let opts = nfkit_lang::Options {
        search: nfkit_nf::SearchPath::new(vec![nf_dir()]),
        ..nfkit_lang::Options::default()
    };
    let c = nfkit_lang::compile_with(file, src, &opts, inline).map_err(|e| format!("{e}"))?;
    let entry = c
        .entry()
        .ok_or_else(|| format!("{file}: no classifier"))?
        .to_string();
    let writes = c.control_plane();
    Ok((c.image, entry, writes))
}

/// A script compiled for dynamic mode (segments and NF dynamic entries
/// in one Image, `nfkit_progs` filled by its map inits): the Image, the
/// dynamic classifier to run and the control-plane writes.
pub fn compile_dynamic(file: &str, src: &str) -> Res<Program> {
    compile_dynamic_with(file, src, false, true)
}

/// [`compile_dynamic`] without the per-program passes after inlining (`DynSlots::passes`
/// off: no lookups once, no dead code removal; docs/cost.md).
pub fn compile_dynamic_no_passes(file: &str, src: &str) -> Res<Program> {
    compile_dynamic_with(file, src, false, false)
}

/// [`compile_dynamic`] with every call site tail-calling the NFs' shared
/// dynamic entries, calls not inlined (`DynSlots::shared_entries`: the
/// dynamic build before per-site entries, docs/cost.md).
pub fn compile_dynamic_shared(file: &str, src: &str) -> Res<Program> {
    compile_dynamic_with(file, src, true, false)
}

fn compile_dynamic_with(file: &str, src: &str, shared: bool, passes: bool) -> Res<Program> {
    let opts = nfkit_lang::Options {
        search: nfkit_nf::SearchPath::new(vec![nf_dir()]),
        ..nfkit_lang::Options::default()
    };
    let slots = nfkit_lang::DynSlots {
        shared_entries: shared,
        passes,
        ..nfkit_lang::DynSlots::default()
    };
    let d = nfkit_lang::compile_dynamic(file, src, &opts, &slots).map_err(|e| format!("{e}"))?;
    let writes = d.control_plane();
    Ok((d.image, d.entry, writes))
}

/// Run-time statistics of BPF programs (`kernel.bpf_stats_enabled`)
/// switched on while this lives, and back to what they were on drop.
pub struct BpfStats {
    old: String,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStats {
    pub fn enable() -> Res<BpfStats> {
        let old = std::fs::read_to_string(BPF_STATS).map_err(err(BPF_STATS))?;
        std::fs::write(BPF_STATS, "1").map_err(err(BPF_STATS))?;
        Ok(BpfStats {
            old: old.trim().to_string(),
        })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS, &self.old);
    }
}

/// A program's (run_time_ns, run_cnt) from `bpftool prog show` (zero
/// while statistics are off). An entry's time includes the programs it
/// tail-calls.
pub fn prog_runtime(prog: &Prog) -> Res<(u64, u64)> {
    let id = prog.id().map_err(err("prog id"))?;
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show", "id", &id.to_string()])
        .output()
        .map_err(err("bpftool"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(err("bpftool prog show"))?;
    Ok((
        v["run_time_ns"].as_u64().unwrap_or(0),
        v["run_cnt"].as_u64().unwrap_or(0),
    ))
}
