//! For every corpus object, what nfkit-object decodes agrees instruction
//! by instruction with `llvm-objdump -d`: the same sections, function
//! symbols and instruction boundaries; opcode, registers, offset and
//! immediate of each instruction equal the fields of objdump's raw byte
//! column; and objdump's text agrees with the decoded instruction's kind,
//! registers, jump/memory offset and immediate. llvm-objdump 14 prints
//! `<unknown>` for ISA v4 instructions: those lines are skipped (the
//! conformance round trip covers them).

use nfkit_isa::{CallKind, Insn, Operand, RawInsn, Width};
use nfkit_object::read_object;
use std::collections::BTreeMap;
use std::process::Command;

/// One instruction as llvm-objdump shows it.
struct Dumped {
    slot: usize,
    bytes: Vec<u8>,
    text: String,
}

/// Sections -> instructions, and sections -> (offset, function label).
type Dump = (
    BTreeMap<String, Vec<Dumped>>,
    BTreeMap<String, Vec<(usize, String)>>,
);

fn objdump(path: &str) -> Dump {
    let out = Command::new("llvm-objdump")
        .args(["-d", path])
        .output()
        .expect("run llvm-objdump (install llvm)");
    assert!(out.status.success(), "llvm-objdump failed on {path}");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut insns: BTreeMap<String, Vec<Dumped>> = BTreeMap::new();
    let mut labels: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines() {
        if let Some(s) = line
            .strip_prefix("Disassembly of section ")
            .and_then(|s| s.strip_suffix(':'))
        {
            section = s.to_string();
            continue;
        }
        // "0000000000000030 <bump>:"
        if let Some((addr, rest)) = line.split_once(" <") {
            if let (Ok(a), Some(name)) = (
                u64::from_str_radix(addr.trim(), 16),
                rest.strip_suffix(">:"),
            ) {
                labels
                    .entry(section.clone())
                    .or_default()
                    .push(((a / 8) as usize, name.to_string()));
                continue;
            }
        }
        // "      12:\t85 00 00 00 01 00 00 00\tcall 1"
        let mut parts = line.splitn(3, '\t');
        let (Some(idx), Some(raw), Some(txt)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Ok(slot) = idx.trim().trim_end_matches(':').parse::<usize>() else {
            continue;
        };
        let bytes: Vec<u8> = raw
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
            .collect();
        insns.entry(section.clone()).or_default().push(Dumped {
            slot,
            bytes,
            text: txt.trim().to_string(),
        });
    }
    (insns, labels)
}

fn raw_fields(r: RawInsn) -> (u8, u8, u8, i16, i32) {
    (r.code, r.dst, r.src, r.off, r.imm)
}

fn reg_text(width: Width, n: u8) -> String {
    match width {
        Width::W32 => format!("w{n}"),
        Width::W64 => format!("r{n}"),
    }
}

fn signed_off(off: i64) -> String {
    if off < 0 {
        format!("- {}", -off)
    } else {
        format!("+ {off}")
    }
}

/// `Ok` when `t` contains `s`.
fn has(t: &str, s: &str) -> Result<(), String> {
    if t.contains(s) {
        Ok(())
    } else {
        Err(format!("expected '{s}' in the text"))
    }
}

/// Checks objdump's text against the decoded instruction; returns why not.
fn text_agrees(insn: &Insn, t: &str) -> Result<(), String> {
    match *insn {
        Insn::Exit => (t == "exit").then_some(()).ok_or("not exit".into()),
        Insn::Call {
            kind: CallKind::Helper | CallKind::Local,
            imm,
        } => (t == format!("call {imm}"))
            .then_some(())
            .ok_or("call imm differs".into()),
        Insn::Lddw { dst, .. } => {
            if !t.ends_with(" ll") {
                return Err("not lddw".into());
            }
            // Relocated loads show the symbol's address; plain constants the
            // value: only the destination is compared.
            has(t, &format!("r{} = ", dst.num()))
        }
        Insn::Ja { .. } | Insn::Jmp { .. } => jump_agrees(insn, t),
        Insn::Ldx { .. } | Insn::Stx { .. } | Insn::St { .. } => memory_agrees(insn, t),
        Insn::Atomic { dst, src, off, .. } => {
            if !(t.starts_with("lock ") || t.contains("atomic_") || t.contains("xchg")) {
                return Err("not an atomic".into());
            }
            // `lock *(u64 *)(r1 + 8) += r2`, `cmpxchg_64(r1 + 32, r0, r4)`.
            has(t, &format!("r{} {}", dst.num(), signed_off(off.into())))?;
            let s = src.num();
            (t.contains(&format!("r{s}")) || t.contains(&format!("w{s}")))
                .then_some(())
                .ok_or("source register".into())
        }
        Insn::Endian { dst, bits, .. } => {
            has(t, &format!("r{} = ", dst.num()))?;
            has(t, &format!("{bits} r{}", dst.num()))
        }
        Insn::Alu { .. } => alu_agrees(insn, t),
        Insn::LdAbs { size, imm } => has(t, &format!("r0 = *(u{} *)skb[{imm}]", size.bits())),
        Insn::LdInd { size, src, imm } => {
            has(t, &format!("r0 = *(u{} *)skb[r{}", size.bits(), src.num()))?;
            has(t, &imm.to_string())
        }
        ref other => Err(format!("unexpected instruction {other:?} in clang output")),
    }
}

/// `goto` and conditional jumps: registers or immediate, and the offset.
fn jump_agrees(insn: &Insn, t: &str) -> Result<(), String> {
    match *insn {
        Insn::Ja { off } => {
            if !t.starts_with("goto ") {
                return Err("not goto".into());
            }
            has(t, &format!("goto {off:+}"))
        }
        Insn::Jmp {
            width,
            dst,
            src,
            off,
            ..
        } => {
            if !t.starts_with("if ") {
                return Err("not a conditional jump".into());
            }
            has(t, &format!("if {} ", reg_text(width, dst.num())))?;
            match src {
                Operand::Reg(r) => has(t, &format!(" {} goto", reg_text(width, r.num())))?,
                Operand::Imm(i) => has(t, &format!(" {i} goto"))?,
            }
            has(t, &format!("goto {off:+}"))
        }
        ref other => Err(format!("{other:?} is not a jump")),
    }
}

/// Loads and stores: size, registers, offset (and the stored immediate).
fn memory_agrees(insn: &Insn, t: &str) -> Result<(), String> {
    match *insn {
        Insn::Ldx {
            size,
            dst,
            src,
            off,
            signed,
        } => {
            let ty = format!("{}{}", if signed { "s" } else { "u" }, size.bits());
            has(
                t,
                &format!(
                    "r{} = *({ty} *)(r{} {})",
                    dst.num(),
                    src.num(),
                    signed_off(off.into())
                ),
            )
        }
        Insn::Stx {
            size,
            dst,
            src,
            off,
        } => {
            let at = format!(
                "*(u{} *)(r{} {}) = ",
                size.bits(),
                dst.num(),
                signed_off(off.into())
            );
            let reg = if size.bits() == 64 { "r" } else { "w" };
            has(t, &format!("{at}{reg}{}", src.num()))
                .or_else(|_| has(t, &format!("{at}r{}", src.num())))
        }
        Insn::St {
            size,
            dst,
            off,
            imm,
        } => has(
            t,
            &format!(
                "*(u{} *)(r{} {}) = {imm}",
                size.bits(),
                dst.num(),
                signed_off(off.into())
            ),
        ),
        ref other => Err(format!("{other:?} is not a load or store")),
    }
}

/// ALU operations: the destination register, and the source register or
/// immediate.
fn alu_agrees(insn: &Insn, t: &str) -> Result<(), String> {
    let Insn::Alu {
        width, dst, src, ..
    } = *insn
    else {
        return Err(format!("{insn:?} is not an ALU operation"));
    };
    let d = reg_text(width, dst.num());
    if !t.starts_with(&format!("{d} ")) {
        return Err(format!("destination is not {d}"));
    }
    match src {
        Operand::Reg(r) => has(t, &reg_text(width, r.num())),
        Operand::Imm(i) => {
            // llvm prints 32-bit immediates of 64-bit ops as signed.
            let alt = (i as u32).to_string();
            if t.ends_with(&format!(" {i}"))
                || t.ends_with(&format!(" {alt}"))
                || t.starts_with(&format!("{d} = -{d}"))
            {
                Ok(())
            } else {
                Err(format!("immediate {i}"))
            }
        }
    }
}

#[test]
fn decoded_instructions_agree_with_llvm_objdump() {
    let mut total = 0;
    let mut skipped = 0;
    for e in nfkit_corpus::ENTRIES {
        let obj = read_object(e.object, e.name).unwrap_or_else(|err| panic!("{}: {err}", e.name));
        let (dump, labels) = objdump(e.path);
        // Our side: section -> slot -> (insn, function name at its start).
        let mut ours: BTreeMap<&str, BTreeMap<usize, Insn>> = BTreeMap::new();
        let mut funcs: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
        for f in &obj.functions {
            let starts = nfkit_isa::slot_offsets(&f.insns);
            let sec = ours.entry(f.section.as_str()).or_default();
            for (i, insn) in f.insns.iter().enumerate() {
                sec.insert(f.section_slot + starts[i], *insn);
            }
            funcs
                .entry(f.section.as_str())
                .or_default()
                .push((f.section_slot, f.name.as_str()));
        }
        let dumped: Vec<&str> = dump.keys().map(String::as_str).collect();
        let decoded: Vec<&str> = ours.keys().copied().collect();
        assert_eq!(
            {
                let mut d = dumped.clone();
                d.sort();
                d
            },
            decoded,
            "{}: code sections",
            e.name
        );
        for (section, insns) in &dump {
            let mine = &ours[section.as_str()];
            // Every function symbol is one of objdump's labels at the same offset.
            let lab = labels.get(section).cloned().unwrap_or_default();
            for &(slot, name) in &funcs[section.as_str()] {
                assert!(
                    lab.iter().any(|(s, n)| *s == slot && n == name),
                    "{}: {section}: function {name} at slot {slot} is not labelled by objdump",
                    e.name
                );
            }
            let slots: Vec<usize> = insns.iter().map(|d| d.slot).collect();
            let my_slots: Vec<usize> = mine.keys().copied().collect();
            assert_eq!(slots, my_slots, "{}: {section}: boundaries", e.name);
            for d in insns {
                let insn = &mine[&d.slot];
                let at = format!("{}: {section}+{}: `{}`", e.name, d.slot, d.text);
                if d.text.contains("<unknown>") {
                    skipped += 1;
                    continue;
                }
                // Raw fields from objdump's byte column vs the decoded instruction's.
                let enc = insn.encode();
                assert_eq!(d.bytes.len(), enc.len() * 8, "{at}: length");
                for (k, r) in enc.iter().enumerate() {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&d.bytes[k * 8..k * 8 + 8]);
                    assert_eq!(
                        raw_fields(RawInsn::from_bytes(b)),
                        raw_fields(*r),
                        "{at}: (opcode, dst, src, off, imm) of slot {k} ({insn:?})"
                    );
                }
                if let Err(why) = text_agrees(insn, &d.text) {
                    panic!("{at}: decoded {insn:?}: {why}");
                }
                total += 1;
            }
        }
    }
    assert!(total > 500, "only {total} instructions compared");
    eprintln!("{total} instructions agree, {skipped} <unknown> skipped");
}
