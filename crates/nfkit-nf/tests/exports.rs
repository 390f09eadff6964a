//! The two exports every NF has besides its function (abi.md 2, 5), run in
//! the VM: the standalone program `xdp_<name>` with its arguments in
//! `nf_args` (.rodata, set before loading), and the dynamic entry
//! `dyn_<name>` reached from a dynamic classifier through `nfkit_progs`
//! with its arguments in the per-CPU call frame.

mod common;

use common::*;
use nfkit_nf::Hook;
use nfkit_object::{Image, MapKind};
use nfkit_vm::{Context, Redirect, Vm, VmConfig, XdpMd};

/// The embedded object of `module` for XDP with `nf_args` = `args`.
fn standalone(module: &str, args: [u64; 4]) -> Vm {
    let bytes = nfkit_nf::object(module, Hook::Xdp).unwrap();
    let obj = nfkit_object::read_object(bytes, module).unwrap();
    let var = obj
        .btf
        .as_ref()
        .unwrap()
        .datasec_vars(".rodata")
        .into_iter()
        .find(|v| v.name == "nf_args")
        .expect("nf_args in .rodata");
    let mut image = Image::from_object(&obj).unwrap();
    let ro = image
        .maps
        .iter_mut()
        .find(|m| matches!(&m.kind, MapKind::Global { section, .. } if section == ".rodata"))
        .expect(".rodata map");
    let data = ro.data.as_mut().expect(".rodata bytes");
    for (i, a) in args.iter().enumerate() {
        let at = var.offset as usize + i * 8;
        data[at..at + 8].copy_from_slice(&a.to_le_bytes());
    }
    Vm::new(&image, VmConfig::kernel()).unwrap()
}

fn pin_clock(vm: &Vm, now: u64) {
    let cfg = nfkit_abi::NfConfig::default().pinned_at(now).to_bytes();
    vm.map("nfkit_config")
        .unwrap()
        .update(&0u32.to_le_bytes(), &cfg, 0)
        .unwrap();
}

#[test]
fn standalone_exports_take_their_arguments_from_nf_args() {
    let p = v4([198, 18, 0, 1], [198, 19, 0, 1], UDP, &udp(1, 2));
    let vm = standalone("nf.base", [7, 0, 0, 0]);
    let r = vm.run(
        "xdp_redirect",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    assert_eq!(r.result.ok(), Some(4), "XDP_REDIRECT");
    assert!(matches!(
        r.redirect,
        Some(Redirect::Ifindex { ifindex: 7, .. })
    ));
    let r = vm.run(
        "xdp_drop",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    assert_eq!(r.result.ok(), Some(1), "XDP_DROP");

    // A value result gets the default action (PASS); the bucket it used is
    // keyed by the nf_args rate and burst.
    let vm = standalone("nf.meter", [3, 9, 0, 0]);
    pin_clock(&vm, 0);
    let r = vm.run(
        "xdp_tb_dst",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    assert_eq!(r.result.ok(), Some(2), "XDP_PASS");
    let keys = vm.map("nf_meter_tb_dst").unwrap().keys();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0][16..24], [3, 0, 0, 0, 9, 0, 0, 0]);
    // A value of a chain that returned plain values is counted as such.
    let stats = vm.map("nfkit_stats").unwrap();
    assert_eq!(
        u64_at(
            &stats.lookup_cpu(&8u32.to_le_bytes(), 0).unwrap().unwrap(),
            0
        ),
        0,
        "standalone programs keep no statistics"
    );
}

/// The dynamic classifier `dyn_by_dscp` linked with `module`: DSCP 0 picks
/// chain 5, whose entry in nfkit_progs is `dyn_<name>`; the frame holds
/// the arguments, chain id 5 and the continuation slot 0, which holds
/// `dyn_drop` (standing in for the chain's next segment).
fn dynamic(module: &str, name: &str, args: [u64; 4]) -> (Vm, u32) {
    let cls = nfkit_object::read_object(
        nfkit_nf::object("nf.classify", Hook::Xdp).unwrap(),
        "classify",
    )
    .unwrap();
    let nf =
        nfkit_object::read_object(nfkit_nf::object(module, Hook::Xdp).unwrap(), module).unwrap();
    let base =
        nfkit_object::read_object(nfkit_nf::object("nf.base", Hook::Xdp).unwrap(), "base").unwrap();
    let mut objs = vec![cls, nf];
    if module != "nf.base" {
        objs.push(base);
    }
    let image = nfkit_object::link(&objs).unwrap();
    let vm = Vm::new(&image, VmConfig::kernel()).unwrap();
    let progs = vm.map("nfkit_progs").unwrap();
    let entry = vm.entry_index(format!("dyn_{name}").as_str()).unwrap() as u32;
    let drop = vm.entry_index("dyn_drop").unwrap() as u32;
    progs
        .update(&5u32.to_le_bytes(), &entry.to_le_bytes(), 0)
        .unwrap();
    progs
        .update(&0u32.to_le_bytes(), &drop.to_le_bytes(), 0)
        .unwrap();
    let mut cls_entry = 5u32.to_le_bytes().to_vec();
    cls_entry.extend(1u32.to_le_bytes());
    vm.map("nfkit_cls_dscp")
        .unwrap()
        .update(&0u32.to_le_bytes(), &cls_entry, 0)
        .unwrap();
    let mut frame = vec![0u8; 504]; // sizeof(struct nf_frame)
    for (i, a) in args.iter().enumerate() {
        frame[i * 8..i * 8 + 8].copy_from_slice(&a.to_le_bytes());
    }
    // What a chain's segment 0 and its call site leave there (with the
    // NFs' shared entries, abi.md 5): the continuation (slot 0) and the
    // chain's id; the classifier itself leaves the frame alone.
    frame[40..44].copy_from_slice(&0u32.to_le_bytes());
    frame[48..52].copy_from_slice(&5u32.to_le_bytes());
    vm.map("nfkit_frame")
        .unwrap()
        .update(&0u32.to_le_bytes(), &frame, 0)
        .unwrap();
    pin_clock(&vm, 0);
    (vm, entry)
}

fn stat(vm: &Vm, chain: i64, k: u64) -> u64 {
    let idx = ((chain + 1) * 16) as u32 + k as u32;
    u64_at(
        &vm.map("nfkit_stats")
            .unwrap()
            .lookup_cpu(&idx.to_le_bytes(), 0)
            .unwrap()
            .unwrap(),
        0,
    )
}

#[test]
fn dynamic_entries_run_from_the_frame_and_end_or_continue_the_chain() {
    let p = v4([198, 18, 0, 1], [198, 19, 0, 1], UDP, &udp(1, 2));
    // A verdict ends the chain at once: redirect(9) from the frame's args.
    let (vm, _) = dynamic("nf.base", "redirect", [9, 0, 0, 0]);
    let r = vm.run(
        "dyn_by_dscp",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    assert_eq!(r.result.ok(), Some(4), "XDP_REDIRECT");
    assert!(matches!(
        r.redirect,
        Some(Redirect::Ifindex { ifindex: 9, .. })
    ));
    assert_eq!(stat(&vm, 5, 4), 1, "chain 5 counted a REDIRECT");

    // A value goes to frame.result and the continuation (dyn_drop) runs.
    let (vm, _) = dynamic("nf.parse", "dst_port", [0; 4]);
    let r = vm.run(
        "dyn_by_dscp",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    assert_eq!(r.result.ok(), Some(1), "XDP_DROP from the continuation");
    let f = vm
        .map("nfkit_frame")
        .unwrap()
        .lookup_cpu(&0u32.to_le_bytes(), 0)
        .unwrap()
        .unwrap();
    let frame = nfkit_abi::NfFrame::from_bytes(&f).expect("a whole nf_frame");
    assert_eq!(frame.result, 2, "frame.result = dst_port()");
    assert_eq!(frame.calls, 1, "frame.calls");
    assert_eq!(stat(&vm, 5, 1), 1, "chain 5 counted a DROP");
    assert_eq!(frame.chain_id, 5, "frame.chain_id");

    // Arguments from the frame reach the NF: a bucket keyed by them.
    let (vm, _) = dynamic("nf.meter", "tb_src", [4, 6, 0, 0]);
    vm.run(
        "dyn_by_dscp",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    let keys = vm.map("nf_meter_tb_src").unwrap().keys();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0][16..24], [4, 0, 0, 0, 6, 0, 0, 0]);

    // A missing continuation is a fault: the fault action (DROP) and counter.
    let (vm, _) = dynamic("nf.parse", "dst_port", [0; 4]);
    vm.map("nfkit_progs")
        .unwrap()
        .delete(&0u32.to_le_bytes())
        .unwrap();
    let r = vm.run(
        "dyn_by_dscp",
        Context::Xdp(XdpMd::new(&p)),
        &Default::default(),
    );
    assert_eq!(r.result.ok(), Some(1), "XDP_DROP (fault action)");
    assert_eq!(stat(&vm, 5, 9), 1, "counted as a fault of chain 5");
    let faults = vm
        .map("nfkit_faults")
        .unwrap()
        .lookup_cpu(&0u32.to_le_bytes(), 0)
        .unwrap()
        .unwrap();
    assert_eq!(u64_at(&faults, 0), 1);
}
