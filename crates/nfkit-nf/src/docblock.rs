//! The doc blocks of NF sources: parsing and checking.
//!
//! Shared by `build.rs` (which turns the catalogue's blocks into the
//! generated tables) and the library (which reads the blocks of a user's
//! `MODULE.c` found next to `MODULE.o` on the NF search path). Std only.
//!
//! Format: a `/** ... */` comment, one tag per line, text continuing on
//! the following lines until the next tag or a blank line.
//!
//! ```text
//! /**
//!  * @module meter                    module block (once, first)
//!  * @hooks xdp tc                     hooks the module is built for
//!  * Free text: the module's description.
//!  * @const TB_MAX text                a constant; its value comes from
//!  *                                   `#define NF_TB_MAX <int>` in the file
//!  * @map nf_meter_tb_dst text         a map the module owns
//!  */
//! /**
//!  * @nf tb_dst(rate, burst)           an NF block, right above NF(tb_dst, rate, burst)
//!  * Free text: what it does.
//!  * @arg rate text                    one per argument, in order
//!  * @returns text
//!  * @maps nf_meter_tb_dst             maps it uses (or `none`)
//!  * @bad text                         defined behaviour for bad arguments
//!  * @hooks xdp tc                     optional: fewer hooks than the module
//!  */
//! /**
//!  * @classifier by_dscp               a classifier block, above NF_CLASSIFIER(by_dscp)
//!  * Free text.
//!  * @key text
//!  * @maps nfkit_cls_dscp
//!  */
//! ```

use std::fmt;

/// The hook names a block may list.
pub const HOOK_NAMES: [&str; 3] = ["xdp", "tc", "socket"];

/// A documented constant (`@const`), with the value of its `#define`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstDoc {
    pub name: String,
    pub value: u64,
    pub doc: String,
}

/// A documented map (`@map`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDoc {
    pub name: String,
    pub doc: String,
}

/// An NF block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfDoc {
    pub name: String,
    /// `(name, doc)` per argument, in order.
    pub args: Vec<(String, String)>,
    pub doc: String,
    pub returns: String,
    pub maps: Vec<String>,
    pub bad: String,
    /// The NF's hooks (the module's unless the block narrows them).
    pub hooks: Vec<String>,
    /// 1-based line of the `NF(...)` declaration.
    pub line: usize,
}

/// A classifier block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassifierDoc {
    pub name: String,
    pub doc: String,
    pub key: String,
    pub maps: Vec<String>,
    pub line: usize,
}

/// Everything documented in one source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleDoc {
    pub name: String,
    pub hooks: Vec<String>,
    pub doc: String,
    pub consts: Vec<ConstDoc>,
    pub maps: Vec<MapDoc>,
    pub nfs: Vec<NfDoc>,
    pub classifiers: Vec<ClassifierDoc>,
}

/// A problem in a source's doc blocks, with its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for DocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for DocError {}

/// One `/** */` block: its tagged entries and the code line after it.
struct Block {
    line: usize,
    /// `(tag, text)`; tag "" is free text.
    entries: Vec<(String, String)>,
    /// The first non-blank line after the block and its 1-based number.
    next: Option<(usize, String)>,
}

/// Tags whose text ends at the end of their line (further lines are free text).
fn single_line(tag: &str) -> bool {
    matches!(tag, "module" | "hooks" | "nf" | "classifier" | "maps")
}

fn blocks(src: &str) -> Vec<Block> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines.get(i).map(|l| l.trim_start()).unwrap_or("");
        if !start.starts_with("/**") || start.starts_with("/**/") {
            i += 1;
            continue;
        }
        let first = i;
        let mut body: Vec<&str> = Vec::new();
        let rest = start.trim_start_matches("/**");
        let mut closed = false;
        if let Some(pos) = rest.find("*/") {
            body.push(rest.get(..pos).unwrap_or(""));
            closed = true;
        } else {
            body.push(rest);
        }
        i += 1;
        while !closed && i < lines.len() {
            let l = lines.get(i).copied().unwrap_or("");
            if let Some(pos) = l.find("*/") {
                body.push(l.get(..pos).unwrap_or(""));
                closed = true;
            } else {
                body.push(l);
            }
            i += 1;
        }
        let mut entries: Vec<(String, String)> = Vec::new();
        let mut cur: Option<usize> = None; // index into entries continuing
        for raw in body {
            let t = raw.trim();
            let t = t.strip_prefix('*').unwrap_or(t).trim();
            if t.is_empty() {
                cur = None;
                if let Some(last) = entries.last_mut() {
                    if last.0.is_empty() && !last.1.ends_with("\n\n") {
                        last.1.push_str("\n\n");
                    }
                }
                continue;
            }
            if let Some(tagged) = t.strip_prefix('@') {
                let (tag, text) = match tagged.split_once(char::is_whitespace) {
                    Some((a, b)) => (a, b.trim()),
                    None => (tagged, ""),
                };
                entries.push((tag.to_string(), text.to_string()));
                cur = if single_line(tag) {
                    None
                } else {
                    Some(entries.len() - 1)
                };
                continue;
            }
            match cur {
                Some(k) => {
                    if let Some(e) = entries.get_mut(k) {
                        if !e.1.is_empty() {
                            e.1.push(' ');
                        }
                        e.1.push_str(t);
                    }
                }
                None => {
                    match entries.last_mut() {
                        Some(last) if last.0.is_empty() => {
                            if !last.1.is_empty() && !last.1.ends_with("\n\n") {
                                last.1.push(' ');
                            }
                            last.1.push_str(t);
                        }
                        _ => entries.push((String::new(), t.to_string())),
                    }
                    cur = None;
                }
            }
        }
        let mut next = None;
        let mut j = i;
        while j < lines.len() {
            let l = lines.get(j).map(|l| l.trim()).unwrap_or("");
            if !l.is_empty() {
                next = Some((j + 1, l.to_string()));
                break;
            }
            j += 1;
        }
        out.push(Block {
            line: first + 1,
            entries,
            next,
        });
    }
    out
}

fn join_text(entries: &[(String, String)]) -> String {
    let mut s = String::new();
    for (tag, text) in entries {
        if tag.is_empty() {
            if !s.is_empty() && !s.ends_with("\n\n") {
                s.push(' ');
            }
            s.push_str(text);
        }
    }
    s.trim_end().to_string()
}

/// `name(a, b)` or `name` -> (name, args).
fn parse_call(text: &str) -> Option<(String, Vec<String>)> {
    let text = text.trim().trim_end_matches(';').trim();
    match text.split_once('(') {
        None => {
            if text.is_empty() {
                None
            } else {
                Some((text.to_string(), Vec::new()))
            }
        }
        Some((name, rest)) => {
            let inner = rest.trim_end().strip_suffix(')')?;
            let args = inner
                .split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect();
            Some((name.trim().to_string(), args))
        }
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses an integer literal as C writes it (decimal or 0x hex, U/L suffixes).
pub fn parse_c_int(text: &str) -> Option<u64> {
    let t = text.trim().trim_end_matches(['u', 'U', 'l', 'L']);
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse::<u64>().ok()
    }
}

/// The value of `#define NAME <int>` or of the enumerator `NAME = <int>,`
/// (the ABI header's constants are enums, so that BTF carries them) in
/// `src`.
fn define_value(src: &str, name: &str) -> Option<u64> {
    src.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        match w.next()? {
            "#define" if w.next() == Some(name) => parse_c_int(w.next()?),
            first if first == name && w.next() == Some("=") => {
                parse_c_int(w.next()?.trim_end_matches(','))
            }
            _ => None,
        }
    })
}

fn hooks_of(text: &str, file: &str, line: usize) -> Result<Vec<String>, DocError> {
    let hooks: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    if hooks.is_empty() {
        return Err(err(file, line, "@hooks lists no hook".into()));
    }
    for h in &hooks {
        if !HOOK_NAMES.contains(&h.as_str()) {
            return Err(err(
                file,
                line,
                format!("unknown hook `{h}` (hooks: xdp, tc, socket)"),
            ));
        }
    }
    Ok(hooks)
}

fn maps_of(text: &str) -> Vec<String> {
    text.split([' ', ','])
        .map(str::trim)
        .filter(|m| !m.is_empty() && *m != "none")
        .map(str::to_string)
        .collect()
}

fn err(file: &str, line: usize, message: String) -> DocError {
    DocError {
        file: file.to_string(),
        line,
        message,
    }
}

fn tag<'a>(b: &'a Block, name: &str) -> Option<&'a str> {
    b.entries
        .iter()
        .find(|(t, _)| t == name)
        .map(|(_, s)| s.as_str())
}

/// Parses and checks the doc blocks of one source file. `file` names it in
/// errors. Every `NF(...)` and `NF_CLASSIFIER(...)` at the start of a line
/// must have its block right above it, with the same name and argument
/// names; every `@const` needs its `#define NF_<NAME>` (or enumerator); every map an NF
/// lists must be a `@map` of the module or a shared `nfkit_*` map.
pub fn parse_source(file: &str, src: &str) -> Result<ModuleDoc, DocError> {
    parse_source_with(file, src, &[])
}

/// [`parse_source`], also looking up `@const` values in `includes` (the
/// texts of headers the source includes, e.g. `nfkit.h`).
pub fn parse_source_with(file: &str, src: &str, includes: &[&str]) -> Result<ModuleDoc, DocError> {
    let source = Source {
        file,
        text: src,
        includes,
    };
    let all = blocks(src);
    check_tags(file, &all)?;
    let mut module = module_doc(&source, &all)?;
    for b in &all {
        if let Some(head) = tag(b, "nf") {
            let nf = nf_doc(file, b, head, &module)?;
            if module.nfs.iter().any(|n| n.name == nf.name) {
                return Err(err(file, nf.line, format!("NF {} declared twice", nf.name)));
            }
            module.nfs.push(nf);
        } else if let Some(head) = tag(b, "classifier") {
            module.classifiers.push(classifier_doc(file, b, head)?);
        }
    }
    check_declarations(file, src, &module)?;
    Ok(module)
}

/// The source file being parsed: its name (for errors), its text, and the
/// texts of the headers it includes (where `@const` values may be defined).
struct Source<'a> {
    file: &'a str,
    text: &'a str,
    includes: &'a [&'a str],
}

/// Refuses unknown tags in doc blocks (those with `@module`, `@nf` or
/// `@classifier`; other `/** */` comments are left alone).
fn check_tags(file: &str, all: &[Block]) -> Result<(), DocError> {
    let known = [
        "module",
        "hooks",
        "const",
        "map",
        "nf",
        "arg",
        "returns",
        "maps",
        "bad",
        "classifier",
        "key",
    ];
    for b in all {
        let is_doc = b
            .entries
            .iter()
            .any(|(t, _)| t == "module" || t == "nf" || t == "classifier");
        if !is_doc {
            continue;
        }
        for (t, _) in &b.entries {
            if !t.is_empty() && !known.contains(&t.as_str()) {
                return Err(err(file, b.line, format!("unknown tag @{t}")));
            }
        }
    }
    Ok(())
}

/// The module block: name, hooks, description, `@const`s and `@map`s (no
/// NFs or classifiers yet).
fn module_doc(source: &Source, all: &[Block]) -> Result<ModuleDoc, DocError> {
    let file = source.file;
    let mblock = all
        .iter()
        .find(|b| tag(b, "module").is_some())
        .ok_or_else(|| err(file, 1, "no @module block".into()))?;
    let name = tag(mblock, "module").unwrap_or("").trim().to_string();
    if !is_ident(&name) {
        return Err(err(file, mblock.line, format!("bad module name `{name}`")));
    }
    let hooks = hooks_of(
        tag(mblock, "hooks")
            .ok_or_else(|| err(file, mblock.line, "module block has no @hooks".into()))?,
        file,
        mblock.line,
    )?;
    let mut consts = Vec::new();
    let mut maps = Vec::new();
    for (t, text) in &mblock.entries {
        let (first, rest) = text
            .split_once(char::is_whitespace)
            .map(|(a, b)| (a.trim(), b.trim()))
            .unwrap_or((text.trim(), ""));
        match t.as_str() {
            "const" => consts.push(ConstDoc {
                name: first.to_string(),
                value: const_value(source, mblock.line, first)?,
                doc: rest.to_string(),
            }),
            "map" => maps.push(MapDoc {
                name: first.trim_end_matches(':').to_string(),
                doc: rest.to_string(),
            }),
            _ => {}
        }
    }
    Ok(ModuleDoc {
        name,
        hooks,
        doc: join_text(&mblock.entries),
        consts,
        maps,
        nfs: Vec::new(),
        classifiers: Vec::new(),
    })
}

/// The value of the `@const NAME` of the module block at `line`: its
/// `#define NF_NAME` (or enumerator) in the source or an included header.
fn const_value(source: &Source, line: usize, name: &str) -> Result<u64, DocError> {
    let def = format!("NF_{name}");
    std::iter::once(source.text)
        .chain(source.includes.iter().copied())
        .find_map(|text| define_value(text, &def))
        .ok_or_else(|| {
            err(
                source.file,
                line,
                format!("@const {name}: no `#define {def} <integer>` in the file"),
            )
        })
}

/// An NF block (its `@nf` line is `head`), checked against the `NF(...)`
/// below it and against the module (maps, hooks).
fn nf_doc(file: &str, b: &Block, head: &str, module: &ModuleDoc) -> Result<NfDoc, DocError> {
    let (nf_name, args) =
        parse_call(head).ok_or_else(|| err(file, b.line, format!("bad @nf line `{head}`")))?;
    let line = nf_declaration(file, b, &nf_name, &args)?;
    let arg_docs = arg_docs(file, b, &nf_name, &args)?;
    let need = |t: &str| {
        tag(b, t)
            .map(str::to_string)
            .ok_or_else(|| err(file, b.line, format!("{nf_name}: missing @{t}")))
    };
    let returns = need("returns")?;
    let bad = need("bad")?;
    let nf_maps = maps_of(&need("maps")?);
    for m in &nf_maps {
        if !m.starts_with("nfkit_") && !module.maps.iter().any(|d| &d.name == m) {
            return Err(err(
                file,
                b.line,
                format!("{nf_name}: map {m} is not a @map of module {}", module.name),
            ));
        }
    }
    let hooks = nf_hooks(file, b, &nf_name, &module.hooks)?;
    Ok(NfDoc {
        name: nf_name,
        args: arg_docs,
        doc: join_text(&b.entries),
        returns,
        maps: nf_maps,
        bad,
        hooks,
        line,
    })
}

/// Checks that the line after NF block `b` declares `NF(name, args...)`
/// (at most 4 arguments); returns that line's number.
fn nf_declaration(
    file: &str,
    b: &Block,
    nf_name: &str,
    args: &[String],
) -> Result<usize, DocError> {
    let (line, code) = b.next.as_ref().ok_or_else(|| {
        err(
            file,
            b.line,
            format!("@nf {nf_name}: no NF(...) after the block"),
        )
    })?;
    let line = *line;
    let decl = code
        .strip_prefix("NF(")
        .map(|r| format!("x({r}"))
        .and_then(|c| parse_call(&c))
        .ok_or_else(|| {
            err(
                file,
                line,
                format!("@nf {nf_name}: expected NF({nf_name}, ...) here"),
            )
        })?;
    let decl_args: Vec<String> = decl.1.into_iter().skip(1).collect();
    let decl_name = code
        .strip_prefix("NF(")
        .and_then(|r| r.split([',', ')']).next())
        .unwrap_or("")
        .trim();
    if decl_name != nf_name || decl_args != args {
        return Err(err(
            file,
            line,
            format!(
                "@nf {nf_name}({}) does not match the declaration `{code}`",
                args.join(", ")
            ),
        ));
    }
    if args.len() > 4 {
        return Err(err(file, line, format!("{nf_name}: more than 4 arguments")));
    }
    Ok(line)
}

/// The `@arg` lines of NF block `b` as `(name, doc)`; they must name the
/// arguments `args`, in order.
fn arg_docs(
    file: &str,
    b: &Block,
    nf_name: &str,
    args: &[String],
) -> Result<Vec<(String, String)>, DocError> {
    let arg_docs: Vec<(String, String)> = b
        .entries
        .iter()
        .filter(|(t, _)| t == "arg")
        .map(|(_, s)| {
            let (n, d) = s
                .split_once(char::is_whitespace)
                .unwrap_or((s.as_str(), ""));
            (n.to_string(), d.trim().to_string())
        })
        .collect();
    if !arg_docs.iter().map(|(n, _)| n).eq(args) {
        return Err(err(
            file,
            b.line,
            format!(
                "{nf_name}: @arg lines ({}) must document the arguments ({}) in order",
                arg_docs
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                args.join(", ")
            ),
        ));
    }
    Ok(arg_docs)
}

/// The hooks of NF block `b`: its `@hooks` (a subset of the module's
/// `module_hooks`), else the module's.
fn nf_hooks(
    file: &str,
    b: &Block,
    nf_name: &str,
    module_hooks: &[String],
) -> Result<Vec<String>, DocError> {
    let Some(h) = tag(b, "hooks") else {
        return Ok(module_hooks.to_vec());
    };
    let hs = hooks_of(h, file, b.line)?;
    if let Some(x) = hs.iter().find(|h| !module_hooks.contains(h)) {
        return Err(err(
            file,
            b.line,
            format!("{nf_name}: hook {x} is not a hook of the module"),
        ));
    }
    Ok(hs)
}

/// A classifier block (its `@classifier` line is `head`), checked against
/// the `NF_CLASSIFIER(...)` below it.
fn classifier_doc(file: &str, b: &Block, head: &str) -> Result<ClassifierDoc, DocError> {
    let cname = head.trim().to_string();
    let (line, code) = b.next.as_ref().ok_or_else(|| {
        err(
            file,
            b.line,
            format!("@classifier {cname}: nothing after the block"),
        )
    })?;
    if code.trim_end_matches(';') != format!("NF_CLASSIFIER({cname})") {
        return Err(err(
            file,
            *line,
            format!("@classifier {cname}: expected NF_CLASSIFIER({cname}) here"),
        ));
    }
    Ok(ClassifierDoc {
        name: cname,
        doc: join_text(&b.entries),
        key: tag(b, "key").unwrap_or("").to_string(),
        maps: maps_of(tag(b, "maps").unwrap_or("")),
        line: *line,
    })
}

/// Checks that every `NF(...)` and `NF_CLASSIFIER(...)` at the start of a
/// line of `src` has its doc block right above it.
fn check_declarations(file: &str, src: &str, module: &ModuleDoc) -> Result<(), DocError> {
    for (i, l) in src.lines().enumerate() {
        let l = l.trim_start();
        let declared = if let Some(r) = l.strip_prefix("NF(") {
            r.split([',', ')']).next().map(|n| (n.trim(), true))
        } else if let Some(r) = l.strip_prefix("NF_CLASSIFIER(") {
            r.split(')').next().map(|n| (n.trim(), false))
        } else {
            None
        };
        if let Some((n, is_nf)) = declared {
            let documented = if is_nf {
                module.nfs.iter().any(|d| d.name == n && d.line == i + 1)
            } else {
                module
                    .classifiers
                    .iter()
                    .any(|d| d.name == n && d.line == i + 1)
            };
            if !documented {
                return Err(err(
                    file,
                    i + 1,
                    format!("{n} has no doc block right above it"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
/**
 * @module demo
 * @hooks xdp tc
 * A demo module.
 * Second line.
 * @const LIMIT the limit
 * @map nf_demo_m hash: things
 */
#define NF_LIMIT 0x10

/**
 * @nf f(a, b)
 * Does f.
 * @arg a first
 *      continued
 * @arg b second
 * @returns 1 or 0.
 * @maps nf_demo_m
 * @bad a == 0: 0.
 */
NF(f, a, b)
{
}

/**
 * @nf g()
 * Does g.
 * @returns nothing.
 * @maps none
 * @bad none.
 * @hooks xdp
 */
NF(g)
"#;

    #[test]
    fn parses_module_nfs_consts_maps() {
        let m = parse_source("demo.c", SRC).unwrap();
        assert_eq!(m.name, "demo");
        assert_eq!(m.hooks, ["xdp", "tc"]);
        assert_eq!(m.doc, "A demo module. Second line.");
        assert_eq!(
            m.consts,
            [ConstDoc {
                name: "LIMIT".into(),
                value: 16,
                doc: "the limit".into()
            }]
        );
        assert_eq!(m.maps[0].name, "nf_demo_m");
        assert_eq!(m.nfs.len(), 2);
        let f = &m.nfs[0];
        assert_eq!(
            f.args,
            [
                ("a".into(), "first continued".into()),
                ("b".into(), "second".into())
            ]
        );
        assert_eq!(f.returns, "1 or 0.");
        assert_eq!(f.maps, ["nf_demo_m"]);
        assert_eq!(f.hooks, ["xdp", "tc"]);
        assert_eq!(f.line, 22);
        assert_eq!(m.nfs[1].hooks, ["xdp"]);
        assert!(m.nfs[1].maps.is_empty());
    }

    #[test]
    fn mismatched_args_are_an_error_at_the_declaration() {
        let bad = SRC.replace("NF(f, a, b)", "NF(f, a, c)");
        let e = parse_source("demo.c", &bad).unwrap_err();
        assert_eq!(e.line, 22);
        assert!(e.message.contains("does not match"), "{e}");
    }

    #[test]
    fn undocumented_nf_unknown_map_missing_define_are_errors() {
        let e = parse_source("d.c", &format!("{SRC}\nNF(h)\n{{}}\n")).unwrap_err();
        assert!(e.message.contains("h has no doc block"), "{e}");
        let e = parse_source("d.c", &SRC.replace("@maps nf_demo_m", "@maps nf_other")).unwrap_err();
        assert!(e.message.contains("nf_other"), "{e}");
        let e = parse_source("d.c", &SRC.replace("#define NF_LIMIT 0x10", "")).unwrap_err();
        assert!(e.message.contains("#define NF_LIMIT"), "{e}");
        let e = parse_source("d.c", &SRC.replace("@hooks xdp\n", "@hooks socket\n")).unwrap_err();
        assert!(e.message.contains("not a hook of the module"), "{e}");
        let e = parse_source("d.c", &SRC.replace("@returns 1 or 0.\n", "")).unwrap_err();
        assert!(e.message.contains("missing @returns"), "{e}");
    }

    #[test]
    fn c_integers() {
        assert_eq!(parse_c_int("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_c_int("256"), Some(256));
        assert_eq!(parse_c_int("1ULL"), Some(1));
        assert_eq!(parse_c_int("x"), None);
    }
}
