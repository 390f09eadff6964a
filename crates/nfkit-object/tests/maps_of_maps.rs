//! Maps of maps read the libbpf way: `__array(values, struct inner)`
//! gives the inner definition (from BTF), `.values = { [i] = &map }` the
//! initial slots (relocations in `.rel.maps`); an outer map without an
//! inner definition is refused by name; the Image keeps both through
//! linking; the writer refuses to write them rather than drop them.

use nfkit_corpus::BpfBuild;
use nfkit_object::{read_object, write_object, Image, MapType, Object};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

fn compile(name: &str, src: &str) -> Vec<u8> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("maps_of_maps-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.o"));
    std::fs::write(&c, src).expect("write source");
    let bytes = BpfBuild::new(&c)
        .out(&o)
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

const HEADER: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";

const OUTER: &str = r#"
struct inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u16);
} in_a SEC(".maps"), in_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 32);
	__type(key, __u32);
	__array(values, struct inner);
} outer SEC(".maps") = { .values = { [5] = &in_b, [7] = &in_a } };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__array(values, struct inner);
} empty SEC(".maps");

SEC("xdp")
int prog(struct xdp_md *ctx)
{
	__u32 k = 5;
	void *m = bpf_map_lookup_elem(&outer, &k);
	return m ? XDP_PASS : XDP_DROP;
}
char LICENSE[] SEC("license") = "GPL";
"#;

#[test]
fn inner_definition_and_slots() {
    let bytes = compile("outer", &format!("{HEADER}{OUTER}"));
    let obj: Object = read_object(&bytes, "outer.o").expect("read");
    let outer = obj.maps.iter().find(|m| m.name == "outer").expect("outer");
    assert_eq!(outer.map_type, MapType::HashOfMaps);
    assert_eq!(
        (outer.key_size, outer.value_size, outer.max_entries),
        (4, 4, 32)
    );
    let inner = outer.inner.as_ref().expect("inner maps");
    let t = &inner.template;
    assert_eq!(
        (t.map_type, t.key_size, t.value_size, t.max_entries),
        (MapType::Hash, 4, 2, 16)
    );
    let slots: Vec<(u32, &str)> = inner
        .slots
        .iter()
        .map(|s| (s.slot, s.map.as_str()))
        .collect();
    assert_eq!(slots, [(5, "in_b"), (7, "in_a")]);
    // No key given: 4 bytes, as libbpf gives it; no slots.
    let empty = obj.maps.iter().find(|m| m.name == "empty").expect("empty");
    assert_eq!((empty.key_size, empty.value_size), (4, 4));
    assert!(empty.inner.as_ref().is_some_and(|i| i.slots.is_empty()));

    let image = Image::from_elf(&bytes, "outer.o").expect("image");
    let linked = image
        .maps
        .iter()
        .find(|m| m.name == "outer")
        .expect("linked outer");
    let li = linked.inner.as_ref().expect("linked inner maps");
    assert_eq!(li.slots, inner.slots);
    // The template's value type points into the merged BTF: a __u16.
    let btf = image.btf.as_ref().expect("btf");
    let v = li.template.value_type_id.expect("value type");
    assert_eq!(btf.size_of(v).ok(), Some(2));
    let err = write_object(&image).expect_err("maps of maps are not written");
    assert!(err.to_string().contains("map 'outer'"), "{err}");
}

#[test]
fn outer_map_without_inner_definition_is_refused() {
    let src = format!(
        "{HEADER}
struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
}} bare SEC(\".maps\");
SEC(\"xdp\") int prog(struct xdp_md *ctx) {{ return XDP_PASS; }}
char LICENSE[] SEC(\"license\") = \"GPL\";
"
    );
    let err = read_object(&compile("bare", &src), "bare.o").expect_err("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("bare") && msg.contains("inner map definition"),
        "{msg}"
    );
}
