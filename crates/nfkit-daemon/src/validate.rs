//! Checks on request fields before anything runs: names, sizes, enum
//! values. A bad field is an `INVALID_ARGUMENT` that names the field and
//! says what is accepted.

use crate::proto;
use nfkit_abi::AttachPoint;
use nfkit_control::Mode;
use tonic::Status;

/// Longest script accepted inline (bytes); the request limit may be lower.
pub const MAX_SOURCE: usize = 1 << 20;
/// Longest key or value text.
pub const MAX_TEXT: usize = 4096;

fn bad(field: &str, what: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {what}"))
}

fn chars_ok(s: &str, extra: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// An interface name (empty allowed when `optional`).
pub fn dev(s: &str, optional: bool) -> Result<Option<String>, Status> {
    if s.is_empty() {
        return if optional {
            Ok(None)
        } else {
            Err(bad("dev", "an interface name is needed"))
        };
    }
    if s.len() > 15 || !chars_ok(s, "_.:@-") || s == "." || s == ".." {
        return Err(bad(
            "dev",
            format!(
                "{:?} is not an interface name ([A-Za-z0-9_.:@-], at most 15 characters)",
                clip(s)
            ),
        ));
    }
    Ok(Some(s.to_string()))
}

/// Most output devices a pipeline deploy names.
pub const MAX_POST_DEVS: usize = 64;

/// A pipeline's output devices (`post_devs`): interface names, no
/// repeats, at most [`MAX_POST_DEVS`].
pub fn post_devs(v: &[String]) -> Result<Vec<String>, Status> {
    if v.len() > MAX_POST_DEVS {
        return Err(bad(
            "post_devs",
            format!("{} devices: at most {MAX_POST_DEVS}", v.len()),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(v.len());
    for d in v {
        let d = dev(d, false)
            .map_err(|s| bad("post_devs", s.message().trim_start_matches("dev: ")))?
            .unwrap_or_default();
        if out.contains(&d) {
            return Err(bad("post_devs", format!("{d:?} is named twice")));
        }
        out.push(d);
    }
    Ok(out)
}

/// A named network namespace (empty: none).
pub fn netns(s: &str) -> Result<Option<String>, Status> {
    if s.is_empty() {
        return Ok(None);
    }
    if s.len() > 64 || !chars_ok(s, "_.-") || s.starts_with('.') {
        return Err(bad(
            "netns",
            format!(
                "{:?} is not a namespace name ([A-Za-z0-9_.-], at most 64, not starting with '.')",
                clip(s)
            ),
        ));
    }
    Ok(Some(s.to_string()))
}

/// A chain name.
pub fn chain_name(s: &str) -> Result<String, Status> {
    if s.is_empty() || s.len() > 64 || !chars_ok(s, "_.-") || s.starts_with('.') {
        return Err(bad(
            "name",
            format!(
                "{:?} is not a chain name ([A-Za-z0-9_.-], 1 to 64 characters, not starting with '.')",
                clip(s)
            ),
        ));
    }
    Ok(s.to_string())
}

/// A map name.
pub fn map_name(s: &str) -> Result<String, Status> {
    if s.is_empty() || s.len() > 64 || !chars_ok(s, "_.") {
        return Err(bad(
            "map.name",
            format!(
                "{:?} is not a map name ([A-Za-z0-9_.], 1 to 64 characters)",
                clip(s)
            ),
        ));
    }
    Ok(s.to_string())
}

/// A watch stream's `interval_ms`: 0 means 1000, else 100 to 60,000.
pub fn interval_ms(n: u32) -> Result<u32, Status> {
    match n {
        0 => Ok(1000),
        100..=60_000 => Ok(n),
        _ => Err(Status::invalid_argument(format!(
            "interval_ms: {n} is outside 100..=60000 (0: 1000)"
        ))),
    }
}

/// Key or value text.
pub fn text(field: &str, s: &str) -> Result<String, Status> {
    if s.is_empty() || s.len() > MAX_TEXT || s.chars().any(char::is_control) {
        return Err(bad(
            field,
            format!("1 to {MAX_TEXT} characters without control characters"),
        ));
    }
    Ok(s.to_string())
}

/// A file name or path shown in messages and status.
pub fn label(field: &str, s: &str) -> Result<String, Status> {
    if s.len() > MAX_TEXT || s.chars().any(char::is_control) {
        return Err(bad(
            field,
            format!("at most {MAX_TEXT} characters without control characters"),
        ));
    }
    Ok(s.to_string())
}

/// Script text.
pub fn source(s: &str) -> Result<(), Status> {
    if s.len() > MAX_SOURCE {
        return Err(bad(
            "source",
            format!("{} bytes, at most {MAX_SOURCE}", s.len()),
        ));
    }
    if s.contains('\0') {
        return Err(bad("source", "contains a NUL byte"));
    }
    Ok(())
}

/// An attach point (`None`: unspecified).
pub fn attach(field: &str, v: i32) -> Result<Option<AttachPoint>, Status> {
    use proto::AttachPoint as P;
    match P::try_from(v) {
        Ok(P::Unspecified) => Ok(None),
        Ok(P::Xdp) => Ok(Some(AttachPoint::Xdp)),
        Ok(P::XdpGeneric) => Ok(Some(AttachPoint::XdpGeneric)),
        Ok(P::TcIngress) => Ok(Some(AttachPoint::TcIngress)),
        Ok(P::TcEgress) => Ok(Some(AttachPoint::TcEgress)),
        Err(_) => Err(bad(
            field,
            format!("{v} is not an attach point (1 xdp, 2 xdp-generic, 3 tc-ingress, 4 tc-egress)"),
        )),
    }
}

/// The wire value of an attach point.
pub fn attach_wire(a: AttachPoint) -> i32 {
    use proto::AttachPoint as P;
    (match a {
        AttachPoint::Xdp => P::Xdp,
        AttachPoint::XdpGeneric => P::XdpGeneric,
        AttachPoint::TcIngress => P::TcIngress,
        AttachPoint::TcEgress => P::TcEgress,
        AttachPoint::Socket => P::Unspecified,
    }) as i32
}

/// A deploy mode.
pub fn mode(v: i32) -> Result<Mode, Status> {
    use proto::DeployMode as P;
    match P::try_from(v) {
        Ok(P::Unspecified | P::Static) => Ok(Mode::Static),
        Ok(P::Dynamic) => Ok(Mode::Dynamic),
        Err(_) => Err(bad(
            "mode",
            format!("{v} is not a mode (1 static, 2 dynamic)"),
        )),
    }
}

/// At most 40 characters of `s`, for messages.
fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_errors_name_the_field() {
        assert_eq!(dev("veth0", false).unwrap().as_deref(), Some("veth0"));
        assert!(dev("", true).unwrap().is_none());
        let e = dev("../../etc", false).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().starts_with("dev: "), "{}", e.message());
        assert!(dev("a-very-long-interface", false).is_err());
        assert!(netns("../x").is_err() && netns("ns-1").is_ok());
        assert!(chain_name("acl.v2").is_ok() && chain_name(".hidden").is_err());
        assert!(map_name("seen").is_ok() && map_name("a/b").is_err());
        assert!(attach("attach", 9).is_err() && attach("attach", 2).unwrap().is_some());
        assert!(mode(3).is_err());
        assert!(text("key", "1\n2").is_err());
    }
}
