//! What can go wrong compiling patterns.

/// A pattern set that cannot become an NF's tables.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DpiError {
    /// No pattern given.
    #[error("a pattern set needs at least one pattern")]
    Empty,
    /// A pattern is not a regular expression nfkit accepts.
    #[error("pattern {index} `{pattern}`: {why}")]
    Syntax {
        index: usize,
        pattern: String,
        why: String,
    },
    /// The DFA would have more states than the budget.
    #[error(
        "pattern {index} `{pattern}` makes the DFA too large (over {budget} states with it, at least {states}): \
         bound its repetitions (x{{0,40}} instead of x*), or split the set"
    )]
    TooManyStates {
        index: usize,
        pattern: String,
        states: usize,
        budget: usize,
    },
    /// The tables of several sets do not fit the NF's maps.
    #[error(
        "the pattern sets need {states} DFA states in all; the dpi NF's tables hold {capacity}"
    )]
    TablesFull { states: usize, capacity: usize },
    /// More sets than the NF's set table holds.
    #[error("{sets} pattern sets; the dpi NF holds {capacity}")]
    TooManySets { sets: usize, capacity: usize },
    /// A DFA file (`Dfa::from_bytes`) that is not one.
    #[error("DFA file, byte {offset}: {why}")]
    BadFile { offset: usize, why: String },
}
