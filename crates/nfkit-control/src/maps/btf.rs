//! [`ValueType`] from BTF: C integer, array, struct and typedef types,
//! with field and typedef names deciding addresses, ports and times
//! where the C type is plain (docs/abi.md "Map keys and values").

use super::types::{Field, ValueType};
use nfkit_object::btf::{Kind, INT_SIGNED};
use nfkit_object::Btf;

/// How deep structs may nest before we give up (shown as bytes).
const MAX_DEPTH: usize = 8;

/// What a name says a plain-typed field is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Plain,
    Addr,
    Port,
    Time { expiry: bool },
}

/// The role of field or typedef name `n`.
fn role(n: &str) -> Role {
    let n = n.to_ascii_lowercase();
    let n = n.as_str();
    if matches!(n, "addr" | "saddr" | "daddr" | "src" | "dst" | "ip")
        || n.ends_with("_addr")
        || n.ends_with("_ip")
    {
        Role::Addr
    } else if matches!(n, "port" | "sport" | "dport") || n.ends_with("_port") {
        Role::Port
    } else if n.contains("expir") || n.contains("deadline") || n == "until" {
        Role::Time { expiry: true }
    } else if n.ends_with("_ns") {
        Role::Time { expiry: false }
    } else {
        Role::Plain
    }
}

/// The type of BTF type `id` of `btf`, if BTF describes it.
pub fn from_btf(btf: &Btf, id: u32) -> Option<ValueType> {
    build(btf, id, Role::Plain, 0)
}

fn build(btf: &Btf, id: u32, r: Role, depth: usize) -> Option<ValueType> {
    if depth > MAX_DEPTH {
        return None;
    }
    let t = btf.get(id)?;
    match &t.kind {
        Kind::Typedef { ty } => typedef(btf, &t.name, *ty, r, depth),
        Kind::Const { ty } | Kind::Volatile { ty } | Kind::Restrict { ty } => {
            build(btf, *ty, r, depth + 1)
        }
        Kind::TypeTag { ty, .. } => build(btf, *ty, r, depth + 1),
        Kind::Int { size, encoding, .. } => Some(int(*size, encoding & INT_SIGNED != 0, r)),
        Kind::Enum { size, signed, .. } | Kind::Enum64 { size, signed, .. } => {
            Some(int(*size, *signed, r))
        }
        Kind::Ptr { .. } => Some(ValueType::uint(8)),
        Kind::Array { elem, nelems, .. } => {
            let bytes = matches!(
                btf.strip(*elem)
                    .ok()
                    .and_then(|e| btf.get(e))
                    .map(|e| &e.kind),
                Some(Kind::Int { size: 1, .. })
            );
            let size = btf.size_of(id).ok()?;
            Some(match (bytes, nelems, r) {
                (true, 4, Role::Addr) => ValueType::Ipv4,
                (true, 16, Role::Addr) => ValueType::Ipv6,
                _ => ValueType::Bytes { size },
            })
        }
        Kind::Struct { size, members } => {
            let mut fields = Vec::new();
            for m in members {
                if m.bitfield_size != 0 || m.bit_offset % 8 != 0 || skipped(btf, &m.name, m.ty) {
                    continue;
                }
                let ty = build(btf, m.ty, role(&m.name), depth + 1)?;
                fields.push(Field {
                    name: m.name.clone(),
                    offset: m.bit_offset / 8,
                    ty,
                });
            }
            Some(ValueType::Struct {
                name: t.name.clone(),
                size: *size,
                fields,
            })
        }
        Kind::Union { size, .. } => Some(ValueType::Bytes { size: *size }),
        _ => None,
    }
}

/// A typedef: `__be*` are big-endian (addresses and ports when the
/// field's name says so); other names can give a role.
fn typedef(btf: &Btf, name: &str, ty: u32, r: Role, depth: usize) -> Option<ValueType> {
    let size = btf.size_of(ty).ok()?;
    if name.starts_with("__be") {
        return Some(match (r, size) {
            (Role::Addr, 4) => ValueType::Ipv4,
            (Role::Port, 2) => ValueType::Port { be: true },
            _ => ValueType::BeInt { size },
        });
    }
    let r = match (r, role(name)) {
        (Role::Plain, own) => own,
        (given, _) => given,
    };
    build(btf, ty, r, depth + 1)
}

/// An integer of `size` bytes in role `r`.
fn int(size: u32, signed: bool, r: Role) -> ValueType {
    match (r, size) {
        (Role::Time { expiry }, 8) => ValueType::Time { expiry },
        (Role::Port, 2) => ValueType::Port { be: false },
        _ => ValueType::Int { size, signed },
    }
}

/// Padding and locks: not shown (and zero when written).
fn skipped(btf: &Btf, name: &str, ty: u32) -> bool {
    let bare = name.trim_start_matches('_');
    bare.is_empty()
        || bare.starts_with("pad")
        || btf
            .strip(ty)
            .ok()
            .is_some_and(|t| btf.name_of(t) == "bpf_spin_lock")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_object::btf::{Member, Type};

    fn member(name: &str, ty: u32, byte: u32) -> Member {
        Member {
            name: name.into(),
            ty,
            bit_offset: byte * 8,
            bitfield_size: 0,
        }
    }

    #[test]
    fn names_give_addresses_ports_and_times() {
        let mut b = Btf::new();
        let int = |size, encoding| Kind::Int {
            size,
            encoding,
            offset: 0,
            bits: (size * 8) as u8,
        };
        let u8_ = b.add(Type::new("unsigned char", int(1, 0)));
        let u16_ = b.add(Type::new("unsigned short", int(2, 0)));
        let u32_ = b.add(Type::new("unsigned int", int(4, 0)));
        let u64_ = b.add(Type::new("unsigned long long", int(8, 0)));
        let be32 = b.add(Type::new("__be32", Kind::Typedef { ty: u32_ }));
        let be16 = b.add(Type::new("__be16", Kind::Typedef { ty: u16_ }));
        let a16 = b.add(Type::new(
            "",
            Kind::Array {
                elem: u8_,
                index: u32_,
                nelems: 16,
            },
        ));
        let expiry = b.add(Type::new("nf_set_expiry", Kind::Typedef { ty: u64_ }));
        let s = b.add(Type::new(
            "k",
            Kind::Struct {
                size: 40,
                members: vec![
                    member("src", a16, 0),
                    member("daddr", be32, 16),
                    member("dport", be16, 20),
                    member("sport", u16_, 22),
                    member("pad", u32_, 24),
                    member("last_ns", u64_, 28),
                    member("count", u32_, 36),
                ],
            },
        ));
        let t = from_btf(&b, s).unwrap();
        let tys: Vec<(&str, &ValueType)> = t
            .shown_fields()
            .iter()
            .map(|f| (f.name.as_str(), &f.ty))
            .collect();
        assert_eq!(
            tys,
            [
                ("src", &ValueType::Ipv6),
                ("daddr", &ValueType::Ipv4),
                ("dport", &ValueType::Port { be: true }),
                ("sport", &ValueType::Port { be: false }),
                ("last_ns", &ValueType::Time { expiry: false }),
                ("count", &ValueType::uint(4)),
            ]
        );
        assert_eq!(from_btf(&b, expiry), Some(ValueType::Time { expiry: true }));
        assert_eq!(from_btf(&b, be32), Some(ValueType::BeInt { size: 4 }));
        assert_eq!(from_btf(&b, a16), Some(ValueType::Bytes { size: 16 }));
    }
}
