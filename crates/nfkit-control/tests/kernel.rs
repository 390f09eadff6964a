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
