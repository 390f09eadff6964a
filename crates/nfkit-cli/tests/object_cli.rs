//! `nfkit object show FILE.o [--json]`, run as a user runs it, on the C
//! corpus (compiled here by clang as the build does): the JSON agrees with
//! `bpftool btf dump file` (BTF-defined maps: names, types, key/value
//! sizes and types, max_entries, flags), with the raw `maps` section
//! (legacy maps) and with `llvm-readelf -S -s` (programs and subprograms:
//! sections, offsets, sizes, bindings; global-data sections and their
//! symbols). Bad files exit 1 with one line on stderr.

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .output()
        .expect("run nfkit")
}

fn tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Every `corpus/*.c`, compiled once per test run: (stem, object path).
fn corpus() -> &'static [(String, PathBuf)] {
    static OBJECTS: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("object_cli-{}", std::process::id()));
        std::fs::create_dir_all(&out).expect("tmp dir");
        let mut v = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&src)
            .expect("corpus dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        files.sort();
        for c in files {
            let stem = c.file_stem().unwrap().to_string_lossy().into_owned();
            let o = out.join(format!("{stem}.o"));
            nfkit_corpus::BpfBuild::new(&c)
                .arg("-mcpu=v3")
                .out(&o)
                .object_file()
                .unwrap_or_else(|e| panic!("{e}"));
            v.push((stem, o));
        }
        assert!(v.len() >= 12, "corpus has {} programs", v.len());
        v
    })
}

fn show_json(path: &Path) -> Value {
    let o = nfkit(&["object", "show", path.to_str().unwrap(), "--json"]);
    assert!(
        o.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// bpftool's JSON BTF, by id.
struct BtfDump(HashMap<u64, Value>);

impl BtfDump {
    fn of(path: &Path) -> BtfDump {
        let v: Value = serde_json::from_str(&tool(
            "bpftool",
            &["-j", "btf", "dump", "file", path.to_str().unwrap()],
        ))
        .expect("bpftool JSON");
        let types = v["types"].as_array().expect("types").clone();
        BtfDump(
            types
                .into_iter()
                .map(|t| (t["id"].as_u64().unwrap(), t))
                .collect(),
        )
    }

    fn get(&self, id: u64) -> &Value {
        &self.0[&id]
    }

    fn datasec(&self, name: &str) -> Option<&Value> {
        self.0
            .values()
            .find(|t| t["kind"] == "DATASEC" && t["name"] == name)
    }

    fn size(&self, id: u64) -> u64 {
        let t = self.get(id);
        match t["kind"].as_str().unwrap() {
            "TYPEDEF" | "CONST" | "VOLATILE" | "RESTRICT" => {
                self.size(t["type_id"].as_u64().unwrap())
            }
            "ARRAY" => t["nr_elems"].as_u64().unwrap() * self.size(t["type_id"].as_u64().unwrap()),
            "PTR" => 8,
            _ => t["size"].as_u64().expect("sized type"),
        }
    }

    /// The C name nfkit should print for a key/value type.
    fn c_name(&self, id: u64) -> String {
        let t = self.get(id);
        let name = t["name"].as_str().unwrap();
        match t["kind"].as_str().unwrap() {
            "STRUCT" => format!("struct {name}"),
            "UNION" => format!("union {name}"),
            _ => name.to_string(),
        }
    }
}

const MAP_TYPES: &[(u64, &str)] = &[
    (1, "hash"),
    (2, "array"),
    (3, "prog_array"),
    (5, "percpu_hash"),
    (6, "percpu_array"),
    (9, "lru_hash"),
    (10, "lru_percpu_hash"),
    (11, "lpm_trie"),
    (27, "ringbuf"),
];

fn map_type_name(id: u64) -> &'static str {
    MAP_TYPES
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, n)| *n)
        .unwrap_or_else(|| panic!("map type {id} not in the test's table"))
}

/// Maps as bpftool's BTF dump defines them: name -> (type, key, value,
/// max_entries, flags, key type, value type).
type MapRow = (String, u64, u64, u64, u64, Option<String>, Option<String>);

fn btf_maps(btf: &BtfDump) -> HashMap<String, MapRow> {
    let mut out = HashMap::new();
    let Some(sec) = btf.datasec(".maps") else {
        return out;
    };
    for v in sec["vars"].as_array().unwrap() {
        let var = btf.get(v["type_id"].as_u64().unwrap());
        let name = var["name"].as_str().unwrap().to_string();
        let st = btf.get(var["type_id"].as_u64().unwrap());
        let mut row: MapRow = (String::new(), 0, 0, 0, 0, None, None);
        for m in st["members"].as_array().unwrap() {
            if m["name"] == "values" {
                // prog array contents: the value is a 4-byte program id.
                row.1 = row.1.max(4);
                row.2 = 4;
                continue;
            }
            let ptr = btf.get(m["type_id"].as_u64().unwrap());
            assert_eq!(ptr["kind"], "PTR", "{name}: {m}");
            let target = ptr["type_id"].as_u64().unwrap();
            let uint = || btf.get(target)["nr_elems"].as_u64().unwrap();
            match m["name"].as_str().unwrap() {
                "type" => row.0 = map_type_name(uint()).to_string(),
                "max_entries" => row.3 = uint(),
                "map_flags" => row.4 = uint(),
                "key_size" => row.1 = uint(),
                "value_size" => row.2 = uint(),
                "key" => {
                    row.1 = btf.size(target);
                    row.5 = Some(btf.c_name(target));
                }
                "value" => {
                    row.2 = btf.size(target);
                    row.6 = Some(btf.c_name(target));
                }
                other => panic!("{name}: unexpected field {other}"),
            }
        }
        out.insert(name, row);
    }
    out
}

/// Legacy `struct bpf_map_def`s from the raw `maps` section and symbols.
fn legacy_maps(path: &Path, syms: &[Sym]) -> HashMap<String, MapRow> {
    let hex = tool("llvm-readelf", &["-x", "maps", path.to_str().unwrap()]);
    let mut bytes = Vec::new();
    for l in hex.lines().filter(|l| l.trim_start().starts_with("0x")) {
        for w in l.split_whitespace().skip(1).take(4) {
            if w.len() != 8 || !w.chars().all(|c| c.is_ascii_hexdigit()) {
                break;
            }
            for i in 0..4 {
                bytes.push(u8::from_str_radix(&w[i * 2..i * 2 + 2], 16).unwrap());
            }
        }
    }
    let word = |at: usize| u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()));
    syms.iter()
        .filter(|s| s.section == "maps" && s.kind == "OBJECT")
        .map(|s| {
            let o = s.value as usize;
            (
                s.name.clone(),
                (
                    map_type_name(word(o)).to_string(),
                    word(o + 4),
                    word(o + 8),
                    word(o + 12),
                    word(o + 16),
                    None,
                    None,
                ),
            )
        })
        .collect()
}

/// One `llvm-readelf -s` symbol with its section's name.
#[derive(Debug)]
struct Sym {
    name: String,
    value: u64,
    size: u64,
    kind: String,
    bind: String,
    section: String,
}

/// Sections (index -> (name, size)) and symbols from `llvm-readelf -S -s`.
fn readelf(path: &Path) -> (HashMap<usize, (String, u64)>, Vec<Sym>) {
    let text = tool("llvm-readelf", &["-S", "-s", path.to_str().unwrap()]);
    let mut sections = HashMap::new();
    let mut syms = Vec::new();
    for l in text.lines() {
        // "  [ 3] xdp   PROGBITS  0000000000000000 000040 000148 00  AX  0   0  8"
        if let Some(rest) = l.trim_start().strip_prefix('[') {
            let (idx, rest) = rest.split_once(']').unwrap();
            let f: Vec<&str> = rest.split_whitespace().collect();
            if let (Ok(i), Some(name), Some(size)) =
                (idx.trim().parse::<usize>(), f.first(), f.get(4))
            {
                if let Ok(sz) = u64::from_str_radix(size, 16) {
                    sections.insert(i, (name.to_string(), sz));
                }
            }
            continue;
        }
        // "    16: 0000000000000000   328 FUNC    GLOBAL DEFAULT     3 xdp_legacy_count"
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 8 && f[0].ends_with(':') {
            if let (Ok(value), Ok(size), Ok(ndx)) = (
                u64::from_str_radix(f[1], 16),
                f[2].parse::<u64>(),
                f[6].parse::<usize>(),
            ) {
                syms.push(Sym {
                    name: f[7].to_string(),
                    value,
                    size,
                    kind: f[3].to_string(),
                    bind: f[4].to_string(),
                    section: sections.get(&ndx).map(|s| s.0.clone()).unwrap_or_default(),
                });
            }
        }
    }
    (sections, syms)
}

fn prog_type_of(section: &str) -> &'static str {
    if section == "socket" {
        "socket_filter"
    } else if section.starts_with("xdp") {
        "xdp"
    } else if section == "tc" || section.starts_with("classifier") || section.starts_with("tc/") {
        "sched_cls"
    } else {
        panic!("section {section} not in the test's table")
    }
}

fn map_rows(j: &Value) -> HashMap<String, MapRow> {
    j["maps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().map(str::to_string);
            (
                m["name"].as_str().unwrap().to_string(),
                (
                    m["type"].as_str().unwrap().to_string(),
                    m["key_size"].as_u64().unwrap(),
                    m["value_size"].as_u64().unwrap(),
                    m["max_entries"].as_u64().unwrap(),
                    m["flags"].as_u64().unwrap(),
                    s("key_type"),
                    s("value_type"),
                ),
            )
        })
        .collect()
}

#[test]
fn show_json_agrees_with_bpftool_and_readelf() {
    let mut maps_seen = 0;
    for (name, path) in corpus() {
        let j = show_json(path);
        assert_eq!(j["file"], path.to_str().unwrap());
        let (sections, syms) = readelf(path);
        // Maps: BTF-defined ones against bpftool, legacy ones against the raw section.
        let btf = BtfDump::of(path);
        let mut want = btf_maps(&btf);
        want.extend(legacy_maps_if_any(path, &sections, &syms));
        let mut got = map_rows(&j);
        if name == "xdp_legacy_maps" {
            // Legacy definitions carry no BTF types.
            for row in got.values_mut() {
                assert_eq!((row.5.take(), row.6.take()), (None, None), "{name}");
            }
        }
        assert_eq!(got, want, "{name}: maps");
        maps_seen += got.len();
        // Programs and subprograms against the FUNC symbols.
        let funcs: Vec<&Sym> = syms.iter().filter(|s| s.kind == "FUNC").collect();
        let progs = j["programs"].as_array().unwrap();
        let subs = j["functions"].as_array().unwrap();
        assert_eq!(progs.len() + subs.len(), funcs.len(), "{name}: functions");
        for s in &funcs {
            let (list, is_prog) = if s.section == ".text" {
                (subs, false)
            } else {
                (progs, true)
            };
            let p = list
                .iter()
                .find(|p| p["name"] == s.name.as_str())
                .unwrap_or_else(|| panic!("{name}: {} not listed", s.name));
            assert_eq!(p["section"], s.section.as_str(), "{name}: {}", s.name);
            assert_eq!(p["offset"].as_u64(), Some(s.value), "{name}: {}", s.name);
            assert_eq!(p["size"].as_u64(), Some(s.size), "{name}: {}", s.name);
            let insns = p["insns"].as_u64().unwrap();
            assert!(
                insns <= s.size / 8 && insns * 16 >= s.size,
                "{name}: {}",
                s.name
            );
            if is_prog {
                assert_eq!(p["type"], prog_type_of(&s.section), "{name}: {}", s.name);
            } else {
                let bind = if s.bind == "LOCAL" {
                    "static"
                } else {
                    "global"
                };
                assert_eq!(p["binding"], bind, "{name}: {}", s.name);
            }
        }
        // Global data: every .rodata/.data/.bss section with its size and
        // its global symbols.
        let globals = j["globals"].as_array().unwrap();
        let data_secs: Vec<&(String, u64)> = sections
            .values()
            .filter(|(n, sz)| {
                *sz > 0
                    && [".rodata", ".data", ".bss"]
                        .iter()
                        .any(|p| n == p || n.starts_with(&format!("{p}.")))
            })
            .collect();
        assert_eq!(globals.len(), data_secs.len(), "{name}: global sections");
        for (sec, size) in data_secs {
            let g = globals
                .iter()
                .find(|g| g["section"] == sec.as_str())
                .unwrap_or_else(|| panic!("{name}: {sec} not listed"));
            assert_eq!(g["size"].as_u64(), Some(*size), "{name}: {sec}");
            assert_eq!(g["read_only"], sec.starts_with(".rodata"), "{name}: {sec}");
            for s in syms
                .iter()
                .filter(|s| s.section == *sec && s.kind == "OBJECT" && s.bind == "GLOBAL")
            {
                let v = g["vars"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == s.name.as_str())
                    .unwrap_or_else(|| panic!("{name}: {sec}: {} not listed", s.name));
                assert_eq!(v["offset"].as_u64(), Some(s.value), "{name}: {}", s.name);
                assert_eq!(v["size"].as_u64(), Some(s.size), "{name}: {}", s.name);
                assert_eq!(v["linkage"], "global");
            }
        }
    }
    assert!(maps_seen >= 12, "only {maps_seen} maps compared");
}

fn legacy_maps_if_any(
    path: &Path,
    sections: &HashMap<usize, (String, u64)>,
    syms: &[Sym],
) -> HashMap<String, MapRow> {
    if sections.values().any(|(n, _)| n == "maps") {
        legacy_maps(path, syms)
    } else {
        HashMap::new()
    }
}

#[test]
fn show_prints_tables() {
    let (_, path) = corpus()
        .iter()
        .find(|(n, _)| n == "xdp_port_filter")
        .expect("corpus program");
    let o = nfkit(&["object", "show", path.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let line = |needle: &[&str]| {
        assert!(
            text.lines().any(|l| needle.iter().all(|n| l.contains(n))),
            "no line with {needle:?} in\n{text}"
        );
    };
    line(&["xdp_port_filter", "xdp"]);
    line(&["blocked_ports", "hash", "2", "8", "64", "__u16", "__u64"]);
    line(&["verdicts", "percpu_array", "4"]);
    assert!(text.contains("license GPL"), "{text}");
}

/// Bad files: exit 1, nothing on stdout, one line on stderr that names
/// the file and where in it.
#[test]
fn bad_files_exit_1_with_one_line() {
    let (_, path) = corpus()
        .iter()
        .find(|(n, _)| n == "xdp_subprogs")
        .expect("corpus program");
    let good = std::fs::read(path).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("object_cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated.o", good[..good.len() / 2].to_vec(), "offset 0x"),
        (
            "garbage.o",
            b"hello, not an object".to_vec(),
            "not an ELF file",
        ),
    ];
    let mut x86 = good.clone();
    x86[0x12] = 62;
    cases.push(("x86.o", x86, "machine 62"));
    // A relocation whose offset is outside its section.
    let mut bad_rel = good.clone();
    let rel = find_section(&good, ".relxdp");
    bad_rel[rel..rel + 8].copy_from_slice(&0xfff0u64.to_le_bytes());
    cases.push(("badrel.o", bad_rel, "section 'xdp', symbol '"));
    for (file, bytes, needle) in cases {
        let p = dir.join(file);
        std::fs::write(&p, bytes).unwrap();
        for json in [false, true] {
            let mut args = vec!["object", "show", p.to_str().unwrap()];
            if json {
                args.push("--json");
            }
            let o = nfkit(&args);
            assert_eq!(o.status.code(), Some(1), "{file}");
            assert!(o.stdout.is_empty(), "{file}");
            let err = String::from_utf8(o.stderr).unwrap();
            assert_eq!(err.lines().count(), 1, "{file}: {err}");
            assert!(
                err.starts_with(&format!("error: {}: ", p.display())) && err.contains(needle),
                "{file}: {err}"
            );
        }
    }
    let o = nfkit(&["object", "show", "/nonexistent/x.o"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// File offset of the contents of section `name` (little-endian ELF64).
fn find_section(b: &[u8], name: &str) -> usize {
    let u16_at = |a: usize| u16::from_le_bytes([b[a], b[a + 1]]) as usize;
    let u32_at = |a: usize| u32::from_le_bytes(b[a..a + 4].try_into().unwrap()) as usize;
    let u64_at = |a: usize| u64::from_le_bytes(b[a..a + 8].try_into().unwrap()) as usize;
    let (shoff, shnum, shstrndx) = (u64_at(0x28), u16_at(0x3c), u16_at(0x3e));
    let strtab = u64_at(shoff + shstrndx * 64 + 24);
    (0..shnum)
        .map(|i| shoff + i * 64)
        .find(|&h| {
            let n = strtab + u32_at(h);
            b[n..].starts_with(name.as_bytes()) && b[n + name.len()] == 0
        })
        .map(|h| u64_at(h + 24))
        .unwrap_or_else(|| panic!("no section {name}"))
}
