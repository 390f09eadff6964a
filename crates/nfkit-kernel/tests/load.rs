//! Loading Images and objects into the running kernel: every corpus
//! program loads (with its BTF, func and line info), test runs give the
//! kernel's answers, maps are reachable, verifier rejections carry the
//! log and the source line, and the testbed cleans up after itself.

use nfkit_kernel::{load_image, load_object_file, KernelError, LoadOptions, TestRun};
use nfkit_object::Image;
use std::path::PathBuf;

fn image(name: &str) -> Image {
    let e = nfkit_corpus::get(name).unwrap_or_else(|| panic!("corpus program {name}"));
    Image::from_elf(e.object, e.name).unwrap_or_else(|err| panic!("{name}: {err}"))
}

fn ipv4_udp(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(42)];
    p[12] = 0x08;
    p[14] = 0x45;
    let ip_len = (p.len() - 14) as u16;
    p[16..18].copy_from_slice(&ip_len.to_be_bytes());
    p[22] = 64;
    p[23] = 17;
    p[26..30].copy_from_slice(&[198, 18, 0, 1]);
    p[30..34].copy_from_slice(&[198, 18, 0, 2]);
    p[36..38].copy_from_slice(&53u16.to_be_bytes());
    p
}

#[test]
fn every_corpus_program_loads_with_btf() {
    for e in nfkit_corpus::ENTRIES {
        let img = image(e.name);
        let loaded = load_image(&img, &LoadOptions::default())
            .unwrap_or_else(|err| panic!("{}: {err}", e.name));
        assert_eq!(loaded.btf_error(), None, "{}", e.name);
        assert_eq!(loaded.progs().len(), img.entries.len(), "{}", e.name);
        for p in loaded.progs() {
            assert!(p.id().expect("id") > 0);
        }
        for m in &img.maps {
            assert!(loaded.map(&m.name).is_some(), "{}: map {}", e.name, m.name);
        }
    }
}

#[test]
fn test_run_and_maps() {
    let img = image("xdp_port_filter");
    let loaded = load_image(&img, &LoadOptions::default()).expect("load");
    let prog = loaded.prog("xdp_port_filter").expect("prog");
    let blocked = loaded.map("blocked_ports").expect("map");
    blocked
        .update(&53u16.to_be_bytes(), &0u64.to_le_bytes(), 0)
        .expect("update");
    let pkt = ipv4_udp(60);
    let out = prog.test_run(&TestRun::packet(&pkt)).expect("run");
    assert_eq!(out.retval, 1, "XDP_DROP for a blocked port");
    assert_eq!(out.data, pkt);
    let hits = blocked.lookup(&53u16.to_be_bytes()).expect("lookup");
    assert_eq!(hits, Some(1u64.to_le_bytes().to_vec()));
    // Repeat: the program runs 5 more times.
    let out = prog
        .test_run(&TestRun {
            data: pkt.clone(),
            repeat: 5,
            ..TestRun::default()
        })
        .expect("run");
    assert_eq!(out.retval, 1);
    assert_eq!(
        blocked.lookup(&53u16.to_be_bytes()).expect("lookup"),
        Some(6u64.to_le_bytes().to_vec())
    );
    // Too short for XDP: refused.
    let err = prog
        .test_run(&TestRun::packet(&pkt[..13]))
        .expect_err("short");
    assert_eq!(err.errno(), Some(libc::EINVAL));
    // Per-CPU map: one value per possible CPU.
    let verdicts = loaded.map("verdicts").expect("verdicts");
    assert!(verdicts.is_percpu());
    let v = verdicts
        .lookup_percpu(&1u32.to_le_bytes())
        .expect("lookup")
        .expect("present");
    assert_eq!(v.len(), nfkit_kernel::possible_cpus().expect("cpus"));
    let total: u64 = v
        .iter()
        .map(|b| u64::from_le_bytes(b[..8].try_into().expect("8")))
        .sum();
    assert_eq!(total, 6);
    assert_eq!(blocked.keys(), vec![53u16.to_be_bytes().to_vec()]);
    blocked.delete(&53u16.to_be_bytes()).expect("delete");
    assert!(blocked.keys().is_empty());
}

#[test]
fn xdp_metadata_goes_in_and_out_through_the_context() {
    let img = image("xdp_port_filter");
    let loaded = load_image(&img, &LoadOptions::default()).expect("load");
    let prog = loaded.prog("xdp_port_filter").expect("prog");
    let pkt = ipv4_udp(60);
    let meta = [0xaau8, 0xbb, 0xcc, 0xdd, 1, 2, 3, 4];
    let mut data = meta.to_vec();
    data.extend_from_slice(&pkt);
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex.
    let mut ctx = Vec::new();
    for v in [meta.len() as u32, data.len() as u32, 0, 0, 0, 0] {
        ctx.extend_from_slice(&v.to_le_bytes());
    }
    let out = prog
        .test_run(&TestRun {
            data: data.clone(),
            ctx_in: Some(ctx),
            ..TestRun::default()
        })
        .expect("run");
    assert_eq!(out.retval, 2);
    assert_eq!(out.data, data, "the output starts at data_meta");
    let ctx_out = out.ctx_out.expect("ctx out");
    assert_eq!(&ctx_out[0..4], &(meta.len() as u32).to_le_bytes());
    assert_eq!(&ctx_out[4..8], &(data.len() as u32).to_le_bytes());
}

#[test]
fn globals_are_set_before_loading() {
    let img = image("xdp_globals");
    let opts = LoadOptions::default().global("min_len", &100u32.to_le_bytes());
    let loaded = load_image(&img, &opts).expect("load");
    let prog = loaded.prog("xdp_globals").expect("prog");
    // 80 bytes < min_len 100: bucket 0, drop_small: XDP_DROP.
    assert_eq!(
        prog.test_run(&TestRun::packet(&[0u8; 80]))
            .expect("run")
            .retval,
        1
    );
    let loaded = load_image(&img, &LoadOptions::default()).expect("load");
    let prog = loaded.prog("xdp_globals").expect("prog");
    assert_eq!(
        prog.test_run(&TestRun::packet(&[0u8; 80]))
            .expect("run")
            .retval,
        2
    );
    let bad = LoadOptions::default().global("min_len", &[1u8]);
    assert!(matches!(
        load_image(&img, &bad),
        Err(KernelError::Global { .. })
    ));
    let bad = LoadOptions::default().global("no_such_var", &[1u8]);
    assert!(matches!(
        load_image(&img, &bad),
        Err(KernelError::Global { .. })
    ));
}

#[test]
fn prog_array_is_filled_from_its_initial_values() {
    let img = image("xdp_tail_dispatch");
    let loaded = load_image(&img, &LoadOptions::default()).expect("load");
    let prog = loaded.prog("xdp_dispatch").expect("prog");
    let mut pkt = ipv4_udp(42);
    // UDP handler: shorter than 64 bytes -> XDP_DROP.
    assert_eq!(
        prog.test_run(&TestRun::packet(&pkt)).expect("run").retval,
        1
    );
    pkt[23] = 6;
    assert_eq!(
        prog.test_run(&TestRun::packet(&pkt)).expect("run").retval,
        2
    );
    let handled = loaded.map("handled").expect("map");
    assert_eq!(
        handled.lookup(&0u32.to_le_bytes()).expect("l"),
        Some(1u64.to_le_bytes().to_vec())
    );
    assert_eq!(
        handled.lookup(&1u32.to_le_bytes()).expect("l"),
        Some(1u64.to_le_bytes().to_vec())
    );
}

#[test]
fn libbpf_loads_the_same_objects() {
    for e in nfkit_corpus::ENTRIES {
        if nfkit_corpus::LIBBPF_REFUSES.contains(&e.name) {
            assert!(load_object_file(e.path).is_err(), "{}", e.name);
            continue;
        }
        let lo = load_object_file(e.path).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        let li = load_image(&image(e.name), &LoadOptions::default()).expect("load");
        let mut a: Vec<&str> = lo.progs().iter().map(|p| p.name()).collect();
        let mut b: Vec<&str> = li.progs().iter().map(|p| p.name()).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{}", e.name);
    }
    let lo = load_object_file(nfkit_corpus::get("xdp_port_filter").expect("e").path).expect("load");
    let out = lo
        .prog("xdp_port_filter")
        .expect("prog")
        .test_run(&TestRun::packet(&ipv4_udp(60)))
        .expect("run");
    assert_eq!(out.retval, 2);
    assert!(lo.map("verdicts").is_some());
}

fn compile(name: &str, src: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nfkit-kernel-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.o"));
    std::fs::write(&c, src).expect("write");
    nfkit_corpus::BpfBuild::new(&c)
        .arg("-mcpu=v3")
        .out(&o)
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&c);
    o
}

#[test]
fn verifier_rejection_names_the_source_line() {
    let src = "#include <linux/bpf.h>\n\
               #include <bpf/bpf_helpers.h>\n\
               SEC(\"xdp\")\n\
               int bad(struct xdp_md *ctx)\n\
               {\n\
               \tunsigned char *p = (void *)(long)ctx->data;\n\
               \treturn p[3]; /* no bounds check */\n\
               }\n\
               char LICENSE[] SEC(\"license\") = \"GPL\";\n";
    let obj = compile("bad", src);
    let img = Image::from_file(&obj).expect("image");
    if let Some(dir) = obj.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    match load_image(&img, &LoadOptions::default()) {
        Err(KernelError::Verifier { entry, log, line }) => {
            assert_eq!(entry, "bad");
            assert!(log.contains("invalid access to packet"), "{log}");
            let line = line.expect("a source line");
            assert_eq!(line.line, 7, "{line}");
            assert!(line.text.contains("p[3]"), "{line}");
            assert!(line.file.ends_with("bad.c"), "{line}");
        }
        other => panic!("expected a verifier error, got {other:?}"),
    }
}

#[test]
fn bpffs_is_mounted() {
    let existed = std::path::Path::new(nfkit_kernel::PIN_DIR).exists();
    let dir = nfkit_kernel::ensure_bpffs().expect("bpffs");
    assert!(nfkit_kernel::bpffs::is_bpffs(std::path::Path::new(
        nfkit_kernel::BPFFS
    )));
    assert!(dir.is_dir());
    // A map pinned under nfkit's directory is there until unpinned.
    let loaded = load_image(&image("xdp_port_filter"), &LoadOptions::default()).expect("load");
    let pin = dir.join(format!("test-verdicts-{}", std::process::id()));
    loaded.map("verdicts").expect("map").pin(&pin).expect("pin");
    assert!(pin.exists());
    std::fs::remove_file(&pin).expect("unpin");
    if !existed {
        let _ = std::fs::remove_dir(&dir);
    }
}

#[test]
fn testbed_creates_and_removes_namespaces_and_veths() {
    let (ns_a, ns_b, dev_a) = {
        let tb = nfkit_kernel::Testbed::pair().expect("testbed");
        let a = tb.ns_a.name().to_string();
        let b = tb.ns_b.name().to_string();
        assert!(nfkit_kernel::Netns::exists(&a));
        assert!(nfkit_kernel::Netns::exists(&b));
        let idx = tb.ns_a.ifindex(&tb.veth.a.dev).expect("ifindex");
        assert!(idx > 1);
        let addrs = tb
            .ns_b
            .ip(&["-o", "addr", "show", "dev", &tb.veth.b.dev])
            .expect("addr");
        assert!(addrs.contains("198.18."), "{addrs}");
        let link = tb
            .ns_a
            .ip(&["-o", "link", "show", "dev", &tb.veth.a.dev])
            .expect("link");
        assert!(link.contains("UP"), "{link}");
        (a, b, tb.veth.a.dev.clone())
    };
    assert!(!nfkit_kernel::Netns::exists(&ns_a));
    assert!(!nfkit_kernel::Netns::exists(&ns_b));
    assert!(nfkit_kernel::testbed::ip(&["link", "show", "dev", &dev_a]).is_err());

    // A panicking test still cleans up.
    let name = std::panic::catch_unwind(|| {
        let ns = nfkit_kernel::Netns::new("panic").expect("netns");
        let name = ns.name().to_string();
        std::panic::panic_any(name);
    })
    .expect_err("panicked");
    let name = name.downcast::<String>().expect("name");
    assert!(!nfkit_kernel::Netns::exists(&name));
    assert!(nfkit_kernel::Veth::new(None, Some("10.0.0.1/24"), None, None).is_err());
}

/// A `perf_event_array` declared without max_entries gets one entry per
/// possible CPU, as libbpf gives it (the kernel refuses 0 entries).
#[test]
fn perf_event_array_gets_the_possible_cpus() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let src = "#include <linux/bpf.h>\n\
               #include <bpf/bpf_helpers.h>\n\
               struct {\n\
               \t__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);\n\
               \t__uint(key_size, sizeof(int));\n\
               \t__uint(value_size, sizeof(int));\n\
               } events SEC(\".maps\");\n\
               SEC(\"xdp\")\n\
               int perf(struct xdp_md *ctx)\n\
               {\n\
               \tint v = 7;\n\
               \tbpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, &v, sizeof(v));\n\
               \treturn XDP_PASS;\n\
               }\n\
               char LICENSE[] SEC(\"license\") = \"GPL\";\n";
    let obj = compile("perf", src);
    let img = Image::from_file(&obj).expect("image");
    if let Some(dir) = obj.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let spec = img.maps.iter().find(|m| m.name == "events").expect("map");
    assert_eq!(spec.max_entries, 0);
    let lo = load_image(&img, &LoadOptions::default()).expect("load");
    let cpus = nfkit_kernel::possible_cpus().expect("cpus");
    let m = lo.map("events").expect("events");
    assert_eq!(m.max_entries() as usize, cpus);
    let out = lo
        .prog("perf")
        .expect("perf")
        .test_run(&TestRun::packet(&ipv4_udp(60)))
        .expect("run");
    assert_eq!(out.retval, 2);
}
