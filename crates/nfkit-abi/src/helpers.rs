//! Kernel helper ids (`enum bpf_func_id` of linux/bpf.h) that nfkit's
//! own code uses: the header, the chain compiler, the VM's helper table,
//! the backends.

pub const MAP_LOOKUP_ELEM: i32 = 1;
pub const MAP_UPDATE_ELEM: i32 = 2;
pub const MAP_DELETE_ELEM: i32 = 3;
pub const KTIME_GET_NS: i32 = 5;
pub const TRACE_PRINTK: i32 = 6;
pub const GET_PRANDOM_U32: i32 = 7;
pub const GET_SMP_PROCESSOR_ID: i32 = 8;
pub const SKB_STORE_BYTES: i32 = 9;
pub const L3_CSUM_REPLACE: i32 = 10;
pub const L4_CSUM_REPLACE: i32 = 11;
pub const TAIL_CALL: i32 = 12;
pub const CLONE_REDIRECT: i32 = 13;
pub const REDIRECT: i32 = 23;
pub const SKB_LOAD_BYTES: i32 = 26;
pub const CSUM_DIFF: i32 = 28;
pub const GET_HASH_RECALC: i32 = 34;
pub const SKB_PULL_DATA: i32 = 39;
pub const GET_NUMA_NODE_ID: i32 = 42;
pub const XDP_ADJUST_HEAD: i32 = 44;
pub const REDIRECT_MAP: i32 = 51;
pub const XDP_ADJUST_META: i32 = 54;
pub const XDP_ADJUST_TAIL: i32 = 65;
pub const SKB_LOAD_BYTES_RELATIVE: i32 = 68;
pub const SPIN_LOCK: i32 = 93;
pub const SPIN_UNLOCK: i32 = 94;
pub const JIFFIES64: i32 = 118;
pub const KTIME_GET_BOOT_NS: i32 = 125;
pub const RINGBUF_OUTPUT: i32 = 130;
pub const RINGBUF_RESERVE: i32 = 131;
pub const RINGBUF_SUBMIT: i32 = 132;
pub const RINGBUF_DISCARD: i32 = 133;
pub const RINGBUF_QUERY: i32 = 134;
pub const KTIME_GET_COARSE_NS: i32 = 160;
pub const LOOP: i32 = 181;
pub const XDP_GET_BUFF_LEN: i32 = 188;
pub const XDP_LOAD_BYTES: i32 = 189;
pub const XDP_STORE_BYTES: i32 = 190;
pub const MAP_LOOKUP_PERCPU_ELEM: i32 = 195;
