//! `nfkit graph`: the DOT of examples/ddos.py and of a dispatching
//! script, parsed (statements, quoted ids, attribute lists, clusters):
//! the classifier, chains, NFs and maps are nodes, the entries, calls
//! and map accesses are edges, every edge's ends are nodes. With
//! Graphviz installed, `dot` accepts it and `--format svg` writes SVG;
//! without, `--format svg` fails with a clear error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const NFKIT: &str = env!("CARGO_BIN_EXE_nfkit");

/// A parsed DOT graph: node id → attributes, (from, to) → attributes,
/// cluster labels.
#[derive(Debug, Default)]
struct Graph {
    nodes: BTreeMap<String, BTreeMap<String, String>>,
    edges: BTreeMap<(String, String), BTreeMap<String, String>>,
    clusters: Vec<String>,
}

#[derive(Debug, PartialEq)]
enum Tok {
    Id(String),
    Punct(char),
    Arrow,
}

fn lex(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut cs = text.chars().peekable();
    while let Some(c) = cs.next() {
        match c {
            '/' if cs.peek() == Some(&'/') => {
                for c in cs.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match cs.next().expect("unterminated string") {
                        '\\' => match cs.next().expect("escape") {
                            'n' => s.push('\n'),
                            c => s.push(c),
                        },
                        '"' => break,
                        c => s.push(c),
                    }
                }
                out.push(Tok::Id(s));
            }
            '-' if cs.peek() == Some(&'>') => {
                cs.next();
                out.push(Tok::Arrow);
            }
            '{' | '}' | '[' | ']' | ';' | ',' | '=' => out.push(Tok::Punct(c)),
            c if c.is_whitespace() => {}
            c if c.is_alphanumeric() || c == '_' || c == '#' => {
                let mut s = String::from(c);
                while let Some(&n) = cs.peek() {
                    if n.is_alphanumeric() || n == '_' || n == '.' {
                        s.push(n);
                        cs.next();
                    } else {
                        break;
                    }
                }
                out.push(Tok::Id(s));
            }
            c => panic!("unexpected {c:?} in DOT"),
        }
    }
    out
}

fn id(t: &[Tok], i: &mut usize) -> String {
    match &t[*i] {
        Tok::Id(s) => {
            *i += 1;
            s.clone()
        }
        x => panic!("expected an id at {i}, got {x:?}"),
    }
}

fn attrs(t: &[Tok], i: &mut usize) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if t.get(*i) != Some(&Tok::Punct('[')) {
        return m;
    }
    *i += 1;
    while t[*i] != Tok::Punct(']') {
        let k = id(t, i);
        assert_eq!(t[*i], Tok::Punct('='));
        *i += 1;
        m.insert(k, id(t, i));
        if t[*i] == Tok::Punct(',') {
            *i += 1;
        }
    }
    *i += 1;
    m
}

/// Parses the subset of DOT that `nfkit graph` writes (and fails on
/// anything else): `digraph N { stmt* }`, stmts being `a=b;`,
/// `node|edge [..];`, `"id" [..];`, `"a" -> "b" [..];` and
/// `subgraph cluster_N { label=...; stmt* }`.
fn parse(text: &str) -> Graph {
    let t = lex(text);
    let mut g = Graph::default();
    assert_eq!(t[0], Tok::Id("digraph".into()));
    let mut i = 2;
    assert_eq!(t[i], Tok::Punct('{'));
    i += 1;
    let mut depth = 1;
    while depth > 0 {
        match &t[i] {
            Tok::Punct('}') => {
                depth -= 1;
                i += 1;
            }
            Tok::Id(s) if s == "subgraph" => {
                i += 1;
                let name = id(&t, &mut i);
                assert!(name.starts_with("cluster_"));
                assert_eq!(t[i], Tok::Punct('{'));
                i += 1;
                depth += 1;
            }
            Tok::Id(s) if (s == "node" || s == "edge") && t[i + 1] == Tok::Punct('[') => {
                i += 1;
                attrs(&t, &mut i);
                assert_eq!(t[i], Tok::Punct(';'));
                i += 1;
            }
            Tok::Id(_) => {
                let a = id(&t, &mut i);
                match &t[i] {
                    Tok::Punct('=') => {
                        i += 1;
                        let v = id(&t, &mut i);
                        if a == "label" && depth > 1 {
                            g.clusters.push(v);
                        }
                    }
                    Tok::Arrow => {
                        i += 1;
                        let b = id(&t, &mut i);
                        let at = attrs(&t, &mut i);
                        assert!(g.edges.insert((a, b), at).is_none(), "edge twice");
                    }
                    _ => {
                        let at = attrs(&t, &mut i);
                        assert!(g.nodes.insert(a, at).is_none(), "node twice");
                    }
                }
                assert_eq!(t[i], Tok::Punct(';'), "at token {i}");
                i += 1;
            }
            x => panic!("unexpected {x:?} at {i}"),
        }
    }
    assert_eq!(i, t.len(), "text after the graph");
    for (a, b) in g.edges.keys() {
        assert!(
            g.nodes.contains_key(a) && g.nodes.contains_key(b),
            "edge {a} -> {b} to an undeclared node"
        );
    }
    g
}

fn nfkit(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(NFKIT)
        .args(args)
        .env_remove("NFKIT_NF_PATH")
        .output()
        .expect("run nfkit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn label<'a>(g: &'a Graph, a: &str, b: &str) -> &'a str {
    g.edges
        .get(&(a.to_string(), b.to_string()))
        .unwrap_or_else(|| panic!("no edge {a} -> {b} in {:#?}", g.edges.keys()))
        .get("label")
        .map_or("", String::as_str)
}

#[test]
fn the_ddos_example_graph_has_its_classifier_chain_nfs_and_maps() {
    let (code, dot, err) = nfkit(&["graph", &example("ddos.py")]);
    assert_eq!(code, 0, "{err}");
    let g = parse(&dot);
    let cls = "classifier:every_packet";
    assert_eq!(g.nodes[cls]["shape"], "diamond");
    assert_eq!(label(&g, cls, "chain:mitigate"), "every packet");
    assert!(label(&g, cls, "default").contains("otherwise"));
    assert_eq!(g.nodes["default"]["label"], "unclaimed: PASS\nfault: DROP");
    for nf in [
        "nf.meter.tb_dst",
        "nf.meter.tb_srcdst",
        "nf.sets.src_set",
        "nf.sample.one_in",
    ] {
        let id = format!("nf:{nf}");
        assert_eq!(g.nodes[&id]["shape"], "component", "{id}");
        assert_eq!(label(&g, "chain:mitigate", &id), "calls");
    }
    // counters[...] += 1: written; the NFs' own maps, from their docs.
    assert_eq!(label(&g, "chain:mitigate", "map:counters"), "writes");
    assert!(g.nodes["map:counters"]["label"].contains("PercpuArray"));
    assert_eq!(label(&g, "nf:nf.sets.src_set", "map:nf_sets_src"), "uses");
    assert_eq!(g.nodes["map:nf_sets_src"]["style"], "dashed");
    // Nothing else: no stray nodes.
    let chains: BTreeSet<_> = g.nodes.keys().filter(|k| k.starts_with("chain:")).collect();
    assert_eq!(chains.len(), 1, "{chains:?}");
}

#[test]
fn a_dispatching_script_has_one_edge_per_classifier_entry_and_reads() {
    let (code, dot, err) = nfkit(&["graph", &example("dscp_dispatch.py")]);
    assert_eq!(code, 0, "{err}");
    let g = parse(&dot);
    let cls: Vec<_> = g
        .nodes
        .keys()
        .filter(|k| k.starts_with("classifier:"))
        .collect();
    assert_eq!(cls.len(), 1, "{cls:?}");
    let entries: Vec<_> = g
        .edges
        .iter()
        .filter(|((a, b), _)| a == cls[0] && b.starts_with("chain:"))
        .collect();
    assert!(entries.len() >= 2, "{entries:?}");
    for (_, at) in &entries {
        assert!(at["label"].starts_with("dscp "), "{at:?}");
    }
    // Written to a file, the same text.
    let dir = std::env::temp_dir().join(format!("nfkit-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("g.dot");
    let (code, _, err) = nfkit(&[
        "graph",
        &example("dscp_dispatch.py"),
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), dot);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn svg_through_graphviz_or_a_clear_error() {
    let has_dot = Command::new("dot").arg("-V").output().is_ok();
    let (code, out, err) = nfkit(&["graph", &example("ddos.py"), "--format", "svg"]);
    if has_dot {
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("<svg") && out.contains("mitigate"), "{out}");
        assert!(out.contains("nf.meter.tb_dst"));
    } else {
        assert_eq!(code, 1);
        assert!(
            err.contains("Graphviz") && err.contains("--format dot"),
            "{err}"
        );
    }
}

#[test]
fn a_script_with_an_error_is_reported_with_its_place() {
    let dir = std::env::temp_dir().join(format!("nfkit-graph-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.py");
    std::fs::write(
        &f,
        "from nf.classify import every_packet\n\ndef c() -> u64:\n    return nosuch\n\nevery_packet(c)\n",
    )
    .unwrap();
    let (code, out, err) = nfkit(&["graph", f.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("bad.py:4:") && err.contains("nosuch"), "{err}");
    assert!(!err.starts_with("error: error"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
