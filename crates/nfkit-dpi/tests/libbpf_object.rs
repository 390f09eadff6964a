//! The NF objects `nfkit dpi compile SET -o NF.o --hook H` writes
//! (`nfkit_lang::patterns::filter_image` + `write_object`) for every
//! catalogue set at xdp, tc and socket: their tables are `.rodata.*`
//! global data, so plain libbpf (`ObjectBuilder`, through
//! `nfkit_kernel::load_object_file`) loads a working NF. As root, each
//! object loaded by libbpf and by nfkit's kernel loader, and read back
//! into the VM, runs the same payloads (random bytes, the set's
//! alphabet, samples of each pattern at random offsets); the verdict
//! (drop iff a match) and the last result (`dpi_last[0]`) must equal the
//! `regex` crate's first match in all three.

mod common;
use common::{expected, frame, payload, reference, samples};
use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::{catalogue, Match};
use nfkit_nf::{Hook, SearchPath};
use nfkit_object::{Image, MapKind, ProgType};
use nfkit_vm::{Context, RunOptions, SkBuff, Vm, VmConfig, XdpMd};

/// Payloads per set (each through three hooks and three loaders).
const CASES: usize = 3000;

struct Case {
    frame: Vec<u8>,
    want: u64,
}

fn cases(set: &catalogue::Set, seed: u64) -> Vec<Case> {
    let res = reference(set.patterns, false);
    let samples = samples(set.name);
    let mut alphabet: Vec<u8> = samples.iter().flat_map(|s| s.iter().copied()).collect();
    alphabet.extend_from_slice(b" +%'=;-");
    let mut g = Gen(seed);
    let mut per = vec![0usize; set.patterns.len()];
    let out: Vec<Case> = (0..CASES)
        .map(|_| {
            let p = payload(&mut g, &samples, &alphabet);
            let want = expected(&res, &p);
            if let Some(m) = Match::from_result(want) {
                per[m.pattern] += 1;
            }
            let tcp = g.index(2) == 0;
            Case {
                frame: frame(p, tcp),
                want,
            }
        })
        .collect();
    for (i, &c) in per.iter().enumerate() {
        assert!(
            c * 200 >= CASES,
            "set {}: pattern {i} matched only {c} of {CASES} payloads",
            set.name
        );
    }
    out
}

/// Whether a return value of a `t` program is the filter's drop.
fn dropped(t: ProgType, ret: u64) -> bool {
    match t {
        ProgType::Xdp => ret == 1,
        ProgType::SchedCls => ret == 2,
        _ => ret == 0,
    }
}

fn u64_of(v: Option<Vec<u8>>) -> Option<u64> {
    v.and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()))
        .map(u64::from_ne_bytes)
}

/// The object bytes `dpi compile -o` writes for `set` at `hook`.
fn object(set: &catalogue::Set, hook: Hook) -> Vec<u8> {
    let pats: Vec<String> = set.patterns.iter().map(|p| p.to_string()).collect();
    let image = nfkit_lang::patterns::filter_image(&pats, hook, 0, &SearchPath::embedded())
        .expect("filter image");
    nfkit_object::write_object(&image).expect("write object")
}

/// Runs every case through `run` (a return value and the last result),
/// the disagreements with the regex crate.
fn check(
    what: &str,
    t: ProgType,
    cases: &[Case],
    mut run: impl FnMut(&[u8]) -> Result<(u64, Option<u64>), String>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        match run(&c.frame) {
            Ok((ret, got)) if got == Some(c.want) && dropped(t, ret) == (c.want != 0) => {}
            Ok((ret, got)) => wrong.push(format!(
                "{what} case {i}: {got:x?} (returned {ret}), regex {:x}",
                c.want
            )),
            Err(e) => wrong.push(format!("{what} case {i}: {e}")),
        }
    }
    wrong
}

/// [`check`] on `entry` of a program loaded into the kernel: its test
/// run's return value and `dpi_last[0]` after it.
fn check_kernel(
    what: &str,
    loaded: &nfkit_kernel::Loaded,
    entry: &str,
    t: ProgType,
    cases: &[Case],
) -> Vec<String> {
    let prog = loaded.prog(entry).expect("the entry program");
    let last = loaded.map("dpi_last").expect("dpi_last");
    check(what, t, cases, |f| {
        let o = prog
            .test_run(&nfkit_kernel::TestRun::packet(f))
            .map_err(|e| e.to_string())?;
        let got = last
            .lookup(&0u32.to_ne_bytes())
            .map_err(|e| e.to_string())?;
        Ok((u64::from(o.retval), u64_of(got)))
    })
}

#[test]
fn objects_carry_their_tables_as_read_only_global_data() {
    for set in catalogue::ALL {
        let bytes = object(set, Hook::Xdp);
        let img = Image::from_elf(&bytes, "dpi.o").expect("read object");
        for name in ["nf_dpi_next", "nf_dpi_accept", "nf_dpi_sets"] {
            let section = format!(".rodata.{name}");
            let (_, m) = img.map(&section).expect("a .rodata map");
            assert!(
                matches!(
                    m.kind,
                    MapKind::Global {
                        read_only: true,
                        ..
                    }
                ),
                "{section} is read-only global data"
            );
            assert!(
                m.data.as_ref().is_some_and(|d| d.iter().any(|&b| b != 0)),
                "{section} holds the tables of {}",
                set.name
            );
            assert!(img.map(name).is_none(), "no declared map {name} is left");
            let init = format!(".nfkit.init.{name}");
            let found = nfkit_object::section_bytes(&bytes, &[init.as_str()]).expect("sections");
            assert!(found[0].is_none(), "no {init} section");
        }
    }
}

#[test]
fn objects_loaded_by_libbpf_equal_the_regex_crate_and_nfkits_loaders() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root (libbpf loads into the kernel)");
        return;
    }
    let dir = std::env::temp_dir();
    let mut wrong = Vec::new();
    for (si, set) in catalogue::ALL.iter().enumerate() {
        let cases = cases(set, 0x11b_b9f0 + si as u64);
        for hook in [Hook::Xdp, Hook::Tc, Hook::Socket] {
            let bytes = object(set, hook);
            let path = dir.join(format!(
                "nfkit-dpi-libbpf-{}-{}-{hook:?}.o",
                std::process::id(),
                set.name
            ));
            std::fs::write(&path, &bytes).expect("write the object file");
            let loaded = nfkit_kernel::load_object_file(&path);
            let _ = std::fs::remove_file(&path);
            let loaded = loaded.unwrap_or_else(|e| {
                panic!("libbpf loads the {} object at {hook:?}: {e}", set.name)
            });
            let img = Image::from_elf(&bytes, "dpi.o").expect("read object");
            let e = &img.entries[0];
            let (entry, t) = (e.name.clone(), e.prog_type);
            let what = format!("{} {hook:?}", set.name);

            // libbpf: nothing written by the test.
            let label = format!("libbpf {what}");
            wrong.extend(check_kernel(&label, &loaded, &entry, t, &cases));

            // nfkit's kernel loader.
            let k = nfkit_kernel::load_image(&img, &nfkit_kernel::LoadOptions::default())
                .unwrap_or_else(|e| panic!("nfkit loads the {what} object: {e}"));
            let label = format!("nfkit kernel {what}");
            wrong.extend(check_kernel(&label, &k, &entry, t, &cases));

            // The VM.
            let vm = Vm::new(&img, VmConfig::kernel()).expect("VM load");
            let last = vm.map("dpi_last").expect("dpi_last");
            wrong.extend(check(&format!("VM {what}"), t, &cases, |f| {
                let ctx = match hook {
                    Hook::Xdp => Context::Xdp(XdpMd::new(f)),
                    _ => Context::Skb(SkBuff::new(f)),
                };
                let r = vm.run(entry.as_str(), ctx, &RunOptions::default());
                let ret = r.result.map_err(|e| e.to_string())?;
                let got = last
                    .lookup(&0u32.to_ne_bytes())
                    .map_err(|e| e.to_string())?;
                Ok((ret, u64_of(got)))
            }));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} disagreements; first:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}
