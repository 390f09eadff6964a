//! Where an update applies in a switch's pipeline.

use std::fmt;
use std::str::FromStr;

/// A pipeline position: `pre` (the script run on arrival), a
/// match-action table (its entries, or the code its actions call), a
/// port's `post` program.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Position {
    /// The program run on every frame on arrival.
    Pre,
    /// A match-action table (its entries, or its extern) by name.
    Table(String),
    /// The program run before transmission on a port, by port name.
    Post(String),
}

impl Position {
    /// The position's code in the message.
    pub fn code(&self) -> u8 {
        match self {
            Position::Pre => 1,
            Position::Table(_) => 2,
            Position::Post(_) => 3,
        }
    }

    /// The name carried with it (empty for `pre`).
    pub fn name(&self) -> &str {
        match self {
            Position::Pre => "",
            Position::Table(n) | Position::Post(n) => n,
        }
    }

    /// The position of `code` and `name`; `None` for an unknown code or
    /// a name where none belongs (or none where one does).
    pub fn from_parts(code: u8, name: &str) -> Option<Position> {
        match (code, name.is_empty()) {
            (1, true) => Some(Position::Pre),
            (2, false) => Some(Position::Table(name.to_string())),
            (3, false) => Some(Position::Post(name.to_string())),
            _ => None,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Pre => f.write_str("pre"),
            Position::Table(n) => write!(f, "table:{n}"),
            Position::Post(n) => write!(f, "post:{n}"),
        }
    }
}

/// Why a position's text is not one.
#[derive(Debug, thiserror::Error)]
#[error("position `{0}`: expected `pre`, `table:NAME` or `post:PORT`")]
pub struct BadPosition(pub String);

impl FromStr for Position {
    type Err = BadPosition;
    fn from_str(s: &str) -> Result<Position, BadPosition> {
        let bad = || BadPosition(s.to_string());
        if s == "pre" {
            return Ok(Position::Pre);
        }
        let (kind, name) = s.split_once(':').ok_or_else(bad)?;
        if name.is_empty() || name.len() > usize::from(u8::MAX) {
            return Err(bad());
        }
        match kind {
            "table" => Ok(Position::Table(name.to_string())),
            "post" => Ok(Position::Post(name.to_string())),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_parts_round_trip() {
        for p in ["pre", "table:acl", "post:p2"] {
            let pos: Position = p.parse().expect(p);
            assert_eq!(pos.to_string(), p);
            assert_eq!(Position::from_parts(pos.code(), pos.name()), Some(pos));
        }
        for bad in ["", "post", "table:", "mid:x", "PRE"] {
            assert!(bad.parse::<Position>().is_err(), "{bad}");
        }
        assert_eq!(Position::from_parts(1, "x"), None);
        assert_eq!(Position::from_parts(2, ""), None);
        assert_eq!(Position::from_parts(9, "x"), None);
    }
}
