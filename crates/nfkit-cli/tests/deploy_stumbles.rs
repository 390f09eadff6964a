//! What a new user stumbled over when deploying: the script's own attach
//! point, the native-XDP-on-veth trap, an interface in another network
//! namespace, empty lists in `status`. Needs root; skipped otherwise.
//! Namespaces, veths and the private bpffs mount are removed by RAII
//! guards even when an assertion fails.

mod common;
use common::{examples, is_root, json, nfkit, nfkit_cmd, nfkit_ok, output, Pair, Scratch};

/// `examples/port_stats.py` with its `attach(...)` line replaced.
fn script_with_attach(s: &Scratch, dev: &str, hook: &str) -> String {
    let text = std::fs::read_to_string(examples().join("port_stats.py")).expect("read example");
    let text = text.replace(
        "attach(\"eth0\", \"xdp\")",
        &format!("attach(\"{dev}\", \"{hook}\")"),
    );
    assert!(text.contains(hook), "the example has an attach line");
    let path = s.state().join(format!("port_stats_{hook}.py"));
    std::fs::create_dir_all(s.state()).expect("state dir");
    std::fs::write(&path, text).expect("write script");
    path.display().to_string()
}

#[test]
fn the_scripts_attach_point_is_used() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("stumble-attach");
    let Pair {
        sut,
        peer: _peer,
        veth,
    } = Pair::new("st-sut", "st-peer", "198.18.21");
    let dev = veth.a.dev.as_str();
    let script = script_with_attach(&s, dev, "xdp-generic");
    // No --dev, no --hook: both come from attach(dev, "xdp-generic").
    let (ok, out, err) = nfkit(&sut, &s, &["deploy", &script, "--json"]);
    assert!(ok, "{out}\n{err}");
    let d = json(&out);
    assert_eq!(d["deployment"]["hook"], "xdp-generic", "{d}");
    assert_eq!(d["deployment"]["dev"], dev, "{d}");
    assert!(
        !err.contains("native XDP"),
        "no warning in generic mode: {err}"
    );
    let shown = sut
        .ip(&["-d", "link", "show", "dev", dev])
        .expect("ip link");
    assert!(
        shown.contains("xdpgeneric"),
        "attached in generic mode: {shown}"
    );
    let st = json(&nfkit_ok(&sut, &s, &["status", "--json"]));
    assert_eq!(st["deployments"][0]["hook"], "xdp-generic", "{st}");
    nfkit_ok(&sut, &s, &["undeploy"]);
}

#[test]
fn native_xdp_on_a_veth_warns() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("stumble-native");
    let Pair {
        sut,
        peer: _peer,
        veth,
    } = Pair::new("sn-sut", "sn-peer", "198.18.22");
    let dev = veth.a.dev.as_str();
    let script = examples().join("ddos.py").display().to_string();
    let (ok, out, err) = nfkit(
        &sut,
        &s,
        &["deploy", &script, "--dev", dev, "--hook", "xdp"],
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        err.contains("warning: native XDP on veth") && err.contains("xdp-generic"),
        "{err}"
    );
    assert!(err.contains("REDIRECT or TX"), "{err}");
    nfkit_ok(&sut, &s, &["undeploy"]);
    let (ok, out, err) = nfkit(
        &sut,
        &s,
        &["deploy", &script, "--dev", dev, "--hook", "xdp-generic"],
    );
    assert!(ok, "{out}\n{err}");
    assert!(!err.contains("native XDP"), "{err}");
    nfkit_ok(&sut, &s, &["undeploy"]);
}

#[test]
fn an_interface_in_another_namespace_suggests_netns() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("stumble-netns");
    let Pair {
        sut,
        peer: _peer,
        veth,
    } = Pair::new("sx-sut", "sx-peer", "198.18.23");
    let dev = veth.a.dev.as_str();
    let script = examples().join("port_stats.py").display().to_string();
    // From the host: the veth is in `sut`, not here.
    let (ok, out, err) = output(
        nfkit_cmd(None, &s),
        &["deploy", &script, "--dev", dev, "--hook", "xdp-generic"],
    );
    assert!(!ok, "{out}");
    assert!(
        err.contains(&format!("no interface `{dev}` in this network namespace")),
        "{err}"
    );
    assert!(err.contains(&format!("--netns {}", sut.name())), "{err}");
    assert!(!err.contains("os error"), "one clear message: {err}");
}

#[test]
fn status_omits_empty_nf_lists() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let s = Scratch::new("stumble-status");
    let Pair {
        sut,
        peer: _peer,
        veth,
    } = Pair::new("ss-sut", "ss-peer", "198.18.24");
    let dev = veth.a.dev.as_str();
    // port_stats calls no NF: its dynamic deployment keeps none loaded.
    let script = examples().join("port_stats.py").display().to_string();
    let args = ["deploy", &script, "--dev", dev, "--hook", "xdp-generic"];
    let out = nfkit_ok(&sut, &s, &[&args[..], &["--mode", "dynamic"]].concat());
    assert!(!out.contains("NFs:"), "{out}");
    let st = nfkit_ok(&sut, &s, &["status"]);
    assert!(st.contains("segments"), "a dynamic deployment: {st}");
    assert!(!st.contains("NFs:"), "{st}");
    nfkit_ok(&sut, &s, &["undeploy"]);
}
