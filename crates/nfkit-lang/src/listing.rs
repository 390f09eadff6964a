//! `--emit asm`: the generated functions in llvm-objdump syntax with the
//! script line of each statement as a comment.

use crate::codegen::Ref;
use crate::Compiled;
use nfkit_isa::disasm::format_insn;
use nfkit_isa::Syntax;
use std::fmt::Write;

/// The listing of every generated function.
pub fn listing(c: &Compiled) -> String {
    let lines: Vec<&str> = c.program.source.lines().collect();
    let mut out = String::new();
    for f in &c.generated.funcs {
        let _ = writeln!(out, "{}:", f.name);
        let slots = nfkit_isa::slot_offsets(&f.insns);
        let mut li = 0;
        let mut last_line = 0;
        for (i, insn) in f.insns.iter().enumerate() {
            while li < f.lines.len() && f.lines[li].0 <= i {
                let line = f.lines[li].1;
                if line != last_line {
                    let text = lines.get(line as usize - 1).map(|s| s.trim()).unwrap_or("");
                    let _ = writeln!(out, "    ; {}:{}: {}", c.program.file, line, text);
                    last_line = line;
                }
                li += 1;
            }
            let mut text = format_insn(insn, Syntax::Llvm);
            if let Some((_, r)) = f.refs.iter().find(|(k, _)| *k == i) {
                let what = match r {
                    Ref::Map(m) => match c.generated.maps.get(*m) {
                        Some(crate::codegen::ObjMap::User(u)) => c.program.maps[*u].name.clone(),
                        Some(crate::codegen::ObjMap::PktInfo) => "nfkit_pktinfo".into(),
                        Some(crate::codegen::ObjMap::Nest) => "nfkit_nest".into(),
                        Some(crate::codegen::ObjMap::Frame) => "nfkit_frame".into(),
                        Some(crate::codegen::ObjMap::Progs) => "nfkit_progs".into(),
                        None => "?".into(),
                    },
                    Ref::Nf(s) => s.clone(),
                    Ref::Func(k) | Ref::FuncAddr(k) => c
                        .generated
                        .funcs
                        .get(*k)
                        .map(|f| f.name.clone())
                        .unwrap_or_default(),
                };
                text = format!("{text}  # {what}");
            }
            let _ = writeln!(out, "{:6}: {}", slots[i], text);
        }
        out.push('\n');
    }
    out
}
