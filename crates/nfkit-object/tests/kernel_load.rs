//! The kernel accepts the corpus and what the ELF writer makes of it:
//! every corpus object as clang wrote it (except the ones libbpf 1.x
//! refuses) and every object written back from its Image pass
//! `bpftool prog loadall` (libbpf + the verifier), with all programs
//! pinned; prog array slots declared in C are filled. Needs root, bpffs
//! and bpftool (as CI has); every pin is removed, also on failure.

use nfkit_object::{link, read_object, write_object, Image};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A bpffs directory for one load, removed (unpinning everything) on drop.
struct Pins(PathBuf);

impl Pins {
    fn new(tag: &str) -> Pins {
        let bpffs = Path::new("/sys/fs/bpf");
        let mounted = std::fs::read_to_string("/proc/mounts")
            .map(|m| {
                m.lines().any(|l| {
                    l.split_whitespace().nth(1) == Some("/sys/fs/bpf") && l.contains(" bpf ")
                })
            })
            .unwrap_or(false);
        if !mounted {
            let ok = Command::new("mount")
                .args(["-t", "bpf", "bpf", "/sys/fs/bpf"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "cannot mount bpffs at /sys/fs/bpf (these tests need root)"
            );
        }
        Pins(bpffs.join(format!("nfkit-object-test-{}-{tag}", std::process::id())))
    }

    fn sub(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `bpftool prog loadall FILE DIR [pinmaps MAPDIR]`; the pinned program names.
fn loadall(obj: &[u8], name: &str, pins: &Pins, maps: bool) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(&pins.0).map_err(|e| format!("{}: {e}", pins.0.display()))?;
    let file = pins.0.with_extension(format!("{name}.o"));
    let file = std::env::temp_dir().join(file.file_name().unwrap_or_default());
    std::fs::write(&file, obj).map_err(|e| e.to_string())?;
    let progs = pins.sub("progs");
    let mut cmd = Command::new("bpftool");
    cmd.args(["prog", "loadall"]).arg(&file).arg(&progs);
    if maps {
        cmd.arg("pinmaps").arg(pins.sub("maps"));
    }
    let out = cmd.output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| format!("run bpftool: {e}"))?;
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        return Err(tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    let mut names: Vec<String> = std::fs::read_dir(&progs)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

fn entry_names(img: &Image) -> Vec<String> {
    let mut n: Vec<String> = img.entries.iter().map(|e| e.name.clone()).collect();
    n.sort();
    n
}

#[test]
fn corpus_objects_pass_the_verifier() {
    for e in nfkit_corpus::ENTRIES {
        if nfkit_corpus::LIBBPF_REFUSES.contains(&e.name) {
            continue;
        }
        let img = Image::from_elf(e.object, e.name).expect("read");
        let pins = Pins::new(&format!("c-{}", e.name));
        let loaded = loadall(e.object, e.name, &pins, false)
            .unwrap_or_else(|log| panic!("{}: clang's object is refused:\n{log}", e.name));
        assert_eq!(loaded, entry_names(&img), "{}", e.name);
    }
}

#[test]
fn written_objects_pass_the_verifier() {
    for e in nfkit_corpus::ENTRIES {
        let img = Image::from_elf(e.object, e.name).expect("read");
        let bytes = write_object(&img).expect("write");
        let pins = Pins::new(&format!("w-{}", e.name));
        let loaded = loadall(&bytes, e.name, &pins, false)
            .unwrap_or_else(|log| panic!("{}: the written object is refused:\n{log}", e.name));
        assert_eq!(loaded, entry_names(&img), "{}", e.name);
    }
}

#[test]
fn written_prog_array_slots_are_filled() {
    let e = nfkit_corpus::get("xdp_tail_dispatch").expect("corpus");
    let img = Image::from_elf(e.object, e.name).expect("read");
    let bytes = write_object(&img).expect("write");
    let pins = Pins::new("slots");
    loadall(&bytes, e.name, &pins, true).unwrap_or_else(|log| panic!("{log}"));
    let out = Command::new("bpftool")
        .args(["-j", "map", "dump", "pinned"])
        .arg(pins.sub("maps").join("jmp_table"))
        .output()
        .expect("bpftool map dump");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut keys: Vec<u64> = v
        .as_array()
        .expect("entries")
        .iter()
        .map(|kv| {
            let k = kv["key"].as_array().expect("key bytes");
            let b: Vec<u8> = k
                .iter()
                .map(|x| {
                    u8::from_str_radix(x.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
                })
                .collect();
            u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        })
        .collect();
    keys.sort();
    assert_eq!(keys, [6, 17]);
}

#[test]
fn written_linked_objects_pass_the_verifier() {
    let objs: Vec<_> = ["xdp_port_filter", "tc_proto_stats", "socket_tcp_port"]
        .iter()
        .map(|n| {
            let e = nfkit_corpus::get(n).expect("corpus");
            read_object(e.object, e.name).expect("read")
        })
        .collect();
    let img = link(&objs).expect("link");
    let bytes = write_object(&img).expect("write");
    let pins = Pins::new("linked");
    let loaded = loadall(&bytes, "linked", &pins, false).unwrap_or_else(|log| panic!("{log}"));
    assert_eq!(loaded, entry_names(&img));
}
