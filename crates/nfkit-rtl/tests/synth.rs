//! Yosys synthesis of one engine for Xilinx 7-series (`synth_xilinx`,
//! about half a minute of CPU): the design is accepted, its memories are
//! inferred as block RAM (the instruction memory's two 32 KiB versions
//! and the data memory's eight byte banks, not flip-flops or LUTs), the
//! 64-bit multiplier maps to DSP slices, and the logic stays the size of
//! one small core.

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
