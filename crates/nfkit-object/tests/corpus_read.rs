//! Every corpus object reads and links; spot checks of what clang put in
//! them (maps, globals, program types, calls, BTF, line info).

use nfkit_isa::{CallKind, Insn, LddwKind};
use nfkit_object::{read_object, Image, MapKind, MapType, ProgType};

fn image(name: &str) -> Image {
    let e = nfkit_corpus::get(name).unwrap_or_else(|| panic!("no corpus program {name}"));
    Image::from_elf(e.object, e.name).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// Every local call and function address of `img` lands on a function start.
fn assert_calls_resolved(img: &Image) -> usize {
    let starts = nfkit_isa::slot_offsets(&img.insns);
    let mut n = 0;
    for (i, insn) in img.insns.iter().enumerate() {
        if let Some(off) = insn.call_offset() {
            let target = starts[i] as i64 + 1 + off;
            assert!(
                img.functions.iter().any(|f| f.start as i64 == target),
                "call at slot {} goes to {target}, not a function",
                starts[i]
            );
            n += 1;
        }
    }
    n
}

#[test]
fn every_corpus_object_reads_and_links() {
    for (name, bytes) in nfkit_corpus::objects() {
        let obj = read_object(bytes, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let img = Image::from_object(&obj).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!img.entries.is_empty(), "{name}");
        assert_eq!(img.license, "GPL", "{name}");
        assert!(img.btf.is_some(), "{name}");
        // Functions cover the instructions without gaps, each with BTF.
        let mut slot = 0;
        for f in &img.functions {
            assert_eq!(f.start, slot, "{name}: {}", f.name);
            assert_eq!(f.origin, name);
            let btf = img
                .btf
                .as_ref()
                .and_then(|b| f.btf_id.map(|id| b.func_signature(id)));
            let sig = btf.unwrap_or_else(|| panic!("{name}: {} has no BTF", f.name));
            assert_eq!(sig.map(|s| s.name).as_deref(), Ok(f.name.as_str()));
            slot += f.len;
        }
        assert_eq!(slot, img.slot_count());
        // Every map reference is a valid map index.
        for i in &img.insns {
            if let Insn::Lddw {
                kind: LddwKind::MapIdx | LddwKind::MapIdxValue,
                imm,
                next_imm,
                ..
            } = *i
            {
                let m = &img.maps[imm as usize];
                if let Insn::Lddw {
                    kind: LddwKind::MapIdxValue,
                    ..
                } = i
                {
                    assert!((next_imm as u32) < m.value_size, "{name}: {}", m.name);
                }
            }
        }
        assert_calls_resolved(&img);
        // Line info: sorted, inside the program, naming the C file.
        assert!(img.line_info.windows(2).all(|w| w[0].slot <= w[1].slot));
        assert!(img.line_info.iter().all(|l| l.slot < img.slot_count()));
        assert!(
            img.line_info
                .iter()
                .any(|l| l.file.ends_with(&format!("{name}.c"))),
            "{name}"
        );
    }
}

#[test]
fn btf_maps_with_key_and_value_types() {
    let img = image("xdp_port_filter");
    let btf = img.btf.as_ref().expect("btf");
    let (_, ports) = img.map("blocked_ports").expect("blocked_ports");
    assert_eq!(
        (
            ports.map_type,
            ports.key_size,
            ports.value_size,
            ports.max_entries
        ),
        (MapType::Hash, 2, 8, 64)
    );
    assert_eq!(btf.c_type(ports.key_type_id.expect("key type")), "__u16");
    assert_eq!(
        btf.c_type(ports.value_type_id.expect("value type")),
        "__u64"
    );
    let (_, v) = img.map("verdicts").expect("verdicts");
    assert_eq!(
        (v.map_type, v.key_size, v.value_size, v.max_entries),
        (MapType::PercpuArray, 4, 8, 4)
    );
    let e = img.entry("xdp_port_filter").expect("entry");
    assert_eq!((e.section.as_str(), e.prog_type), ("xdp", ProgType::Xdp));
    let sig = btf
        .func_signature(img.functions[e.function].btf_id.expect("btf id"))
        .expect("sig");
    assert_eq!(sig.c_decl, "int xdp_port_filter(struct xdp_md *ctx)");

    let lpm = image("xdp_lpm_route");
    let (_, routes) = lpm.map("routes").expect("routes");
    assert_eq!(
        (
            routes.map_type,
            routes.key_size,
            routes.value_size,
            routes.flags
        ),
        (MapType::LpmTrie, 8, 8, 1)
    );
    let lb = lpm.btf.as_ref().expect("btf");
    assert_eq!(
        lb.c_type(routes.key_type_id.expect("key")),
        "struct lpm_key"
    );
}

#[test]
fn legacy_maps_section() {
    let img = image("xdp_legacy_maps");
    let (_, c) = img.map("ethertype_count").expect("map");
    assert_eq!(
        (c.map_type, c.key_size, c.value_size, c.max_entries),
        (MapType::Array, 4, 8, 4)
    );
    let (_, p) = img.map("policy").expect("map");
    assert_eq!(
        (p.map_type, p.key_size, p.value_size, p.max_entries),
        (MapType::Hash, 2, 4, 16)
    );
    assert_eq!(c.kind, MapKind::Declared);
}

#[test]
fn global_data_sections_are_maps() {
    let img = image("xdp_globals");
    let (ri, ro) = img.map(".rodata").expect(".rodata");
    assert_eq!(
        ro.kind,
        MapKind::Global {
            section: ".rodata".into(),
            read_only: true
        }
    );
    let data = ro.data.as_ref().expect("data");
    assert_eq!(&data[0..4], &60u32.to_le_bytes()); // min_len
    assert_eq!(&data[4..8], &1514u32.to_le_bytes()); // max_len
    let (_, d) = img.map(".data").expect(".data");
    assert_eq!(&d.data.as_ref().expect("data")[0..8], &1u64.to_le_bytes()); // seen = 1
    let (_, bss) = img.map(".bss").expect(".bss");
    assert!(bss.data.as_ref().expect("data").iter().all(|&b| b == 0));
    let (si, stats) = img.map(".data.stats").expect(".data.stats");
    assert_eq!(stats.value_size, 32);
    // DATASEC names the variables with their offsets.
    let btf = img.btf.as_ref().expect("btf");
    let vars: Vec<(String, u32)> = btf
        .datasec_vars(".rodata")
        .into_iter()
        .map(|v| (v.name, v.offset))
        .collect();
    assert!(
        vars.contains(&("min_len".into(), 0)) && vars.contains(&("max_len".into(), 4)),
        "{vars:?}"
    );
    // The program loads min_len (offset 0 of .rodata) and sizes[] (.data.stats).
    let loads: Vec<(i32, i32)> = img
        .insns
        .iter()
        .filter_map(|i| match *i {
            Insn::Lddw {
                kind: LddwKind::MapIdxValue,
                imm,
                next_imm,
                ..
            } => Some((imm, next_imm)),
            _ => None,
        })
        .collect();
    assert!(loads.contains(&(ri as i32, 0)), "{loads:?}");
    assert!(loads.contains(&(si as i32, 0)), "{loads:?}");
    let f = img
        .functions
        .iter()
        .find(|f| f.name == "size_bucket")
        .expect("size_bucket");
    assert!(f.global);
}

#[test]
fn subprograms_calls_and_callbacks() {
    let img = image("xdp_subprogs");
    let names: Vec<(&str, &str)> = img
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.section.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("xdp_classify", "xdp"),
            ("xdp_zero_scan", "xdp"),
            ("xdp_frags_len", "xdp.frags")
        ]
    );
    assert!(assert_calls_resolved(&img) >= 6);
    let count_zero = img
        .functions
        .iter()
        .position(|f| f.name == "count_zero")
        .expect("count_zero");
    let starts = nfkit_isa::slot_offsets(&img.insns);
    let addr = img
        .insns
        .iter()
        .enumerate()
        .find_map(|(i, insn)| match *insn {
            Insn::Lddw {
                kind: LddwKind::Func,
                imm,
                ..
            } => Some(starts[i] as i64 + 1 + imm as i64),
            _ => None,
        });
    assert_eq!(addr, Some(img.functions[count_zero].start as i64));
    assert!(!img.functions[count_zero].global);
    // xdp_classify reaches frame_class (global) and bump (static).
    let e = img.entry("xdp_classify").expect("entry");
    let reach: Vec<&str> = img
        .reachable_functions(e.function)
        .into_iter()
        .map(|i| img.functions[i].name.as_str())
        .collect();
    assert!(
        reach.contains(&"frame_class") && reach.contains(&"bump"),
        "{reach:?}"
    );
    assert!(img.insns.iter().any(|i| matches!(
        i,
        Insn::Call {
            kind: CallKind::Local,
            ..
        }
    )));
}

#[test]
fn prog_array_initial_values() {
    let img = image("xdp_tail_dispatch");
    let (mi, jt) = img.map("jmp_table").expect("jmp_table");
    assert_eq!(
        (jt.map_type, jt.key_size, jt.value_size, jt.max_entries),
        (MapType::ProgArray, 4, 4, 32)
    );
    let mut inits: Vec<(u32, &str)> = img
        .map_inits
        .iter()
        .map(|i| {
            assert_eq!(i.map, mi);
            (i.slot, img.entries[i.entry].name.as_str())
        })
        .collect();
    inits.sort();
    assert_eq!(inits, [(6, "handle_tcp"), (17, "handle_udp")]);
}

#[test]
fn program_types_from_sections() {
    assert_eq!(
        image("socket_tcp_port").entries[0].prog_type,
        ProgType::SocketFilter
    );
    assert_eq!(
        image("tc_proto_stats").entries[0].prog_type,
        ProgType::SchedCls
    );
    assert_eq!(image("xdp_adjust").entries[0].prog_type, ProgType::Xdp);
}

/// The corpus covers what issue 2 asks of it, as read from the objects
/// (not from the sources): program types, map types, global data
/// sections, static and global subprograms, loops, atomics, helpers.
#[test]
fn corpus_covers_the_acceptance_list() {
    use std::collections::HashSet;
    let mut progs = HashSet::new();
    let mut maps = HashSet::new();
    let mut globals = HashSet::new();
    let (mut static_fn, mut global_fn, mut loops, mut atomics, mut helpers) = (0, 0, 0, 0, 0);
    for (name, bytes) in nfkit_corpus::objects() {
        let img = Image::from_elf(bytes, name).unwrap();
        progs.extend(img.entries.iter().map(|e| e.prog_type));
        for m in &img.maps {
            match &m.kind {
                MapKind::Declared => {
                    maps.insert(m.map_type);
                }
                MapKind::Global { section, .. } => {
                    globals.insert(section.split('.').nth(1).unwrap_or("").to_string());
                }
            }
        }
        for (fi, f) in img.functions.iter().enumerate() {
            if img.entries.iter().any(|e| e.function == fi) {
                continue;
            }
            if f.global {
                global_fn += 1;
            } else {
                static_fn += 1;
            }
        }
        for i in &img.insns {
            match i {
                Insn::Jmp { off, .. } if *off < 0 => loops += 1,
                Insn::Ja { off } if *off < 0 => loops += 1,
                Insn::Atomic { .. } => atomics += 1,
                Insn::Call {
                    kind: CallKind::Helper,
                    ..
                } => helpers += 1,
                _ => {}
            }
        }
    }
    assert!(nfkit_corpus::ENTRIES.len() >= 12);
    for t in [ProgType::Xdp, ProgType::SchedCls, ProgType::SocketFilter] {
        assert!(progs.contains(&t), "no {t:?} program");
    }
    for t in [
        MapType::Hash,
        MapType::Array,
        MapType::PercpuArray,
        MapType::PercpuHash,
        MapType::LpmTrie,
        MapType::ProgArray,
    ] {
        assert!(maps.contains(&t), "no {t:?} map");
    }
    for s in ["rodata", "data", "bss"] {
        assert!(globals.contains(s), "no .{s} section");
    }
    assert!(
        static_fn >= 2 && global_fn >= 2,
        "{static_fn} static, {global_fn} global subprograms"
    );
    assert!(loops >= 3, "{loops} backward jumps");
    assert!(
        atomics >= 5 && helpers >= 20,
        "{atomics} atomics, {helpers} helper calls"
    );
}

#[test]
fn socket_filter_with_subprograms_and_globals() {
    let img = image("socket_len_hist");
    assert_eq!(img.entries[0].prog_type, ProgType::SocketFilter);
    let f = |n: &str| img.functions.iter().find(|f| f.name == n).expect(n);
    assert!(f("len_bucket").global && !f("first_byte_nonzero").global);
    let (_, h) = img.map("len_hist").expect("len_hist");
    assert_eq!(
        (h.map_type, h.key_size, h.value_size, h.max_entries),
        (MapType::PercpuArray, 4, 8, 8)
    );
    let (_, ro) = img.map(".rodata").expect(".rodata");
    assert_eq!(
        &ro.data.as_ref().expect("data")[..8],
        &[64, 0, 0, 0, 128, 0, 0, 0]
    );
    assert!(img.map(".bss").is_some() && img.map(".data").is_some());

    let tc = image("tc_classifier_acl");
    let e = &tc.entries[0];
    assert_eq!(
        (e.section.as_str(), e.prog_type),
        ("classifier", ProgType::SchedCls)
    );
    let (_, acl) = tc.map("acl").expect("acl");
    let btf = tc.btf.as_ref().expect("btf");
    assert_eq!(btf.c_type(acl.key_type_id.expect("key")), "struct acl_key");
    assert_eq!((acl.key_size, acl.value_size), (8, 4));
    let (_, hits) = tc.map("acl_hits").expect("acl_hits");
    assert_eq!(hits.map_type, MapType::LruPercpuHash);
}
