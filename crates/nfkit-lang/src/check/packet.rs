//! Packet access (docs/language.md, "Packet"): reads, writes, offsets
//! and the fields of the parse-once info block.

use super::{off, Checker, Scope, R, TE};
use crate::ir::{Expr, ExprKind, StmtKind};
use crate::types::Ty;
use nfkit_isa::Size;
use nfkit_nf::Hook;
use rustpython_parser::ast;

/// Packet info block fields a chain may read: (name, offset, size, type).
/// `in_port` is the ingress ifindex under another name: in the software
/// switch it is the input port's number (ports count from 1).
pub const PKT_FIELDS: [(&str, i16, Size, Ty); 12] = [
    ("l3_off", 56, Size::H, Ty::U16),
    ("l4_off", 58, Size::H, Ty::U16),
    ("ip_version", 37, Size::B, Ty::U8),
    ("l4_proto", 36, Size::B, Ty::U8),
    ("sport", 32, Size::H, Ty::U16),
    ("dport", 34, Size::H, Ty::U16),
    ("tos", 64, Size::B, Ty::U8),
    ("ttl", 65, Size::B, Ty::U8),
    ("tcp_flags", 66, Size::B, Ty::U8),
    ("eth_proto", 60, Size::H, Ty::U16),
    ("ifindex", 52, Size::W, Ty::U32),
    ("in_port", 52, Size::W, Ty::U32),
];

/// The access size and type of a `read_`/`write_` suffix.
fn size_of_suffix(s: &str) -> Option<(Size, Ty)> {
    match s {
        "u8" => Some((Size::B, Ty::U8)),
        "u16" => Some((Size::H, Ty::U16)),
        "u32" => Some((Size::W, Ty::U32)),
        "u64" => Some((Size::DW, Ty::U64)),
        _ => None,
    }
}

impl Checker<'_> {
    /// `Packet.write_uN(off, v)`, if the call is one.
    pub(super) fn packet_write(
        &mut self,
        call: &ast::ExprCall,
        sc: &mut Scope,
    ) -> R<Option<StmtKind>> {
        let ast::Expr::Attribute(a) = call.func.as_ref() else {
            return Ok(None);
        };
        let ast::Expr::Name(base) = a.value.as_ref() else {
            return Ok(None);
        };
        if base.id.as_str() != "Packet" {
            return Ok(None);
        }
        let Some(suffix) = a.attr.as_str().strip_prefix("write_") else {
            return Ok(None);
        };
        let Some((size, ty)) = size_of_suffix(suffix) else {
            return self.err(
                off(call),
                format!("Packet has no method '{}'", a.attr.as_str()),
                "Packet.write_u8/u16/u32/u64(off, value)",
            );
        };
        if self.hook == Hook::Socket {
            return self.err(
                off(call),
                "socket filters cannot write the packet",
                "socket filters are read-only: attach to xdp or tc to rewrite packets",
            );
        }
        if call.args.len() != 2 || !call.keywords.is_empty() {
            return self.err(
                off(call),
                format!(
                    "Packet.{} takes 2 arguments (offset, value)",
                    a.attr.as_str()
                ),
                "Packet.write_u16(off, value)",
            );
        }
        let o = self.expr(&call.args[0], sc)?;
        let o = self.offset(o)?;
        let v = self.expr(&call.args[1], sc)?;
        let v = self.convert(v, ty)?;
        Ok(Some(StmtKind::PktWrite {
            size,
            off: o,
            value: v,
        }))
    }

    /// A packet offset as u64 (literals: 0..32767).
    pub(super) fn offset(&self, o: TE) -> R<Expr> {
        match o {
            TE::Lit(v, at) if v < 0 => self.err(
                at,
                format!("packet offset {v} is negative"),
                "offsets count from 0",
            ),
            TE::Lit(v, at) if v > 0x7fff => self.err(
                at,
                format!("packet offset {v} is beyond any packet"),
                "offsets are at most 32767 (a larger offset is a fault)",
            ),
            o => {
                let e = self.typed(o, Ty::U64)?;
                if e.ty == Ty::Bool {
                    return self.err(
                        0,
                        "a packet offset must be an integer",
                        "use an integer expression",
                    );
                }
                Ok(e.cast(Ty::U64))
            }
        }
    }

    /// `Packet.read_uN(off)`: N bits at `off`, network order to host.
    pub(super) fn packet_read(&mut self, call: &ast::ExprCall, m: &str, sc: &mut Scope) -> R<TE> {
        let at = off(call);
        if m.starts_with("write_") {
            return self.err(
                at,
                format!("Packet.{m} is a statement, not a value"),
                "call it on its own line",
            );
        }
        let Some((size, ty)) = m.strip_prefix("read_").and_then(size_of_suffix) else {
            return self.err(
                at,
                format!("Packet has no method '{m}'"),
                "Packet.read_u8/u16/u32/u64(off), Packet.write_u8/u16/u32/u64(off, value)",
            );
        };
        if call.args.len() != 1 || !call.keywords.is_empty() {
            return self.err(
                at,
                format!("Packet.{m} takes 1 argument (offset)"),
                "Packet.read_u16(12)",
            );
        }
        let o = self.expr(&call.args[0], sc)?;
        let o = self.offset(o)?;
        Ok(TE::Typed(Expr {
            ty,
            kind: ExprKind::PktRead {
                size,
                off: Box::new(o),
            },
        }))
    }

    /// `Packet.len` and the info block fields (`Packet.l3_off`, ...).
    pub(super) fn packet_attr(&self, a: &ast::ExprAttribute, at: usize) -> R<TE> {
        let ast::Expr::Name(base) = a.value.as_ref() else {
            return self.err(
                at,
                "attributes are not supported here",
                "Packet.len, Packet.l3_off, ...",
            );
        };
        if base.id.as_str() != "Packet" {
            return self.err(
                at,
                format!("'{}' has no attributes", base.id.as_str()),
                "attributes exist only on Packet: Packet.len, Packet.l3_off, ...",
            );
        }
        let attr = a.attr.as_str();
        if attr == "len" {
            return Ok(TE::Typed(Expr {
                ty: Ty::U32,
                kind: ExprKind::PktLen,
            }));
        }
        if attr == "queue" {
            return Ok(TE::Typed(Expr {
                ty: Ty::U32,
                kind: ExprKind::PktQueue,
            }));
        }
        if attr == "arrival" {
            return Ok(TE::Typed(Expr {
                ty: Ty::U64,
                kind: ExprKind::PktArrival,
            }));
        }
        if let Some(&(_, o, size, ty)) = PKT_FIELDS.iter().find(|f| f.0 == attr) {
            return Ok(TE::Typed(Expr {
                ty,
                kind: ExprKind::PktInfo { off: o, size },
            }));
        }
        let names: Vec<&str> = PKT_FIELDS.iter().map(|f| f.0).collect();
        self.err(
            at,
            format!("Packet has no attribute '{attr}'"),
            &format!(
                "Packet.len, Packet.queue, Packet.arrival, Packet.{}; methods read_u8..read_u64, write_u8..write_u64",
                names.join(", Packet.")
            ),
        )
    }
}
