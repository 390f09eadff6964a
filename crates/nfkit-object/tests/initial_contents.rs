//! Initial contents of declared array maps (`nfkit_object::initial`):
//! written to `.nfkit.init.NAME` and read back onto the map; refused
//! for other map types and for contents larger than the map.

use nfkit_isa::assemble;
use nfkit_object::{write_object, Image, MapKind, MapSpec, MapType, ProgType};

fn map(name: &str, t: MapType, value: u32, max: u32, data: Option<Vec<u8>>) -> MapSpec {
    MapSpec {
        name: name.into(),
        kind: MapKind::Declared,
        map_type: t,
        key_size: 4,
        value_size: value,
        max_entries: max,
        flags: 0,
        key_type_id: None,
        value_type_id: None,
        data,
        pin_by_name: false,
        inner: None,
    }
}

fn image(maps: Vec<MapSpec>) -> Image {
    let insns = assemble("mov %r0, 2\nexit", None).expect("asm");
    let mut img = Image::from_insns("prog", ProgType::Xdp, insns);
    img.maps = maps;
    img.entries[0].section = "xdp".into();
    img
}

#[test]
fn initial_contents_survive_writing_and_reading() {
    let data: Vec<u8> = (0..20u8).collect();
    let img = image(vec![
        map("table", MapType::Array, 8, 4, Some(data.clone())),
        map("plain", MapType::Array, 8, 4, None),
    ]);
    let bytes = write_object(&img).expect("write");
    let back = Image::from_elf(&bytes, "t.o").expect("read back");
    assert_eq!(back.map("table").expect("table").1.data, Some(data));
    assert_eq!(back.map("plain").expect("plain").1.data, None);
    let entries: Vec<(u32, Vec<u8>)> = nfkit_object::initial::entries(&[1, 2, 3], 2).collect();
    assert_eq!(entries, vec![(0, vec![1, 2]), (1, vec![3, 0])]);
}

#[test]
fn initial_contents_are_refused_where_they_do_not_fit() {
    let img = image(vec![map("h", MapType::Hash, 8, 4, Some(vec![1; 8]))]);
    let e = write_object(&img).expect_err("hash").to_string();
    assert!(e.contains("array maps only"), "{e}");
    let img = image(vec![map("a", MapType::Array, 8, 4, Some(vec![1; 33]))]);
    let e = write_object(&img).expect_err("too large").to_string();
    assert!(e.contains("33 bytes") && e.contains("holds 32"), "{e}");
}
