//! Running a compiled script in the userspace VM, packet by packet, the
//! way `nfkit run` does: the control plane's writes applied first (the
//! classifier table, default and fault actions), the clock pinned to
//! each packet's timestamp (docs/abi.md 7), statistics read back from
//! `nfkit_stats`.

use crate::maps::{self, DumpOptions, MapInfo, Row, VmMap};
use nfkit_abi::{maps as abi_maps, stats as abi_stats, Hook, NfConfig};
use nfkit_lang::chain_object::ChainObject;
use nfkit_lang::ir::Program;
use nfkit_lang::{Compiled, DynCompiled};
use nfkit_vm::{Context, Engine, EngineUse, RunOptions, SkBuff, Vm, VmConfig, XdpMd};

/// Why a script cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the script has no classifier (every_packet(...), by_dscp(...), ...): nothing to run")]
    NoClassifier,
    /// The VM refused the image (its text embedded: not a `source()`).
    #[error("loading into the VM: {0}")]
    Load(Box<nfkit_vm::LoadError>),
    #[error("map {0}: not in the image")]
    NoMap(String),
    #[error("map {map}: {cause}")]
    Map {
        map: String,
        cause: crate::maps::MapError,
    },
    /// The pipeline's `post` program did not compile.
    #[error("the pipeline's post program: {0}")]
    Post(String),
}

impl From<Box<nfkit_vm::LoadError>> for RunError {
    fn from(e: Box<nfkit_vm::LoadError>) -> RunError {
        RunError::Load(e)
    }
}

/// The outcome of one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The hook's return code (XDP action, TC action, socket length).
    pub code: u64,
    /// The VM's error, if the run itself failed.
    pub error: Option<String>,
    /// The packet afterwards.
    pub packet: Vec<u8>,
    /// Redirect target set by a helper (ifindex).
    pub redirect: Option<u32>,
    /// (chain slot, k) of the `nfkit_stats` counter this packet moved.
    pub stat: Option<(u32, u32)>,
    /// Instructions executed.
    pub insns: u64,
}

/// Per-chain counters: `counts[k]`, k = verdict action 0..7, 8 = plain
/// value (default action), 9 = fault (docs/abi.md 8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainStats {
    /// The chain's name (`(unclaimed)` for slot 0).
    pub chain: String,
    pub counts: [u64; 10],
}

/// Names of the `k` columns (nfkit-abi's).
pub use nfkit_abi::stats::NAMES as STAT_NAMES;

/// A compiled script loaded into the VM.
pub struct ScriptVm {
    pub vm: Vm,
    entry: String,
    hook: Hook,
    chains: Vec<String>,
    last: Vec<u64>,
    /// The maps reports show: (typed info, whether an NF's).
    shown: Vec<(MapInfo, bool)>,
    /// The clock of the latest packet (times in maps are shown against it).
    now: Option<u64>,
}

/// One map of a run, typed.
#[derive(Clone, Debug, PartialEq)]
pub struct MapDump {
    pub info: MapInfo,
    /// An NF's map (not declared by the script).
    pub nf: bool,
    pub rows: Vec<Row>,
}

/// The maps a report shows: the script's, then the NFs' own (the
/// `nfkit_*` maps of the ABI, global data and maps with initial
/// contents, such as the dpi tables, left out), typed.
/// A chain object has no program: its maps all show as NFs' (untyped).
fn shown_maps(image: &nfkit_object::Image, program: Option<&Program>) -> Vec<(MapInfo, bool)> {
    use nfkit_object::{MapKind, MapType};
    let mut out = Vec::new();
    let declared = program.map(|p| p.maps.as_slice()).unwrap_or_default();
    for d in declared {
        if let Some(spec) = image.maps.iter().find(|s| s.name == d.name) {
            out.push((MapInfo::from_spec(spec, image.btf.as_ref(), Some(d)), false));
        }
    }
    for spec in &image.maps {
        let data = matches!(
            spec.map_type,
            MapType::Hash
                | MapType::Array
                | MapType::PercpuHash
                | MapType::PercpuArray
                | MapType::LruHash
                | MapType::LruPercpuHash
                | MapType::LpmTrie
        );
        if data
            && spec.kind == MapKind::Declared
            && !spec.name.starts_with("nfkit_")
            && spec.data.is_none()
            && !declared.iter().any(|d| d.name == spec.name)
        {
            out.push((MapInfo::from_spec(spec, image.btf.as_ref(), None), true));
        }
    }
    out
}

fn map_err(map: &str, source: impl Into<crate::maps::MapError>) -> RunError {
    RunError::Map {
        map: map.to_string(),
        cause: source.into(),
    }
}

impl ScriptVm {
    /// Loads `c` on the best engine ([`Engine::best`]) and applies its
    /// control-plane writes.
    pub fn new(c: &Compiled) -> Result<ScriptVm, RunError> {
        ScriptVm::new_on(c, Engine::best())
    }

    /// Loads `c` on `engine` and applies its control-plane writes.
    pub fn new_on(c: &Compiled, engine: Engine) -> Result<ScriptVm, RunError> {
        ScriptVm::new_with(c, VmConfig::kernel().with_engine(engine))
    }

    /// Loads `c` into a VM configured by `config` (the switch: one CPU
    /// per worker) and applies its control-plane writes.
    pub fn new_with(c: &Compiled, config: VmConfig) -> Result<ScriptVm, RunError> {
        let entry = c.entry().ok_or(RunError::NoClassifier)?;
        ScriptVm::load(&c.image, entry, c.hook, &c.program, config)
    }

    /// [`ScriptVm::new_with`], keeping `old`'s maps: every map the
    /// script declares (or its NFs do) with the same name, type and
    /// sizes as one of `old`'s shares `old`'s entries
    /// ([`Vm::new_keeping`]); the ABI's `nfkit_*` maps (classifier
    /// tables, configuration, statistics) are the new script's own, so
    /// `old` runs on unchanged. A hitless reload builds its next version
    /// this way.
    pub fn new_keeping(
        c: &Compiled,
        config: VmConfig,
        old: &ScriptVm,
    ) -> Result<ScriptVm, RunError> {
        let entry = c.entry().ok_or(RunError::NoClassifier)?;
        ScriptVm::load_keeping(&c.image, entry, c.hook, &c.program, config, Some(&old.vm))
    }

    /// The entry program that runs for each packet (the classifier).
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// The hook the script was compiled for.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// Loads a script compiled for dynamic mode (on the best engine):
    /// the dynamic classifier, segments and NF entries composed through
    /// `nfkit_progs`.
    pub fn new_dynamic(c: &DynCompiled) -> Result<ScriptVm, RunError> {
        ScriptVm::new_dynamic_on(c, Engine::best())
    }

    /// [`ScriptVm::new_dynamic`] on `engine`.
    pub fn new_dynamic_on(c: &DynCompiled, engine: Engine) -> Result<ScriptVm, RunError> {
        if c.entry.is_empty() {
            return Err(RunError::NoClassifier);
        }
        let config = VmConfig::kernel().with_engine(engine);
        ScriptVm::load(&c.image, &c.entry, c.hook, &c.program, config)
    }

    fn load(
        image: &nfkit_object::Image,
        entry: &str,
        hook: Hook,
        program: &Program,
        config: VmConfig,
    ) -> Result<ScriptVm, RunError> {
        ScriptVm::load_keeping(image, entry, hook, program, config, None)
    }

    fn load_keeping(
        image: &nfkit_object::Image,
        entry: &str,
        hook: Hook,
        program: &Program,
        config: VmConfig,
        old: Option<&Vm>,
    ) -> Result<ScriptVm, RunError> {
        ScriptVm::load_parts(
            image,
            entry,
            hook,
            &nfkit_lang::link::control_plane(program),
            program.chain_names(),
            shown_maps(image, Some(program)),
            config,
            old,
        )
    }

    /// Loads a chain object (`nfkit compile -o`: no compiling) into a VM
    /// configured by `config`, keeping `old`'s maps as
    /// [`ScriptVm::new_keeping`] does when given, and applies its
    /// control-plane writes.
    pub fn from_object(
        o: &ChainObject,
        config: VmConfig,
        old: Option<&ScriptVm>,
    ) -> Result<ScriptVm, RunError> {
        let entry = o.entry.as_deref().ok_or(RunError::NoClassifier)?;
        let shown = shown_maps(&o.image, None);
        ScriptVm::load_parts(
            &o.image,
            entry,
            o.hook,
            &o.writes,
            o.chains.clone(),
            shown,
            config,
            old.map(|s| &s.vm),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn load_parts(
        image: &nfkit_object::Image,
        entry: &str,
        hook: Hook,
        writes: &[nfkit_lang::link::MapWrite],
        chains: Vec<String>,
        shown: Vec<(MapInfo, bool)>,
        config: VmConfig,
        old: Option<&Vm>,
    ) -> Result<ScriptVm, RunError> {
        let vm = match old {
            Some(old) => Vm::new_keeping(image, config, old, &|name| !name.starts_with("nfkit_")),
            None => Vm::new(image, config),
        }
        .map_err(|e| RunError::Load(Box::new(e)))?;
        for (map, k, v) in writes {
            let m = vm.map(map).ok_or_else(|| RunError::NoMap(map.clone()))?;
            m.update(k, v, 0).map_err(|e| map_err(map, e))?;
        }
        let mut s = ScriptVm {
            vm,
            entry: entry.to_string(),
            hook,
            chains,
            last: Vec::new(),
            shown,
            now: None,
        };
        s.last = s.raw_stats();
        Ok(s)
    }

    /// What runs the script's entry: the interpreter, the JIT, or the
    /// interpreter because the JIT could not compile it (traced runs
    /// always use the interpreter).
    pub fn engine(&self) -> EngineUse {
        self.vm
            .engine(self.entry.as_str())
            .cloned()
            .unwrap_or(EngineUse::Interp)
    }

    /// Pins `nf_now()` to `now_ns` (and the random sequence to its seed).
    fn pin_clock(&self, now_ns: u64) -> Result<(), RunError> {
        let name = abi_maps::CONFIG;
        let m = self
            .vm
            .map(name)
            .ok_or_else(|| RunError::NoMap(name.to_string()))?;
        let key = 0u32.to_le_bytes();
        let old = m.lookup(&key).map_err(|e| map_err(name, e))?;
        let cfg = old
            .as_deref()
            .and_then(NfConfig::from_bytes)
            .unwrap_or_default();
        m.update(&key, &cfg.pinned_at(now_ns).to_bytes(), 0)
            .map_err(|e| map_err(name, e))
    }

    fn raw_stats(&self) -> Vec<u64> {
        let Some(m) = self.vm.map(abi_maps::STATS_MAP) else {
            return Vec::new();
        };
        // Rows of the unclaimed slot and of this script's chains only.
        let rows = abi_stats::index(self.chains.len() as u32 + 1, 0);
        (0..rows.min(abi_maps::STATS))
            .map(|i| {
                m.lookup(&i.to_le_bytes())
                    .ok()
                    .flatten()
                    .map(|v| v.chunks(8).map(le).fold(0u64, u64::wrapping_add))
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Runs the whole script on one packet at time `now_ns`.
    pub fn run(
        &mut self,
        frame: &[u8],
        now_ns: u64,
        trace: bool,
    ) -> Result<(Outcome, Vec<String>), RunError> {
        self.pin_clock(now_ns)?;
        self.now = Some(now_ns);
        let opts = RunOptions {
            trace,
            ..RunOptions::default()
        };
        let ctx = match self.hook {
            Hook::Xdp | Hook::Switch => Context::Xdp(XdpMd::new(frame)),
            _ => Context::Skb(SkBuff::new(frame)),
        };
        let res = self.vm.run(self.entry.as_str(), ctx, &opts);
        let now = self.raw_stats();
        let stat = now
            .iter()
            .zip(self.last.iter().chain(std::iter::repeat(&0)))
            .position(|(a, b)| a != b)
            .map(|i| abi_stats::split(i as u32));
        self.last = now;
        let tr = res.trace_lines();
        let packet = self.kept_bytes(&res.packet, res.code());
        Ok((
            Outcome {
                code: res.code(),
                error: res.result.as_ref().err().map(|e| e.to_string()),
                packet,
                redirect: res.redirect.as_ref().and_then(|r| match r {
                    nfkit_vm::Redirect::Ifindex { ifindex, .. } => Some(*ifindex),
                    nfkit_vm::Redirect::Map { ifindex, .. } => *ifindex,
                    #[allow(unreachable_patterns)]
                    _ => None,
                }),
                stat,
                insns: res.insns,
            },
            tr,
        ))
    }

    /// The packet as the hook leaves it: a socket filter keeps the first
    /// `code` bytes (all of them when `code` is larger).
    fn kept_bytes(&self, packet: &[u8], code: u64) -> Vec<u8> {
        match self.hook {
            Hook::Socket => {
                let n = usize::try_from(code)
                    .unwrap_or(usize::MAX)
                    .min(packet.len());
                packet.get(..n).unwrap_or_default().to_vec()
            }
            _ => packet.to_vec(),
        }
    }

    /// The name of chain slot `slot` (`(unclaimed)` for 0).
    pub fn chain_name(&self, slot: u32) -> String {
        if slot == 0 {
            abi_stats::UNCLAIMED.into()
        } else {
            self.chains
                .get(slot as usize - 1)
                .cloned()
                .unwrap_or_else(|| format!("chain {}", slot - 1))
        }
    }

    /// Counters per chain (rows with any count).
    pub fn stats(&self) -> Vec<ChainStats> {
        let raw = self.raw_stats();
        (0..=self.chains.len() as u32)
            .filter_map(|slot| {
                let mut counts = [0u64; abi_stats::COLUMNS];
                for (k, c) in counts.iter_mut().enumerate() {
                    let i = abi_stats::index(slot, k as u32) as usize;
                    *c = raw.get(i).copied().unwrap_or(0);
                }
                counts.iter().any(|&c| c > 0).then(|| ChainStats {
                    chain: self.chain_name(slot),
                    counts,
                })
            })
            .collect()
    }

    /// The maps a report shows, typed (script maps, then NF maps).
    pub fn map_infos(&self) -> impl Iterator<Item = &MapInfo> {
        self.shown.iter().map(|(i, _)| i)
    }

    /// Typed access to map `name` (one a report shows): read and
    /// written with [`maps::access`]'s text-level operations.
    pub fn map_access(&self, name: &str) -> Option<VmMap<'_>> {
        let (info, _) = self.shown.iter().find(|(i, _)| i.name == name)?;
        Some(VmMap::new(self.vm.map(name)?, info.clone(), self.now))
    }

    /// Every map a report shows, typed (script maps, then NF maps);
    /// per-CPU integers summed, array entries of value 0 left out.
    pub fn map_dumps(&self) -> Result<Vec<MapDump>, RunError> {
        let opts = DumpOptions {
            skip_zero_array: true,
            sum_per_cpu: true,
        };
        let mut out = Vec::new();
        for (info, nf) in &self.shown {
            let Some(m) = self.vm.map(&info.name) else {
                continue;
            };
            let access = VmMap::new(m, info.clone(), self.now);
            let rows = maps::dump(&access, opts).map_err(|e| map_err(&info.name, e))?;
            out.push(MapDump {
                info: info.clone(),
                nf: *nf,
                rows,
            });
        }
        Ok(out)
    }

    /// The script's maps: (name, sorted (key, value) pairs); per-CPU
    /// values summed over CPUs.
    pub fn maps(&self, prog: &Program) -> Vec<(String, Vec<(u64, u64)>)> {
        prog.maps
            .iter()
            .map(|d| {
                let mut rows: Vec<(u64, u64)> = Vec::new();
                if let Some(m) = self.vm.map(&d.name) {
                    for (k, v) in m.entries() {
                        let key = d.key.wrap(le(&k));
                        let per_cpu = matches!(
                            d.map_type,
                            nfkit_object::MapType::PercpuArray | nfkit_object::MapType::PercpuHash
                        );
                        let val = if per_cpu {
                            v.chunks(8).map(le).fold(0u64, |a, b| a.wrapping_add(b))
                        } else {
                            le(&v)
                        };
                        let val = d.value.wrap(val);
                        let is_array = matches!(
                            d.map_type,
                            nfkit_object::MapType::Array | nfkit_object::MapType::PercpuArray
                        );
                        if is_array && val == 0 {
                            continue;
                        }
                        rows.push((key, val));
                    }
                }
                rows.sort();
                (d.name.clone(), rows)
            })
            .collect()
    }
}

fn le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    let n = b.len().min(8);
    a[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(a)
}

/// `DROP`, `REDIRECT(3)`, ... for a verdict value.
pub fn verdict_name(v: u64) -> String {
    nfkit_abi::verdict::name(v)
}

/// One packet's line of a run report.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PacketLine {
    /// 1-based packet number.
    pub index: usize,
    pub chain: String,
    /// The stats column (`PASS`, `DROP`, `VALUE`, `FAULT`, ...).
    pub verdict: String,
    /// The hook's return code.
    pub code: u64,
    pub redirect: Option<u32>,
    pub insns: u64,
    pub error: Option<String>,
    /// A pipeline's `post` program ran on the frame leaving on a port:
    /// its verdict (`DROP` keeps the frame off the port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post: Option<String>,
}

/// What `nfkit run SCRIPT` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub packets: usize,
    pub stats: Vec<ChainStats>,
    /// The script's maps as integers (a tuple key's first 8 bytes).
    pub maps: Vec<(String, Vec<(u64, u64)>)>,
    /// Every map, typed: the script's, then its NFs'.
    pub map_dumps: Vec<MapDump>,
    pub lines: Vec<PacketLine>,
    /// Packets the hook lets through (not dropped), as modified: (ts, bytes).
    pub out: Vec<(u64, Vec<u8>)>,
    /// Per-instruction traces of each packet (when asked for).
    pub traces: Vec<Vec<String>>,
    /// What ran the script's entry (traced packets: the interpreter).
    pub engine: EngineUse,
    /// Packets the interpreter ran because they were traced.
    pub traced: usize,
}

/// Whether return value `r0` lets the packet through at `hook` (passed,
/// transmitted or redirected: nfkit-abi's table).
pub fn kept(hook: Hook, r0: u64) -> bool {
    hook.keeps_packet(hook.code(r0))
}

/// Runs the whole script on every packet `(timestamp ns, bytes)`, on
/// the best engine ([`Engine::best`]).
pub fn run_capture(
    c: &Compiled,
    packets: &[(u64, Vec<u8>)],
    trace: bool,
) -> Result<Report, RunError> {
    run_capture_on(c, packets, trace, Engine::best())
}

/// [`run_capture`] on `engine` (traced runs use the interpreter).
pub fn run_capture_on(
    c: &Compiled,
    packets: &[(u64, Vec<u8>)],
    trace: bool,
    engine: Engine,
) -> Result<Report, RunError> {
    let mut vm = ScriptVm::new_on(c, engine)?;
    let mut post = post_vm(c, &vm, engine)?;
    let mut lines = Vec::new();
    let mut out = Vec::new();
    let mut traces = Vec::new();
    for (i, (ts, data)) in packets.iter().enumerate() {
        let (o, tr) = vm.run(data, *ts, trace)?;
        let (chain, verdict) = match o.stat {
            Some((slot, k)) => (vm.chain_name(slot), abi_stats::name(k).to_string()),
            None => ("?".into(), "?".into()),
        };
        let mut post_verdict = None;
        if kept(c.hook, o.code) {
            let mut frame = o.packet.clone();
            let mut send = true;
            // Frames leaving on a port (REDIRECT, TX) pass `post` first,
            // as in the switch and at the kernel's TC egress.
            if let Some(p) = post
                .as_mut()
                .filter(|_| verdict == "REDIRECT" || verdict == "TX")
            {
                let (po, _) = p.run(&frame, *ts, false)?;
                send = kept(c.hook, po.code);
                post_verdict = Some(match po.stat {
                    Some((_, k)) => abi_stats::name(k).to_string(),
                    None => "?".into(),
                });
                frame = po.packet;
            }
            if send {
                out.push((*ts, frame));
            }
        }
        lines.push(PacketLine {
            index: i + 1,
            chain,
            verdict,
            code: o.code,
            redirect: o.redirect,
            insns: o.insns,
            error: o.error.clone(),
            post: post_verdict,
        });
        if trace {
            traces.push(tr);
        }
    }
    Ok(Report {
        packets: packets.len(),
        stats: vm.stats(),
        maps: vm.maps(&c.program),
        map_dumps: vm.map_dumps()?,
        lines,
        out,
        traces,
        engine: vm.engine(),
        traced: if trace { packets.len() } else { 0 },
    })
}

/// A pipeline's `post` program (none without `post`) in the VM, with
/// `ingress`'s maps (docs/language.md, "Pipelines"), where the hook has
/// it: the switch and TC (at TC egress); frames XDP redirects skip the
/// kernel's egress path, so none for XDP.
fn post_vm(c: &Compiled, ingress: &ScriptVm, engine: Engine) -> Result<Option<ScriptVm>, RunError> {
    if !matches!(c.hook, Hook::Tc | Hook::Switch) {
        return Ok(None);
    }
    let opts = nfkit_lang::Options {
        hook: Some(c.hook),
        ..nfkit_lang::Options::default()
    };
    let Some(pc) =
        nfkit_lang::pipeline::post_of(c, &opts).map_err(|e| RunError::Post(e.to_string()))?
    else {
        return Ok(None);
    };
    let config = VmConfig::kernel().with_engine(engine);
    Ok(Some(ScriptVm::new_keeping(&pc, config, ingress)?))
}

impl Report {
    /// `engine: jit`, `engine: interp (JIT fallback: why)`, ..., and
    /// when packets were traced, that the interpreter ran them.
    pub fn engine_line(&self) -> String {
        engine_line(&self.engine, self.traced, self.packets)
    }

    /// The human-readable report: per chain and verdict counts, then maps.
    pub fn text(&self, per_packet: bool) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        if per_packet {
            for (i, l) in self.lines.iter().enumerate() {
                let _ = write!(
                    s,
                    "packet {}: chain {} -> {} (code {}",
                    l.index, l.chain, l.verdict, l.code
                );
                if let Some(r) = l.redirect {
                    let _ = write!(s, ", redirect {r}");
                }
                if let Some(p) = &l.post {
                    let _ = write!(s, ", post {p}");
                }
                let _ = writeln!(s, ", {} insns)", l.insns);
                if let Some(e) = &l.error {
                    let _ = writeln!(s, "  error: {e}");
                }
                if let Some(t) = self.traces.get(i) {
                    for step in t {
                        let _ = writeln!(s, "  {step}");
                    }
                }
            }
        }
        let _ = writeln!(s, "packets: {}", self.packets);
        let _ = writeln!(s, "chains:");
        for st in &self.stats {
            let parts: Vec<String> = st
                .counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(k, c)| format!("{} {c}", STAT_NAMES[k]))
                .collect();
            let _ = writeln!(s, "  {}: {}", st.chain, parts.join(", "));
        }
        for (nf, title) in [(false, "maps:"), (true, "nf maps:")] {
            let mut dumps = self.map_dumps.iter().filter(|d| d.nf == nf).peekable();
            if nf && dumps.peek().is_none() {
                continue;
            }
            let _ = writeln!(s, "{title}");
            for d in dumps {
                let _ = writeln!(s, "  {}: {} entries", d.info.name, d.rows.len());
                for r in &d.rows {
                    let _ = writeln!(s, "    {}", r.text());
                }
            }
        }
        s
    }

    /// The report as JSON.
    pub fn json(&self, per_packet: bool) -> serde_json::Value {
        let chains: Vec<serde_json::Value> = self
            .stats
            .iter()
            .map(|st| {
                let counts: serde_json::Map<String, serde_json::Value> = st
                    .counts
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(k, &c)| (STAT_NAMES[k].to_string(), c.into()))
                    .collect();
                serde_json::json!({"chain": st.chain, "counts": counts})
            })
            .collect();
        let maps = |nf: bool| -> serde_json::Map<String, serde_json::Value> {
            self.map_dumps
                .iter()
                .filter(|d| d.nf == nf)
                .map(|d| {
                    let rows: Vec<serde_json::Value> = d.rows.iter().map(Row::json).collect();
                    (d.info.name.clone(), rows.into())
                })
                .collect()
        };
        let mut v = serde_json::json!({
            "packets": self.packets,
            "chains": chains,
            "maps": maps(false),
            "nf_maps": maps(true),
            "out_packets": self.out.len(),
        });
        engine_json(&mut v, &self.engine, self.traced);
        if per_packet {
            v["per_packet"] = serde_json::to_value(&self.lines).unwrap_or_default();
        }
        v
    }
}

/// The line a run report names its engine with: what ran the entry
/// ([`EngineUse`]'s text), and that the `traced` of `packets` packets ran
/// on the interpreter (traced runs always do).
pub fn engine_line(engine: &EngineUse, traced: usize, packets: usize) -> String {
    let mut s = format!("engine: {engine}");
    if traced > 0 {
        s.push_str(&format!(
            "; traced packets ({traced} of {packets}) run on the interpreter"
        ));
    }
    s
}

/// Adds `engine` (`jit` or `interp`: what ran), `engine_fallback` (why
/// the JIT did not, when it was asked for) and `traced_on` (`interp`,
/// when packets were traced) to a JSON report.
pub fn engine_json(v: &mut serde_json::Value, engine: &EngineUse, traced: usize) {
    v["engine"] = engine.engine().name().into();
    if let EngineUse::Fallback(why) = engine {
        v["engine_fallback"] = why.as_str().into();
    }
    if traced > 0 {
        v["traced_on"] = Engine::Interp.name().into();
    }
}
