//! Offload (issue 19, first slice): an XDP program's stateless paths as
//! tc flower rules.
//!
//! * [`pattern`]: [`Pattern`], a ternary match on packet bits plus a
//!   minimum length: what one path requires of a packet.
//! * [`value`]: the symbolic values the executor computes with (bits of
//!   the packet, constants, pointers).
//! * [`source`]: [`MapSource`], the current contents of the maps.
//! * [`symbolic`]: the symbolic executor: [`analyse`] an entry of an
//!   [`Image`](nfkit_object::Image) into [`Path`]s, each a pattern and a
//!   verdict or "software", with the counter additions along it.
//! * [`hoist`]: uniform regions (a source whose every packet is
//!   dropped) as rules before all paths, and [`RegionCache`], their
//!   analyses kept across map syncs.
//! * [`derive`]: [`Deriver`], map sync's timed derivation (analysis,
//!   regions from the cache, rules).
//! * [`rewrite`]: header rewrites (pedit edits, `csum` fix-ups) a
//!   path makes before its TX or redirect; [`csum`]: the checksum sums
//!   the executor follows to prove a fix-up; [`pedit`]: a rewrite as
//!   tc's `pedit` and `csum` actions (netlink) and back.
//! * [`fields`]: the header field model: which pattern bits name flower
//!   keys.
//! * [`fold`]: rule hit counts folded into the program's verdict
//!   counters.
//! * [`guard`]: `u32` guard rules keeping frames outside the field
//!   model (IP version, IPv4 options) from the flower rules.
//! * [`rules`]: paths to prioritised flower [`Rule`]s (first-match order,
//!   merging, rule budget) and their `tc filter add` text.
//! * [`flower`]: a rule as the kernel's flower classifier takes it
//!   (netlink attributes) and back.
//! * [`netlink`]: [`Tc`], the rtnetlink socket: clsact qdisc, flower
//!   filters added, listed with their counts, deleted.
//! * [`u32match`]: rules flower cannot match exactly (UDP ports) as
//!   `u32` filters, whose keys match the frame's bytes where they are.
//! * [`record`]: [`Installed`], what `nfkit offload` installed where
//!   (the offload state file).
//! * [`switch`]: replacing installed rules at fresh priorities so that
//!   no frame meets a mix of old and new rules.
//! * [`model`]: flower matching on a frame and the equivalence check
//!   "rules, then the program" against "the program alone".
//! * [`writes`]: which maps a program may write, by a pointer-provenance
//!   scan over its bytecode.
//! * [`error`] holds [`OffloadError`].

#![forbid(unsafe_code)]

pub mod csum;
pub mod derive;
pub mod error;
pub mod fields;
pub mod flower;
pub mod fold;
pub mod guard;
pub mod hoist;
pub mod model;
pub mod netlink;
pub mod pattern;
pub mod pedit;
pub mod record;
pub mod rewrite;
pub mod rules;
pub mod source;
pub mod switch;
pub mod symbolic;
pub mod u32match;
pub mod value;
pub mod writes;

pub use derive::{Derivation, Deriver};
pub use error::OffloadError;
pub use hoist::{hoist, hoist_cached, RegionCache};
pub use model::{Decision, Equivalence};
pub use netlink::{NetlinkError, Tc};
pub use pattern::Pattern;
pub use record::{Installed, OffloadState, RecordError};
pub use rewrite::{Edit, Rewrite};
pub use rules::{generate, Rule, RuleAction, RuleSet, RulesOptions};
pub use source::MapSource;
pub use switch::{SwitchError, SwitchPlan};
pub use symbolic::{analyse, analyse_within, Analysis, Count, Limits, Outcome, Path, XdpAction};
