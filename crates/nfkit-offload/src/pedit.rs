//! A [`Rewrite`] as tc actions: `pedit` with extended keys (each edit a
//! 32-bit key relative to a header) and `csum`, both `pipe`, before the
//! rule's terminal action, and back from an installed filter's dump.
//!
//! The keys are those `tc ... action pedit ex munge ...` sends for the
//! munge words [`Rewrite::tc_actions`] prints (one key per 32-bit word a
//! munge touches; MAC and IPv4 addresses whole): a test compares the
//! encoding with what `tc` itself sends. A key's mask and value are in
//! packet byte order: the kernel computes `word = (word & mask) ^ val`
//! (`set`) or `val = (word + key) & ~mask` first (`add`) on the native
//! word that holds those bytes.

use crate::rewrite::{Edit, Rewrite};
use netlink_packet_core::{DefaultNla, Emitable, Nla, NLA_F_NESTED, NLA_TYPE_MASK};
use netlink_packet_route::tc::{
    TcAction, TcActionAttribute, TcActionGeneric, TcActionOption, TcActionType,
};

const TCA_PEDIT_PARMS_EX: u16 = 4;
const TCA_PEDIT_KEYS_EX: u16 = 5;
const TCA_PEDIT_KEY_EX: u16 = 6;
const TCA_PEDIT_KEY_EX_HTYPE: u16 = 1;
const TCA_PEDIT_KEY_EX_CMD: u16 = 2;
const TCA_CSUM_PARMS: u16 = 1;
/// `TCA_CSUM_UPDATE_FLAG_IPV4HDR`.
const CSUM_IPV4HDR: u32 = 1;
/// `TCA_CSUM_UPDATE_FLAG_TCP`.
const CSUM_TCP: u32 = 8;
/// `struct tc_pedit_key`: mask, val, off, at, offmask, shift.
const KEY_LEN: usize = 24;
/// `tc_gen` (index, capab, action, refcnt, bindcnt) in a parameter
/// struct.
const GEN_LEN: usize = 20;

/// `TCA_PEDIT_KEY_EX_HDR_TYPE_*`: what a key's offset counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// The network header (`munge offset N ...`).
    Network = 0,
    Eth = 1,
    Ip4 = 2,
    Ip6 = 3,
}

impl Header {
    fn from_u16(v: u16) -> Option<Header> {
        Some(match v {
            0 => Header::Network,
            1 => Header::Eth,
            2 => Header::Ip4,
            3 => Header::Ip6,
            _ => return None,
        })
    }

    /// Where the header starts in an untagged frame.
    fn base(self) -> usize {
        match self {
            Header::Eth => 0,
            _ => 14,
        }
    }
}

/// One pedit key: the aligned 32-bit word at `off` from `header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub header: Header,
    /// `add` (`TCA_PEDIT_KEY_EX_CMD_ADD`) rather than `set`.
    pub add: bool,
    pub off: u32,
    /// Bits kept, in packet byte order.
    pub mask: [u8; 4],
    /// Bits set (or added), in packet byte order.
    pub val: [u8; 4],
}

/// One `munge` of `tc`'s pedit: its words and its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Munge {
    pub text: String,
    pub keys: Vec<Key>,
}

/// The keys setting bytes `bytes` at frame offset `at` (the header
/// starting at frame byte `header.base()`), one per word they touch.
fn set_keys(header: Header, at: usize, bytes: &[u8], keep: &[u8]) -> Vec<Key> {
    let rel = at - header.base();
    let mut keys: Vec<Key> = Vec::new();
    for (j, (&v, &k)) in bytes.iter().zip(keep).enumerate() {
        let off = ((rel + j) & !3) as u32;
        let i = (rel + j) & 3;
        if keys.last().is_none_or(|key| key.off != off) {
            keys.push(Key {
                header,
                add: false,
                off,
                mask: [0xff; 4],
                val: [0; 4],
            });
        }
        if let Some(key) = keys.last_mut() {
            key.mask[i] = k;
            key.val[i] = v & !k;
        }
    }
    keys
}

/// The munges of `rw` for a frame of `ethertype` (0x0800, 0x86dd or
/// other): the words `tc_actions` prints and the keys `tc` makes of
/// them. Errors name an edit the munges cannot express.
pub fn munges(rw: &Rewrite, ethertype: u16) -> Result<Vec<Munge>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rw.edits.len() {
        let e = rw.edits[i];
        // A whole MAC or IPv4 address set at once.
        let run = |start: usize, len: usize| -> Option<Vec<u8>> {
            (0..len)
                .map(|j| match rw.edits.get(i + j) {
                    Some(Edit::Set {
                        at,
                        val,
                        mask: 0xff,
                    }) if *at == start + j => Some(*val),
                    _ => None,
                })
                .collect()
        };
        let at = e.at();
        if at == 0 || at == 6 {
            let Some(mac) = run(at, 6) else {
                return Err(format!(
                    "a partial rewrite of the {} MAC address",
                    if at == 0 { "destination" } else { "source" }
                ));
            };
            let m: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
            let f = if at == 0 { "dst" } else { "src" };
            out.push(Munge {
                text: format!("munge eth {f} set {}", m.join(":")),
                keys: set_keys(Header::Eth, at, &mac, &[0; 6]),
            });
            i += 6;
            continue;
        }
        if at < 14 {
            return Err(format!(
                "a rewrite of frame byte {at} (inside a MAC address or the EtherType)"
            ));
        }
        if ethertype == 0x0800 && (at == 26 || at == 30) {
            if let Some(a) = run(at, 4) {
                let f = if at == 26 { "src" } else { "dst" };
                out.push(Munge {
                    text: format!("munge ip {f} set {}.{}.{}.{}", a[0], a[1], a[2], a[3]),
                    keys: set_keys(Header::Ip4, at, &a, &[0; 4]),
                });
                i += 4;
                continue;
            }
        }
        let (field, header) = match (ethertype, at) {
            (0x0800, 15) => ("ip tos".to_string(), Header::Ip4),
            (0x0800, 22) => ("ip ttl".to_string(), Header::Ip4),
            (0x86dd, 21) => ("ip6 hoplimit".to_string(), Header::Ip6),
            _ => (format!("offset {} u8", at - 14), Header::Network),
        };
        out.push(match e {
            Edit::Set {
                val, mask: 0xff, ..
            } => Munge {
                text: format!("munge {field} set {val}"),
                keys: set_keys(header, at, &[val], &[0]),
            },
            Edit::Set { val, mask, .. } => Munge {
                text: format!("munge {field} set {:#04x} retain {mask:#04x}", val & mask),
                keys: set_keys(header, at, &[val], &[!mask]),
            },
            Edit::Add { add, .. } => {
                let mut keys = set_keys(header, at, &[add], &[0]);
                for k in &mut keys {
                    k.add = true;
                }
                Munge {
                    text: format!("munge {field} add {add:#04x}"),
                    keys,
                }
            }
        });
        i += 1;
    }
    Ok(out)
}

/// A `tc_gen` whose action is `pipe` (the next action runs).
fn pipe_gen(buf: &mut [u8]) {
    let mut g = TcActionGeneric::default();
    g.action = TcActionType::Pipe;
    g.emit(&mut buf[..GEN_LEN]);
}

fn nested(kind: u16, children: &[DefaultNla]) -> DefaultNla {
    let mut b = vec![0u8; children.iter().map(|c| c.buffer_len()).sum()];
    let mut at = 0;
    for c in children {
        c.emit(&mut b[at..at + c.buffer_len()]);
        at += c.buffer_len();
    }
    DefaultNla::new(kind | NLA_F_NESTED, b)
}

fn u16_nla(kind: u16, v: u16) -> DefaultNla {
    DefaultNla::new(kind, v.to_ne_bytes().to_vec())
}

fn act(tab: u16, kind: &str, options: Vec<DefaultNla>) -> TcAction {
    let mut a = TcAction::default();
    a.tab = tab;
    a.attributes = vec![
        TcActionAttribute::Kind(kind.into()),
        TcActionAttribute::Options(options.into_iter().map(TcActionOption::Other).collect()),
    ];
    a
}

/// The `pedit` (when `rw` edits bytes) and `csum` (when it redoes the
/// IPv4 header checksum) actions of `rw`, numbered from `tab`.
pub fn actions(rw: &Rewrite, ethertype: u16, tab: u16) -> Result<Vec<TcAction>, String> {
    let keys: Vec<Key> = munges(rw, ethertype)?
        .into_iter()
        .flat_map(|m| m.keys)
        .collect();
    let mut out = Vec::new();
    if !keys.is_empty() {
        let n = u8::try_from(keys.len())
            .map_err(|_| format!("{} pedit keys (at most 255)", keys.len()))?;
        // tc_pedit_sel: tc_gen, nkeys, flags, padding, then the keys.
        let mut sel = vec![0u8; GEN_LEN + 4 + KEY_LEN * keys.len()];
        pipe_gen(&mut sel);
        sel[GEN_LEN] = n;
        let mut ex = Vec::with_capacity(keys.len());
        for (k, key) in keys.iter().enumerate() {
            let b = &mut sel[GEN_LEN + 4 + KEY_LEN * k..][..KEY_LEN];
            b[0..4].copy_from_slice(&key.mask);
            b[4..8].copy_from_slice(&key.val);
            b[8..12].copy_from_slice(&key.off.to_ne_bytes());
            ex.push(nested(
                TCA_PEDIT_KEY_EX,
                &[
                    u16_nla(TCA_PEDIT_KEY_EX_HTYPE, key.header as u16),
                    u16_nla(TCA_PEDIT_KEY_EX_CMD, u16::from(key.add)),
                ],
            ));
        }
        out.push(act(
            tab,
            "pedit",
            vec![
                DefaultNla::new(TCA_PEDIT_PARMS_EX, sel),
                nested(TCA_PEDIT_KEYS_EX, &ex),
            ],
        ));
    }
    if rw.csum_ip4h || rw.csum_tcp {
        let flags =
            if rw.csum_ip4h { CSUM_IPV4HDR } else { 0 } | if rw.csum_tcp { CSUM_TCP } else { 0 };
        let mut p = vec![0u8; GEN_LEN + 4];
        pipe_gen(&mut p);
        p[GEN_LEN..].copy_from_slice(&flags.to_ne_bytes());
        out.push(act(
            tab + out.len() as u16,
            "csum",
            vec![DefaultNla::new(TCA_CSUM_PARMS, p)],
        ));
    }
    Ok(out)
}

fn value(n: &DefaultNla) -> Vec<u8> {
    let mut b = vec![0u8; n.value_len()];
    n.emit_value(&mut b);
    b
}

/// The NLAs in `b` (a nested attribute's value), by type (flags masked
/// off), in order.
fn children(b: &[u8]) -> Result<Vec<(u16, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= b.len() {
        let len = usize::from(u16::from_ne_bytes([b[at], b[at + 1]]));
        let kind = u16::from_ne_bytes([b[at + 2], b[at + 3]]) & NLA_TYPE_MASK;
        if len < 4 || at + len > b.len() {
            return Err(format!(
                "a truncated attribute at byte {at} of a pedit key list"
            ));
        }
        out.push((kind, b[at + 4..at + len].to_vec()));
        at += (len + 3) & !3;
    }
    Ok(out)
}

fn u16_of(b: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes([*b.first()?, *b.get(1)?]))
}

/// The keys of an installed `pedit` action from its options.
pub fn decode_pedit(opts: &[TcActionOption]) -> Result<Vec<Key>, String> {
    let other = |want: u16| {
        opts.iter().find_map(|o| match o {
            TcActionOption::Other(n) if n.kind() & !NLA_F_NESTED == want => Some(value(n)),
            _ => None,
        })
    };
    let sel = other(TCA_PEDIT_PARMS_EX).ok_or("a pedit action without extended parameters")?;
    let n = usize::from(*sel.get(GEN_LEN).ok_or("a short pedit selector")?);
    let ex = children(&other(TCA_PEDIT_KEYS_EX).ok_or("a pedit action without key types")?)?;
    if ex.len() != n || sel.len() < GEN_LEN + 4 + KEY_LEN * n {
        return Err(format!(
            "a pedit action with {n} keys, {} key types and {} bytes of keys",
            ex.len(),
            sel.len().saturating_sub(GEN_LEN + 4)
        ));
    }
    let mut keys = Vec::with_capacity(n);
    for (k, (_, key_ex)) in ex.iter().enumerate() {
        let b = &sel[GEN_LEN + 4 + KEY_LEN * k..][..KEY_LEN];
        let attrs = children(key_ex)?;
        let find = |t: u16| {
            attrs
                .iter()
                .find(|(k, _)| *k == t)
                .and_then(|(_, v)| u16_of(v))
        };
        let h = find(TCA_PEDIT_KEY_EX_HTYPE).unwrap_or(0);
        let header = Header::from_u16(h).ok_or(format!("a pedit key on header type {h}"))?;
        let cmd = find(TCA_PEDIT_KEY_EX_CMD).unwrap_or(0);
        if cmd > 1 {
            return Err(format!("a pedit key with command {cmd}"));
        }
        // at, offmask and shift: offsets read from the packet, which
        // nfkit never writes.
        if b[12..24].iter().any(|&x| x != 0) {
            return Err("a pedit key with a packet-relative offset".into());
        }
        keys.push(Key {
            header,
            add: cmd == 1,
            off: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            mask: [b[0], b[1], b[2], b[3]],
            val: [b[4], b[5], b[6], b[7]],
        });
    }
    Ok(keys)
}

/// What an installed `csum` action redoes: (the IPv4 header checksum,
/// the TCP checksum); an error for anything nfkit does not write.
pub fn decode_csum(opts: &[TcActionOption]) -> Result<(bool, bool), String> {
    let p = opts
        .iter()
        .find_map(|o| match o {
            TcActionOption::Other(n) if n.kind() == TCA_CSUM_PARMS => Some(value(n)),
            _ => None,
        })
        .ok_or("a csum action without parameters")?;
    let flags = p
        .get(GEN_LEN..GEN_LEN + 4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or("a short csum parameter block")?;
    if flags & !(CSUM_IPV4HDR | CSUM_TCP) != 0 || flags == 0 {
        return Err(format!("a csum action with update flags {flags:#x}"));
    }
    Ok((flags & CSUM_IPV4HDR != 0, flags & CSUM_TCP != 0))
}

/// The byte edits of `keys`, by frame offset (an untagged frame), in
/// the form [`Rewrite`] holds them.
pub fn edits_of(keys: &[Key]) -> Result<Vec<Edit>, String> {
    let mut out: Vec<Edit> = Vec::new();
    for k in keys {
        let changed = k.mask.iter().filter(|&&m| m != 0xff).count();
        if k.add && (changed > 1 || k.mask.iter().any(|&m| m != 0 && m != 0xff)) {
            return Err(format!(
                "a pedit add at offset {} that is not on one whole byte",
                k.off
            ));
        }
        if !k.add && k.mask.iter().zip(&k.val).any(|(m, v)| m & v != 0) {
            return Err(format!(
                "a pedit key at offset {} that flips kept bits",
                k.off
            ));
        }
        for i in 0..4 {
            if k.mask[i] == 0xff && (k.add || k.val[i] == 0) {
                continue;
            }
            let at = k.header.base() + k.off as usize + i;
            out.push(if k.add {
                Edit::Add { at, add: k.val[i] }
            } else {
                Edit::Set {
                    at,
                    val: k.val[i],
                    mask: !k.mask[i],
                }
            });
        }
    }
    out.sort_by_key(|e| e.at());
    Ok(out)
}

/// Applies `keys` to `frame` as the kernel's `act_pedit` does
/// (`tcf_pedit_act`: per key the native 32-bit word at the header's
/// offset, `set`: `(w & mask) ^ val`, `add`: `(w & mask) ^ ((w + val) &
/// !mask)`; a word past the frame's end stops the action). Used by tests
/// to hold the keys to the model.
pub fn apply_keys(keys: &[Key], frame: &mut [u8]) {
    for k in keys {
        let at = k.header.base() + k.off as usize;
        let Some(b) = frame.get_mut(at..at + 4) else {
            return;
        };
        let w = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let mask = u32::from_ne_bytes(k.mask);
        let val = u32::from_ne_bytes(k.val);
        let v = if k.add {
            w.wrapping_add(val) & !mask
        } else {
            val
        };
        b.copy_from_slice(&((w & mask) ^ v).to_ne_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random rewrite of an IPv4 or IPv6 frame that the munges can
    /// express: whole MACs, whole IPv4 addresses, named fields and
    /// single bytes, set (some bits or all) or added to.
    fn random_rewrite(rng: &mut Rng, v6: bool) -> Rewrite {
        let mut edits: Vec<Edit> = Vec::new();
        let mut used = [false; 64];
        let whole =
            |edits: &mut Vec<Edit>, used: &mut [bool; 64], at: usize, n: usize, rng: &mut Rng| {
                if used[at..at + n].iter().any(|&u| u) {
                    return;
                }
                for j in 0..n {
                    used[at + j] = true;
                    edits.push(Edit::Set {
                        at: at + j,
                        val: rng.next() as u8,
                        mask: 0xff,
                    });
                }
            };
        for _ in 0..1 + rng.below(5) {
            match rng.below(4) {
                0 => whole(&mut edits, &mut used, 0, 6, rng),
                1 => whole(&mut edits, &mut used, 6, 6, rng),
                2 if !v6 => whole(
                    &mut edits,
                    &mut used,
                    26 + 4 * rng.below(2) as usize,
                    4,
                    rng,
                ),
                _ => {
                    // One byte past the EtherType, not inside an address
                    // the whole-address munge would take.
                    let at = 14 + rng.below(48) as usize;
                    if used[at] || (!v6 && (at == 26 || at == 30)) {
                        continue;
                    }
                    used[at] = true;
                    edits.push(match rng.below(3) {
                        0 => Edit::Add {
                            at,
                            add: rng.next() as u8,
                        },
                        1 => Edit::Set {
                            at,
                            val: rng.next() as u8,
                            mask: 0xff,
                        },
                        _ => {
                            let mask = (rng.next() as u8) | 1;
                            Edit::Set {
                                at,
                                val: rng.next() as u8 & mask,
                                mask,
                            }
                        }
                    });
                }
            }
        }
        edits.sort_by_key(|e| e.at());
        Rewrite {
            edits,
            csum_ip4h: !v6 && rng.below(2) == 0,
            csum_tcp: false,
            assumes_valid_csum: false,
        }
    }

    /// The keys do to a frame what the model's rewrite does (checksum
    /// aside), and read back as the same edits.
    #[test]
    fn keys_rewrite_frames_as_the_model_does() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..5000 {
            let v6 = case % 3 == 0;
            let mut rw = random_rewrite(&mut rng, v6);
            rw.csum_ip4h = false;
            let ethertype = if v6 { 0x86dd } else { 0x0800 };
            let keys: Vec<Key> = munges(&rw, ethertype)
                .unwrap_or_else(|e| panic!("case {case} {rw}: {e}"))
                .into_iter()
                .flat_map(|m| m.keys)
                .collect();
            let frame: Vec<u8> = (0..80).map(|_| rng.next() as u8).collect();
            let (mut a, mut b) = (frame.clone(), frame);
            rw.apply(&mut a);
            apply_keys(&keys, &mut b);
            assert_eq!(a, b, "case {case}: {rw}: keys {keys:?}");
            assert_eq!(
                edits_of(&keys).unwrap_or_else(|e| panic!("case {case}: {e}")),
                rw.edits,
                "case {case}: {rw}"
            );
        }
    }

    /// Keys nfkit never writes are refused when read back.
    #[test]
    fn foreign_keys_are_refused() {
        let xor = Key {
            header: Header::Ip4,
            add: false,
            off: 8,
            mask: [0xff, 0xff, 0xff, 0xff],
            val: [1, 0, 0, 0],
        };
        assert!(edits_of(&[xor]).is_err());
        let wide_add = Key {
            header: Header::Ip4,
            add: true,
            off: 8,
            mask: [0, 0, 0xff, 0xff],
            val: [1, 1, 0, 0],
        };
        assert!(edits_of(&[wide_add]).is_err());
    }

    /// A partial MAC rewrite has no munge: refused with the reason.
    #[test]
    fn a_partial_mac_is_refused() {
        let rw = Rewrite {
            edits: vec![Edit::Set {
                at: 0,
                val: 7,
                mask: 0xff,
            }],
            csum_ip4h: false,
            csum_tcp: false,
            assumes_valid_csum: false,
        };
        let e = munges(&rw, 0x0800).unwrap_err();
        assert!(e.contains("partial rewrite of the destination MAC"), "{e}");
        let mut inside = rw.clone();
        inside.edits[0] = Edit::Set {
            at: 2,
            val: 7,
            mask: 0xff,
        };
        let e = munges(&inside, 0x0800).unwrap_err();
        assert!(e.contains("frame byte 2"), "{e}");
    }

    /// `\xNN` escapes (strace -xx) as bytes.
    fn unescape(s: &str) -> Vec<u8> {
        s.split("\\x")
            .filter(|h| !h.is_empty())
            .map(|h| u8::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{h}: {e}")))
            .collect()
    }

    /// Removes the test's network namespace however the test ends.
    struct Netns(String);
    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .status();
        }
    }

    /// What `tc` itself sends for `tc filter add ... flower action
    /// WORDS` (built by iproute2 before the kernel is asked: run under
    /// strace in a namespace of the test's own, whose `lo` has no
    /// qdisc, so nothing is installed): each command's TCA_FLOWER_ACT.
    fn tc_sends(cmds: &[String]) -> Vec<Vec<u8>> {
        let ns = Netns(format!("nfkit-pedit-{}", std::process::id()));
        let dir = std::env::temp_dir().join(&ns.0);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let batch = dir.join("batch");
        let trace = dir.join("trace");
        std::fs::write(&batch, cmds.join("\n") + "\n").unwrap_or_else(|e| panic!("{e}"));
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip netns add {}", ns.0);
        let st = std::process::Command::new("ip")
            .args(["netns", "exec", &ns.0, "strace", "-o"])
            .arg(&trace)
            .args([
                "-e",
                "trace=sendmsg",
                "-xx",
                "-s",
                "65536",
                "tc",
                "-force",
                "-batch",
            ])
            .arg(&batch)
            .output()
            .unwrap_or_else(|e| panic!("strace tc (scripts/install-deps.sh installs both): {e}"));
        let text = std::fs::read_to_string(&trace).unwrap_or_else(|e| {
            panic!(
                "no strace output ({e}): {}",
                String::from_utf8_lossy(&st.stderr)
            )
        });
        let _ = std::fs::remove_dir_all(&dir);
        text.lines()
            .filter(|l| l.contains("RTM_NEWTFILTER"))
            .map(|l| {
                let start = l
                    .find("nla_type=TCA_OPTIONS}, \"")
                    .unwrap_or_else(|| panic!("no options in {l}"))
                    + "nla_type=TCA_OPTIONS}, \"".len();
                let end = start + l[start..].find('"').unwrap_or_else(|| panic!("{l}"));
                let opts = unescape(&l[start..end]);
                children(&opts)
                    .unwrap_or_else(|e| panic!("{e}: {l}"))
                    .into_iter()
                    .find(|(k, _)| *k == 3)
                    .unwrap_or_else(|| panic!("no TCA_FLOWER_ACT in {l}"))
                    .1
            })
            .collect()
    }

    /// Every rule's actions as nfkit encodes them equal, byte for byte,
    /// what `tc` sends for the words `--dry-run` prints: 300 random
    /// rewrites (IPv4 and IPv6; MACs, addresses, named fields, single
    /// bytes set, set in part, added to; with and without `csum ip4h`)
    /// before `drop`, `pass` and a redirect.
    #[test]
    fn actions_are_what_tc_sends() {
        if !nfkit_kernel::is_root() {
            eprintln!("skipped: needs root (a network namespace)");
            return;
        }
        use crate::pattern::Pattern;
        use crate::rules::{Rule, RuleAction};
        use netlink_packet_route::tc::TcFilterFlowerOption as F;
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut cmds = Vec::new();
        let mut mine = Vec::new();
        for case in 0..300 {
            let v6 = case % 4 == 0;
            let rw = random_rewrite(&mut rng, v6);
            let ethertype: u16 = if v6 { 0x86dd } else { 0x0800 };
            let (action, last) = match case % 3 {
                0 => (RuleAction::Drop, "drop"),
                1 => (RuleAction::Pass, "pass"),
                _ => (RuleAction::Redirect(1), "mirred egress redirect dev lo"),
            };
            let words = rw
                .tc_actions(ethertype)
                .unwrap_or_else(|e| panic!("case {case}: {e}"));
            cmds.push(format!(
                "filter add dev lo ingress prio 1 protocol {} flower action {words}{last}",
                if v6 { "ipv6" } else { "ip" }
            ));
            let mut pattern = Pattern::any();
            for (i, b) in ethertype.to_be_bytes().iter().enumerate() {
                for bit in 0..8 {
                    pattern.set_bit(((12 + i) * 8 + bit) as u32, b >> bit & 1 == 1);
                }
            }
            pattern.min_len = 14;
            let rule = Rule {
                prio: 1,
                pattern,
                action,
                paths: Vec::new(),
                ranges: Vec::new(),
                counts: Vec::new(),
                u32_filter: false,
                rewrite: Some(rw),
            };
            let f =
                crate::flower::encode(&rule, 0, 7).unwrap_or_else(|e| panic!("case {case}: {e}"));
            let acts = f
                .options
                .iter()
                .find(|o| matches!(o, F::Actions(_)))
                .unwrap_or_else(|| panic!("case {case}: no actions"));
            let mut b = vec![0u8; acts.buffer_len()];
            acts.emit(&mut b);
            mine.push(b[4..].to_vec());
        }
        let theirs = tc_sends(&cmds);
        assert_eq!(theirs.len(), cmds.len(), "one message per command");
        for (case, (m, t)) in mine.iter().zip(&theirs).enumerate() {
            assert_eq!(m, t, "case {case}: {}", cmds[case]);
        }
    }
}
