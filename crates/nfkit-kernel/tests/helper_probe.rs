//! Which helpers this kernel lets XDP, TC (sched_cls / sched_act) and
//! socket filter programs call, probed one program per (type, helper) by
//! `nfkit_kernel::probe` (`bpftool feature probe` is not used: it reports
//! the same list for all these types), checked against the VM:
//!
//! * every helper the VM lets a program type call, the kernel lets it
//!   call too;
//! * the helper table of `docs/vm.md` lists every helper the kernel
//!   allows any of these types, and says for each whether the VM has it
//!   as the VM's own table does.
//!
//! `NFKIT_WRITE_HELPER_TABLE=1 cargo test -p nfkit-kernel --test
//! helper_probe` rewrites that table from the probe (between its
//! `helper-table` markers).

use nfkit_kernel::probe::allowed_helpers;
use nfkit_object::ProgType;
use nfkit_vm::helpers::table::KERNEL_HELPERS;
use std::collections::BTreeMap;
use std::path::PathBuf;

const TYPES: [ProgType; 4] = [
    ProgType::Xdp,
    ProgType::SchedCls,
    ProgType::SchedAct,
    ProgType::SocketFilter,
];

const BEGIN: &str = "<!-- helper-table:begin -->";
const END: &str = "<!-- helper-table:end -->";

/// Helper id -> which of [`TYPES`] the kernel lets call it.
fn probe() -> BTreeMap<i32, [bool; 4]> {
    let mut out: BTreeMap<i32, [bool; 4]> = BTreeMap::new();
    for (i, t) in TYPES.iter().enumerate() {
        for id in allowed_helpers(*t) {
            out.entry(id).or_default()[i] = true;
        }
    }
    out
}

fn vm_allows(id: i32, t: ProgType) -> bool {
    KERNEL_HELPERS
        .iter()
        .any(|h| h.id == id && h.avail.allows(t))
}

fn name(id: i32) -> String {
    nfkit_isa::helpers::helper_name(id)
        .map(str::to_string)
        .unwrap_or_else(|| format!("helper #{id}"))
}

/// Why the VM does not offer helper `name`.
fn why_not(name: &str) -> &'static str {
    const SOCKET: &[&str] = &[
        "get_socket_cookie",
        "get_socket_uid",
        "get_listener_sock",
        "sk_assign",
        "sk_fullsock",
        "tcp_sock",
        "sk_release",
        "get_netns_cookie",
    ];
    const TRACING: &[&str] = &[
        "get_current_pid_tgid",
        "get_current_uid_gid",
        "get_current_comm",
        "get_current_task",
        "get_current_task_btf",
        "current_task_under_cgroup",
        "get_ns_current_pid_tgid",
        "send_signal",
        "send_signal_thread",
        "get_task_stack",
        "copy_from_user",
        "copy_from_user_task",
        "task_pt_regs",
        "find_vma",
        "get_branch_snapshot",
        "perf_event_read",
        "perf_event_read_value",
        "snprintf_btf",
        "per_cpu_ptr",
        "this_cpu_ptr",
    ];
    const CGROUP: &[&str] = &[
        "get_cgroup_classid",
        "skb_cgroup_id",
        "skb_ancestor_cgroup_id",
        "skb_under_cgroup",
        "skb_cgroup_classid",
        "get_current_cgroup_id",
        "get_current_ancestor_cgroup_id",
    ];
    const DEVICES: &[&str] = &[
        "clone_redirect",
        "redirect_neigh",
        "redirect_peer",
        "get_route_realm",
        "skb_get_xfrm_state",
        "check_mtu",
    ];
    let starts = |p: &[&str]| p.iter().any(|x| name.starts_with(x));
    if SOCKET.contains(&name) || starts(&["sk_", "skc_", "sk_storage"]) {
        "needs a socket (the VM has none)"
    } else if name.contains("syncookie") {
        "needs the kernel's SYN cookie secrets"
    } else if TRACING.contains(&name) || starts(&["probe_read", "task_storage"]) {
        "tracing: reads the current task or kernel memory"
    } else if CGROUP.contains(&name) || name.starts_with("cgrp_storage") {
        "needs cgroups"
    } else if DEVICES.contains(&name) {
        "needs kernel network state (devices, neighbours, xfrm, route realms)"
    } else if starts(&[
        "timer_",
        "dynptr",
        "ringbuf_reserve_dynptr",
        "ringbuf_submit_dynptr",
    ]) || starts(&["ringbuf_discard_dynptr", "user_ringbuf"])
    {
        "needs kernel objects the VM does not model (timers, dynptrs, user ring buffers)"
    } else if starts(&["map_push", "map_pop", "map_peek"]) {
        "queue and stack maps are not in the VM"
    } else {
        "not implemented yet"
    }
}

/// The markdown table of every helper the kernel allows one of the types.
fn table(probed: &BTreeMap<i32, [bool; 4]>) -> String {
    let mut s = String::from(
        "| id | helper | XDP | TC | socket | VM | why not |\n|---:|---|:-:|:-:|:-:|:-:|---|\n",
    );
    let mark = |b: bool| if b { "yes" } else { "-" };
    for (&id, a) in probed {
        let n = name(id);
        let tc = match (a[1], a[2]) {
            (true, true) => "yes",
            (true, false) => "cls",
            (false, true) => "act",
            _ => "-",
        };
        let kernel: Vec<ProgType> = (0..4).filter(|&i| a[i]).map(|i| TYPES[i]).collect();
        let vm_n = kernel.iter().filter(|&&t| vm_allows(id, t)).count();
        let (vm, why) = match vm_n {
            0 => ("no", why_not(&n)),
            n if n == kernel.len() => ("yes", ""),
            _ => ("some", "not for every type the kernel allows"),
        };
        s += &format!(
            "| {id} | `{n}` | {} | {tc} | {} | {vm} | {why} |\n",
            mark(a[0]),
            mark(a[3])
        );
    }
    s
}

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/vm.md")
}

#[test]
fn the_vm_allows_only_helpers_the_kernel_allows() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let probed = probe();
    assert!(
        probed.len() > 80,
        "the probe found only {} helpers",
        probed.len()
    );
    let mut wrong = Vec::new();
    for h in KERNEL_HELPERS {
        for (i, t) in TYPES.iter().enumerate() {
            let kernel = probed.get(&h.id).is_some_and(|a| a[i]);
            if h.avail.allows(*t) && !kernel {
                wrong.push(format!("{} ({}) for {t:?}", h.name, h.id));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the VM allows what the kernel refuses: {}",
        wrong.join(", ")
    );
    let n = |i: usize| probed.values().filter(|a| a[i]).count();
    let vm = |i: usize| probed.keys().filter(|&&id| vm_allows(id, TYPES[i])).count();
    println!(
        "kernel / VM helpers: XDP {}/{}, sched_cls {}/{}, sched_act {}/{}, socket {}/{}",
        n(0),
        vm(0),
        n(1),
        vm(1),
        n(2),
        vm(2),
        n(3),
        vm(3)
    );
}

#[test]
fn the_doc_table_lists_every_kernel_helper() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let probed = probe();
    let doc = std::fs::read_to_string(doc_path()).expect("docs/vm.md");
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/vm.md has no {BEGIN} ... {END} section");
    };
    if std::env::var_os("NFKIT_WRITE_HELPER_TABLE").is_some() {
        let new = format!("{}{BEGIN}\n{}{}", &doc[..b], table(&probed), &doc[e..]);
        std::fs::write(doc_path(), new).expect("write docs/vm.md");
        return;
    }
    let section = &doc[b..e];
    // id -> the row's VM column.
    let rows: BTreeMap<i32, String> = section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let id = cells.get(1)?.parse().ok()?;
            Some((id, cells.get(6)?.to_string()))
        })
        .collect();
    let mut wrong = Vec::new();
    for (&id, a) in &probed {
        let kernel: Vec<ProgType> = (0..4).filter(|&i| a[i]).map(|i| TYPES[i]).collect();
        let vm_all = kernel.iter().all(|&t| vm_allows(id, t));
        let vm_none = !kernel.iter().any(|&t| vm_allows(id, t));
        let want = if vm_all {
            "yes"
        } else if vm_none {
            "no"
        } else {
            "some"
        };
        match rows.get(&id) {
            None => wrong.push(format!("{} ({id}) is missing", name(id))),
            Some(v) if v != want => wrong.push(format!(
                "{} ({id}): table says VM {v}, the VM has {want}",
                name(id)
            )),
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/vm.md helper table (regenerate with NFKIT_WRITE_HELPER_TABLE=1): {}",
        wrong.join("; ")
    );
}
