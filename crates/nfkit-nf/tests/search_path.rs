//! The NF search path with a user's own NF objects: compiled here with
//! clang from a few lines of C (as the README shows), found through
//! directories before the embedded catalogue, documented from doc blocks
//! or from BTF, and callable through the caller in the VM.

mod common;

use common::*;
use nfkit_nf::{caller, Hook, NfKind, Origin, SearchPath};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("nfkit-nf-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn compile(src: &Path, hook: Hook, out: &Path) {
    let arch = Command::new("uname").arg("-m").output().expect("uname");
    let arch = String::from_utf8_lossy(&arch.stdout).trim().to_string();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../nf/include");
    let status = Command::new(std::env::var("CLANG").unwrap_or_else(|_| "clang".into()))
        .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3"])
        .arg(format!("-D{}", hook.define()))
        .arg("-I")
        .arg(&include)
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .args(["-x", "c", "-c"])
        .arg(src)
        .arg("-o")
        .arg(out)
        .status()
        .expect("clang");
    assert!(status.success(), "clang failed on {}", src.display());
}

/// The README's example: an XDP filter turned into an NF.
const MY_FILTER: &str = r#"
#include "nfkit.h"

NF(my_filter, port)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct nf_pkt_info *pi = nf_info(ctx);
	if (!pi || data + 14 > end)
		return NF_ABORTED;
	if (pi->dport == port)
		return NF_DROP;
	return pi->dport;
}
NF_EXPORT(my_filter);
"#;

#[test]
fn user_objects_come_first_and_are_documented_from_btf() {
    let dir = TempDir::new("btf");
    let src = dir.0.join("mine.c.txt"); // no mine.c: docs come from BTF
    std::fs::write(&src, MY_FILTER).unwrap();
    compile(&src, Hook::Xdp, &dir.0.join("mine.xdp.o"));
    let path = SearchPath::from_parts(&[dir.0.display().to_string()], None);

    let r = path.resolve("mine", Hook::Xdp).unwrap().expect("found");
    assert_eq!(r.origin, Origin::File(dir.0.join("mine.xdp.o")));
    assert!(path.resolve("mine", Hook::Tc).unwrap().is_none());
    let found = path.lookup("my_filter").unwrap();
    assert_eq!(found.len(), 1);
    let d = &found[0];
    assert_eq!(
        (d.module.as_str(), d.symbol.as_str(), d.kind),
        ("mine", "nf_my_filter", NfKind::Nf)
    );
    assert_eq!(
        d.args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["port"]
    );
    assert_eq!(d.hooks, [Hook::Xdp]);
    assert_eq!(path.find("mine", "my_filter").unwrap().as_ref(), Some(d));
    let all = path.list().unwrap();
    assert_eq!(all.first(), Some(d), "user modules first");
    assert_eq!(
        all.len(),
        nfkit_nf::list().len() + 1,
        "then the whole catalogue"
    );

    // It runs like a catalogue NF.
    let image = caller::caller_image(&path, "mine", "my_filter", Hook::Xdp).unwrap();
    let vm = nfkit_vm::Vm::new(&image, nfkit_vm::VmConfig::kernel()).unwrap();
    let h = Harness {
        vm,
        hook: Hook::Xdp,
        ingress: 1,
    };
    h.set_clock(0);
    let p = v4([198, 18, 0, 1], [198, 19, 0, 1], UDP, &udp(1, 53));
    assert_eq!(h.call(&p, args1(53)), DROP);
    assert_eq!(h.call(&p, args1(80)), 53);
}

#[test]
fn user_modules_shadow_the_catalogue_and_use_their_doc_blocks() {
    let dir = TempDir::new("doc");
    let src = dir.0.join("base.c");
    std::fs::write(
        &src,
        r#"/**
 * @module base
 * @hooks xdp
 * A replacement base module.
 */
#include "nfkit.h"

/**
 * @nf drop()
 * Pass instead of dropping.
 * @returns PASS.
 * @maps none
 * @bad none.
 */
NF(drop)
{
	return NF_PASS;
}
NF_EXPORT(drop);
"#,
    )
    .unwrap();
    compile(&src, Hook::Xdp, &dir.0.join("base.o"));
    let env = format!(
        "/nonexistent-nfkit-dir-is-an-error-only-when-listed:{}",
        dir.0.display()
    );
    let path = SearchPath::from_parts(&[], Some(&env));
    // Resolution skips missing directories; listing reports them.
    let r = path.resolve("nf.base", Hook::Xdp).unwrap().expect("found");
    assert_eq!(r.origin, Origin::File(dir.0.join("base.o")));
    assert!(path.list().is_err());
    let path = SearchPath::from_parts(&[dir.0.display().to_string()], None);
    let d = path.find("nf.base", "drop").unwrap().expect("drop");
    assert_eq!(d.doc, "Pass instead of dropping.");
    assert!(
        path.find("nf.base", "allow").unwrap().is_none(),
        "the whole module is shadowed"
    );
    assert!(
        path.find("nf.meter", "tb_dst").unwrap().is_some(),
        "other modules still embedded"
    );
    let image = caller::caller_image(&path, "nf.base", "drop", Hook::Xdp).unwrap();
    let vm = nfkit_vm::Vm::new(&image, nfkit_vm::VmConfig::kernel()).unwrap();
    let h = Harness {
        vm,
        hook: Hook::Xdp,
        ingress: 1,
    };
    assert_eq!(h.call(&arp(), NOARGS), PASS);
}
