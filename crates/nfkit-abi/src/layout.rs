//! The C structs of the ABI as Rust types, with their byte images
//! (little endian, as on every BPF target nfkit runs on) and a table of
//! their fields that a test checks against the catalogue's BTF.
//!
//! No code anywhere else writes these structs by byte offset: it builds
//! the type and calls `to_bytes`, or reads one with `from_bytes`.

/// A field of a C struct: its name, byte offset and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// A field type with a fixed little-endian image.
trait Le: Sized {
    const SIZE: usize;
    fn put(&self, out: &mut [u8]);
    fn get(b: &[u8]) -> Self;
}

macro_rules! le_int {
    ($($t:ty),*) => {$(
        impl Le for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(&self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
le_int!(u8, u16, u32, u64);

impl<T: Le + Copy + Default, const N: usize> Le for [T; N] {
    const SIZE: usize = T::SIZE * N;
    fn put(&self, out: &mut [u8]) {
        for (v, o) in self.iter().zip(out.chunks_exact_mut(T::SIZE)) {
            v.put(o);
        }
    }
    fn get(b: &[u8]) -> Self {
        let mut a = [T::default(); N];
        for (v, c) in a.iter_mut().zip(b.chunks_exact(T::SIZE)) {
            *v = T::get(c);
        }
        a
    }
}

/// Declares a C struct's twin: fields in C order, `SIZE`, `FIELDS`,
/// `to_bytes` and `from_bytes` (which needs at least `SIZE` bytes).
macro_rules! abi_struct {
    ($(#[$m:meta])* $name:ident = $c:literal, size $size:literal {
        $($(#[$fm:meta])* $f:ident : $t:ty,)*
    }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }

        impl Default for $name {
            /// All zero, as the maps start.
            fn default() -> Self {
                Self { $($f: <$t as Le>::get(&[0u8; <$t as Le>::SIZE]),)* }
            }
        }

        impl $name {
            /// The C struct's name.
            pub const C_NAME: &'static str = $c;
            /// `sizeof` the C struct.
            pub const SIZE: usize = $size;
            /// The fields in order, with offsets.
            pub const FIELDS: &'static [Field] = &{
                let sizes = [$(<$t as Le>::SIZE),*];
                let names = [$(stringify!($f)),*];
                let mut out = [Field { name: "", offset: 0, size: 0 }; [$(stringify!($f)),*].len()];
                let mut i = 0;
                let mut off = 0;
                while i < out.len() {
                    out[i] = Field { name: names[i], offset: off, size: sizes[i] };
                    off += sizes[i];
                    i += 1;
                }
                assert!(off == $size, "fields do not add up to the C size");
                out
            };

            /// The struct's bytes.
            pub fn to_bytes(&self) -> Vec<u8> {
                let mut out = vec![0u8; Self::SIZE];
                let mut off = 0;
                $(
                    <$t as Le>::put(&self.$f, &mut out[off..off + <$t as Le>::SIZE]);
                    off += <$t as Le>::SIZE;
                )*
                let _ = off;
                out
            }

            /// The struct read from `b` (at least `SIZE` bytes; `None` if
            /// shorter).
            pub fn from_bytes(b: &[u8]) -> Option<Self> {
                let b = b.get(..Self::SIZE)?;
                let mut off = 0;
                $(
                    let $f = <$t as Le>::get(&b[off..off + <$t as Le>::SIZE]);
                    off += <$t as Le>::SIZE;
                )*
                let _ = off;
                Some(Self { $($f,)* })
            }
        }
    };
}

abi_struct! {
    /// The parse-once packet info block (`struct nf_pkt_info`, docs/abi.md
    /// 3). Addresses are 16 bytes (IPv4 as `::ffff:a.b.c.d`); ports and
    /// `eth_proto` in host order.
    PktInfo = "nf_pkt_info", size 80 {
        src: [u8; 16],
        dst: [u8; 16],
        sport: u16,
        dport: u16,
        l4_proto: u8,
        ip_version: u8,
        key_pad: u16,
        rand_state: u64,
        pkt_len: u32,
        ifindex: u32,
        l3_off: u16,
        l4_off: u16,
        eth_proto: u16,
        vlan_id: u16,
        tos: u8,
        ttl: u8,
        tcp_flags: u8,
        /// `PI_*` flags.
        flags: u8,
        pad: u32,
        /// `nf_now()` of this packet once read (`PI_NOW` set).
        now_ns: u64,
    }
}

/// Bytes at the start of [`PktInfo`] that form the flow key.
pub const FLOW_KEY_SIZE: usize = 40;
/// `NF_PI_VALID`: the block was filled for this packet.
pub const PI_VALID: u8 = 0x01;
/// `NF_PI_VLAN`: the frame had at least one VLAN tag.
pub const PI_VLAN: u8 = 0x02;
/// `NF_PI_FRAG`: an IP fragment.
pub const PI_FRAG: u8 = 0x04;
/// `NF_PI_TRUNC`: a header was cut short.
pub const PI_TRUNC: u8 = 0x08;
/// `NF_PI_L4`: `l4_off` points at a complete L4 header.
pub const PI_L4: u8 = 0x10;
/// `NF_PI_NOW`: `now_ns` holds this packet's `nf_now()`.
pub const PI_NOW: u8 = 0x20;
/// `NF_PI_RAND`: `rand_state` holds this packet's `nf_rand()` sequence,
/// seeded by one `bpf_get_prandom_u32()` (real mode).
pub const PI_RAND: u8 = 0x40;

/// TCP flags as in [`PktInfo::tcp_flags`] (`NF_TCP_*`).
pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

abi_struct! {
    /// The deployment's configuration (`struct nf_config`, docs/abi.md 4
    /// and 7), the one entry of `nfkit_config`.
    NfConfig = "nf_config", size 40 {
        /// Verdict for unclaimed packets and plain values (not a verdict:
        /// PASS).
        default_action: u64,
        /// Verdict on a fault (not a verdict: DROP).
        fault_action: u64,
        controller_ifindex: u32,
        /// [`CLOCK_PINNED`]: `nf_now()`/`nf_rand()` are pinned;
        /// [`CLOCK_RAND_ONLY`]: only `nf_rand()` (the switch's replay).
        clock_pinned: u32,
        /// `nf_now()` when pinned.
        now_ns: u64,
        /// Seed of `nf_rand()` when pinned (0: [`RAND_SEED0`]).
        rand_seed: u64,
    }
}

impl NfConfig {
    /// This configuration with the clock pinned at `now_ns`.
    pub fn pinned_at(self, now_ns: u64) -> NfConfig {
        NfConfig {
            clock_pinned: CLOCK_PINNED,
            now_ns,
            ..self
        }
    }
}

/// `clock_pinned`: real time and randomness (`NF_CLOCK_REAL`).
pub const CLOCK_REAL: u32 = 0;
/// `clock_pinned`: `nf_now()` is `now_ns`, `nf_rand()` a xorshift64
/// sequence from `rand_seed` reset per packet (`NF_CLOCK_PINNED`).
pub const CLOCK_PINNED: u32 = 1;
/// `clock_pinned`: `nf_now()` from `bpf_ktime_get_ns()` (which a VM run
/// can pin per run), `nf_rand()` as pinned (`NF_CLOCK_RAND_ONLY`).
pub const CLOCK_RAND_ONLY: u32 = 2;

/// The seed of `nf_rand()` when `rand_seed` is 0 (`NF_RAND_SEED0`).
pub const RAND_SEED0: u64 = 0x9e37_79b9_7f4a_7c15;

/// Stack slots a chain carries across an NF call in dynamic mode.
pub const FRAME_LOCALS: usize = 56;

abi_struct! {
    /// The per-CPU call frame of dynamic mode (`struct nf_frame`,
    /// docs/abi.md 5).
    NfFrame = "nf_frame", size 504 {
        /// Arguments of the NF being called (those that are not
        /// constants of the call site).
        args: [u64; 4],
        /// Its result (the NFs' shared entries only, as the next three).
        result: u64,
        /// `nfkit_progs` index of the continuation.
        cont: u32,
        /// NF calls so far in this packet.
        calls: u32,
        /// The chain being run.
        chain_id: u32,
        pad: u32,
        /// The chain's stack slots live across an NF call.
        locals: [u64; FRAME_LOCALS],
    }
}

impl NfFrame {
    /// Byte offset of field `name` (for code that addresses the frame
    /// through a pointer; `None` if there is no such field).
    pub fn offset_of(name: &str) -> Option<usize> {
        Self::FIELDS
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.offset)
    }
}

/// `NF_CLS_VALID`: a classifier entry in use.
pub const CLS_VALID: u32 = 1;

abi_struct! {
    /// A classifier table's value (`struct nf_cls_entry`).
    ClsEntry = "nf_cls_entry", size 8 {
        chain_id: u32,
        /// [`CLS_VALID`].
        flags: u32,
    }
}

impl ClsEntry {
    /// A valid entry for chain `chain_id`.
    pub fn valid(chain_id: u32) -> ClsEntry {
        ClsEntry {
            chain_id,
            flags: CLS_VALID,
        }
    }
}

abi_struct! {
    /// The key of `nfkit_cls_ip4` (`struct nf_cls_ip4_key`, an LPM key).
    ClsIp4Key = "nf_cls_ip4_key", size 8 {
        prefixlen: u32,
        /// Network order.
        addr: [u8; 4],
    }
}

abi_struct! {
    /// The key of `nfkit_cls_ip6` (`struct nf_cls_ip6_key`).
    ClsIp6Key = "nf_cls_ip6_key", size 20 {
        prefixlen: u32,
        addr: [u8; 16],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_offsets() {
        let c = NfConfig {
            default_action: 1,
            fault_action: 2,
            controller_ifindex: 3,
            clock_pinned: 4,
            now_ns: 5,
            rand_seed: 6,
        };
        let b = c.to_bytes();
        assert_eq!(b.len(), NfConfig::SIZE);
        assert_eq!(b[24..32], 5u64.to_le_bytes());
        assert_eq!(NfConfig::from_bytes(&b), Some(c));
        assert_eq!(NfConfig::from_bytes(&b[..39]), None);
        let f = NfFrame {
            locals: [7; FRAME_LOCALS],
            chain_id: 9,
            ..NfFrame::default()
        };
        assert_eq!(NfFrame::from_bytes(&f.to_bytes()), Some(f));
        assert_eq!(NfFrame::offset_of("locals"), Some(56));
        assert_eq!(NfFrame::offset_of("chain_id"), Some(48));
        let pi = PktInfo::FIELDS;
        assert_eq!(
            pi.iter().find(|f| f.name == "flags").map(|f| f.offset),
            Some(67)
        );
        assert_eq!(
            pi.iter().find(|f| f.name == "rand_state").map(|f| f.offset),
            Some(FLOW_KEY_SIZE)
        );
    }
}
