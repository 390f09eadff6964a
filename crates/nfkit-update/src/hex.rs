//! Hex digits (key files).

/// `bytes` as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(D[usize::from(b >> 4)]));
        s.push(char::from(D[usize::from(b & 15)]));
    }
    s
}

/// The bytes of `text` (an even number of hex digits, either case);
/// `None` when it is not.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(2) {
        return None;
    }
    t.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_refusals() {
        let b = [0u8, 1, 0x7f, 0xab, 0xff];
        assert_eq!(super::encode(&b), "00017fabff");
        assert_eq!(super::decode("00017FABff").as_deref(), Some(&b[..]));
        assert_eq!(super::decode("0"), None);
        assert_eq!(super::decode("0g"), None);
    }
}
