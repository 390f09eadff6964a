//! Resource and clock estimate of one engine: Yosys `synth_xilinx` for a
//! 7-series part (eBPFlow's target family), cell counts from its `stat`,
//! and the longest path of the core from `sta` ([`synth_with_clock`]).
//!
//! No open place-and-route for 7-series is packaged, so the clock is an
//! estimate, not a routed figure: `synth_xilinx -abc9` annotates every
//! Xilinx primitive with its delays (Yosys's cell library carries Artix-7
//! figures from Project X-Ray's timing database), `sta` finds the path
//! with the latest arrival (cell delays only, no wires), and each hop of
//! that path between two cells over general routing adds
//! [`NET_PS`] (dedicated carry and DSP cascade hops add nothing). The
//! routing assumption is the uncertain part: placed designs spread it
//! from about 0.2 ns to over 1 ns a net.

use crate::error::RtlError;
use crate::sources::{FILES, TOP};
use std::collections::BTreeMap;
use std::fmt;
use std::process::Command;

/// Cell counts after synthesis, by Xilinx primitive, and their totals.
#[derive(Clone, Debug, Default)]
pub struct SynthReport {
    pub cells: BTreeMap<String, u64>,
    /// The critical path, when Yosys's `sta` reported one.
    pub timing: Option<Timing>,
}

/// Assumed delay of one net over general routing, in picoseconds (see
/// the module's comment).
pub const NET_PS: u64 = 500;

/// The longest path `sta` found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timing {
    /// Arrival at the path's end, cell delays only (ps), from the clock.
    pub logic_ps: u64,
    /// Hops between cells over general routing.
    pub nets: u64,
    /// Hops over dedicated carry or DSP cascade wires.
    pub cascades: u64,
    /// The cells of the path, first to last, as `TYPE.IN->OUT`.
    pub cells: Vec<String>,
}

impl Timing {
    /// Estimated period: cell delays plus [`NET_PS`] a routed net (ps).
    pub fn period_ps(&self) -> u64 {
        self.logic_ps + self.nets * NET_PS
    }
    /// Estimated clock (MHz) from [`Timing::period_ps`].
    pub fn clock_mhz(&self) -> f64 {
        1e6 / self.period_ps().max(1) as f64
    }
    /// Upper bound on the clock with zero-delay wires (MHz).
    pub fn logic_only_mhz(&self) -> f64 {
        1e6 / self.logic_ps.max(1) as f64
    }

    /// Parses `sta`'s report: "Latest arrival time in 'top' is N:" and the
    /// path's lines after it, latest first ("  N name (TYPE.IN->OUT)").
    pub fn parse(text: &str) -> Option<Timing> {
        let (_, rest) = text.split_once("Latest arrival time in ")?;
        let (head, path) = rest.split_once('\n')?;
        let logic_ps = head
            .trim_end_matches(':')
            .rsplit(' ')
            .next()?
            .parse()
            .ok()?;
        let mut cells = Vec::new();
        for line in path.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with("Arrival histogram") {
                break;
            }
            // Hop lines: arrival, cell name, "(TYPE.PIN->PIN)".
            let Some(open) = t.rfind('(') else { continue };
            let kind = t[open + 1..].trim_end_matches(')');
            if kind.contains("->") && t.split_whitespace().next()?.parse::<u64>().is_ok() {
                cells.push(kind.to_string());
            }
        }
        cells.reverse();
        // The clock's own buffers are no hop of the path.
        cells.retain(|c| !(c.starts_with("IBUF.") || c.starts_with("BUFG.")));
        let cascade = |c: &str| {
            let pin = c.split_once('.').map_or("", |(_, p)| p);
            ["PCIN", "ACIN", "BCIN", "CI", "CIN", "CARRYCASCIN"]
                .iter()
                .any(|p| pin.starts_with(&format!("{p}->")) || pin.starts_with(&format!("{p}[")))
        };
        let cascades = cells.iter().skip(1).filter(|c| cascade(c)).count() as u64;
        let nets = cells.len().saturating_sub(1) as u64 - cascades;
        Some(Timing {
            logic_ps,
            nets,
            cascades,
            cells,
        })
    }
}

impl SynthReport {
    fn sum(&self, pred: impl Fn(&str) -> bool) -> u64 {
        self.cells
            .iter()
            .filter(|(k, _)| pred(k))
            .map(|(_, v)| v)
            .sum()
    }
    /// Logic LUTs (LUT1..LUT6).
    pub fn luts(&self) -> u64 {
        self.sum(|k| k.starts_with("LUT"))
    }
    /// LUTs used as distributed RAM (RAM32M, RAM64M, RAM*X1*).
    pub fn lutram_cells(&self) -> u64 {
        self.sum(|k| k.starts_with("RAM") && !k.starts_with("RAMB"))
    }
    /// Flip-flops (FD*).
    pub fn ffs(&self) -> u64 {
        self.sum(|k| k.starts_with("FD"))
    }
    /// Block RAMs in 36 Kb units (a RAMB18 counts half).
    pub fn bram36(&self) -> f64 {
        self.sum(|k| k.starts_with("RAMB36")) as f64
            + self.sum(|k| k.starts_with("RAMB18")) as f64 / 2.0
    }
    /// DSP slices.
    pub fn dsps(&self) -> u64 {
        self.sum(|k| k.starts_with("DSP48"))
    }

    /// Parses Yosys's `stat` listing ("     LUT6    1234").
    pub fn parse(text: &str) -> SynthReport {
        let mut cells = BTreeMap::new();
        // The last `stat` block (the top after flattening) wins.
        for block in text.split("Number of cells:").skip(1) {
            cells.clear();
            for line in block.lines().skip(1) {
                let mut it = line.split_whitespace();
                let (Some(name), Some(n), None) = (it.next(), it.next(), it.next()) else {
                    if line.trim().is_empty() {
                        continue;
                    }
                    break;
                };
                let Ok(n) = n.parse::<u64>() else { break };
                cells.insert(name.to_string(), n);
            }
        }
        SynthReport {
            cells,
            timing: None,
        }
    }
}

impl fmt::Display for SynthReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "one engine ({TOP}, {SYNTH_LINES} map lines), Yosys synth_xilinx, 7-series:"
        )?;
        writeln!(f, "  LUTs (logic)      {}", self.luts())?;
        writeln!(f, "  LUTRAM cells      {}", self.lutram_cells())?;
        writeln!(f, "  flip-flops        {}", self.ffs())?;
        writeln!(f, "  block RAM (36Kb)  {}", self.bram36())?;
        writeln!(f, "  DSP48             {}", self.dsps())?;
        match &self.timing {
            Some(t) => {
                writeln!(
                    f,
                    "  clock (estimate)  {:.1} MHz ({CLOCK_TOP}): {:.2} ns = {:.2} ns in {} cells + {} nets x {:.1} ns \
                     (logic only: {:.1} MHz)",
                    t.clock_mhz(),
                    t.period_ps() as f64 / 1000.0,
                    t.logic_ps as f64 / 1000.0,
                    t.cells.len(),
                    t.nets,
                    NET_PS as f64 / 1000.0,
                    t.logic_only_mhz()
                )?;
                writeln!(f, "  critical path     {}", t.cells.join(" > "))
            }
            None => writeln!(f, "  clock             not estimated"),
        }
    }
}

/// Map lines of the synthesised engine: the sources' default, 4 (the
/// simulated model has 1024). Yosys's `proc` on the coprocessor's
/// per-line search grows steeply with the lines (16 s at 4), so the
/// resource figure covers the coprocessor's logic with 4 lines; each line
/// adds a key register and its comparator.
pub const SYNTH_LINES: usize = 4;

/// How the clock figure is obtained, for reports.
pub const CLOCK_METHOD: &str =
    "Yosys synth_xilinx -abc9 + sta of the core (ebpf_core: pipeline, ALU, \
     divider): Artix-7 cell delays (Project X-Ray, in Yosys's cell library) on the longest path \
     plus 0.5 ns per routed net; not placed and routed";

/// The module the clock is estimated on: the core. Yosys 0.23's `abc9`
/// aborts on the whole engine (an out-of-range index inside the pass), so
/// the engine's other parts (memories, coprocessor at 4 lines, FSM) are
/// outside the figure: their paths into the core start at its ports.
pub const CLOCK_TOP: &str = "ebpf_core";

/// Runs Yosys's `synth_xilinx` of one engine: resources, no clock.
pub fn synth_xilinx() -> Result<SynthReport, RtlError> {
    let stat = yosys(&format!(
        "synth_xilinx -top {TOP} -family xc7 -flatten; tee -q -o out.txt stat"
    ))?;
    Ok(SynthReport::parse(&stat))
}

/// Resources of one engine and the clock estimate of its core, the two
/// Yosys runs side by side.
pub fn synth_with_clock() -> Result<SynthReport, RtlError> {
    let clock = std::thread::spawn(|| clock_estimate(CLOCK_TOP));
    let mut r = synth_xilinx()?;
    let t = clock
        .join()
        .map_err(|_| RtlError::Synth("the clock estimate's thread panicked".into()))??;
    r.timing = Some(t);
    Ok(r)
}

/// The critical path of module `top` of the embedded sources (see the
/// module's comment for the method).
pub fn clock_estimate(top: &str) -> Result<Timing, RtlError> {
    let text = yosys(&format!(
        "synth_xilinx -top {top} -family xc7 -flatten -abc9; tee -q -o out.txt sta"
    ))?;
    Timing::parse(&text)
        .ok_or_else(|| RtlError::Synth(format!("yosys sta reported no path for {top}")))
}

/// Runs `read_verilog` of the embedded sources, then `script`, in a fresh
/// directory; answers what the script wrote to `out.txt`.
fn yosys(script: &str) -> Result<String, RtlError> {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("nfkit-rtl-synth-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| RtlError::Synth(format!("{}: {e}", dir.display())))?;
    let mut names = Vec::new();
    for (name, text) in FILES {
        std::fs::write(dir.join(name), text)
            .map_err(|e| RtlError::Synth(format!("{name}: {e}")))?;
        if name.ends_with(".sv") {
            names.push(*name);
        }
    }
    let script = format!("read_verilog -sv -I. {}; {script}", names.join(" "));
    let out = Command::new("yosys")
        .current_dir(&dir)
        .args(["-q", "-p", &script])
        .output();
    let text = std::fs::read_to_string(dir.join("out.txt")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let out = match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(RtlError::YosysMissing),
        Err(e) => return Err(RtlError::Synth(e.to_string())),
    };
    if !out.status.success() {
        return Err(RtlError::Synth(format!(
            "yosys failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_last_stat_block() {
        let text = "=== sub ===\n   Number of cells:  3\n     LUT6  3\n\n\
                    === ebpf_top ===\n\n   Number of wires:  9\n   Number of cells:  40\n     \
                    CARRY4  4\n     DSP48E1  2\n     FDRE  10\n     FDSE  1\n     LUT2  5\n     \
                    LUT6  7\n     RAM64M  2\n     RAMB18E1  3\n     RAMB36E1  2\n\n";
        let r = SynthReport::parse(text);
        assert_eq!(r.luts(), 12);
        assert_eq!(r.ffs(), 11);
        assert_eq!(r.dsps(), 2);
        assert_eq!(r.lutram_cells(), 2);
        assert!((r.bram36() - 3.5).abs() < 1e-9);
    }

    #[test]
    fn parses_the_critical_path() {
        let text = "Latest arrival time in 'ebpf_top' is 8098:\n\
                    \x20   8098 (<unknown>)\n\
                    \x20          w1\n\
                    \x20   8098 c5 (LUT2.I1->O)\n\
                    \x20          w2 [1]\n\
                    \x20   7971 c4 (DSP48E1.PCIN->P)\n\
                    \x20   4354 c3 (DSP48E1.B->PCOUT)\n\
                    \x20   1516 c2 (LUT6.I3->O)\n\
                    \x20    399 c1 (FDRE.C->Q)\n\
                    \x20          \\u_div.clk\n\
                    \x20     96 b (BUFG.I->O)\n\
                    \x20      0 i (IBUF.I->O)\n\
                    \x20      0   \\clk (<primary input>)\n\nArrival histogram:\n (  6500,   6175] |+\n";
        let t = Timing::parse(text).expect("a path");
        assert_eq!(t.logic_ps, 8098);
        assert_eq!(
            t.cells,
            [
                "FDRE.C->Q",
                "LUT6.I3->O",
                "DSP48E1.B->PCOUT",
                "DSP48E1.PCIN->P",
                "LUT2.I1->O"
            ]
        );
        assert_eq!((t.nets, t.cascades), (3, 1));
        assert_eq!(t.period_ps(), 8098 + 3 * NET_PS);
        assert!((t.clock_mhz() - 1e6 / 9598.0).abs() < 1e-9);
    }
}
