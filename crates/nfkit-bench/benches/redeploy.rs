//! The time to apply a chain change, in static and in dynamic mode.
//!
//! `examples/ddos.py` is deployed with `nfkit_kernel::deploy` (native XDP
//! on a veth in a namespace of its own, pins and state in a private bpffs
//! mount and directory), then redeployed again and again, alternating
//! between two versions of the chain (`DST_RATE` 100 and 200: a change
//! of the chain's code, not of a map). Each change goes through
//! `nfkit_control::deploy_script` (compile; dynamic mode: slot planning
//! and a compile for those slots), as `nfkit deploy` does:
//! * static: the whole program (classifier, chain, NFs) is loaded and
//!   verified again, then swapped in by a link update;
//! * dynamic: the classifier and the NFs stay loaded; only the chain's
//!   segments are loaded, into the bank of `nfkit_progs` the running
//!   version does not use, and the chain's entry slot is switched.
//!
//! Criterion times one change (compile + deploy, wall clock). The
//! summary gives medians over 10 changes per mode: compile, load
//! (`DeployOutcome::load_time` minus the switch), switch
//! (`switch_time`: link update, or prog-array update in dynamic mode)
//! and the total. Needs root; skipped otherwise.

use criterion::Criterion;
use nfkit_abi::AttachPoint;
use nfkit_bench::*;
use nfkit_control::deploy::{deploy_script, DeploySpec, Mode};
use nfkit_kernel::deploy::{DeployOutcome, Paths};
use std::time::{Duration, Instant};

/// One measured change.
struct Change {
    compile: Duration,
    total: Duration,
    out: DeployOutcome,
}

/// Compiles `src` for `mode` and deploys it on `dev` in `ns` through
/// `nfkit_control::deploy_script` (from the calling thread, which enters
/// `ns`). The compile time is the time before loading starts (compile,
/// slot planning and, in dynamic mode, the second compile).
fn change(paths: &Paths, ns: &str, dev: &str, mode: Mode, src: &str) -> Res<Change> {
    let t0 = Instant::now();
    let spec = DeploySpec {
        file: "ddos.py",
        source: src,
        source_path: "examples/ddos.py",
        dev: Some(dev),
        netns: Some(ns),
        attach: Some(AttachPoint::Xdp),
        mode,
        search: nfkit_nf::SearchPath::embedded(),
        post_devs: &[],
    };
    let out = deploy_script(paths, &spec).map_err(err("deploy"))?.outcome;
    let total = t0.elapsed();
    Ok(Change {
        compile: total.saturating_sub(out.load_time),
        total,
        out,
    })
}

/// The two versions of the chain.
fn versions() -> Res<[String; 2]> {
    let v1 = std::fs::read_to_string(examples_dir().join("ddos.py")).map_err(err("ddos.py"))?;
    let v2 = v1.replace("DST_RATE = 100 ", "DST_RATE = 200 ");
    if v1 == v2 {
        return Err("ddos.py has no `DST_RATE = 100 ` to change".into());
    }
    Ok([v1, v2])
}

/// Runs `n` changes in `mode` (after a first deploy that is not
/// counted), alternating the versions; the first version deployed is
/// `versions[*k % 2]`, and `k` counts on.
fn changes(
    paths: &Paths,
    tb: &nfkit_kernel::Testbed,
    mode: Mode,
    versions: &[String; 2],
    k: &mut usize,
    n: usize,
) -> Res<Vec<Change>> {
    let ns = tb.ns_b.name().to_string();
    let dev = tb.veth.b.dev.clone();
    let start = *k;
    let out = in_netns(&ns, || {
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            v.push(change(paths, &ns, &dev, mode, &versions[(start + i) % 2])?);
        }
        Ok(v)
    });
    *k += n;
    out
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10)
        .configure_from_args();
    if !is_root() {
        println!("redeploy: skipped (the kernel benchmarks need root)");
        return;
    }
    let setup = (|| -> Res<_> {
        let versions = versions()?;
        let scratch = Scratch::new("redeploy")?;
        let tb = nfkit_kernel::Testbed::pair().map_err(err("testbed"))?;
        Ok((versions, scratch, tb))
    })();
    let (versions, scratch, tb) = match setup {
        Ok(s) => s,
        Err(e) => {
            println!("redeploy: skipped: {e}");
            return;
        }
    };
    let paths = scratch.paths();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut medians: Vec<(Mode, f64)> = Vec::new();
    for mode in [Mode::Static, Mode::Dynamic] {
        let _ = nfkit_kernel::deploy::undeploy(&paths, None);
        let mut k = 0usize;
        // The first deploy (attach, and in dynamic mode the NFs' load).
        let first = match changes(&paths, &tb, mode, &versions, &mut k, 1) {
            Ok(mut v) => v.pop(),
            Err(e) => {
                println!("redeploy: {} mode left out: {e}", mode.name());
                continue;
            }
        };
        c.bench_function(&format!("redeploy/{}", mode.name()), |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                let _ = changes(&paths, &tb, mode, &versions, &mut k, iters as usize);
                t.elapsed()
            })
        });
        let v = match changes(&paths, &tb, mode, &versions, &mut k, 10) {
            Ok(v) => v,
            Err(e) => {
                println!("redeploy: {} mode: {e}", mode.name());
                continue;
            }
        };
        let med = |f: &dyn Fn(&Change) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
        let compile = med(&|c| ms(c.compile));
        let switch = med(&|c| ms(c.out.switch_time));
        let load = med(&|c| ms(c.out.load_time.saturating_sub(c.out.switch_time)));
        let total = med(&|c| ms(c.total));
        let swapped = v.iter().filter(|c| c.out.swapped).count();
        medians.push((mode, total));
        rows.push(vec![
            mode.name().into(),
            first.map_or("-".into(), |f| format!("{:.2}", ms(f.total))),
            format!("{compile:.2}"),
            format!("{load:.2}"),
            format!("{switch:.3}"),
            format!("{total:.2}"),
            format!("{swapped}/{}", v.len()),
        ]);
    }
    let _ = nfkit_kernel::deploy::undeploy(&paths, None);
    c.final_summary();
    let get = |m: Mode| medians.iter().find(|(x, _)| *x == m).map(|(_, t)| *t);
    print_table(
        "Chain change (examples/ddos.py, DST_RATE 100 <-> 200, native XDP on a veth): \
         ms, median of 10 changes",
        &[
            "mode",
            "first deploy",
            "compile",
            "load",
            "switch",
            "total",
            "live swaps",
        ],
        &rows,
    );
    println!(
        "static / dynamic (total): {}",
        ratio(get(Mode::Static), get(Mode::Dynamic))
    );
}
