//! The catalogue's XDP NFs as one-NF static chains (shared by
//! `tests/chain.rs` and `benches/rtl.rs`).

/// The catalogue's XDP NFs: module, function, arguments, and whether it
/// is a verdict (returned as is) or a value (PASS when 0, else DROP).
pub const NFS: &[(&str, &str, &str, bool)] = &[
    ("base", "drop", "", true),
    ("base", "allow", "", true),
    ("base", "abort", "", true),
    ("base", "tx", "", true),
    ("base", "redirect", "3", true),
    ("firewall", "conntrack", "", false),
    ("firewall", "acl", "", false),
    ("l2", "xconnect", "", false),
    ("mark", "set_dscp", "10", false),
    ("mark", "set_ecn", "1", false),
    ("mark", "set_ttl", "32", false),
    ("meter", "tb_dst", "100, 20", false),
    ("meter", "tb_src", "100, 20", false),
    ("meter", "tb_srcdst", "20, 5", false),
    ("monitor", "count", "1", false),
    ("monitor", "flow_rate", "", false),
    ("monitor", "last_seen", "", false),
    ("parse", "ip_version", "", false),
    ("parse", "src_port", "", false),
    ("parse", "dst_port", "", false),
    ("parse", "dscp", "", false),
    ("parse", "pkt_len", "", false),
    ("route", "lpm_lookup", "", false),
    ("route", "forward", "", false),
    ("sample", "one_in", "10", false),
    ("sets", "src_set", "SET_ADD, 1000000000", false),
    ("sets", "dst_set", "SET_ADD, 1000000000", false),
    ("sets", "srcdst_set", "SET_ADD, 1000000000", false),
];

/// A one-NF chain running `func` on every packet.
pub fn nf_script(module: &str, func: &str, args: &str, verdict: bool) -> String {
    let import = if module == "sets" {
        format!("{func}, SET_ADD")
    } else {
        func.to_string()
    };
    let body = if verdict {
        format!("    return {func}({args})")
    } else {
        format!("    if {func}({args}) == 0:\n        return PASS\n    return DROP")
    };
    format!(
        "from nf.{module} import {import}\nfrom nf.classify import every_packet\n\ndef chain() -> u64:\n{body}\n\nevery_packet(chain)\nattach(\"eth0\", \"xdp\")\n"
    )
}
