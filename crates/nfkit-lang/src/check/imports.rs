//! Imports (docs/language.md, "Module level"): NFs, classifiers and
//! their constants from `nf.MODULE`; chains of library scripts from
//! `lib.NAME`, checked on their own and merged with their NFs and maps.

use super::classifier::CLASSIFIERS;
use super::module::check_at;
use super::{off, Checker, Options, Sym, R};
use crate::ir::walk::{walk_block_mut, walk_expr_mut, walk_stmt_mut, VisitMut};
use crate::ir::{Expr, ExprKind, MapDecl, NfRef, Stmt, StmtKind};
use nfkit_nf::NfKind;
use rustpython_parser::ast;

impl Checker<'_> {
    /// `from nf.MODULE import a, b as c`: NFs, classifiers and constants.
    pub(super) fn import(&mut self, i: &ast::StmtImportFrom) -> R<()> {
        let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
        if i.level.map(|l| l.to_u32()).unwrap_or(0) != 0 {
            return self.err(
                off(i),
                "relative imports are not supported",
                "import NFs with 'from nf.MODULE import name'",
            );
        }
        let Some(m) = module.strip_prefix("nf.") else {
            if let Some(rest) = module.strip_prefix("lib.") {
                return self.import_lib(i, rest);
            }
            return self.err(
                off(i),
                format!("unknown module '{module}'"),
                "import NFs and classifiers from 'nf.MODULE' (see 'nfkit nf list')",
            );
        };
        let resolved = self.opts.search.resolve(m, self.hook).ok().flatten();
        let embedded = nfkit_nf::module(m);
        if resolved.is_none() && embedded.is_none() {
            return self.err(
                off(i),
                format!("no NF module 'nf.{m}' (for hook {})", self.hook.name()),
                "see 'nfkit nf list' for the catalogue, or put MODULE.o on the NF search path (--nf-path, NFKIT_NF_PATH)",
            );
        }
        for alias in &i.names {
            let name = alias.name.as_str();
            let local = alias.asname.as_ref().map(|a| a.as_str()).unwrap_or(name);
            let at = off(alias);
            if name == "*" {
                return self.err(
                    at,
                    "'import *' is not supported",
                    "import each name you use",
                );
            }
            let doc = match self.opts.search.find(m, name) {
                Ok(Some(d)) => Some(d),
                _ => nfkit_nf::find(m, name),
            };
            if let Some(d) = doc {
                match d.kind {
                    NfKind::Nf => {
                        let idx = self.prog.nfs.len();
                        self.prog.nfs.push(NfRef {
                            module: format!("nf.{m}"),
                            name: d.name.clone(),
                            symbol: d.symbol.clone(),
                            arity: d.args.len(),
                        });
                        self.define(local, Sym::Nf(idx), at)?;
                    }
                    NfKind::Classifier => {
                        if !CLASSIFIERS.contains(&name) {
                            return self.err(
                                at,
                                format!("unknown classifier '{name}'"),
                                &format!("classifiers: {}", CLASSIFIERS.join(", ")),
                            );
                        }
                        self.define(local, Sym::Classifier(name.to_string()), at)?;
                    }
                }
                continue;
            }
            let konst = embedded
                .and_then(|e| e.doc())
                .and_then(|d| d.consts.iter().find(|c| c.name == name).map(|c| c.value));
            if let Some(v) = konst {
                self.define(local, Sym::Const(None, v as i128), at)?;
                continue;
            }
            return self.err(
                at,
                format!("module 'nf.{m}' has no NF, classifier or constant '{name}'"),
                &format!("see 'nfkit nf list' or 'nfkit nf show nf.{m}.NAME'"),
            );
        }
        Ok(())
    }

    /// `from lib.common import f`: chains of `lib/common.chain` (or
    /// `.py`) next to this script, checked on their own and merged with
    /// the NFs and maps they use.
    fn import_lib(&mut self, i: &ast::StmtImportFrom, rest: &str) -> R<()> {
        let at = off(i);
        if self.depth >= 8 {
            return self.err(
                at,
                "scripts import each other too deeply (a cycle?)",
                "import library chains without cycles",
            );
        }
        let rel: std::path::PathBuf = std::iter::once("lib").chain(rest.split('.')).collect();
        let Some((path, src)) = crate::pipeline::lib_script(&self.prog.file, rest) else {
            return self.err(
                at,
                format!(
                    "no script {} (.chain or .py) next to this script",
                    rel.display()
                ),
                "library scripts live in lib/NAME.chain relative to the importing script",
            );
        };
        let opts = Options {
            search: self.opts.search.clone(),
            hook: Some(self.hook),
        };
        let lib = check_at(&path.display().to_string(), &src, &opts, self.depth + 1)?;
        self.warnings.extend(lib.warnings);
        let lib = lib.program;
        // Merge its NFs, maps and chains, renumbering their references.
        let mut nf_map = Vec::new();
        for nf in &lib.nfs {
            let k = match self
                .prog
                .nfs
                .iter()
                .position(|x| x.symbol == nf.symbol && x.module == nf.module)
            {
                Some(k) => k,
                None => {
                    self.prog.nfs.push(nf.clone());
                    self.prog.nfs.len() - 1
                }
            };
            nf_map.push(k);
        }
        let map_map = self.merge_lib_maps(&lib.maps, &path, at)?;
        self.merge_lib_tables(&lib.tables, &path, at)?;
        let set_base = self.merge_lib_patterns(&lib.patterns, &path, at)?;
        let is_match: Vec<bool> = lib
            .nfs
            .iter()
            .map(|n| n.module == "nf.dpi" && n.name == "match")
            .collect();
        let first = self.prog.chains.len();
        for c in &lib.chains {
            let mut c = c.clone();
            let mut r = Renumber {
                nfs: &nf_map,
                maps: &map_map,
                chain_base: first,
                is_match: &is_match,
                set_base,
                set_not_const: false,
            };
            walk_block_mut(&mut r, &mut c.body);
            if r.set_not_const && !lib.patterns.is_empty() {
                return self.err(
                    at,
                    format!(
                        "{}: chain '{}' calls match with a set that is not a Patterns name",
                        path.display(),
                        c.name
                    ),
                    "in a library script, call match(SET) with SET a Patterns name of that script",
                );
            }
            c.name = format!("{}.{}", rest, c.name);
            self.prog.chains.push(c);
            self.defs.push(None);
        }
        for alias in &i.names {
            let name = alias.name.as_str();
            let local = alias.asname.as_ref().map(|a| a.as_str()).unwrap_or(name);
            if lib.tables.iter().any(|t| t.name == name) {
                // A table: its apply chain, called as `LOCAL_apply` (the
                // expansion renames `LOCAL.apply(` and pipeline stages).
                let apply = format!("{name}_apply");
                if let Some(k) = lib.chains.iter().position(|c| c.name == apply) {
                    let local_apply = format!("{local}_apply");
                    self.prog.chains[first + k].name = local_apply.clone();
                    self.define(&local_apply, Sym::Chain(first + k), off(alias))?;
                    continue;
                }
            }
            let Some(k) = lib.chains.iter().position(|c| c.name == name) else {
                return self.err(
                    off(alias),
                    format!("{} has no chain or table '{name}'", path.display()),
                    "import chains defined with 'def' and tables (T = Table(...)) of the library script",
                );
            };
            self.prog.chains[first + k].name = name.to_string();
            self.define(local, Sym::Chain(first + k), off(alias))?;
        }
        Ok(())
    }

    /// Adds the pattern sets of library `path` after this script's; the
    /// set id of the library's first set here.
    fn merge_lib_patterns(
        &mut self,
        sets: &[crate::patterns::PatternSet],
        path: &std::path::Path,
        at: usize,
    ) -> R<u64> {
        let base = self.prog.patterns.len();
        let states: usize = self
            .prog
            .patterns
            .iter()
            .chain(sets)
            .map(|p| p.dfa.states())
            .sum();
        if states >= nfkit_dpi::tables::STATES {
            return self.err(
                at,
                format!(
                    "the Patterns of {} and of this script need {states} DFA states, over the {} the dpi NF holds",
                    path.display(),
                    nfkit_dpi::tables::STATES - 1
                ),
                "use smaller sets, or bound them with max_states=",
            );
        }
        if base + sets.len() > nfkit_dpi::tables::SETS {
            return self.err(
                at,
                format!(
                    "more than {} Patterns sets with those of {}",
                    nfkit_dpi::tables::SETS,
                    path.display()
                ),
                "merge sets: one set holds many patterns",
            );
        }
        self.prog.patterns.extend(sets.iter().cloned());
        Ok(base as u64)
    }

    /// Adds the tables of library `path` (their declared entries and
    /// defaults are control-plane writes; a table of the same name must
    /// be the same table).
    fn merge_lib_tables(
        &mut self,
        tables: &[crate::table::Table],
        path: &std::path::Path,
        at: usize,
    ) -> R<()> {
        for t in tables {
            match self.prog.tables.iter().find(|x| x.name == t.name) {
                Some(x) if x.keys == t.keys && x.actions == t.actions && x.size == t.size => {}
                Some(_) => {
                    return self.err(
                        at,
                        format!(
                            "table '{}' of {} clashes with a table of the same name",
                            t.name,
                            path.display()
                        ),
                        "rename one of the tables",
                    )
                }
                None => self.prog.tables.push(t.clone()),
            }
        }
        Ok(())
    }

    /// Adds the maps of library `path` (a map of the same name must be
    /// the same map); their indices in this script.
    fn merge_lib_maps(
        &mut self,
        maps: &[MapDecl],
        path: &std::path::Path,
        at: usize,
    ) -> R<Vec<usize>> {
        let mut map_map = Vec::new();
        for m in maps {
            let k = match self.prog.maps.iter().position(|x| x.name == m.name) {
                Some(k) if self.prog.maps[k] == *m => k,
                Some(_) => {
                    return self.err(
                        at,
                        format!(
                            "map '{}' of {} clashes with a map of the same name",
                            m.name,
                            path.display()
                        ),
                        "rename one of the maps",
                    )
                }
                None => {
                    if self.syms.contains_key(&m.name) {
                        return self.err(
                            at,
                            format!(
                                "map '{}' of {} clashes with a name of this script",
                                m.name,
                                path.display()
                            ),
                            "rename one of them",
                        );
                    }
                    self.prog.maps.push(m.clone());
                    self.syms
                        .insert(m.name.clone(), Sym::Map(self.prog.maps.len() - 1));
                    self.prog.maps.len() - 1
                }
            };
            map_map.push(k);
        }
        Ok(map_map)
    }
}

/// Renumbers the NF, map and chain references of an imported script's
/// IR into the importing script's tables.
struct Renumber<'a> {
    nfs: &'a [usize],
    maps: &'a [usize],
    chain_base: usize,
    /// By library NF index: `match` of `nf.dpi`, whose first argument
    /// (a set id of the library) moves up by `set_base`.
    is_match: &'a [bool],
    set_base: u64,
    /// A `match` whose set is not a constant was seen.
    set_not_const: bool,
}

impl Renumber<'_> {
    /// The importing script's index of library map `m`.
    fn map(&self, m: usize) -> usize {
        self.maps.get(m).copied().unwrap_or(m)
    }
}

impl VisitMut for Renumber<'_> {
    fn visit_stmt(&mut self, s: &mut Stmt) {
        if let StmtKind::MapSet { map, .. }
        | StmtKind::MapRmw { map, .. }
        | StmtKind::MapDel { map, .. } = &mut s.kind
        {
            *map = self.map(*map);
        }
        walk_stmt_mut(self, s);
    }

    fn visit_expr(&mut self, x: &mut Expr) {
        match &mut x.kind {
            ExprKind::CallNf { nf, args } => {
                if self.is_match.get(*nf).copied().unwrap_or(false) {
                    match args.first_mut().map(|a| &mut a.kind) {
                        Some(ExprKind::Const(v)) => *v += self.set_base,
                        _ => self.set_not_const = true,
                    }
                }
                *nf = self.nfs.get(*nf).copied().unwrap_or(*nf)
            }
            ExprKind::CallChain { chain, .. } => *chain += self.chain_base,
            ExprKind::MapGet { map, .. } | ExprKind::MapHas { map, .. } => *map = self.map(*map),
            _ => {}
        }
        walk_expr_mut(self, x);
    }
}
