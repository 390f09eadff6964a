//! Linking several objects: a call to a global function of another object
//! resolves by name; a missing symbol and a duplicate definition are
//! clear errors naming the symbol and the objects; weak definitions give
//! way to global ones; maps of one name must agree. Objects are compiled
//! by clang here, as users' objects are.

use nfkit_corpus::BpfBuild;
use nfkit_object::{link, read_object, write_object, Image, LinkError, Object};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

fn compile(name: &str, src: &str) -> Object {
    // Tests run in parallel: each compile gets its own directory.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("link_objects-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.o"));
    std::fs::write(&c, src).expect("write source");
    let bytes = BpfBuild::new(&c)
        .arg("-mcpu=v3")
        .out(&o)
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    read_object(&bytes, &format!("{name}.o")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const HEADER: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";

fn caller() -> Object {
    compile(
        "caller",
        &format!(
            "{HEADER}
extern int nf_score(__u32 len);
struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 4);
}} shared SEC(\".maps\");
SEC(\"xdp\")
int xdp_main(struct xdp_md *ctx)
{{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&shared, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
	return nf_score(ctx->data_end - ctx->data) > 100 ? XDP_DROP : XDP_PASS;
}}
char LICENSE[] SEC(\"license\") = \"GPL\";
"
        ),
    )
}

fn callee(name: &str, attr: &str, max_entries: u32) -> Object {
    compile(
        name,
        &format!(
            "{HEADER}
struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, {max_entries});
}} shared SEC(\".maps\");
__attribute__((noinline{attr})) int nf_score(__u32 len)
{{
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&shared, &k);
	if (v)
		__sync_fetch_and_add(v, len);
	return len * 3;
}}
"
        ),
    )
}

#[test]
fn calls_resolve_across_objects() {
    let objs = [caller(), callee("callee", "", 4)];
    let img = link(&objs).expect("link");
    let main = img.entry("xdp_main").expect("entry");
    let reach: Vec<&str> = img
        .reachable_functions(main.function)
        .into_iter()
        .map(|i| img.functions[i].name.as_str())
        .collect();
    assert_eq!(reach, ["xdp_main", "nf_score"]);
    // One map `shared` for both objects.
    assert_eq!(img.maps.iter().filter(|m| m.name == "shared").count(), 1);
    assert_eq!(img.maps_used(0..img.slot_count()).len(), 1);
    // The linked Image is written and read back.
    let bytes = write_object(&img).expect("write");
    let back = Image::from_elf(&bytes, "linked").expect("read back");
    assert_eq!(back.insns, img.insns);
    assert_eq!(back.entries.len(), 1);
}

#[test]
fn missing_symbol_is_an_error() {
    let err = link(&[caller()]).unwrap_err();
    assert!(
        matches!(&err, LinkError::UndefinedSymbol { symbol, object, .. } if symbol == "nf_score" && object == "caller.o"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("caller.o")
            && msg.contains("xdp_main+")
            && msg.contains("undefined symbol 'nf_score'"),
        "{msg}"
    );
}

#[test]
fn duplicate_symbol_is_an_error() {
    let objs = [caller(), callee("one", "", 4), callee("two", "", 4)];
    let err = link(&objs).unwrap_err();
    assert_eq!(
        err.to_string(),
        "symbol 'nf_score' is defined in both one.o and two.o"
    );
}

#[test]
fn weak_definition_gives_way() {
    let objs = [
        caller(),
        callee("weak", ", weak", 4),
        callee("strong", "", 4),
    ];
    let img = link(&objs).expect("link");
    let f: Vec<&str> = img
        .functions
        .iter()
        .filter(|f| f.name == "nf_score")
        .map(|f| f.origin.as_str())
        .collect();
    assert_eq!(f, ["strong.o"]);
}

#[test]
fn maps_of_one_name_must_agree() {
    let objs = [caller(), callee("other", "", 8)];
    let msg = link(&objs).unwrap_err().to_string();
    assert!(
        msg.contains("map 'shared'")
            && msg.contains("caller.o")
            && msg.contains("other.o")
            && msg.contains("max_entries 8"),
        "{msg}"
    );
}
