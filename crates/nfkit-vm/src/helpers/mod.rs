//! Helper functions, with the kernel's numbers and semantics (return
//! values, error codes, argument checks), plus the conformance suite's
//! unwind helper.
//!
//! * [`table`]: which helpers exist per profile and program type.
//! * [`csum`]: the Internet checksum arithmetic the checksum helpers use.
//! * [`fib`]: the route table of `bpf_fib_lookup` and its text form.
//! * [`net`]: a run's network state (routes, tunnel key, perf records).
//! * [`tunnel`]: tunnel metadata (`bpf_skb_{get,set}_tunnel_key`).
//! * `skb_room`: `bpf_skb_adjust_room`, `bpf_skb_change_proto`,
//!   `bpf_skb_ecn_set_ce`, `bpf_skb_change_tail`, `bpf_skb_change_type`.
//! * `vlan`: `bpf_skb_vlan_push`, `bpf_skb_vlan_pop`.
//! * [`strings`]: `bpf_strtol`, `bpf_strtoul`, `bpf_strncmp`.

#![forbid(unsafe_code)]

pub mod csum;
pub mod fib;
pub mod net;
mod skb_room;
pub mod strings;
pub mod table;
pub mod tunnel;
mod vlan;

use crate::config::Profile;
use crate::error::RunErrorKind;
use crate::interp::{fault, Machine, Reservation, Step, Stop};
use crate::maps::{Map, Store};
use crate::mem::{self, Region, RegionKind};
use crate::result::Redirect;
use nfkit_abi::hook;
use nfkit_object::MapType;
use std::sync::Arc;
use table::id;

/// Bytes of an Ethernet header: where TC programs' network header starts.
const ETH_HLEN: usize = 14;

const EINVAL: i64 = 22;
const EFAULT: i64 = 14;
const E2BIG: i64 = 7;
const EACCES: i64 = 13;
const ENOMEM: i64 = 12;
const EAGAIN: i64 = 11;
const ENOTSUPP: i64 = 524;

// The hook return codes helpers give back (`bpf_redirect*`).
const XDP_ABORTED: u64 = hook::XDP_ABORTED as u64;
const XDP_REDIRECT: u64 = hook::XDP_REDIRECT as u64;
const TC_ACT_SHOT: u64 = hook::TC_ACT_SHOT as u64;
const TC_ACT_REDIRECT: u64 = hook::TC_ACT_REDIRECT as u64;

/// Keys up to this size are read without allocating.
const KEY_INLINE: usize = 64;

/// Map values up to this size are read into a stack buffer.
const VALUE_INLINE: usize = 256;

/// The map a program's map handle `v` names, borrowed from the VM.
#[inline(always)]
fn map_of(vm: &crate::vm::Inner, v: u64) -> Option<&Arc<Map>> {
    if (v >> mem::REGION_SHIFT) as u32 != mem::MAP_HANDLES {
        return None;
    }
    vm.maps.by_index((v & 0xffff_ffff) as usize)
}

/// A key read from program memory.
enum Key {
    Inline([u8; KEY_INLINE], usize),
    Heap(Vec<u8>),
}

impl std::ops::Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline(b, n) => &b[..(*n).min(KEY_INLINE)],
            Key::Heap(v) => v,
        }
    }
}

fn neg(e: i64) -> u64 {
    (-e) as u64
}

impl Machine {
    fn herr<T>(&self, pc: usize, helper: &str, why: impl Into<String>) -> Step<T> {
        fault(
            pc,
            RunErrorKind::Helper {
                helper: format!("bpf_{helper}"),
                why: why.into(),
            },
        )
    }

    /// The fault of a map argument `v` that is no map.
    #[cold]
    fn not_a_map<T>(&self, v: u64, pc: usize, helper: &str) -> Step<T> {
        self.herr(pc, helper, format!("{v:#x} is not a map"))
    }

    fn map_arg(&self, v: u64, pc: usize, helper: &str) -> Step<Arc<Map>> {
        if (v >> mem::REGION_SHIFT) as u32 == mem::MAP_HANDLES {
            if let Some(m) = self.vm.maps.by_index((v & 0xffff_ffff) as usize) {
                return Ok(m.clone());
            }
        }
        self.herr(pc, helper, format!("{v:#x} is not a map"))
    }

    fn read_arg(&self, addr: u64, len: usize, pc: usize, helper: &str) -> Step<Vec<u8>> {
        let mut v = vec![0u8; len];
        match self.mem.read(addr, &mut v) {
            Some(()) => Ok(v),
            None => self.herr(
                pc,
                helper,
                format!("cannot read {len} bytes at {}", self.mem.describe(addr)),
            ),
        }
    }

    /// A map key argument: read into a stack buffer when it is small (no
    /// allocation per lookup).
    fn read_key(&self, addr: u64, len: usize, pc: usize, helper: &str) -> Step<Key> {
        let mut k = Key::Inline([0; KEY_INLINE], len);
        match &mut k {
            Key::Inline(b, _) if len <= KEY_INLINE => {
                if self.mem.read(addr, &mut b[..len]).is_none() {
                    return self.read_arg(addr, len, pc, helper).map(Key::Heap);
                }
                Ok(k)
            }
            _ => self.read_arg(addr, len, pc, helper).map(Key::Heap),
        }
    }

    fn write_arg(&self, addr: u64, data: &[u8], pc: usize, helper: &str) -> Step<()> {
        match self.mem.write(addr, data) {
            Some(()) => Ok(()),
            None => self.herr(
                pc,
                helper,
                format!(
                    "cannot write {} bytes at {}",
                    data.len(),
                    self.mem.describe(addr)
                ),
            ),
        }
    }

    fn packet_buf(&self) -> Option<Arc<mem::GuardedBuf>> {
        self.mem.region(mem::PACKET).map(|r| r.buf.clone())
    }

    fn is_xdp(&self) -> bool {
        matches!(self.ctx, crate::ctx::CtxState::Xdp { .. })
    }

    /// `callx`: the helper whose id is in a register.
    pub(crate) fn helper_checked(&mut self, id: u64, cur: usize, next: usize) -> Step<usize> {
        match table::lookup(self.vm.config.profile, id as i64) {
            Some(_) => self.helper(id as i64, cur, next),
            None => fault(cur, RunErrorKind::BadCallx { value: id }),
        }
    }

    /// Checks `bpf_loop(n, callback, ctx, flags)`'s arguments: the
    /// callback's first op, or the r0 the helper returns at once
    /// (`-EINVAL` for flags, `-E2BIG` past 2^23 iterations).
    pub(crate) fn loop_args(&self, a: [u64; 4], cur: usize) -> Step<Result<usize, u64>> {
        let [n, cb_addr, _, flags] = a;
        if flags != 0 {
            return Ok(Err(neg(EINVAL)));
        }
        if n > 1 << 23 {
            return Ok(Err(neg(E2BIG)));
        }
        let cb = (cb_addr & 0xffff_ffff) as usize;
        let is_func = (cb_addr >> mem::REGION_SHIFT) as u32 == mem::FUNCS
            && self.vm.program.funcs.iter().any(|f| f.start_op == cb);
        if !is_func {
            return self.herr(cur, "loop", format!("{cb_addr:#x} is not a function"));
        }
        Ok(Ok(cb))
    }

    /// Releases a spin lock at `addr`.
    pub(crate) fn unlock(&self, addr: u64) {
        if let Some((buf, off)) = self.mem.resolve(addr, 4, true) {
            let _ = buf.store(off, 4, 0);
        }
    }

    /// Calls helper `hid` from op `cur`; returns the op to continue at.
    pub(crate) fn helper(&mut self, hid: i64, cur: usize, next: usize) -> Step<usize> {
        let [_, a1, a2, a3, a4, a5] = [
            0,
            self.regs[1],
            self.regs[2],
            self.regs[3],
            self.regs[4],
            self.regs[5],
        ];
        if self.vm.config.profile == Profile::Conformance {
            return match hid as i32 {
                id::UNWIND if a1 == 0 => Err(Stop::Exit(0)),
                id::UNWIND => {
                    self.regs[0] = a1;
                    Ok(next)
                }
                _ => fault(cur, RunErrorKind::BadCallx { value: hid as u64 }),
            };
        }
        let r0: u64 = match hid as i32 {
            id::MAP_LOOKUP_ELEM | id::MAP_LOOKUP_PERCPU_ELEM => {
                self.map_lookup(hid, a1, a2, a3, cur)?
            }
            id::MAP_UPDATE_ELEM => self.map_update(a1, a2, a3, a4, cur)?,
            id::MAP_DELETE_ELEM => self.map_delete(a1, a2, cur)?,
            id::KTIME_GET_NS
            | id::KTIME_GET_COARSE_NS
            | id::KTIME_GET_BOOT_NS
            | id::JIFFIES64
            | id::GET_PRANDOM_U32
            | id::GET_SMP_PROCESSOR_ID
            | id::GET_NUMA_NODE_ID => self.pure_helper(hid as i32).unwrap_or(0),
            id::TRACE_PRINTK => self.trace_printk(a1, a2, [a3, a4, a5], cur)?,
            id::TAIL_CALL => return self.tail_call(a1, a2, a3, cur, next),
            id::REDIRECT => self.redirect(a1, a2),
            id::CLONE_REDIRECT => self.clone_redirect(a2, a3),
            id::REDIRECT_MAP => self.redirect_map(a1, a2, a3, cur)?,
            id::XDP_ADJUST_HEAD => self.adjust_head(a2 as i32 as i64),
            id::XDP_ADJUST_META => self.adjust_meta(a2 as i32 as i64),
            id::XDP_ADJUST_TAIL => self.adjust_tail(a2 as i32 as i64),
            id::XDP_GET_BUFF_LEN => (self.pkt.data_end - self.pkt.data) as u64,
            id::XDP_LOAD_BYTES
            | id::XDP_STORE_BYTES
            | id::SKB_LOAD_BYTES
            | id::SKB_LOAD_BYTES_RELATIVE
            | id::SKB_STORE_BYTES
            | id::SKB_PULL_DATA => self.packet_bytes(hid, a2, a3, a4, a5, cur)?,
            id::GET_HASH_RECALC => match &self.ctx {
                crate::ctx::CtxState::Skb(s) => s.out.hash as u64,
                _ => 0,
            },
            id::L3_CSUM_REPLACE | id::L4_CSUM_REPLACE => {
                self.csum_replace(hid as i32 == id::L4_CSUM_REPLACE, a2, a3, a4, a5, cur)?
            }
            id::CSUM_DIFF => {
                let from = self.read_arg(a1, a2 as u32 as usize, cur, "csum_diff")?;
                let to = self.read_arg(a3, a4 as u32 as usize, cur, "csum_diff")?;
                csum::bpf_csum_diff(&from, &to, a5 as u32) as u64
            }
            id::SPIN_LOCK => self.spin_lock(a1, cur)?,
            id::SPIN_UNLOCK => {
                if self.lock_held != Some(a1) {
                    return self.herr(cur, "spin_unlock", "this lock is not held");
                }
                self.lock_held = None;
                self.unlock(a1);
                0
            }
            id::LOOP => match self.loop_args([a1, a2, a3, a4], cur)? {
                Ok(cb) => return self.start_loop(a1, cb, a3, next, cur),
                Err(r0) => r0,
            },
            id::RINGBUF_RESERVE => self.ringbuf_reserve(a1, a2, a3, cur)?,
            id::RINGBUF_SUBMIT | id::RINGBUF_DISCARD => {
                self.ringbuf_submit(a1, hid as i32 == id::RINGBUF_DISCARD, cur)?
            }
            id::RINGBUF_OUTPUT => self.ringbuf_output(a1, a2, a3, cur)?,
            id::RINGBUF_QUERY => {
                let m = self.map_arg(a1, cur, "ringbuf_query")?;
                m.ringbuf().map_or(0, |rb| rb.query(a2))
            }
            _ => match self.net_helper(hid as i32, [a1, a2, a3, a4, a5], cur) {
                Some(r) => r?,
                None => {
                    return self.herr(
                        cur,
                        nfkit_isa::helpers::helper_name(hid as i32).unwrap_or("unknown"),
                        "not implemented by the VM",
                    )
                }
            },
        };
        self.regs[0] = r0;
        Ok(next)
    }

    /// The helpers of the network around the program, of socket buffers
    /// and of strings; `None` for any other id.
    fn net_helper(&mut self, hid: i32, a: [u64; 5], cur: usize) -> Option<Step<u64>> {
        let [a1, a2, a3, a4, a5] = a;
        let r0 = match hid {
            id::PERF_EVENT_OUTPUT => return Some(self.perf_event_output(a2, a3, a4, a5, cur)),
            id::FIB_LOOKUP => return Some(self.fib_lookup(a2, a3, a4, cur)),
            id::CHECK_MTU => return Some(self.check_mtu(a2, a3, a4, a5, cur)),
            id::STRTOL | id::STRTOUL => {
                return Some(self.strtox(hid == id::STRTOL, a1, a2, a3, a4, cur))
            }
            id::STRNCMP => return Some(self.strncmp(a1, a2, a3, cur)),
            id::SKB_GET_TUNNEL_KEY => return Some(self.get_tunnel_key(a2, a3, a4, cur)),
            id::SKB_SET_TUNNEL_KEY => return Some(self.set_tunnel_key(a2, a3, a4, cur)),
            id::SKB_GET_TUNNEL_OPT => return Some(self.get_tunnel_opt(a2, a3, cur)),
            id::SKB_SET_TUNNEL_OPT => return Some(self.set_tunnel_opt(a2, a3, cur)),
            id::SKB_ADJUST_ROOM => self.skb_adjust_room(a2 as i32, a3, a4),
            id::SKB_CHANGE_PROTO => self.skb_change_proto(a2, a3),
            id::SKB_ECN_SET_CE => self.skb_ecn_set_ce(),
            id::SKB_VLAN_PUSH => self.skb_vlan_push(a2, a3),
            id::SKB_VLAN_POP => self.skb_vlan_pop(),
            id::SKB_CHANGE_TAIL => self.skb_change_tail(a2 as u32, a3),
            id::SKB_CHANGE_HEAD => self.skb_change_head(a2 as u32, a3),
            id::SKB_CHANGE_TYPE => self.skb_change_type(a2 as u32),
            id::SKB_SET_TSTAMP => self.skb_set_tstamp(a2, a3),
            id::SET_HASH | id::SET_HASH_INVALID => {
                let h = if hid == id::SET_HASH { a2 as u32 } else { 0 };
                if let crate::ctx::CtxState::Skb(s) = &mut self.ctx {
                    s.out.hash = h;
                }
                0
            }
            // The VM keeps no CHECKSUM_COMPLETE sum: as the kernel for
            // any other checksum state.
            id::CSUM_UPDATE => neg(ENOTSUPP),
            id::CSUM_LEVEL => self.csum_level(a2),
            _ => return None,
        };
        Some(Ok(r0))
    }

    /// `bpf_map_lookup_elem(map, key)` and
    /// `bpf_map_lookup_percpu_elem(map, key, cpu)`: the value's address, or 0.
    /// r0 of helper `hid` when it is one that only reads the clock, the
    /// random numbers or the CPU (no arguments, no memory, no fault):
    /// what the JIT calls without the generic helper path.
    #[inline(always)]
    pub(crate) fn pure_helper(&self, hid: i32) -> Option<u64> {
        Some(match hid {
            id::KTIME_GET_NS | id::KTIME_GET_COARSE_NS => self.clock().now_ns(),
            id::KTIME_GET_BOOT_NS => self.clock().boot_ns(),
            id::JIFFIES64 => self.clock().now_ns() / 4_000_000,
            id::GET_PRANDOM_U32 => self.rng().next_u32() as u64,
            id::GET_SMP_PROCESSOR_ID => self.cpu as u64,
            id::GET_NUMA_NODE_ID => 0,
            _ => return None,
        })
    }

    /// r0 of map helper `hid` (lookup, per-CPU lookup, update, delete)
    /// with the arguments in r1..r4, as [`Machine::helper`] gives it.
    #[inline(always)]
    pub(crate) fn map_helper(&mut self, hid: i32, cur: usize) -> Step<u64> {
        let [a1, a2, a3, a4] = [self.regs[1], self.regs[2], self.regs[3], self.regs[4]];
        match hid {
            id::MAP_UPDATE_ELEM => self.map_update(a1, a2, a3, a4, cur),
            id::MAP_DELETE_ELEM => self.map_delete(a1, a2, cur),
            _ => self.map_lookup(hid as i64, a1, a2, a3, cur),
        }
    }

    #[inline(always)]
    fn map_lookup(&mut self, hid: i64, a1: u64, a2: u64, a3: u64, cur: usize) -> Step<u64> {
        let name = "map_lookup_elem";
        // The map borrowed from the VM (no reference count per call).
        let Some(m) = map_of(&self.vm, a1) else {
            return self.not_a_map(a1, cur, name);
        };
        if hid as i32 == id::MAP_LOOKUP_ELEM {
            if let Some(v) = self.static_lookup(m, a2) {
                return Ok(v);
            }
        }
        let key = self.read_key(a2, m.spec.key_size as usize, cur, name)?;
        let cpu = if hid as i32 == id::MAP_LOOKUP_PERCPU_ELEM {
            if !matches!(
                m.spec.map_type,
                MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
            ) {
                return self.herr(cur, "map_lookup_percpu_elem", "map is not per-CPU");
            }
            a3
        } else {
            self.cpu as u64
        };
        if let Some(o) = m.outer() {
            // A map of maps gives the inner map's handle (or NULL).
            return Ok(o
                .get(&key)
                .map_or(0, |i| mem::addr(mem::MAP_HANDLES, u64::from(i))));
        }
        if cpu >= m.ncpus() as u64 && m.ncpus() > 1 {
            return Ok(0);
        }
        if let Some(s) = self.vm.statics.get(m.index).copied().flatten() {
            // Values with regions of their own (for per-CPU arrays, the
            // slots of the CPU the regions show).
            if s.ncpus == 1 || cpu == u64::from(self.mem.statics_cpu) {
                let Ok(k) = <[u8; 4]>::try_from(&key[..]).map(u32::from_le_bytes) else {
                    return Ok(0);
                };
                return Ok(s.lookup(k, cpu as u32));
            }
        }
        Ok(
            if matches!(
                *m.store,
                Store::ProgArray(_) | Store::Ringbuf(_) | Store::PerfEvents
            ) || matches!(m.spec.map_type, MapType::Cpumap | MapType::Xskmap)
            {
                // An xskmap's values are sockets the VM does not have; the
                // kernel refuses cpumap lookups from programs.
                return self.herr(cur, name, format!("map {} cannot be looked up", m.name()));
            } else {
                match (m.prog_lookup(&key, cpu as u32), m.value_buf()) {
                    // A region of exactly this value (this CPU's slot).
                    (Some(off), Some((buf, writable))) => {
                        let len = m.spec.value_size as usize;
                        self.mem.value_addr(m.index as u32, buf, off, len, writable)
                    }
                    _ => 0,
                }
            },
        )
    }

    /// `bpf_map_lookup_elem` on an array whose values have static
    /// regions (`vm::StaticValues`) on the run's own CPU, its 4-byte key
    /// readable at `key`: r0 without reading the key into a buffer or
    /// going through the map's store. `None`: the general lookup decides
    /// (and faults the same way on a key it cannot read).
    #[inline(always)]
    fn static_lookup(&self, m: &Map, key: u64) -> Option<u64> {
        let s = self.vm.statics.get(m.index).copied().flatten()?;
        if s.key_size != 4
            || (s.ncpus > 1 && (self.cpu != self.mem.statics_cpu || self.cpu >= s.ncpus))
        {
            return None;
        }
        let (buf, off) = self.mem.resolve(key, 4, false)?;
        let k = buf.load(off, 4)? as u32;
        Some(s.lookup(k, self.cpu))
    }

    /// `bpf_map_update_elem(map, key, value, flags)`: 0 or a negative errno.
    fn map_update(&mut self, a1: u64, a2: u64, a3: u64, a4: u64, cur: usize) -> Step<u64> {
        let name = "map_update_elem";
        let Some(m) = map_of(&self.vm, a1) else {
            return self.not_a_map(a1, cur, name);
        };
        if m.outer().is_some() {
            return self.herr(
                cur,
                name,
                format!("map of maps {} is read-only to programs", m.name()),
            );
        }
        let key = self.read_key(a2, m.spec.key_size as usize, cur, name)?;
        // Small values are read into a stack buffer (no allocation).
        let vs = m.spec.value_size as usize;
        let mut small = [0u8; VALUE_INLINE];
        let heap;
        let val: &[u8] = if vs <= VALUE_INLINE && self.mem.read(a3, &mut small[..vs]).is_some() {
            &small[..vs]
        } else {
            heap = self.read_arg(a3, vs, cur, name)?;
            &heap
        };
        Ok(match m.prog_update(&key, val, a4, self.cpu) {
            Ok(()) => 0,
            Err(e) => neg(e.errno()),
        })
    }

    /// `bpf_map_delete_elem(map, key)`: 0 or a negative errno.
    fn map_delete(&mut self, a1: u64, a2: u64, cur: usize) -> Step<u64> {
        let name = "map_delete_elem";
        let Some(m) = map_of(&self.vm, a1) else {
            return self.not_a_map(a1, cur, name);
        };
        if m.outer().is_some() {
            return self.herr(
                cur,
                name,
                format!("map of maps {} is read-only to programs", m.name()),
            );
        }
        let key = self.read_key(a2, m.spec.key_size as usize, cur, name)?;
        Ok(match m.delete(&key) {
            Ok(()) => 0,
            Err(e) => neg(e.errno()),
        })
    }

    /// `bpf_redirect(ifindex, flags)`: the hook's redirect code, or its
    /// drop code for bad flags.
    fn redirect(&mut self, ifindex: u64, flags: u64) -> u64 {
        let xdp = self.is_xdp();
        let bad = if xdp { flags != 0 } else { flags & !1 != 0 };
        if bad {
            return if xdp { XDP_ABORTED } else { TC_ACT_SHOT };
        }
        self.redirect = Some(Redirect::Ifindex {
            ifindex: ifindex as u32,
            flags,
        });
        if xdp {
            XDP_REDIRECT
        } else {
            TC_ACT_REDIRECT
        }
    }

    /// The helpers that copy between the packet and program memory
    /// (`bpf_xdp_load_bytes`, `bpf_xdp_store_bytes`, `bpf_skb_load_bytes`,
    /// `bpf_skb_store_bytes`, `bpf_skb_load_bytes_relative`) and
    /// `bpf_skb_pull_data`.
    fn packet_bytes(
        &mut self,
        hid: i64,
        a2: u64,
        a3: u64,
        a4: u64,
        a5: u64,
        cur: usize,
    ) -> Step<u64> {
        let (off, len) = (a2 as u32 as usize, a4 as u32 as usize);
        let avail = self.pkt.data_end - self.pkt.data;
        Ok(match hid as i32 {
            id::XDP_LOAD_BYTES | id::XDP_STORE_BYTES => {
                let store = hid as i32 == id::XDP_STORE_BYTES;
                if off > 0xffff || len > 0xffff {
                    neg(EFAULT)
                } else if off + len > avail {
                    neg(EINVAL)
                } else {
                    self.copy_packet(self.pkt.data + off, a3, len, store, cur)?;
                    0
                }
            }
            id::SKB_LOAD_BYTES => {
                if off > i32::MAX as usize || off + len > avail {
                    let zeros = vec![0u8; len];
                    self.write_arg(a3, &zeros, cur, "skb_load_bytes")?;
                    neg(EFAULT)
                } else {
                    self.copy_packet(self.pkt.data + off, a3, len, false, cur)?;
                    0
                }
            }
            // bpf_skb_load_bytes_relative(skb, off, to, len, start):
            // from the mac (0) or network (1) header; anything else, or
            // bytes outside mac header..tail, clears `to` and fails.
            id::SKB_LOAD_BYTES_RELATIVE => {
                let net = if self.mac < self.pkt.data {
                    self.pkt.data
                } else {
                    self.mac + self.net.mac_len
                };
                let base = match a5 {
                    0 => Some(self.mac),
                    1 => Some(net),
                    _ => None,
                };
                match base {
                    Some(b) if off <= 0xffff && b + off + len <= self.pkt.data_end => {
                        self.copy_packet(b + off, a3, len, false, cur)?;
                        0
                    }
                    _ => {
                        let zeros = vec![0u8; len];
                        self.write_arg(a3, &zeros, cur, "skb_load_bytes_relative")?;
                        neg(EFAULT)
                    }
                }
            }
            id::SKB_STORE_BYTES => {
                if a5 & !3 != 0 {
                    neg(EINVAL)
                } else if off > i32::MAX as usize || off + len > avail {
                    neg(EFAULT)
                } else {
                    self.copy_packet(self.pkt.data + off, a3, len, true, cur)?;
                    if a5 & 2 != 0 {
                        if let crate::ctx::CtxState::Skb(s) = &mut self.ctx {
                            s.out.hash = 0;
                        }
                    }
                    0
                }
            }
            // bpf_skb_pull_data(skb, len): the whole packet is linear.
            _ => {
                if off > avail {
                    neg(ENOMEM)
                } else {
                    0
                }
            }
        })
    }

    /// `bpf_spin_lock(lock)`: spins until the lock word goes from 0 to 1.
    fn spin_lock(&mut self, a1: u64, cur: usize) -> Step<u64> {
        if self.lock_held.is_some() {
            return self.herr(cur, "spin_lock", "a spin lock is already held");
        }
        let Some((buf, off)) = self.mem.resolve(a1, 4, true) else {
            return self.herr(
                cur,
                "spin_lock",
                format!("{a1:#x} is no lock in a map value"),
            );
        };
        let mut spins = 0u64;
        loop {
            match buf.cmpxchg(off, 4, 0, 1) {
                Some(0) => break,
                Some(_) => {
                    spins += 1;
                    if spins.is_multiple_of(64) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                None => return self.herr(cur, "spin_lock", "misaligned lock"),
            }
        }
        self.lock_held = Some(a1);
        Ok(0)
    }

    /// `bpf_ringbuf_reserve(ringbuf, size, flags)`: a new region for the
    /// record (its address), or 0.
    fn ringbuf_reserve(&mut self, a1: u64, a2: u64, a3: u64, cur: usize) -> Step<u64> {
        let m = self.map_arg(a1, cur, "ringbuf_reserve")?;
        let Some(rb) = m.ringbuf() else {
            return self.herr(cur, "ringbuf_reserve", "map is not a ring buffer");
        };
        if a3 != 0 {
            return Ok(0);
        }
        let Some(off) = rb.reserve(a2) else {
            return Ok(0);
        };
        let record = Region {
            kind: RegionKind::Mem,
            buf: rb.buf.clone(),
            name: format!("ringbuf record of {}", m.name()).into(),
            role: mem::Role::Plain,
            writable: true,
        };
        let region = self.mem.push(record, off, off + a2 as usize, true);
        self.reservations.push(Reservation {
            region,
            map: m.index,
            off,
        });
        Ok(mem::addr(region, off as u64))
    }

    /// `bpf_ringbuf_output(ringbuf, data, size, flags)`: copies a record
    /// in; 0, or `-EAGAIN` when the ring is full.
    fn ringbuf_output(&mut self, a1: u64, a2: u64, a3: u64, cur: usize) -> Step<u64> {
        let m = self.map_arg(a1, cur, "ringbuf_output")?;
        let Some(rb) = m.ringbuf() else {
            return self.herr(cur, "ringbuf_output", "map is not a ring buffer");
        };
        let data = self.read_arg(a2, a3 as u32 as usize, cur, "ringbuf_output")?;
        Ok(match rb.reserve(data.len() as u64) {
            Some(off) => {
                let _ = rb.buf.write(off, &data);
                rb.commit(off, false);
                0
            }
            None => neg(EAGAIN),
        })
    }

    /// `bpf_ringbuf_submit(data, flags)` / `bpf_ringbuf_discard`: ends the
    /// reservation at `a1`; its region becomes inaccessible.
    fn ringbuf_submit(&mut self, a1: u64, discard: bool, cur: usize) -> Step<u64> {
        let region = (a1 >> mem::REGION_SHIFT) as u32;
        let off = (a1 & 0xffff_ffff) as usize;
        let Some(pos) = self
            .reservations
            .iter()
            .position(|r| r.region == region && r.off == off)
        else {
            return self.herr(
                cur,
                "ringbuf_submit",
                format!("{a1:#x} is no live reservation"),
            );
        };
        let r = self.reservations.swap_remove(pos);
        if let Some(rb) = self.vm.maps.by_index(r.map).and_then(|m| m.ringbuf()) {
            rb.commit(r.off, discard);
        }
        self.mem.retire(region);
        Ok(0)
    }

    fn copy_packet(
        &mut self,
        pkt_off: usize,
        addr: u64,
        len: usize,
        to_packet: bool,
        pc: usize,
    ) -> Step<()> {
        let Some(buf) = self.packet_buf() else {
            return self.herr(pc, "load_bytes", "no packet");
        };
        let mut tmp = vec![0u8; len];
        if to_packet {
            let data = self.read_arg(addr, len, pc, "store_bytes")?;
            let _ = buf.write(pkt_off, &data);
        } else {
            let _ = buf.read(pkt_off, &mut tmp);
            self.write_arg(addr, &tmp, pc, "load_bytes")?;
        }
        Ok(())
    }

    fn tail_call(
        &mut self,
        ctx: u64,
        map: u64,
        index: u64,
        cur: usize,
        next: usize,
    ) -> Step<usize> {
        // The next program starts with this argument in r1: it must be
        // the context, as the kernel's verifier requires.
        if ctx != mem::addr(mem::CTX, 0) {
            return self.herr(
                cur,
                "tail_call",
                format!("{ctx:#x} is not the context (the first argument must be)"),
            );
        }
        let m = self.map_arg(map, cur, "tail_call")?;
        let Some(pa) = m.prog_array() else {
            return self.herr(
                cur,
                "tail_call",
                format!("map {} is not a prog array", m.name()),
            );
        };
        if self.tail_calls >= self.vm.config.max_tail_calls {
            return Ok(next);
        }
        // A refused entry was never loaded: its slot is empty.
        let Some(e) = pa
            .get(index as u32)
            .and_then(|e| self.vm.entries.get(e))
            .filter(|e| e.refused.is_none())
        else {
            return Ok(next);
        };
        // The kernel keeps programs of other types out of a prog array:
        // the slot reads as empty.
        if e.prog_type != self.prog_type && e.prog_type != nfkit_object::ProgType::Unspec {
            return Ok(next);
        }
        self.tail_calls += 1;
        self.may_goto = self.vm.config.may_goto_budget;
        Ok(e.start_op)
    }

    /// `bpf_redirect_map(map, key, flags)` as the kernel's
    /// `__bpf_xdp_redirect_map`: the low two flag bits are the verdict
    /// when `key` has no entry; `BPF_F_BROADCAST` and
    /// `BPF_F_EXCLUDE_INGRESS` only for devmaps; any other flag aborts.
    fn redirect_map(&mut self, map: u64, key: u64, flags: u64, cur: usize) -> Step<u64> {
        const ACTIONS: u64 = 3;
        const BROADCAST: u64 = 1 << 3;
        const EXCLUDE_INGRESS: u64 = 1 << 4;
        let m = self.map_arg(map, cur, "redirect_map")?;
        if !m.is_redirect_map() {
            return self.herr(
                cur,
                "redirect_map",
                format!(
                    "map {} of type {} is not a devmap, cpumap or xskmap",
                    m.name(),
                    m.spec.map_type.name()
                ),
            );
        }
        let devmap = matches!(m.spec.map_type, MapType::Devmap | MapType::DevmapHash);
        let allowed = if devmap {
            ACTIONS | BROADCAST | EXCLUDE_INGRESS
        } else {
            ACTIONS
        };
        if flags & !allowed != 0 {
            return Ok(XDP_ABORTED);
        }
        if flags & BROADCAST != 0 {
            self.redirect = Some(Redirect::Broadcast {
                map: m.index,
                exclude_ingress: flags & EXCLUDE_INGRESS != 0,
            });
            return Ok(XDP_REDIRECT);
        }
        // The kernel's lookups take the key as a u32.
        let k = key as u32;
        let Ok(Some(value)) = m.lookup(&k.to_le_bytes()) else {
            return Ok(flags & ACTIONS);
        };
        self.redirect = Some(match m.spec.map_type {
            MapType::Cpumap => Redirect::Cpu {
                map: m.index,
                cpu: k,
            },
            MapType::Xskmap => Redirect::Xsk {
                map: m.index,
                key: k,
            },
            _ => Redirect::Map {
                map: m.index,
                key: k,
                ifindex: value
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            },
        });
        Ok(XDP_REDIRECT)
    }

    fn adjust_head(&mut self, delta: i64) -> u64 {
        let p = self.pkt;
        let metalen = p.data - p.meta;
        let data = p.data as i64 + delta;
        if data < (self.pkt_min + metalen) as i64
            || data > p.data_end as i64 - crate::ctx::ETH_HLEN as i64
        {
            return neg(EINVAL);
        }
        let data = data as usize;
        let meta = (p.meta as i64 + delta) as usize;
        if metalen > 0 {
            if let Some(buf) = self.packet_buf() {
                let _ = buf.copy_within(p.meta, meta, metalen);
            }
        }
        self.pkt.meta = meta;
        self.pkt.data = data;
        self.sync_packet_region();
        0
    }

    fn adjust_meta(&mut self, delta: i64) -> u64 {
        let p = self.pkt;
        let meta = p.meta as i64 + delta;
        if meta < self.pkt_min as i64 || meta > p.data as i64 {
            return neg(EINVAL);
        }
        let metalen = p.data - meta as usize;
        if !metalen.is_multiple_of(4) || metalen > 32 {
            return neg(EACCES);
        }
        self.pkt.meta = meta as usize;
        self.sync_packet_region();
        0
    }

    fn adjust_tail(&mut self, delta: i64) -> u64 {
        let p = self.pkt;
        let end = p.data_end as i64 + delta;
        if end > self.pkt_max as i64 || end < (p.data + crate::ctx::ETH_HLEN) as i64 {
            return neg(EINVAL);
        }
        if delta > 0 {
            if let Some(buf) = self.packet_buf() {
                let _ = buf.fill(p.data_end, delta as usize, 0);
            }
        }
        self.pkt.data_end = end as usize;
        self.sync_packet_region();
        0
    }

    fn csum_replace(
        &mut self,
        l4: bool,
        off: u64,
        from: u64,
        to: u64,
        flags: u64,
        cur: usize,
    ) -> Step<u64> {
        const PSEUDO: u64 = 0x10;
        const MANGLED0: u64 = 0x20;
        const ENFORCE: u64 = 0x40;
        const IPV6: u64 = 0x80;
        let allowed = if l4 {
            0xf | PSEUDO | MANGLED0 | ENFORCE | IPV6
        } else {
            0xf
        };
        if flags & !allowed != 0 {
            return Ok(neg(EINVAL));
        }
        let off = off as u32 as usize;
        if off > 0xffff || off & 1 != 0 || off + 2 > self.pkt.data_end - self.pkt.data {
            return Ok(neg(EFAULT));
        }
        let Some(buf) = self.packet_buf() else {
            return self.herr(cur, "csum_replace", "no packet");
        };
        let at = self.pkt.data + off;
        let mut b = [0u8; 2];
        let _ = buf.read(at, &mut b);
        let sum = u16::from_le_bytes(b);
        let mmzero = l4 && flags & MANGLED0 != 0;
        if mmzero && flags & ENFORCE == 0 && sum == 0 {
            return Ok(0);
        }
        let new = match flags & 0xf {
            0 => {
                if from != 0 {
                    return Ok(neg(EINVAL));
                }
                csum::replace_by_diff(sum, to as u32)
            }
            2 => csum::replace4(sum, from as u16 as u32, to as u16 as u32),
            4 => csum::replace4(sum, from as u32, to as u32),
            _ => return Ok(neg(EINVAL)),
        };
        let new = if mmzero && new == 0 { 0xffff } else { new };
        let _ = buf.write(at, &new.to_le_bytes());
        Ok(0)
    }

    fn trace_printk(&mut self, fmt: u64, size: u64, args: [u64; 3], cur: usize) -> Step<u64> {
        let size = size as u32 as usize;
        if size == 0 {
            return Ok(neg(EINVAL));
        }
        let f = self.read_arg(fmt, size, cur, "trace_printk")?;
        if f.last() != Some(&0) {
            return Ok(neg(EINVAL));
        }
        let f = &f[..f.len() - 1];
        let text = self.format(f, &args);
        let n = text.len() as u64;
        self.printk.push(text);
        Ok(n)
    }

    /// The subset of `printf` that `bpf_trace_printk` supports.
    fn format(&self, f: &[u8], args: &[u64; 3]) -> String {
        let mut out = String::new();
        let mut next = 0usize;
        let mut i = 0;
        let end = f.iter().position(|&c| c == 0).unwrap_or(f.len());
        let f = &f[..end];
        while i < f.len() {
            let c = f[i];
            i += 1;
            if c != b'%' {
                out.push(c as char);
                continue;
            }
            if f.get(i) == Some(&b'%') {
                out.push('%');
                i += 1;
                continue;
            }
            let mut longs = 0;
            while f.get(i) == Some(&b'l') {
                longs += 1;
                i += 1;
            }
            let conv = f.get(i).copied().unwrap_or(b'?');
            i += 1;
            let arg = args.get(next).copied().unwrap_or(0);
            next += 1;
            let v = if longs == 0 { arg as u32 as u64 } else { arg };
            match conv {
                b'd' | b'i' => {
                    if longs == 0 {
                        out.push_str(&(v as u32 as i32).to_string())
                    } else {
                        out.push_str(&(v as i64).to_string())
                    }
                }
                b'u' => out.push_str(&v.to_string()),
                b'x' => out.push_str(&format!("{v:x}")),
                b'X' => out.push_str(&format!("{v:X}")),
                b'p' => out.push_str(&format!("{arg:#x}")),
                b'c' => out.push(arg as u8 as char),
                b's' => {
                    let mut s = Vec::new();
                    for k in 0..256u64 {
                        let mut b = [0u8; 1];
                        if self.mem.read(arg.wrapping_add(k), &mut b).is_none() || b[0] == 0 {
                            break;
                        }
                        s.push(b[0]);
                    }
                    out.push_str(&String::from_utf8_lossy(&s));
                }
                other => {
                    out.push('%');
                    out.push(other as char);
                }
            }
        }
        out
    }

    /// `bpf_strtol` / `bpf_strtoul(buf, len, flags, res)`: `*res` is set
    /// (to 0 on failure) as the kernel does.
    fn strtox(
        &mut self,
        signed: bool,
        buf: u64,
        len: u64,
        flags: u64,
        res: u64,
        cur: usize,
    ) -> Step<u64> {
        let name = if signed { "strtol" } else { "strtoul" };
        if len > 4096 {
            return self.herr(cur, name, format!("buffer length {len}"));
        }
        let text = self.read_arg(buf, len as usize, cur, name)?;
        let (rc, v) = if signed {
            let (rc, v) = strings::strtol(&text, flags);
            (rc, v.map(|x| x as u64))
        } else {
            strings::strtoul(&text, flags)
        };
        self.write_arg(res, &v.unwrap_or(0).to_le_bytes(), cur, name)?;
        Ok(rc as u64)
    }

    /// `bpf_strncmp(s1, s1_sz, s2)`: `s2` is read up to its NUL.
    fn strncmp(&mut self, s1: u64, n: u64, s2: u64, cur: usize) -> Step<u64> {
        if n > 4096 {
            return self.herr(cur, "strncmp", format!("size {n}"));
        }
        let a = self.read_arg(s1, n as usize, cur, "strncmp")?;
        let mut b = Vec::with_capacity(a.len());
        for i in 0..a.len() as u64 {
            let mut c = [0u8; 1];
            if self.mem.read(s2.wrapping_add(i), &mut c).is_none() {
                return self.herr(
                    cur,
                    "strncmp",
                    format!("cannot read the string at {}", self.mem.describe(s2)),
                );
            }
            b.push(c[0]);
            if c[0] == 0 {
                break;
            }
        }
        Ok(strings::strncmp(&a, &b) as u64)
    }

    /// Drops reservations a run left behind; true if there were any.
    #[inline(always)]
    pub(crate) fn drop_reservations(&mut self) -> bool {
        !self.reservations.is_empty() && self.drop_reservations_slow()
    }

    #[cold]
    fn drop_reservations_slow(&mut self) -> bool {
        let vm = &self.vm;
        for r in self.reservations.drain(..) {
            if let Some(rb) = vm.maps.by_index(r.map).and_then(|m| m.ringbuf()) {
                rb.commit(r.off, true);
            }
        }
        true
    }
}
