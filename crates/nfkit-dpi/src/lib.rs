//! Deep packet inspection for nfkit: a set of regular expressions
//! becomes one minimised DFA, laid out as the tables the catalogue's
//! `dpi` NF (`nf/dpi.c`) walks over a packet's payload.
//!
//! * [`catalogue`]: the pattern sets nfkit ships (SQL injection,
//!   BitTorrent, protocol identifiers), by name.
//! * [`compile`]: patterns to a [`Dfa`] ([`compile()`], [`Options`]):
//!   `regex-automata` builds and minimises the automaton; nfkit numbers
//!   its states densely and enforces a state budget, naming the pattern
//!   that blows it up.
//! * [`dfa`]: the [`Dfa`] (a 257-column table per state: 256 bytes and
//!   end of input, plus the pattern each state reports), its reference
//!   scan ([`Dfa::scan`], what the NF computes) and [`Match`].
//! * [`file`]: a [`Dfa`] as a file ([`Dfa::to_bytes`],
//!   [`Dfa::from_bytes`]; `nfkit dpi compile -o`).
//! * [`patterns`]: pattern files (one regex a line, `#` comments).
//! * [`tables`]: several pattern sets in the NF's maps
//!   ([`Tables`]: `nf_dpi_next`, `nf_dpi_accept`, `nf_dpi_sets`).
//! * [`error`] holds [`DpiError`].

pub mod catalogue;
pub mod compile;
pub mod dfa;
pub mod error;
pub mod file;
pub mod patterns;
pub mod tables;

pub use compile::{compile, Options};
pub use dfa::{Dfa, Match};
pub use error::DpiError;
pub use tables::Tables;
