//! The compiled examples in the kernel: each object passes the verifier
//! and gives, packet by packet, the same verdict (and packet) as in the
//! VM (on both engines), through `BPF_PROG_TEST_RUN`. Needs root;
//! skipped otherwise.

mod common;
use common::*;
use nfkit_control::runner::run_capture_on;
use nfkit_lang::{compile, Options};
use nfkit_vm::Engine;

#[test]
fn examples_give_the_same_verdicts_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for name in EXAMPLES {
        let (src, input) = example(name);
        let c = compile(name, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let k = kernel_run(&c, &input)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", nfkit_lang::listing::listing(&c)));
        for engine in [Engine::Jit, Engine::Interp] {
            let vm = run_capture_on(&c, &input, false, engine).expect("vm");
            assert_kernel_matches(name, &format!("kernel ({engine} VM)"), &vm, &k);
        }
    }
}

#[test]
fn compiled_objects_load_through_libbpf() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("nfkit-lang-obj-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp");
    for name in EXAMPLES {
        let src =
            std::fs::read_to_string(examples_dir().join(format!("{name}.py"))).expect("script");
        let c = compile(name, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let bytes = nfkit_object::write_object(&c.image).expect("ELF");
        let path = tmp.join(format!("{name}.o"));
        std::fs::write(&path, bytes).expect("write");
        let loaded =
            nfkit_kernel::load_object_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            loaded
                .prog("every_packet")
                .or(loaded.prog("by_dscp"))
                .is_some(),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `Packet.in_port` (the ingress ifindex) and `Packet.queue` (the
/// receive queue) read the same in the kernel as in the VM, at XDP and
/// TC: the chain writes them into the packet, which both give back.
#[test]
fn in_port_and_queue_read_the_same_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    use nfkit_control::runner::ScriptVm;
    let frames: Vec<(u64, Vec<u8>)> = (0..4u64)
        .map(|i| (i, udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[0; 8])))
        .collect();
    for hook in ["xdp", "tc"] {
        let src = format!(
            "from nf.classify import every_packet\n\
             def main() -> u64:\n\
             \x20   Packet.write_u32(42, Packet.in_port)\n\
             \x20   Packet.write_u32(46, Packet.queue + 7)\n\
             \x20   return PASS\n\
             every_packet(main)\n\
             attach(\"eth0\", \"{hook}\")\n"
        );
        let c = compile("inport.py", &src, &Options::default()).expect("compile");
        let k = kernel_run(&c, &frames).unwrap_or_else(|e| panic!("{hook}: {e}"));
        let mut vm = ScriptVm::new(&c).expect("vm");
        for ((ts, f), (code, data)) in frames.iter().zip(&k) {
            let (o, _) = vm.run(f, *ts, false).expect("run");
            assert_eq!(o.code, *code, "{hook}: code");
            assert_eq!(&o.packet, data, "{hook}: packet");
            assert_eq!(
                u32::from_be_bytes([data[42], data[43], data[44], data[45]]),
                1,
                "{hook}: in_port"
            );
        }
    }
}

/// `Packet.arrival` is the packet's `nf_now()` in the kernel as in the
/// VM (the clock pinned to each packet's time; read twice, one value),
/// at XDP and TC: the chain writes it into the packet.
#[test]
fn packet_arrival_reads_the_same_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    use nfkit_control::runner::ScriptVm;
    let frames: Vec<(u64, Vec<u8>)> = [7u64, 1_000_000_009, 1_700_000_000_123_456_789]
        .iter()
        .map(|&t| (t, udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[0; 16])))
        .collect();
    for hook in ["xdp", "tc"] {
        let src = format!(
            "from nf.classify import every_packet\n\
             def main() -> u64:\n\
             \x20   Packet.write_u64(42, Packet.arrival)\n\
             \x20   Packet.write_u64(50, Packet.arrival)\n\
             \x20   return PASS\n\
             every_packet(main)\n\
             attach(\"eth0\", \"{hook}\")\n"
        );
        let c = compile("arrival.py", &src, &Options::default()).expect("compile");
        let k = kernel_run(&c, &frames).unwrap_or_else(|e| panic!("{hook}: {e}"));
        let mut vm = ScriptVm::new(&c).expect("vm");
        for ((ts, f), (code, data)) in frames.iter().zip(&k) {
            let (o, _) = vm.run(f, *ts, false).expect("run");
            assert_eq!(o.code, *code, "{hook}: code");
            assert_eq!(&o.packet, data, "{hook}: packet");
            let at = |i: usize| u64::from_be_bytes(data[i..i + 8].try_into().expect("8"));
            assert_eq!((at(42), at(50)), (*ts, *ts), "{hook}: arrival");
        }
    }
}
