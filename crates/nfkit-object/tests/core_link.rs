//! CO-RE relocations through reading and linking, against a target BTF
//! built here (so the values are known): they follow their functions
//! (a subprogram in `.text`, two objects linked together), a missing
//! kernel BTF is a clear error only for the programs that need it.

use nfkit_corpus::BpfBuild;
use nfkit_isa::{CallKind, Insn};
use nfkit_object::btf::{Kind, Member, Type};
use nfkit_object::co_re::{Target, POISON_HELPER};
use nfkit_object::{link_with_target, read_object, Btf, Image, Object};
use std::path::PathBuf;

fn compile(name: &str, src: &str) -> Object {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("core_link-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (c, o) = (dir.join(format!("{name}.c")), dir.join(format!("{name}.o")));
    std::fs::write(&c, src).expect("write source");
    let bytes = BpfBuild::new(&c)
        .arg("-mcpu=v3")
        .out(&o)
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    read_object(&bytes, &format!("{name}.o")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const PROG: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct pkt___local { unsigned int a; unsigned int b; } __attribute__((preserve_access_index));
struct gone___local { int x; } __attribute__((preserve_access_index));
__attribute__((noinline)) int read_b(struct pkt___local *p) { return p->b; }
SEC("xdp") int uses_sub(struct xdp_md *ctx) {
    struct pkt___local *p = (void *)(long)ctx->data;
    if ((void *)(p + 1) > (void *)(long)ctx->data_end) return XDP_PASS;
    return read_b(p) == 7 ? XDP_DROP : XDP_PASS;
}
SEC("xdp") int uses_gone(struct xdp_md *ctx) {
    struct gone___local *g = (void *)(long)ctx->data;
    if ((void *)(long)ctx->data + 64 > (void *)(long)ctx->data_end) return XDP_PASS;
    return g->x;
}
SEC("xdp") int plain(struct xdp_md *ctx) { return XDP_PASS; }
char LICENSE[] SEC("license") = "GPL";
"#;

/// A kernel where `struct pkt` has `b` at byte 12 (and no `gone`).
fn target() -> Target {
    let mut t = Btf::new();
    let u = t.add(Type::new(
        "unsigned int",
        Kind::Int {
            size: 4,
            encoding: 0,
            offset: 0,
            bits: 32,
        },
    ));
    let m = |name: &str, bits| Member {
        name: name.into(),
        ty: u,
        bit_offset: bits,
        bitfield_size: 0,
    };
    t.add(Type::new(
        "pkt",
        Kind::Struct {
            size: 16,
            members: vec![m("z", 0), m("a", 64), m("b", 96)],
        },
    ));
    Target::new(t)
}

fn entry(image: &Image, name: &str) -> usize {
    image
        .entries
        .iter()
        .position(|e| e.name == name)
        .expect("entry")
}

#[test]
fn relocations_follow_functions_and_only_needed_ones_fail() {
    let obj = compile("core_link", PROG);
    let sub = obj.function("read_b").expect("subprogram");
    assert_eq!(sub.section, ".text");
    assert_eq!(
        sub.core_relos.len(),
        1,
        "the relocation is on the subprogram"
    );
    // Linked after another object: the relocation still patches its load.
    let other = compile("other", "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\nSEC(\"xdp\") int first(struct xdp_md *c) { return 2; }\nchar L[] SEC(\"license\") = \"GPL\";\n");
    let t = target();
    let image = link_with_target(&[other, obj], Ok(&t)).expect("links");
    let site = image
        .core_sites
        .iter()
        .find(|s| s.function == "read_b")
        .expect("site in read_b");
    assert_eq!(site.what, "byte_off struct pkt___local::b");
    assert_eq!(site.result, Ok(12));
    let f = image.functions.iter().find(|f| f.name == "read_b").unwrap();
    assert_eq!(site.slot, f.start + site.func_slot);
    let starts = nfkit_isa::slot_offsets(&image.insns);
    let i = starts.binary_search(&site.slot).expect("insn at site");
    assert!(
        matches!(image.insns[i], Insn::Ldx { off: 12, .. }),
        "{:?}",
        image.insns[i]
    );
    // uses_sub reaches read_b, resolved; uses_gone reaches its poison.
    assert_eq!(image.core_error(entry(&image, "uses_sub")), None);
    assert_eq!(image.core_error(entry(&image, "plain")), None);
    let e = image
        .core_error(entry(&image, "uses_gone"))
        .expect("uses_gone refused");
    assert!(
        e.starts_with("CO-RE relocation in 'uses_gone' at insn ")
            && e.ends_with(
                "byte_off struct gone___local::x: field not found in the kernel's BTF (access 0:0)"
            ),
        "{e}"
    );
    assert!(image.insns.contains(&Insn::Call {
        kind: CallKind::Helper,
        imm: POISON_HELPER
    }));
}

#[test]
fn missing_kernel_btf_is_named_for_the_programs_that_need_it() {
    let obj = compile("core_nobtf", PROG);
    let missing = Target::from_file("/nonexistent/vmlinux").unwrap_err();
    assert!(
        missing.starts_with("the kernel's BTF (/nonexistent/vmlinux): "),
        "{missing}"
    );
    let image = link_with_target(std::slice::from_ref(&obj), Err(missing.clone())).expect("links");
    assert_eq!(image.core_error(entry(&image, "plain")), None);
    let e = image
        .core_error(entry(&image, "uses_sub"))
        .expect("needs the kernel's BTF");
    assert!(e.contains(&missing) && e.contains("read_b"), "{e}");
}
