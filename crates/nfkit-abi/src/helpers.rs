//! The kernel helper ids nfkit's own code (the header, the chain compiler,
//! the backends) relies on (`enum bpf_func_id` of linux/bpf.h).

pub const MAP_LOOKUP_ELEM: i32 = 1;
pub const MAP_UPDATE_ELEM: i32 = 2;
pub const MAP_DELETE_ELEM: i32 = 3;
pub const KTIME_GET_NS: i32 = 5;
pub const TRACE_PRINTK: i32 = 6;
pub const GET_PRANDOM_U32: i32 = 7;
pub const SKB_STORE_BYTES: i32 = 9;
pub const L3_CSUM_REPLACE: i32 = 10;
pub const L4_CSUM_REPLACE: i32 = 11;
pub const TAIL_CALL: i32 = 12;
pub const CLONE_REDIRECT: i32 = 13;
pub const REDIRECT: i32 = 23;
pub const SKB_LOAD_BYTES: i32 = 26;
pub const CSUM_DIFF: i32 = 28;
pub const XDP_ADJUST_HEAD: i32 = 44;
pub const XDP_ADJUST_META: i32 = 54;
pub const REDIRECT_MAP: i32 = 51;
pub const XDP_ADJUST_TAIL: i32 = 65;
pub const SKB_LOAD_BYTES_RELATIVE: i32 = 68;
pub const LOOP: i32 = 181;
