//! Running one program on the RTL core and on nfkit's VM, and comparing.

#![allow(dead_code)]

use nfkit_isa::Insn;
use nfkit_object::{Image, ProgType};
use nfkit_rtl::{Core, Program, RunInput, RunResult};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig};

/// What the VM gives for one run: r0 (None on a fault), the memory
/// afterwards, the executed slots when traced.
pub struct VmRun {
    pub r0: Option<u64>,
    pub packet: Vec<u8>,
    pub insns: u64,
    pub trace: Vec<usize>,
}

/// Loads `insns` in the VM's conformance profile; `Err` when it refuses.
pub fn vm_load(insns: &[Insn]) -> Result<Vm, String> {
    let image = Image::from_insns("prog", ProgType::Unspec, insns.to_vec());
    Vm::new(&image, VmConfig::conformance()).map_err(|e| e.to_string())
}

/// Runs a loaded VM on `mem` (the raw context: r1 = mem, r2 = its length).
pub fn vm_run(vm: &Vm, mem: &[u8], trace: bool) -> VmRun {
    let opts = RunOptions {
        trace,
        interp: trace,
        ..RunOptions::default()
    };
    let res = vm.run(0, Context::Raw(mem), &opts);
    VmRun {
        r0: res.result.ok(),
        packet: res.packet.clone(),
        insns: res.insns,
        trace: res.trace.iter().map(|s| s.slot).collect(),
    }
}

/// Runs the loaded program on `mem`.
pub fn rtl_run(core: &mut Core, mem: &[u8], trace: bool) -> RunResult {
    rtl_run_mode(core, mem, trace, false)
}

/// Runs the loaded program on `mem`, streamed in while it runs or not.
pub fn rtl_run_mode(core: &mut Core, mem: &[u8], trace: bool, stream: bool) -> RunResult {
    let mut input = RunInput::new(mem);
    input.trace = trace;
    input.stream = stream;
    input.max_cycles = 1_000_000;
    core.run(&input).expect("the RTL model runs")
}

/// A core with `insns` loaded (the model must be built: Verilator is
/// installed by `make test`'s deps).
pub fn core_for(insns: &[Insn]) -> Core {
    let prog = Program::from_insns("prog", insns).expect("program within the core's subset");
    Core::new(prog).expect("RTL model built (is verilator installed?)")
}

/// Compares one run of both; `Err` says how they differ.
pub fn compare(vm: &VmRun, rtl: &RunResult) -> Result<(), String> {
    match (vm.r0, &rtl.result) {
        (Some(a), Ok(b)) if a == *b => {}
        (None, Err(_)) => return Ok(()),
        (a, b) => return Err(format!("r0: VM {a:x?}, RTL {b:x?}")),
    }
    if vm.packet != rtl.packet {
        let at = vm
            .packet
            .iter()
            .zip(&rtl.packet)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!("packet differs first at byte {at}"));
    }
    if vm.insns != rtl.retired {
        return Err(format!(
            "instructions: VM executed {}, RTL retired {}",
            vm.insns, rtl.retired
        ));
    }
    Ok(())
}

/// An XDP image of `asm` (llvm syntax) with maps `(name, type, key size,
/// value size, entries)`.
pub fn image_with_maps(asm: &str, maps: &[(&str, nfkit_object::MapType, u32, u32, u32)]) -> Image {
    use nfkit_object::{MapKind, MapSpec, MapType};
    let insns =
        nfkit_isa::asm::assemble(asm, Some(nfkit_isa::asm::Syntax::Llvm)).expect("assembles");
    let mut image = Image::from_insns("prog", ProgType::Xdp, insns);
    image.maps = maps
        .iter()
        .map(
            |&(name, map_type, key_size, value_size, max_entries)| MapSpec {
                name: name.to_string(),
                kind: MapKind::Declared,
                map_type,
                key_size,
                value_size,
                max_entries,
                flags: if map_type == MapType::LpmTrie { 1 } else { 0 },
                key_type_id: None,
                value_type_id: None,
                data: None,
                pin_by_name: false,
                inner: None,
            },
        )
        .collect();
    image
}

/// Runs an XDP program in the VM on `frame`.
pub fn vm_run_xdp(vm: &Vm, frame: &[u8]) -> (VmRun, Option<nfkit_vm::Redirect>) {
    let res = vm.run(
        0,
        Context::Xdp(nfkit_vm::XdpMd::new(frame)),
        &RunOptions::default(),
    );
    (
        VmRun {
            r0: res.result.ok(),
            packet: res.packet.clone(),
            insns: res.insns,
            trace: Vec::new(),
        },
        res.redirect,
    )
}

/// Runs the loaded XDP program on `frame` (ingress port 1).
pub fn rtl_run_xdp(core: &mut Core, frame: &[u8]) -> RunResult {
    let mut input = RunInput::new(frame);
    input.ctx = nfkit_rtl::Ctx::Xdp {
        ingress_ifindex: 1,
        rx_queue_index: 0,
    };
    input.max_cycles = 100_000;
    core.run(&input).expect("the RTL model runs")
}

/// The VM's redirect as the core reports it (cpumap and xskmap ones have
/// no counterpart: the coprocessor serves devmaps only).
pub fn vm_redirect(r: nfkit_vm::Redirect) -> Option<nfkit_rtl::Redirect> {
    use nfkit_rtl::Redirect;
    match r {
        nfkit_vm::Redirect::Ifindex { ifindex, .. } => Some(Redirect::Port(ifindex)),
        nfkit_vm::Redirect::Map { map, key, .. } => Some(Redirect::Map { map, key }),
        nfkit_vm::Redirect::Broadcast {
            map,
            exclude_ingress,
        } => Some(Redirect::Broadcast {
            map,
            exclude_ingress,
        }),
        _ => None,
    }
}

/// An XDP run of the VM against the core's: the same r0 (the VM must not
/// fault), packet bytes and instruction count; `Err` says how they differ.
pub fn compare_xdp(want: &nfkit_vm::RunResult, got: &RunResult) -> Result<(), String> {
    let r0 = want
        .result
        .as_ref()
        .map_err(|e| format!("VM faulted: {e}"))?;
    if got.result != Ok(*r0) {
        return Err(format!("r0: VM {r0:#x}, RTL {:?}", got.result));
    }
    if want.packet != got.packet {
        return Err("packet differs".into());
    }
    if want.insns != got.retired {
        return Err(format!(
            "VM executed {}, RTL retired {}",
            want.insns, got.retired
        ));
    }
    Ok(())
}

/// A small deterministic generator (xorshift64) for generated inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
