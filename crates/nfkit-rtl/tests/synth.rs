//! Yosys synthesis of one engine for Xilinx 7-series (`synth_xilinx`,
//! about half a minute of CPU): the design is accepted, its memories are
//! inferred as block RAM (the instruction memory's two 32 KiB versions
//! and the data memory's eight byte banks, not flip-flops or LUTs), the
//! 64-bit multiplier maps to DSP slices, and the logic stays the size of
//! one small core. Also the clock estimate's method on the divider.

#[test]
fn one_engine_synthesises_into_block_ram_dsps_and_a_few_thousand_luts() {
    let r = nfkit_rtl::synth::synth_xilinx().expect("yosys synthesises the engine");
    println!("{r}");
    assert!(r.bram36() >= 20.0, "memories in block RAM: {:?}", r.cells);
    assert!(r.dsps() >= 4, "multiplier on DSP48s: {:?}", r.cells);
    assert!(
        (1000..20_000).contains(&r.luts()),
        "LUTs of one core: {}",
        r.luts()
    );
    assert!(
        (1000..10_000).contains(&r.ffs()),
        "flip-flops of one core (memories not in flip-flops): {}",
        r.ffs()
    );
}

/// The clock estimate's method on a small module (the divider, a few
/// seconds): Yosys's `sta` finds a register-to-register path through
/// Xilinx cells, and the estimate adds the routed nets to its cell delays.
#[test]
fn the_divider_has_a_critical_path_from_a_flip_flop() {
    let t = nfkit_rtl::synth::clock_estimate("ebpf_div").expect("yosys times the divider");
    println!("{t:?}");
    assert!(t.cells.len() >= 3, "a path of several cells: {t:?}");
    assert!(
        t.cells.iter().any(|c| c.starts_with("LUT")),
        "through LUTs: {t:?}"
    );
    assert!(t.logic_ps > 0 && t.period_ps() > t.logic_ps, "{t:?}");
    let mhz = t.clock_mhz();
    assert!((20.0..1000.0).contains(&mhz), "a 7-series clock: {mhz} MHz");
}
