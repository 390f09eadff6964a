//! XDP programs that reach outside the stack frame or the map value a
//! pointer was made for (issue 13, "Isolation inside VM memory"), written
//! in assembly because clang will not emit such accesses. The kernel's
//! verifier refuses each at load time; the VM faults when the access runs.
//! Shared by nfkit-vm's `tests/isolation.rs` and nfkit-kernel's
//! `tests/vm_isolation.rs` (which also loads each into the kernel).
#![allow(dead_code)]

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_object::{Image, MapKind, MapSpec, MapType, ProgType};

/// A program that must fault in the VM and be refused by the kernel.
pub struct Bad {
    pub name: &'static str,
    pub asm: &'static str,
    /// The maps `map_idx(i)` refers to: (type, value size, max entries).
    pub maps: &'static [(MapType, u32, u32)],
    /// In the VM's fault message.
    pub vm: &'static str,
    /// In the kernel verifier's log.
    pub kernel: &'static str,
    /// In the VM's load error under `VmConfig::kernel()`, when the
    /// access is out of bounds on every value (`None`: only on some, the
    /// access faults at run time).
    pub load: Option<&'static str>,
}

/// Looks up key 0 of map 0 (`r0`: the value or 0).
const LOOKUP0: &str = "
    r1 = 0
    *(u32 *)(r10 - 4) = r1
    r2 = r10
    r2 += -4
    r1 = map_idx(0) ll
    call 1
    if r0 == 0 goto out
";

pub const STACK_LEAK: &str = "
    r4 = *(u32 *)(r1 + 16)
    r4 &= 8
    r1 = r10
    r1 += -4000
    r1 += r4
    r0 = *(u64 *)(r1 + 0)
    if r0 != 0 goto seen
    r5 = 0x6d61726b
    *(u64 *)(r1 + 0) = r5
    r0 = 2
    exit
seen:
    r0 = 1
    exit
";

/// Every program here. Variable offsets come from `r4`: the rx queue
/// index masked to 0 or 8, which the verifier cannot know (0 in the
/// VM's runs).
pub fn bad() -> Vec<Bad> {
    let mut v = stack_programs();
    v.extend(map_programs());
    v
}

/// Accesses outside the frame.
fn stack_programs() -> Vec<Bad> {
    vec![
        // Run 1 leaves a marker far below the entry's frame, run 2 sees it.
        Bad {
            name: "stack_leak",
            asm: STACK_LEAK,
            maps: &[],
            vm: "stack frame 0, fp-4000",
            kernel: "read from stack R1 var_off=(0x0; 0x8) off=-4000 size=8",
            load: Some(
                "invalid variable-offset read from stack R1 var_off=(0x0; 0x8) off=-4000 size=8",
            ),
        },
        // One byte below the 512-byte frame.
        Bad {
            name: "stack_below_frame",
            asm: "
                r4 = *(u32 *)(r1 + 16)
                r4 &= 8
                r1 = r10
                r1 += -513
                r1 += r4
                r5 = 1
                *(u8 *)(r1 + 0) = r5
                r0 = 2
                exit",
            maps: &[],
            vm: "store of 1 bytes at 0x",
            kernel: "off=-513 size=1",
            load: None,
        },
        // A callee's own r10 does not reach its caller's frame above it.
        Bad {
            name: "callee_above_own_frame",
            asm: "
                r4 = *(u32 *)(r1 + 16)
                r4 &= 8
                r1 = r4
                call sub
                exit
            sub:
                r2 = r10
                r2 += r1
                r0 = *(u64 *)(r2 + 0)
                exit",
            maps: &[],
            vm: "stack frame 1, fp+0",
            kernel: "off=0 size=8",
            load: Some(
                "invalid variable-offset read from stack R2 var_off=(0x0; 0x8) off=0 size=8",
            ),
        },
        // A pointer to the caller's frame stays in the caller's frame: it
        // does not reach the callee's slots below.
        Bad {
            name: "caller_pointer_below_caller_frame",
            asm: "
                r1 = r10
                r1 += -8
                r2 = 7
                *(u64 *)(r1 + 0) = r2
                call sub
                exit
            sub:
                r2 = r10
                r2 += -8
                r3 = 9
                *(u64 *)(r2 + 0) = r3
                r0 = *(u64 *)(r1 - 512)
                exit",
            maps: &[],
            vm: "stack frame 0, fp-520",
            kernel: "off=-520",
            load: Some("invalid read from stack R1 off=-520 size=8"),
        },
    ]
}

/// Accesses outside the map value (or ring-buffer record).
fn map_programs() -> Vec<Bad> {
    let arr4 = &[(MapType::Array, 4, 2)][..];
    let mut v = Vec::new();
    // Map values: 8 bytes of a 4-byte value, the padding after it, the
    // next element, the bytes before it.
    for (name, access, vm, kernel) in [
        (
            "array_value_wide_read",
            "r0 = *(u64 *)(r0 + 0)",
            "off=0)",
            "value_size=4 off=0 size=8",
        ),
        (
            "array_value_padding",
            "r0 = *(u32 *)(r0 + 4)",
            "off=4)",
            "value_size=4 off=4 size=4",
        ),
        (
            "array_value_next_element",
            "r0 = *(u32 *)(r0 + 8)",
            "off=8)",
            "value_size=4 off=8 size=4",
        ),
        (
            "array_value_before",
            "r0 = *(u32 *)(r0 - 4)",
            "off=-4)",
            "value_size=4 off=-4 size=4",
        ),
    ] {
        v.push(Bad {
            name,
            asm: leak(format!(
                "{LOOKUP0}\n {access}\n exit\n out:\n r0 = 0\n exit"
            )),
            maps: arr4,
            vm: leak(format!("map 'm0' value, value_size=4 {vm}")),
            kernel: leak(format!("invalid access to map value, {kernel}")),
            load: Some(leak(format!("invalid access to map value, {kernel}"))),
        });
    }
    let next = "r0 = *(u32 *)(r0 + 8)\n exit\n out:\n r0 = 0\n exit";
    v.push(Bad {
        name: "percpu_value_next_cpu",
        asm: leak(format!("{LOOKUP0}\n {next}")),
        maps: &[(MapType::PercpuArray, 4, 1)],
        vm: "map 'm0' value, value_size=4 off=8)",
        kernel: "invalid access to map value, value_size=4 off=8 size=4",
        load: Some("invalid access to map value, value_size=4 off=8 size=4"),
    });
    v.push(Bad {
        name: "hash_value_next_slot",
        asm: leak(format!("{LOOKUP0}\n {next}")),
        maps: &[(MapType::Hash, 4, 8)],
        vm: "map 'm0' value, value_size=4 off=8)",
        kernel: "invalid access to map value, value_size=4 off=8 size=4",
        load: Some("invalid access to map value, value_size=4 off=8 size=4"),
    });
    v.push(Bad {
        name: "direct_value_padding",
        asm: "
            r1 = map_idx_value(0, 0) ll
            r0 = *(u32 *)(r1 + 4)
            exit",
        maps: &[(MapType::Array, 4, 1)],
        vm: "map 'm0' value, value_size=4 off=4)",
        kernel: "invalid access to map value, value_size=4 off=4 size=4",
        load: Some("invalid access to map value, value_size=4 off=4 size=4"),
    });
    v.push(Bad {
        name: "ringbuf_record_overrun",
        asm: "
            r1 = map_idx(0) ll
            r2 = 4
            r3 = 0
            call 131
            if r0 == 0 goto out
            r1 = 5
            *(u64 *)(r0 + 0) = r1
            r1 = r0
            r2 = 0
            call 132
        out:
            r0 = 2
            exit",
        maps: &[(MapType::Ringbuf, 0, 4096)],
        vm: "ringbuf record of m0",
        kernel: "invalid access to memory, mem_size=4 off=0 size=8",
        load: Some("invalid access to memory, mem_size=4 off=0 size=8"),
    });
    v
}

/// Values next to the one a program looks up, which it must not see.
pub fn fill_neighbours(vm: &nfkit_vm::Vm) {
    let Some(m) = vm.map("m0") else { return };
    let k = |i: u32| i.to_le_bytes();
    match m.spec.map_type {
        MapType::Array => {
            m.update(&k(0), &0x11u32.to_le_bytes(), 0).expect("update");
            if m.spec.max_entries > 1 {
                m.update(&k(1), &0xe1e1u32.to_le_bytes(), 0)
                    .expect("update");
            }
        }
        MapType::PercpuArray => {
            let mut per_cpu = vec![0u8; 8 * vm.config().ncpus as usize];
            for (c, slot) in per_cpu.chunks_mut(8).enumerate() {
                slot[..4].copy_from_slice(&(0xc0 + c as u32).to_le_bytes());
            }
            m.update(&k(0), &per_cpu, 0).expect("update");
        }
        MapType::Hash => {
            m.update(&k(0), &0x11u32.to_le_bytes(), 0).expect("update");
            m.update(&k(1), &0x22u32.to_le_bytes(), 0).expect("update");
        }
        _ => {}
    }
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Map `i` of a program: `m<i>`, 4-byte keys.
pub fn map_spec(i: usize, (t, value, max): (MapType, u32, u32)) -> MapSpec {
    let key = if t == MapType::Ringbuf { 0 } else { 4 };
    MapSpec {
        name: format!("m{i}"),
        kind: MapKind::Declared,
        map_type: t,
        key_size: key,
        value_size: value,
        max_entries: max,
        flags: 0,
        key_type_id: None,
        value_type_id: None,
        data: None,
        pin_by_name: false,
        inner: None,
    }
}

/// The XDP program `name` of `asm` with `maps`.
pub fn image(name: &str, asm: &str, maps: &[(MapType, u32, u32)]) -> Image {
    let insns = assemble(asm, Some(Syntax::Llvm)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut img = Image::from_insns(name, ProgType::Xdp, insns);
    img.maps = maps
        .iter()
        .enumerate()
        .map(|(i, m)| map_spec(i, *m))
        .collect();
    img
}
