//! `Vm::new_keeping`: a new VM shares the maps of a running one that it
//! declares alike (name, type, sizes) and only those the caller keeps;
//! a map of another shape or a new map starts empty; the old VM is left
//! as it was.

use nfkit_vm::{Vm, VmConfig};

fn image(maps: &str) -> nfkit_object::Image {
    let src = format!(
        "from nf.classify import every_packet\n{maps}\n\
         def main() -> u64:\n    return PASS\n\
         every_packet(main)\n"
    );
    match nfkit_lang::compile("keep.py", &src, &nfkit_lang::Options::default()) {
        Ok(c) => c.image,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn alike_maps_are_shared_by_name_others_are_new() {
    let v1 = image("a = ArrayMap(u64, 4)\nb = HashMap(u16, u64, 64)\n");
    let v2 = image("c = ArrayMap(u64, 2)\nb = HashMap(u16, u64, 128)\na = ArrayMap(u64, 4)\n");
    let old = Vm::new(&v1, VmConfig::kernel()).expect("v1");
    let key = 1u32.to_le_bytes();
    let a_old = old.map("a").expect("a");
    a_old.update(&key, &7u64.to_le_bytes(), 0).expect("a[1]");
    let keep = |name: &str| !name.starts_with("nfkit_");
    let new = Vm::new_keeping(&v2, VmConfig::kernel(), &old, &keep).expect("v2");
    let a_new = new.map("a").expect("a");
    assert!(a_new.same_store(a_old), "a is kept");
    assert_eq!(
        a_new.lookup(&key).expect("lookup"),
        Some(7u64.to_le_bytes().to_vec())
    );
    // Both VMs see each other's writes.
    a_new.update(&key, &9u64.to_le_bytes(), 0).expect("a[1]");
    assert_eq!(
        a_old.lookup(&key).expect("lookup"),
        Some(9u64.to_le_bytes().to_vec())
    );
    // b changed size: a new, empty map; c is new.
    let b_old = old.map("b").expect("b");
    assert!(!new.map("b").expect("b").same_store(b_old));
    assert!(new.map("c").is_some());
    // The ABI maps are not kept (the caller said so).
    if let (Some(x), Some(y)) = (old.map("nfkit_config"), new.map("nfkit_config")) {
        assert!(!x.same_store(y));
    }
    // Keeping nothing: nothing shared.
    let none = Vm::new_keeping(&v2, VmConfig::kernel(), &old, &|_| false).expect("v2");
    assert!(!none.map("a").expect("a").same_store(a_old));
}
