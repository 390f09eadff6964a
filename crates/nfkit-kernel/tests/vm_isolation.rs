//! The VM and the kernel agree that programs reaching outside their stack
//! frame or map value are bad (issue 13 items 1 and 2): the kernel's
//! verifier refuses each program of nfkit-vm's `tests/isolation/progs.rs`
//! at load time, and so does the VM's kernel profile where the access is
//! out of bounds on every value (issue 13 item 3), with the reason the
//! kernel gives; the others fault in the VM when the access runs. The
//! kernel's reason for each is printed. Programs that stay inside their frames and values
//! are compared with the kernel packet by packet in `vm_diff`
//! (`corpus/xdp_frames_values.c`).

#[path = "../../nfkit-vm/tests/isolation/progs.rs"]
mod progs;

use nfkit_kernel::{load_image, KernelError, LoadOptions};
use nfkit_vm::{Context, Rule, RunOptions, Vm, VmConfig, XdpMd};

#[test]
fn kernel_refuses_what_the_vm_faults_on() {
    let mut wrong = Vec::new();
    for b in progs::bad() {
        let image = progs::image(b.name, b.asm, b.maps);
        // The kernel profile already refuses a constant stack offset
        // beyond 512 bytes at load (its stack budget); the rest fault.
        let vm_says = match Vm::new(&image, VmConfig::kernel()) {
            Err(e) => {
                let in_log = |d: &str| {
                    let loaded = load_image(&image, &LoadOptions::default());
                    matches!(loaded, Err(KernelError::Verifier { log, .. }) if log.contains(d))
                };
                match (b.load, &e) {
                    (Some(d), _) if e.to_string().contains(d) && in_log(d) => {}
                    (None, _) if e.rule() == Some(Rule::StackSize) => {}
                    _ => wrong.push(format!(
                        "{}: VM refused with {e}, want {:?}",
                        b.name, b.load
                    )),
                }
                format!("refused at load: {e}")
            }
            Ok(vm) => {
                if let Some(d) = b.load {
                    wrong.push(format!("{}: the VM loaded it, want `{d}`", b.name));
                }
                progs::fill_neighbours(&vm);
                let ctx = Context::Xdp(XdpMd::new(&[0u8; 60]));
                match vm.run(0usize, ctx, &RunOptions::default()).result {
                    Err(e) if e.to_string().contains(b.vm) => format!("fault: {e}"),
                    other => {
                        wrong.push(format!("{}: VM gave {other:?}", b.name));
                        continue;
                    }
                }
            }
        };
        println!("{:<36} VM: {vm_says}", b.name);
        match load_image(&image, &LoadOptions::default()) {
            Err(KernelError::Verifier { log, .. }) => {
                match log.lines().find(|l| l.contains(b.kernel)) {
                    Some(line) => println!("{:<36} kernel: {}", "", line.trim()),
                    None => wrong.push(format!(
                        "{}: verifier log lacks `{}`:\n{}",
                        b.name,
                        b.kernel,
                        log.lines().rev().take(4).collect::<Vec<_>>().join(" | ")
                    )),
                }
            }
            Err(e) => wrong.push(format!("{}: refused for another reason: {e}", b.name)),
            Ok(_) => wrong.push(format!("{}: the kernel accepted it", b.name)),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
