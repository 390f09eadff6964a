//! Every NF keeps its full signature through clang 14 in every hook build:
//! a global BTF function `nf_<name>(ctx, a1, a2, a3, a4)` returning a
//! 64-bit unsigned value, with the hook's context type, and a real
//! (not inlined) function in the object. Also: the standalone and dynamic
//! exports exist for each hook, and classifiers export both forms.

use nfkit_nf::HookObject;
use nfkit_nf::{catalogue, Hook, NfKind};
use nfkit_object::btf::{Kind, Linkage};

fn ctx_type(h: Hook) -> &'static str {
    match h {
        Hook::Xdp | Hook::Switch => "struct xdp_md *",
        Hook::Tc | Hook::Socket => "struct __sk_buff *",
    }
}

#[test]
fn every_nf_has_its_full_signature_in_btf_for_each_hook() {
    let mut checked = 0;
    for m in catalogue() {
        let doc = m.doc().expect("module doc");
        for o in m.objects {
            let obj = nfkit_object::read_object(o.object, o.path)
                .unwrap_or_else(|e| panic!("{} {}: {e}", m.name, o.hook));
            let btf = obj.btf.as_ref().expect("BTF");
            for nf in &doc.nfs {
                if !nf.hooks.iter().any(|h| h == o.hook.name()) {
                    assert!(
                        btf.find_func(&format!("nf_{}", nf.name)).is_none(),
                        "{} is not documented for {} but is built",
                        nf.name,
                        o.hook
                    );
                    continue;
                }
                let sym = format!("nf_{}", nf.name);
                let id = btf.find_func(&sym).unwrap_or_else(|| {
                    panic!("{sym} missing from the BTF of {} {}", m.name, o.hook)
                });
                let sig = btf.func_signature(id).expect("signature");
                let where_ = format!("{sym} ({} {}): {}", m.name, o.hook, sig.c_decl);
                assert_eq!(sig.linkage, Linkage::Global, "{where_}");
                assert_eq!(sig.params.len(), 5, "{where_}");
                assert!(!sig.variadic, "{where_}");
                assert_eq!(sig.params[0].c_type, ctx_type(o.hook), "{where_}");
                assert_eq!(sig.params[0].name, "ctx", "{where_}");
                let strip = |t: u32| btf.strip(t).expect("type");
                for p in &sig.params[1..] {
                    match &btf.get(strip(p.ty)).expect("type").kind {
                        Kind::Int { size, encoding, .. } => {
                            assert_eq!((*size, *encoding & 1), (8, 0), "{where_}: {}", p.name)
                        }
                        k => panic!("{where_}: param {} is {k:?}", p.name),
                    }
                }
                match &btf.get(strip(sig.ret)).expect("type").kind {
                    Kind::Int { size, encoding, .. } => {
                        assert_eq!((*size, *encoding & 1), (8, 0), "{where_}")
                    }
                    k => panic!("{where_}: returns {k:?}"),
                }
                // The documented arguments are the named parameters, in order;
                // unused slots are `_aN`.
                let named: Vec<&str> = sig.params[1..]
                    .iter()
                    .map(|p| p.name.as_str())
                    .filter(|n| !n.starts_with('_'))
                    .collect();
                let documented: Vec<&str> = nf.args.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(named, documented, "{where_}");
                // A real function, not folded away.
                let f = obj
                    .function(&sym)
                    .unwrap_or_else(|| panic!("{where_}: no function"));
                assert!(f.prog_type.is_none(), "{where_}");
                // Its exports.
                for export in [
                    format!("{}{}", o.hook.standalone_prefix(), nf.name),
                    format!("dyn_{}", nf.name),
                ] {
                    let e = obj
                        .function(&export)
                        .unwrap_or_else(|| panic!("{where_}: no {export}"));
                    assert!(e.prog_type.is_some(), "{export} is not a program");
                    assert_eq!(e.section, o.hook.section(), "{export}");
                }
                checked += 1;
            }
            for c in &doc.classifiers {
                for p in [c.name.clone(), format!("dyn_{}", c.name)] {
                    let f = obj
                        .function(&p)
                        .unwrap_or_else(|| panic!("{} {}: no {p}", m.name, o.hook));
                    assert_eq!(f.section, o.hook.section(), "{p}");
                }
            }
        }
    }
    // 30 NFs; socket filters get neither forward nor the meter, mark and l2
    // modules (spin locks, packet writes, redirects), which declare
    // `@hooks xdp tc`.
    assert!(checked >= 70, "only {checked} NF builds checked");
    assert_eq!(nfkit_nf::list().len(), 30);
    assert_eq!(nfkit_nf::classifiers().len(), 7);
    assert!(nfkit_nf::list().iter().all(|d| d.kind == NfKind::Nf));
}
