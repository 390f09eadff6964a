//! Probes which helpers this kernel lets XDP, TC and socket filter
//! programs call (see `nfkit_kernel::probe`) and prints them.
use nfkit_kernel::probe::allowed_helpers;
use nfkit_object::ProgType;

#[test]
fn print_probe() {
    for t in [
        ProgType::Xdp,
        ProgType::SchedCls,
        ProgType::SchedAct,
        ProgType::SocketFilter,
    ] {
        let ids = allowed_helpers(t);
        let names: Vec<String> = ids
            .iter()
            .map(|&i| format!("{i}:{}", nfkit_isa::helpers::helper_name(i).unwrap_or("?")))
            .collect();
        println!("{t:?} {} {}", ids.len(), names.join(" "));
    }
}
