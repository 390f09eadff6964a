//! Resource estimate of one engine: Yosys `synth_xilinx` for a 7-series
//! part (eBPFlow's target family), cell counts from its `stat`. No open
//! place-and-route for 7-series is packaged, so no clock figure here.

use crate::error::RtlError;
use crate::sources::{FILES, TOP};
use std::collections::BTreeMap;
use std::fmt;
use std::process::Command;

/// Cell counts after synthesis, by Xilinx primitive, and their totals.
#[derive(Clone, Debug, Default)]
pub struct SynthReport {
    pub cells: BTreeMap<String, u64>,
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
        SynthReport { cells }
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
        writeln!(f, "  DSP48             {}", self.dsps())
    }
}

/// Map lines of the synthesised engine: the sources' default, 4 (the
/// simulated model has 1024). Yosys's `proc` on the coprocessor's
/// per-line search grows steeply with the lines (16 s at 4), so the
/// resource figure covers the coprocessor's logic with 4 lines; each line
/// adds a key register and its comparator.
pub const SYNTH_LINES: usize = 4;

/// Runs Yosys on the embedded sources.
pub fn synth_xilinx() -> Result<SynthReport, RtlError> {
    let dir = std::env::temp_dir().join(format!("nfkit-rtl-synth-{}", std::process::id()));
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
    let script = format!(
        "read_verilog -sv -I. {}; synth_xilinx -top {TOP} -family xc7 -flatten; tee -q -o stat.txt stat",
        names.join(" ")
    );
    let out = Command::new("yosys")
        .current_dir(&dir)
        .args(["-q", "-p", &script])
        .output();
    let stat = std::fs::read_to_string(dir.join("stat.txt")).unwrap_or_default();
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
    Ok(SynthReport::parse(&stat))
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
}
