//! Authenticated live updates (docs/update.md): what a controller sends a
//! switch to change a running program or a table entry, signed with a
//! keyed BLAKE3 MAC, and what the switch does before trusting it.
//!
//! * [`position`]: where an update applies ([`Position`]: `pre`,
//!   `table:NAME`, `post:PORT`).
//! * [`message`]: the versioned binary message ([`Message`], [`Body`]):
//!   encoding and signing ([`Message::seal`]), parsing ([`parse`]).
//! * [`key`]: keys and key files with key ids ([`KeyRing`]); a key file
//!   readable by group or others is refused.
//! * [`verify`]: the [`Verifier`], the per-switch state (current
//!   version per position, nonces seen), and why it refuses ([`Refusal`]).
//! * [`hex`]: the hex digits of key files.

pub mod hex;
pub mod key;
pub mod message;
pub mod position;
pub mod verify;

pub use key::{Key, KeyError, KeyRing};
pub use message::{parse, Body, CodeFormat, Message, Parsed};
pub use position::Position;
pub use verify::{Refusal, Verifier};
