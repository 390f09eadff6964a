//! The RTL sources, embedded (so `nfkit rtl synth` needs no checkout).

/// `(file name, text)` of every file of `rtl/`.
pub const FILES: &[(&str, &str)] = &[
    ("ebpf_defs.svh", include_str!("../../../rtl/ebpf_defs.svh")),
    ("ebpf_alu.sv", include_str!("../../../rtl/ebpf_alu.sv")),
    ("ebpf_div.sv", include_str!("../../../rtl/ebpf_div.sv")),
    ("ebpf_dmem.sv", include_str!("../../../rtl/ebpf_dmem.sv")),
    ("ebpf_imem.sv", include_str!("../../../rtl/ebpf_imem.sv")),
    (
        "ebpf_coproc.sv",
        include_str!("../../../rtl/ebpf_coproc.sv"),
    ),
    ("ebpf_core.sv", include_str!("../../../rtl/ebpf_core.sv")),
    (
        "ebpf_action.sv",
        include_str!("../../../rtl/ebpf_action.sv"),
    ),
    ("ebpf_top.sv", include_str!("../../../rtl/ebpf_top.sv")),
];

/// The top module of one engine.
pub const TOP: &str = "ebpf_top";
