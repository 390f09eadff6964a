//! What the bytes of a map key or value mean: [`ValueType`], built from
//! a script's declarations ([`ValueType::from_decl_key`]) or from BTF
//! (`super::btf`). docs/abi.md "Map keys and values" states the rules.

use nfkit_lang::ir::MapDecl;
use nfkit_lang::Ty;
use serde::{Deserialize, Serialize};

/// The type of a map key or value, as tools read and write it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ValueType {
    /// An integer in host order (little-endian), as programs store it.
    Int { size: u32, signed: bool },
    /// A big-endian integer (`__be16`, `__be32`, `__be64`).
    BeInt { size: u32 },
    /// An IPv4 address, network order.
    Ipv4,
    /// An IPv6 address, network order; IPv4-mapped ones show as IPv4.
    Ipv6,
    /// A 2-byte port, host order unless `be`.
    Port { be: bool },
    /// A u64 time in ns on CLOCK_MONOTONIC (`bpf_ktime_get_ns`, `nf_now`);
    /// all ones is "never". `expiry`: shown as "expires in ..".
    Time { expiry: bool },
    /// Bytes, shown as hex.
    Bytes { size: u32 },
    /// A C struct: named fields at byte offsets.
    Struct {
        name: String,
        size: u32,
        fields: Vec<Field>,
    },
    /// A script's tuple key: fields `f0, f1, ..` at their offsets.
    Tuple { size: u32, fields: Vec<Field> },
}

/// A field of a struct or tuple.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub offset: u32,
    #[serde(rename = "type")]
    pub ty: ValueType,
}

impl ValueType {
    /// The size in bytes.
    pub fn size(&self) -> u32 {
        match self {
            ValueType::Int { size, .. }
            | ValueType::BeInt { size }
            | ValueType::Bytes { size }
            | ValueType::Struct { size, .. }
            | ValueType::Tuple { size, .. } => *size,
            ValueType::Ipv4 => 4,
            ValueType::Ipv6 => 16,
            ValueType::Port { .. } => 2,
            ValueType::Time { .. } => 8,
        }
    }

    /// An unsigned host-order integer of `size` bytes.
    pub fn uint(size: u32) -> ValueType {
        ValueType::Int {
            size,
            signed: false,
        }
    }

    /// The type of a script integer type.
    pub fn from_ty(t: Ty) -> ValueType {
        ValueType::Int {
            size: t.bytes(),
            signed: t.signed(),
        }
    }

    /// The key of script map `d`: its integer type, or its tuple laid
    /// out as `MapDecl::key_layout` says.
    pub fn from_decl_key(d: &MapDecl) -> ValueType {
        if d.tuple.is_empty() {
            return ValueType::from_ty(d.key);
        }
        let (offs, size) = d.key_layout();
        let fields = d
            .tuple
            .iter()
            .zip(offs)
            .enumerate()
            .map(|(i, (t, offset))| Field {
                name: format!("f{i}"),
                offset,
                ty: ValueType::from_ty(*t),
            })
            .collect();
        ValueType::Tuple { size, fields }
    }

    /// The value of script map `d`.
    pub fn from_decl_value(d: &MapDecl) -> ValueType {
        ValueType::from_ty(d.value)
    }

    /// A guess from the size alone (no BTF, no declaration): integers for
    /// 1, 2, 4, 8 bytes, else bytes.
    pub fn from_size(size: u32) -> ValueType {
        match size {
            1 | 2 | 4 | 8 => ValueType::uint(size),
            _ => ValueType::Bytes { size },
        }
    }

    /// Whether per-CPU copies of it add up (integers and times).
    pub fn is_integer(&self) -> bool {
        matches!(self, ValueType::Int { .. } | ValueType::BeInt { .. })
    }

    /// A short name for messages: `u32`, `ipv4 address`, `struct foo`.
    pub fn describe(&self) -> String {
        match self {
            ValueType::Int { size, signed } => {
                format!("{}{}", if *signed { 's' } else { 'u' }, size * 8)
            }
            ValueType::BeInt { size } => format!("__be{}", size * 8),
            ValueType::Ipv4 => "IPv4 address".into(),
            ValueType::Ipv6 => "IPv6 address".into(),
            ValueType::Port { .. } => "port".into(),
            ValueType::Time { .. } => "time (ns)".into(),
            ValueType::Bytes { size } => format!("{size} bytes"),
            ValueType::Struct { name, .. } if !name.is_empty() => format!("struct {name}"),
            ValueType::Struct { .. } => "struct".into(),
            ValueType::Tuple { fields, .. } => {
                let f: Vec<String> = fields.iter().map(|f| f.ty.describe()).collect();
                format!("({})", f.join(", "))
            }
        }
    }

    /// The fields a struct shows (padding and locks left out).
    pub fn shown_fields(&self) -> &[Field] {
        match self {
            ValueType::Struct { fields, .. } | ValueType::Tuple { fields, .. } => fields,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_round_trip_through_json() {
        let t = ValueType::Struct {
            name: "k".into(),
            size: 20,
            fields: vec![
                Field {
                    name: "addr".into(),
                    offset: 0,
                    ty: ValueType::Ipv6,
                },
                Field {
                    name: "port".into(),
                    offset: 16,
                    ty: ValueType::Port { be: false },
                },
            ],
        };
        let j = serde_json::to_value(&t).unwrap();
        assert_eq!(j["kind"], "struct");
        assert_eq!(serde_json::from_value::<ValueType>(j).unwrap(), t);
        assert_eq!(t.size(), 20);
        assert_eq!(ValueType::from_size(16), ValueType::Bytes { size: 16 });
    }
}
