//! The VM and the kernel agree that programs reaching outside their stack
//! frame or map value are bad (issue 13 items 1 and 2): the kernel's
//! verifier refuses each program of nfkit-vm's `tests/isolation/progs.rs`
//! at load time, and the VM faults when the access runs (the VM has no
//! load-time refusal of these yet: issue 13 item 3). The kernel's reason
//! for each is printed. Programs that stay inside their frames and values
//! are compared with the kernel packet by packet in `vm_diff`
//! (`corpus/xdp_frames_values.c`).

#[path = "../../nfkit-vm/tests/isolation/progs.rs"]
mod progs;

use nfkit_kernel::{load_image, KernelError, LoadOptions};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};

#[test]
fn kernel_refuses_what_the_vm_faults_on() {
    let mut wrong = Vec::new();
    for b in progs::bad() {
        let image = progs::image(b.name, b.asm, b.maps);
        // The kernel profile already refuses a constant stack offset
        // beyond 512 bytes at load (its stack budget); the rest fault.
        let vm_says = match Vm::new(&image, VmConfig::kernel()) {
            Err(e) => format!("refused at load: {e}"),
            Ok(vm) => {
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
