//! The one walk over the IR. Analyses implement [`Visit`] (or
//! [`VisitMut`] to rewrite in place), override the nodes they care about
//! and call [`walk_stmt`] / [`walk_expr`] to go on into the children;
//! the children of every node kind are listed here and nowhere else.
//!
//! Children are visited in source order: a statement's expressions
//! before its blocks (`If`: cond, then, else; `Loop`: cond, body, step),
//! an expression's operands left to right. A chain call's arguments are
//! its children, not the callee's body (a visitor that needs the body
//! looks it up in [`super::Program::chains`]).

use super::{Expr, ExprKind, Stmt, StmtKind};

/// Defines a visitor trait and its walk functions once for shared and
/// once for mutable references (`$($m)?` is empty or `mut`), so that the
/// two cannot disagree about the children.
macro_rules! walker {
    ($(#[$doc:meta])* $visit:ident, $walk_block:ident, $walk_stmt:ident, $walk_expr:ident $(, $m:ident)?) => {
        $(#[$doc])*
        pub trait $visit {
            /// Visits a statement; the default goes on into its children.
            fn visit_stmt(&mut self, s: &$($m)? Stmt) {
                $walk_stmt(self, s)
            }

            /// Visits an expression; the default goes on into its operands.
            fn visit_expr(&mut self, e: &$($m)? Expr) {
                $walk_expr(self, e)
            }
        }

        /// Visits every statement of `body`, in order.
        pub fn $walk_block<V: $visit + ?Sized>(v: &mut V, body: &$($m)? [Stmt]) {
            for s in body {
                v.visit_stmt(s);
            }
        }

        /// Visits the children of `s`: its expressions, then its blocks.
        pub fn $walk_stmt<V: $visit + ?Sized>(v: &mut V, s: &$($m)? Stmt) {
            match &$($m)? s.kind {
                StmtKind::Assign { value, .. } => v.visit_expr(value),
                StmtKind::Expr(x) | StmtKind::Return(x) | StmtKind::Verdict(x) => v.visit_expr(x),
                StmtKind::If { cond, then, els } => {
                    v.visit_expr(cond);
                    $walk_block(v, then);
                    $walk_block(v, els);
                }
                StmtKind::Loop { cond, body, step, .. } => {
                    v.visit_expr(cond);
                    $walk_block(v, body);
                    $walk_block(v, step);
                }
                StmtKind::Break | StmtKind::Continue => {}
                StmtKind::MapSet { key, value, .. } | StmtKind::MapRmw { key, value, .. } => {
                    for k in key {
                        v.visit_expr(k);
                    }
                    v.visit_expr(value);
                }
                StmtKind::MapDel { key, .. } => {
                    for k in key {
                        v.visit_expr(k);
                    }
                }
                StmtKind::PktWrite { off, value, .. } => {
                    v.visit_expr(off);
                    v.visit_expr(value);
                }
            }
        }

        /// Visits the operands of `e`, left to right.
        pub fn $walk_expr<V: $visit + ?Sized>(v: &mut V, e: &$($m)? Expr) {
            match &$($m)? e.kind {
                ExprKind::Const(_)
                | ExprKind::Local(_)
                | ExprKind::PktLen
                | ExprKind::PktQueue
                | ExprKind::PktArrival
                | ExprKind::PktInfo { .. } => {}
                ExprKind::Bin(_, a, b)
                | ExprKind::Cmp(_, a, b)
                | ExprKind::And(a, b)
                | ExprKind::Or(a, b) => {
                    v.visit_expr(a);
                    v.visit_expr(b);
                }
                ExprKind::Neg(a) | ExprKind::Inv(a) | ExprKind::Not(a) | ExprKind::Cast(a) => {
                    v.visit_expr(a)
                }
                ExprKind::IfExp(c, a, b) => {
                    v.visit_expr(c);
                    v.visit_expr(a);
                    v.visit_expr(b);
                }
                ExprKind::CallNf { args, .. } | ExprKind::CallChain { args, .. } => {
                    for a in args {
                        v.visit_expr(a);
                    }
                }
                ExprKind::PktRead { off, .. } => v.visit_expr(off),
                ExprKind::MapGet { key, default, .. } => {
                    for k in key {
                        v.visit_expr(k);
                    }
                    if let Some(d) = default {
                        v.visit_expr(d);
                    }
                }
                ExprKind::MapHas { key, .. } => {
                    for k in key {
                        v.visit_expr(k);
                    }
                }
            }
        }
    };
}

walker!(
    /// A read-only analysis of the IR.
    Visit,
    walk_block,
    walk_stmt,
    walk_expr
);

walker!(
    /// A rewrite of the IR in place (e.g. renumbering references).
    VisitMut,
    walk_block_mut,
    walk_stmt_mut,
    walk_expr_mut,
    mut
);
