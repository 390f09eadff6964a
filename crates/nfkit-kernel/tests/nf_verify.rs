//! Issue 4's acceptance through nfkit's own loader: every NF of the
//! catalogue (`nf/*.c`, built per hook by nfkit-nf) passes the running
//! kernel's verifier, for each hook it is built for, in its three forms:
//!
//! * standalone: the module's `xdp_<name>` / `tc_<name>` / `sock_<name>`
//!   program (classifiers: `<name>`);
//! * called from a chain: nfkit-nf's caller (a small entry program that
//!   calls `nf_<name>` as a real bpf-to-bpf call, as a static chain does)
//!   linked with the NF by nfkit-object, loaded and then run once with
//!   `BPF_PROG_TEST_RUN` (the caller's per-CPU run count shows the NF ran);
//! * dynamic: the module's `dyn_<name>` entry (tail-call composition).
//!
//! Images are linked by nfkit-object and loaded by `nfkit_kernel::load_image`
//! (BTF, func and line info: a rejection would name the NF's source line).

use nfkit_kernel::{load_image, LoadOptions, TestRun};
use nfkit_nf::{caller, catalogue, Hook, NfKind, SearchPath};
use nfkit_object::Image;

/// A frame every hook's parser accepts: Ethernet + IPv4 + UDP.
fn frame() -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&50u16.to_be_bytes());
    p[22] = 64;
    p[23] = 17;
    p[26..30].copy_from_slice(&[198, 18, 0, 1]);
    p[30..34].copy_from_slice(&[198, 18, 0, 2]);
    p[34..36].copy_from_slice(&1234u16.to_be_bytes());
    p[36..38].copy_from_slice(&53u16.to_be_bytes());
    p[38..40].copy_from_slice(&30u16.to_be_bytes());
    p
}

#[test]
fn every_nf_verifies_standalone_called_and_dynamic() {
    let cpu = nfkit_kernel::current_cpu().unwrap_or(0);
    nfkit_kernel::pin_thread_to_cpu(cpu).expect("pin");
    let path = SearchPath::embedded();
    let mut standalone = 0;
    let mut dynamic = 0;
    let mut called = 0;
    let mut failures = Vec::new();
    let docs = nfkit_nf::list();
    let classifiers = nfkit_nf::classifiers();
    for m in catalogue() {
        for o in m.objects {
            let image = Image::from_elf(o.object, o.path)
                .unwrap_or_else(|e| panic!("{} ({}): {e}", m.name, o.hook));
            let loaded = match load_image(&image, &LoadOptions::default()) {
                Ok(l) => l,
                Err(e) => {
                    failures.push(format!("{} ({}): {e}", m.module, o.hook));
                    continue;
                }
            };
            assert_eq!(loaded.btf_error(), None, "{} ({})", m.module, o.hook);
            let nfs = docs
                .iter()
                .filter(|d| d.module == m.module && d.kind == NfKind::Nf);
            for d in nfs.filter(|d| d.hooks.contains(&o.hook)) {
                let alone = format!("{}{}", o.hook.standalone_prefix(), d.name);
                let dynamic_name = format!("dyn_{}", d.name);
                for (name, count) in [(&alone, &mut standalone), (&dynamic_name, &mut dynamic)] {
                    match loaded.prog(name) {
                        Some(p) if p.id().is_ok_and(|id| id > 0) => *count += 1,
                        _ => failures.push(format!("{} ({}): no program {name}", m.module, o.hook)),
                    }
                }
                match call_once(&path, m.module, &d.name, o.hook, cpu) {
                    Ok(()) => called += 1,
                    Err(e) => {
                        failures.push(format!("{}.{} ({}) called: {e}", m.module, d.name, o.hook))
                    }
                }
            }
            for c in classifiers
                .iter()
                .filter(|c| c.module == m.module && c.hooks.contains(&o.hook))
            {
                for name in [c.name.clone(), format!("dyn_{}", c.name)] {
                    if loaded.prog(&name).is_none() {
                        failures.push(format!(
                            "{} ({}): no classifier program {name}",
                            m.module, o.hook
                        ));
                    }
                }
            }
        }
    }
    println!(
        "nf-verify: {standalone} standalone, {dynamic} dynamic, {called} chain-called NF programs verified by the kernel"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(standalone >= 20 && dynamic == standalone && called == standalone);
}

/// Links NF `module.name` with the caller for `hook`, loads it and runs
/// `nfkit_call` once: the NF must have been called (run count 1 on this CPU).
fn call_once(
    path: &SearchPath,
    module: &str,
    name: &str,
    hook: Hook,
    cpu: usize,
) -> Result<(), String> {
    let image = caller::caller_image(path, module, name, hook).map_err(|e| e.to_string())?;
    let loaded = load_image(&image, &LoadOptions::default()).map_err(|e| e.to_string())?;
    if let Some(e) = loaded.btf_error() {
        return Err(format!("BTF refused: {e}"));
    }
    for entry in [caller::CALL_ENTRY, caller::CALL_ACT_ENTRY] {
        if loaded.prog(entry).is_none() {
            return Err(format!("no program {entry}"));
        }
    }
    let prog = loaded.prog(caller::CALL_ENTRY).ok_or("no caller")?;
    prog.test_run(&TestRun::packet(&frame()))
        .map_err(|e| e.to_string())?;
    let args = loaded.map(caller::CALL_ARGS_MAP).ok_or("no args map")?;
    let per_cpu = args
        .lookup_percpu(&0u32.to_le_bytes())
        .map_err(|e| e.to_string())?
        .ok_or("no args entry")?;
    let mine = per_cpu.get(cpu).ok_or("no value for this CPU")?;
    let calls = mine
        .get(40..48)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes);
    if calls != Some(1) {
        return Err(format!(
            "caller ran {calls:?} times on CPU {cpu}, expected 1"
        ));
    }
    Ok(())
}
