//! [`Switch`]: the switch top (`rtl/ebpf_switch.sv`) as one model:
//! [`PORTS`] input ports with [`ENGINES`] engines each, one shared
//! double-buffered instruction memory, an arbiter per output and the
//! crossbar. Packets are offered on ports with the cycle they arrive at;
//! [`Switch::run`] clocks the switch until all of them have left and
//! answers, per packet, the engine that ran it, its result and where it
//! went, and per output the packets in the order they left.
//!
//! One coprocessor serves the maps of all engines (eBPFlow's groups share
//! theirs), with the single engine's map parameters: a program's maps are
//! placed as on a [`crate::Core`], one copy for the whole switch, and the
//! host reads and writes them between runs ([`Switch::map_lookup`], ...).
//! Engines take turns at it and at the one value memory (see
//! `rtl/ebpf_switch.sv`), so updates from engines running at once are
//! serialised, atomics and spin locks included.

use crate::action::{ActionConfig, ActionOut, MAX_HOSTS};
use crate::error::RtlError;
use crate::layout::VAL_BYTES;
use crate::layout::{IMEM_SLOTS, PKT_MAX, VALUE_BASE, XDP_HEADROOM};
use crate::maps::{Entry, MapDef, MapHost, MapOps, MapTable};
use crate::model::Line;
use crate::program::Program;
use crate::result::{Fault, FaultKind, Redirect, Stalls};

/// Input ports of the switch model (`build.rs`'s `SWITCH_PORTS`).
pub const PORTS: usize = 4;
/// Engines per port (`build.rs`'s `SWITCH_ENGINES`; eBPFlow: 4).
pub const ENGINES: usize = 4;
/// Default cycle budget of one packet on its engine.
pub const DEFAULT_BUDGET: u32 = 10_000_000;

/// Where a copy of a packet left the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Output {
    /// Out of a port (an index from 0).
    Port(u8),
    /// To the controller.
    Controller,
    /// The discard tap: dropped (DROP, ABORTED, no such port, no host
    /// port, an empty flood) or past the cycle budget.
    Discard,
}

impl Output {
    fn from_index(o: u32) -> Output {
        match o as usize {
            p if p < PORTS => Output::Port(p as u8),
            p if p == PORTS => Output::Controller,
            _ => Output::Discard,
        }
    }
}

/// One packet's run in the switch.
#[derive(Clone, Debug)]
pub struct SwitchPacket {
    /// [`Switch::offer`]'s answer.
    pub id: u64,
    /// Its input port.
    pub port: usize,
    /// The engine that ran it (port × [`ENGINES`] + its index in the port).
    pub engine: usize,
    /// r0, or the fault that ended the run ([`FaultKind::Budget`] past the
    /// budget).
    pub result: Result<u64, Fault>,
    /// The instruction memory version it ran on.
    pub version: u8,
    pub cycles: u64,
    pub retired: u64,
    pub stalls: Stalls,
    pub redirect: Option<Redirect>,
    /// The action module's answer.
    pub action: ActionOut,
    /// Where the switch sent it (one entry per copy).
    pub outputs: Vec<Output>,
    /// Switch cycles: handed to its engine, its run finished.
    pub t_in: u64,
    pub t_done: u64,
}

/// One copy leaving an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchOutput {
    pub id: u64,
    pub output: Output,
    pub engine: usize,
    /// The switch cycle its last row left.
    pub cycle: u64,
    pub bytes: Vec<u8>,
}

/// What [`Switch::run`] answers.
#[derive(Clone, Debug, Default)]
pub struct SwitchRun {
    /// Every packet run since the last `run`, by id.
    pub packets: Vec<SwitchPacket>,
    /// Every copy that left, in the order they left (ties by output).
    pub outputs: Vec<SwitchOutput>,
    /// Switch cycles this `run` took.
    pub cycles: u64,
}

/// The switch model with a program loaded.
pub struct Switch {
    model: ffi_model::SwModel,
    program: Program,
    /// Staged, each active once the switch has written and swapped it in.
    staged: std::collections::VecDeque<Program>,
    next_id: u64,
    /// The ingress port of each offered packet, by id.
    ports: std::collections::HashMap<u64, usize>,
    action: ActionConfig,
    engines: u64,
    budget: u32,
}

/// Refuses what the switch's engines cannot run.
fn check(program: &Program) -> Result<(), RtlError> {
    if program.words.len() > IMEM_SLOTS {
        return Err(RtlError::TooLarge {
            slots: program.words.len(),
            max: IMEM_SLOTS,
        });
    }
    Ok(())
}

impl Switch {
    /// Builds the switch model and loads `program` into its instruction
    /// memory (every engine enabled, XDP codes, [`PORTS`] ports).
    pub fn new(program: Program) -> Result<Switch, RtlError> {
        check(&program)?;
        let mut model = ffi_model::SwModel::new()?;
        model.load(&program.words);
        let table = program.maps.clone();
        let mut sw = Switch {
            model,
            program,
            staged: Default::default(),
            next_id: 0,
            ports: Default::default(),
            action: ActionConfig {
                nports: PORTS as u8,
                ..ActionConfig::default()
            },
            engines: (1u64 << (PORTS * ENGINES)) - 1,
            budget: DEFAULT_BUDGET,
        };
        sw.apply();
        sw.configure_maps(&table);
        Ok(sw)
    }

    fn apply(&mut self) {
        let hosts = self
            .action
            .hosts
            .iter()
            .enumerate()
            .fold(0, |w, (i, &p)| w | u32::from(p) << (8 * i));
        self.model.config(
            self.engines,
            self.budget,
            self.action.verdicts,
            u32::from(self.action.nports),
            hosts,
            self.action.hosts.len() as u32,
            self.action.fault_verdict,
        );
    }

    /// The program the switch runs now (until a staged one is swapped in).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Enables the first `n` engines of every port (1..=[`ENGINES`]).
    pub fn set_engines_per_port(&mut self, n: usize) -> Result<(), RtlError> {
        if n == 0 || n > ENGINES {
            return Err(RtlError::Switch(format!(
                "{n} engines per port (the switch has 1..={ENGINES})"
            )));
        }
        let per = (1u64 << n) - 1;
        self.engines = (0..PORTS).fold(0, |m, p| m | per << (p * ENGINES));
        self.apply();
        Ok(())
    }

    /// The action modules' settings: as [`crate::Core::set_action`], with
    /// the switch's ports (at most [`PORTS`], host queues on them).
    pub fn set_action(&mut self, cfg: ActionConfig) -> Result<(), RtlError> {
        if usize::from(cfg.nports) > PORTS || cfg.hosts.len() > MAX_HOSTS {
            return Err(RtlError::Action(format!(
                "{} ports and {} host queues (the switch has {PORTS} ports, {MAX_HOSTS} host queues)",
                cfg.nports,
                cfg.hosts.len()
            )));
        }
        if let Some(h) = cfg.hosts.iter().find(|&&h| usize::from(h) >= PORTS) {
            return Err(RtlError::Action(format!(
                "host queue on port index {h} (the switch has {PORTS} ports)"
            )));
        }
        self.action = cfg;
        self.apply();
        Ok(())
    }

    /// Cycles a packet may take on its engine before it is stopped and
    /// discarded ([`FaultKind::Budget`]).
    pub fn set_budget(&mut self, cycles: u32) {
        self.budget = cycles;
        self.apply();
    }

    /// Queues `packet` on input `port`, arriving at switch cycle `at` (or
    /// as soon as the port has taken the packets before it); `timestamp`
    /// is what `bpf_ktime_get_ns` answers for it. Answers its id.
    pub fn offer(
        &mut self,
        port: usize,
        packet: &[u8],
        timestamp: u64,
        at: u64,
    ) -> Result<u64, RtlError> {
        if port >= PORTS {
            return Err(RtlError::Switch(format!(
                "input port {port} (the switch has {PORTS})"
            )));
        }
        if XDP_HEADROOM + packet.len() > PKT_MAX || packet.len() > usize::from(u16::MAX) {
            return Err(RtlError::PacketTooLarge {
                len: packet.len(),
                max: PKT_MAX - XDP_HEADROOM,
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        self.ports.insert(id, port);
        self.model.offer(port as u32, id, packet, timestamp, at);
        Ok(id)
    }

    /// Queues `program` to be written into the inactive instruction
    /// memory while packets run (a slot a cycle, whenever no engine still
    /// holds a packet of that version) and then swapped in: packets that
    /// start after the swap run it, each packet wholly on one version.
    /// Several staged programs follow one another in order.
    pub fn stage(&mut self, program: Program) -> Result<(), RtlError> {
        check(&program)?;
        // The maps stay as they are across a swap: the new version must
        // see them where the old one placed them.
        let current = self.staged.back().unwrap_or(&self.program);
        if program.maps != current.maps {
            return Err(RtlError::Switch(format!(
                "{} places its maps ({}) unlike the version before it ({}): a swap keeps the maps",
                program.name,
                map_names(&program.maps),
                map_names(&current.maps)
            )));
        }
        self.model.stage(&program.words);
        self.staged.push_back(program);
        Ok(())
    }

    /// Swaps done so far (the load counts as the first) and the switch
    /// cycle of the last one.
    pub fn swaps(&self) -> (u64, u64) {
        self.model.swaps()
    }

    /// The switch's cycle counter.
    pub fn now(&self) -> u64 {
        self.model.now()
    }

    /// Clocks the switch until every offered packet has left (or
    /// `max_cycles` pass: then [`RtlError::Switch`]).
    pub fn run(&mut self, max_cycles: u64) -> Result<SwitchRun, RtlError> {
        let t0 = self.model.now();
        let swaps0 = self.model.swaps().0;
        let finished = self.model.run(max_cycles);
        for _ in swaps0..self.model.swaps().0 {
            if let Some(p) = self.staged.pop_front() {
                self.program = p;
            }
        }
        let outs = self.model.take_outputs();
        let mut packets: Vec<SwitchPacket> = self
            .model
            .take_results()
            .into_iter()
            .map(|r| self.packet(&r))
            .collect();
        packets.sort_by_key(|p| p.id);
        if !finished {
            return Err(RtlError::Switch(format!(
                "{} cycles passed with packets still in the switch ({} finished)",
                max_cycles,
                packets.len()
            )));
        }
        let outputs = outs
            .into_iter()
            .map(|(o, bytes)| SwitchOutput {
                id: o.id,
                output: Output::from_index(o.out),
                engine: o.engine as usize,
                cycle: o.cycle,
                bytes,
            })
            .collect();
        Ok(SwitchRun {
            packets,
            outputs,
            cycles: self.model.now() - t0,
        })
    }

    /// The value of `key` in map `map` (between runs; as
    /// [`crate::Core::map_lookup`]).
    pub fn map_lookup(&mut self, map: usize, key: &[u8]) -> Result<Option<Vec<u8>>, RtlError> {
        MapOps::map_lookup(self, map, key)
    }

    /// Sets `key` to `value` in map `map` (flags as `bpf_map_update_elem`).
    pub fn map_update(
        &mut self,
        map: usize,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> Result<(), RtlError> {
        MapOps::map_update(self, map, key, value, flags)
    }

    /// Deletes `key` from map `map`.
    pub fn map_delete(&mut self, map: usize, key: &[u8]) -> Result<(), RtlError> {
        MapOps::map_delete(self, map, key)
    }

    /// Every entry of map `map`, sorted by key (as
    /// [`crate::Core::map_entries`]).
    pub fn map_entries(&mut self, map: usize) -> Result<Vec<Entry>, RtlError> {
        MapOps::map_entries(self, map)
    }

    /// Engine `engine`'s own copy of a per-CPU array (index from 0, as
    /// [`SwitchPacket::engine`]); any other map's one copy.
    pub fn map_entries_of(&mut self, map: usize, engine: usize) -> Result<Vec<Entry>, RtlError> {
        if engine >= PORTS * ENGINES {
            return Err(RtlError::Switch(format!(
                "engine {engine} (the switch has {})",
                PORTS * ENGINES
            )));
        }
        let m = MapOps::map_def(self, map)?;
        if !m.percpu {
            return self.map_entries(map);
        }
        Ok((0..m.max_entries)
            .map(|e| {
                let at = VALUE_BASE + m.array_line(e) as usize * VAL_BYTES;
                let value = self.engine_bytes(at, m.value_size as usize, engine as u32);
                (e.to_le_bytes().to_vec(), value)
            })
            .collect())
    }

    /// Bytes of engine `engine`'s data memory.
    fn engine_bytes(&mut self, at: usize, len: usize, engine: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut pos = at;
        while out.len() < len {
            let (row, lane) = (pos / 8, pos % 8);
            let word = self.model.dmem_read(row as u32, engine).to_le_bytes();
            let n = (8 - lane).min(len - out.len());
            out.extend_from_slice(&word[lane..lane + n]);
            pos += n;
        }
        out
    }

    /// Writes `bytes` at `at` of every engine's data memory (`shared`:
    /// of the shared value memory, `at` a value-region index).
    fn write_rows(&mut self, at: usize, bytes: &[u8], shared: bool) {
        let mut i = 0;
        while i < bytes.len() {
            let pos = at + i;
            let (row, lane) = (pos / 8, pos % 8);
            let n = (8 - lane).min(bytes.len() - i);
            let mut word = [0u8; 8];
            word[lane..lane + n].copy_from_slice(&bytes[i..i + n]);
            let mask = (((1u16 << n) - 1) << lane) as u8;
            let word = u64::from_le_bytes(word);
            if shared {
                let v = pos - VALUE_BASE;
                self.model.vmem_write((v / 8) as u32, word, mask);
            } else {
                self.model.dmem_write(row as u32, word, mask);
            }
            i += n;
        }
    }

    fn packet(&self, r: &ffi_model::SwResult) -> SwitchPacket {
        let base = self.program.base_slot;
        let result = if r.budget != 0 {
            Err(Fault {
                kind: FaultKind::Budget,
                pc: 0,
            })
        } else if r.fault != 0 {
            Err(Fault {
                kind: FaultKind::from_code(r.fault),
                pc: r.fault_pc as usize + base,
            })
        } else {
            Ok(r.r0)
        };
        let mut outputs: Vec<Output> = (0..PORTS as u32 + 2)
            .filter(|o| r.dest >> o & 1 == 1)
            .map(Output::from_index)
            .collect();
        outputs.sort();
        SwitchPacket {
            id: r.id,
            port: self.ports.get(&r.id).copied().unwrap_or(r.port as usize),
            engine: r.engine as usize,
            result,
            version: r.version as u8,
            cycles: r.cycles,
            retired: r.retired,
            stalls: Stalls {
                values: r.stall_val,
                load_use: r.stall_load_use,
                div: r.stall_div,
                call: r.stall_call,
                rx: r.stall_rx,
                flushes: r.flushes,
            },
            redirect: Redirect::decode(r.redirect),
            action: ActionOut::decode(r.action, r.action_arg, r.action_mask),
            outputs,
            t_in: r.t_in,
            t_done: r.t_done,
        }
    }
}

fn map_names(t: &MapTable) -> String {
    let v: Vec<&str> = t.maps.iter().map(|m| m.name.as_str()).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

impl MapHost for Switch {
    fn map_table(&self) -> &MapTable {
        &self.program.maps
    }
    fn host_map_config(&mut self, map: u32, c: [u32; 6]) {
        self.model.map_config(map, c);
    }
    fn host_line_write(&mut self, idx: u32, line: &Line) {
        self.model.line_write(idx, line);
    }
    fn host_line_read(&mut self, idx: u32) -> Line {
        self.model.line_read(idx)
    }
    fn host_write_bytes(&mut self, at: usize, bytes: &[u8]) {
        // Values are in the shared value memory, the rest in every
        // engine's data memory.
        self.write_rows(at, bytes, at >= VALUE_BASE);
    }
    fn host_read_bytes(&mut self, at: usize, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut pos = at;
        while out.len() < len {
            let (row, lane) = (pos / 8, pos % 8);
            let word = match pos.checked_sub(VALUE_BASE) {
                Some(v) => self.model.vmem_read((v / 8) as u32),
                None => self.model.dmem_read(row as u32, 0),
            }
            .to_le_bytes();
            let n = (8 - lane).min(len - out.len());
            out.extend_from_slice(&word[lane..lane + n]);
            pos += n;
        }
        out
    }
    // A per-CPU array's slots are in each engine's own value area.
    fn host_write_value(&mut self, m: &MapDef, line: u32, value: &[u8]) {
        let at = VALUE_BASE + line as usize * VAL_BYTES;
        self.write_rows(at, value, !m.percpu);
    }
    fn host_read_value(&mut self, m: &MapDef, line: u32, len: usize) -> Vec<u8> {
        let at = VALUE_BASE + line as usize * VAL_BYTES;
        if m.percpu {
            self.engine_bytes(at, len, 0)
        } else {
            self.host_read_bytes(at, len)
        }
    }
}

/// The C ABI of `csrc/switch.cpp` (or a stand-in without Verilator).
mod ffi_model {
    use crate::error::RtlError;
    use crate::model::Line;

    /// The shim's `NfkitSwResult`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    pub struct SwResult {
        pub id: u64,
        pub r0: u64,
        pub cycles: u64,
        pub retired: u64,
        pub stall_load_use: u64,
        pub stall_div: u64,
        pub stall_call: u64,
        pub stall_rx: u64,
        pub stall_val: u64,
        pub flushes: u64,
        pub redirect: u64,
        pub t_in: u64,
        pub t_done: u64,
        pub fault: u32,
        pub fault_pc: u32,
        pub budget: u32,
        pub version: u32,
        pub engine: u32,
        pub port: u32,
        pub action: u32,
        pub action_arg: u32,
        pub action_mask: u32,
        pub dest: u32,
        pub len: u32,
        pub pad: u32,
    }

    /// The shim's `NfkitSwOut`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    pub struct SwOut {
        pub id: u64,
        pub cycle: u64,
        pub out: u32,
        pub engine: u32,
        pub len: u32,
        pub pad: u32,
    }

    #[cfg(nfkit_rtl_model)]
    mod sys {
        use super::{Line, SwOut, SwResult};
        #[repr(C)]
        pub struct NfkitSw {
            _private: [u8; 0],
        }
        extern "C" {
            pub fn nfkit_sw_new() -> *mut NfkitSw;
            pub fn nfkit_sw_free(m: *mut NfkitSw);
            pub fn nfkit_sw_ports() -> u32;
            pub fn nfkit_sw_engines() -> u32;
            pub fn nfkit_sw_config(
                m: *mut NfkitSw,
                eng_en: u64,
                budget: u32,
                verdicts: u32,
                nports: u32,
                hosts: u32,
                host_n: u32,
                fault_verdict: u64,
            );
            pub fn nfkit_sw_load(m: *mut NfkitSw, words: *const u64, len: u64);
            pub fn nfkit_sw_stage(m: *mut NfkitSw, words: *const u64, len: u64);
            pub fn nfkit_sw_swaps(m: *mut NfkitSw, last: *mut u64) -> u64;
            pub fn nfkit_sw_now(m: *mut NfkitSw) -> u64;
            pub fn nfkit_sw_offer(
                m: *mut NfkitSw,
                port: u32,
                id: u64,
                data: *const u8,
                len: u64,
                ts: u64,
                at: u64,
            );
            pub fn nfkit_sw_run(m: *mut NfkitSw, max_cycles: u64) -> i32;
            pub fn nfkit_sw_results(m: *mut NfkitSw, buf: *mut SwResult, cap: u64) -> u64;
            pub fn nfkit_sw_out_count(m: *mut NfkitSw) -> u64;
            pub fn nfkit_sw_out_get(
                m: *mut NfkitSw,
                i: u64,
                rec: *mut SwOut,
                bytes: *mut u8,
                cap: u64,
            );
            pub fn nfkit_sw_out_clear(m: *mut NfkitSw);
            #[allow(clippy::too_many_arguments)]
            pub fn nfkit_sw_map_config(
                m: *mut NfkitSw,
                map: u32,
                ty: u32,
                key_size: u32,
                value_size: u32,
                base: u32,
                n: u32,
                trunc: u32,
            );
            pub fn nfkit_sw_line_write(m: *mut NfkitSw, idx: u32, l: *const Line);
            pub fn nfkit_sw_line_read(m: *mut NfkitSw, idx: u32, l: *mut Line);
            pub fn nfkit_sw_dmem_write(m: *mut NfkitSw, row: u32, word: u64, mask: u8);
            pub fn nfkit_sw_dmem_read(m: *mut NfkitSw, row: u32, engine: u32) -> u64;
            pub fn nfkit_sw_vmem_write(m: *mut NfkitSw, row: u32, word: u64, mask: u8);
            pub fn nfkit_sw_vmem_read(m: *mut NfkitSw, row: u32) -> u64;
        }
    }

    /// One switch model (owned; freed on drop).
    #[cfg(nfkit_rtl_model)]
    pub struct SwModel {
        ptr: std::ptr::NonNull<sys::NfkitSw>,
    }

    // Plain C++ state touched only through `&mut self`.
    #[cfg(nfkit_rtl_model)]
    unsafe impl Send for SwModel {}

    #[cfg(nfkit_rtl_model)]
    impl SwModel {
        pub fn new() -> Result<SwModel, RtlError> {
            // SAFETY: plain functions of the shim, no arguments.
            let (p, e) = unsafe { (sys::nfkit_sw_ports(), sys::nfkit_sw_engines()) };
            if p as usize != super::PORTS || e as usize != super::ENGINES {
                return Err(RtlError::Switch(format!(
                    "the model was built with {p} ports x {e} engines, this crate expects {} x {}",
                    super::PORTS,
                    super::ENGINES
                )));
            }
            // SAFETY: allocates and resets a model (aborts on allocation
            // failure like any C++ new).
            let ptr = unsafe { sys::nfkit_sw_new() };
            std::ptr::NonNull::new(ptr)
                .map(|ptr| SwModel { ptr })
                .ok_or(RtlError::NotInstalled)
        }

        #[allow(clippy::too_many_arguments)]
        pub fn config(
            &mut self,
            eng_en: u64,
            budget: u32,
            verdicts: bool,
            nports: u32,
            hosts: u32,
            host_n: u32,
            fault_verdict: u64,
        ) {
            // SAFETY: the model is live; plain integers.
            unsafe {
                sys::nfkit_sw_config(
                    self.ptr.as_ptr(),
                    eng_en,
                    budget,
                    u32::from(verdicts),
                    nports,
                    hosts,
                    host_n,
                    fault_verdict,
                )
            }
        }

        pub fn load(&mut self, words: &[u64]) {
            // SAFETY: the model is live and reads `words.len()` words.
            unsafe { sys::nfkit_sw_load(self.ptr.as_ptr(), words.as_ptr(), words.len() as u64) }
        }

        pub fn stage(&mut self, words: &[u64]) {
            // SAFETY: the model is live and copies the words.
            unsafe { sys::nfkit_sw_stage(self.ptr.as_ptr(), words.as_ptr(), words.len() as u64) }
        }

        pub fn swaps(&self) -> (u64, u64) {
            let mut last = 0;
            // SAFETY: the model is live; `last` is a valid u64.
            let n = unsafe { sys::nfkit_sw_swaps(self.ptr.as_ptr(), &mut last) };
            (n, last)
        }

        pub fn now(&self) -> u64 {
            // SAFETY: the model is live.
            unsafe { sys::nfkit_sw_now(self.ptr.as_ptr()) }
        }

        pub fn offer(&mut self, port: u32, id: u64, data: &[u8], ts: u64, at: u64) {
            // SAFETY: the model is live and copies `data`.
            unsafe {
                sys::nfkit_sw_offer(
                    self.ptr.as_ptr(),
                    port,
                    id,
                    data.as_ptr(),
                    data.len() as u64,
                    ts,
                    at,
                )
            }
        }

        /// `true` when everything left within the budget.
        pub fn run(&mut self, max_cycles: u64) -> bool {
            // SAFETY: the model is live.
            unsafe { sys::nfkit_sw_run(self.ptr.as_ptr(), max_cycles) == 0 }
        }

        pub fn take_results(&mut self) -> Vec<SwResult> {
            let mut all = Vec::new();
            let mut buf = vec![SwResult::default(); 256];
            loop {
                // SAFETY: the model is live and `buf` has room for its length.
                let n = unsafe {
                    sys::nfkit_sw_results(self.ptr.as_ptr(), buf.as_mut_ptr(), buf.len() as u64)
                } as usize;
                all.extend_from_slice(&buf[..n]);
                if n < buf.len() {
                    return all;
                }
            }
        }

        /// Map `map`'s configuration: type, key and value sizes, first
        /// line, lines, sized down.
        pub fn map_config(&mut self, map: u32, c: [u32; 6]) {
            // SAFETY: the model is live; plain integers.
            unsafe {
                sys::nfkit_sw_map_config(self.ptr.as_ptr(), map, c[0], c[1], c[2], c[3], c[4], c[5])
            }
        }

        pub fn line_write(&mut self, idx: u32, line: &Line) {
            // SAFETY: the model is live; `line` is the shim's layout.
            unsafe { sys::nfkit_sw_line_write(self.ptr.as_ptr(), idx, line) }
        }

        pub fn line_read(&mut self, idx: u32) -> Line {
            let mut l = Line::default();
            // SAFETY: the model is live; `l` is the shim's layout.
            unsafe { sys::nfkit_sw_line_read(self.ptr.as_ptr(), idx, &mut l) };
            l
        }

        pub fn dmem_write(&mut self, row: u32, word: u64, mask: u8) {
            // SAFETY: the model is live; plain integers.
            unsafe { sys::nfkit_sw_dmem_write(self.ptr.as_ptr(), row, word, mask) }
        }

        pub fn dmem_read(&mut self, row: u32, engine: u32) -> u64 {
            // SAFETY: the model is live.
            unsafe { sys::nfkit_sw_dmem_read(self.ptr.as_ptr(), row, engine) }
        }

        pub fn vmem_write(&mut self, row: u32, word: u64, mask: u8) {
            // SAFETY: the model is live; plain integers.
            unsafe { sys::nfkit_sw_vmem_write(self.ptr.as_ptr(), row, word, mask) }
        }

        pub fn vmem_read(&mut self, row: u32) -> u64 {
            // SAFETY: the model is live.
            unsafe { sys::nfkit_sw_vmem_read(self.ptr.as_ptr(), row) }
        }

        pub fn take_outputs(&mut self) -> Vec<(SwOut, Vec<u8>)> {
            // SAFETY: the model is live.
            let n = unsafe { sys::nfkit_sw_out_count(self.ptr.as_ptr()) };
            let mut v = Vec::with_capacity(n as usize);
            let mut bytes = vec![0u8; crate::layout::PKT_MAX];
            for i in 0..n {
                let mut rec = SwOut::default();
                // SAFETY: `i` < the count; `bytes` has room for its length.
                unsafe {
                    sys::nfkit_sw_out_get(
                        self.ptr.as_ptr(),
                        i,
                        &mut rec,
                        bytes.as_mut_ptr(),
                        bytes.len() as u64,
                    )
                };
                let len = (rec.len as usize).min(bytes.len());
                v.push((rec, bytes[..len].to_vec()));
            }
            // SAFETY: the model is live.
            unsafe { sys::nfkit_sw_out_clear(self.ptr.as_ptr()) };
            v
        }
    }

    #[cfg(nfkit_rtl_model)]
    impl Drop for SwModel {
        fn drop(&mut self) {
            // SAFETY: the pointer came from nfkit_sw_new and is freed once.
            unsafe { sys::nfkit_sw_free(self.ptr.as_ptr()) }
        }
    }

    /// Without Verilator: no model; creating one says so.
    #[cfg(not(nfkit_rtl_model))]
    pub struct SwModel {
        _none: (),
    }

    #[cfg(not(nfkit_rtl_model))]
    #[allow(clippy::too_many_arguments)]
    impl SwModel {
        pub fn new() -> Result<SwModel, RtlError> {
            Err(RtlError::NotInstalled)
        }
        pub fn config(&mut self, _: u64, _: u32, _: bool, _: u32, _: u32, _: u32, _: u64) {}
        pub fn load(&mut self, _: &[u64]) {}
        pub fn stage(&mut self, _: &[u64]) {}
        pub fn swaps(&self) -> (u64, u64) {
            (0, 0)
        }
        pub fn now(&self) -> u64 {
            0
        }
        pub fn offer(&mut self, _: u32, _: u64, _: &[u8], _: u64, _: u64) {}
        pub fn run(&mut self, _: u64) -> bool {
            false
        }
        pub fn take_results(&mut self) -> Vec<SwResult> {
            Vec::new()
        }
        pub fn take_outputs(&mut self) -> Vec<(SwOut, Vec<u8>)> {
            Vec::new()
        }
        pub fn map_config(&mut self, _: u32, _: [u32; 6]) {}
        pub fn line_write(&mut self, _: u32, _: &Line) {}
        pub fn line_read(&mut self, _: u32) -> Line {
            Line::default()
        }
        pub fn dmem_write(&mut self, _: u32, _: u64, _: u8) {}
        pub fn dmem_read(&mut self, _: u32, _: u32) -> u64 {
            0
        }
        pub fn vmem_write(&mut self, _: u32, _: u64, _: u8) {}
        pub fn vmem_read(&mut self, _: u32) -> u64 {
            0
        }
    }
}
