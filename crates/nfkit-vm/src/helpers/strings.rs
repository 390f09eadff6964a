//! The string helpers of every program type: `bpf_strtol`,
//! `bpf_strtoul` (the kernel's `__bpf_strtoull`: leading white space, a
//! sign, base 0/8/10/16 with the `0`/`0x` prefixes of `kstrtoull`, at
//! most 63 characters looked at, `-ERANGE` on overflow) and `bpf_strncmp`
//! (-1, 0 or 1, as the kernel's `strncmp`).

#![forbid(unsafe_code)]

const EINVAL: i64 = 22;
const ERANGE: i64 = 34;

/// `__bpf_strtoull`: (bytes consumed, value, negative) or the errno.
fn strtoull(buf: &[u8], flags: u64) -> Result<(usize, u64, bool), i64> {
    let mut base = (flags & 0x1f) as u32;
    if flags & !0x1f != 0 || buf.is_empty() || ![0, 8, 10, 16].contains(&base) {
        return Err(-EINVAL);
    }
    let mut i = buf
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0))
        .unwrap_or(buf.len());
    let negative = buf.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let consumed = i;
    if consumed == buf.len() {
        return Err(-EINVAL);
    }
    // The kernel copies at most 63 characters and stops at a NUL.
    let rest = &buf[i..buf.len().min(i + 63)];
    let rest = &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())];
    let lower = |k: usize| rest.get(k).map(u8::to_ascii_lowercase);
    let mut s = 0;
    if base == 0 {
        base = if rest.first() == Some(&b'0') {
            if lower(1) == Some(b'x') && rest.get(2).is_some_and(u8::is_ascii_hexdigit) {
                16
            } else {
                8
            }
        } else {
            10
        };
    }
    if base == 16 && rest.first() == Some(&b'0') && lower(1) == Some(b'x') {
        s = 2;
    }
    let (mut v, mut n, mut overflow) = (0u64, 0usize, false);
    for &c in &rest[s..] {
        let d = match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            b'a'..=b'f' => u32::from(c - b'a') + 10,
            b'A'..=b'F' => u32::from(c - b'A') + 10,
            _ => break,
        };
        if d >= base {
            break;
        }
        match v
            .checked_mul(u64::from(base))
            .and_then(|x| x.checked_add(u64::from(d)))
        {
            Some(x) => v = x,
            None => overflow = true,
        }
        n += 1;
    }
    if overflow {
        return Err(-ERANGE);
    }
    if n == 0 {
        return Err(-EINVAL);
    }
    Ok((consumed + s + n, v, negative))
}

/// `bpf_strtol`: (return value, the value to store when it succeeds).
pub fn strtol(buf: &[u8], flags: u64) -> (i64, Option<i64>) {
    match strtoull(buf, flags) {
        Err(e) => (e, None),
        Ok((_, v, true)) if (v.wrapping_neg() as i64) > 0 => (-ERANGE, None),
        Ok((n, v, true)) => (n as i64, Some(v.wrapping_neg() as i64)),
        Ok((_, v, false)) if (v as i64) < 0 => (-ERANGE, None),
        Ok((n, v, false)) => (n as i64, Some(v as i64)),
    }
}

/// `bpf_strtoul`.
pub fn strtoul(buf: &[u8], flags: u64) -> (i64, Option<u64>) {
    match strtoull(buf, flags) {
        Err(e) => (e, None),
        Ok((_, _, true)) => (-EINVAL, None),
        Ok((n, v, false)) => (n as i64, Some(v)),
    }
}

/// `strncmp(s1, s2, n)` as the kernel's: -1, 0 or 1.
pub fn strncmp(s1: &[u8], s2: &[u8]) -> i64 {
    for (i, &a) in s1.iter().enumerate() {
        let b = s2.get(i).copied().unwrap_or(0);
        if a != b {
            return if a < b { -1 } else { 1 };
        }
        if a == 0 {
            break;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_the_kernel() {
        assert_eq!(strtol(b"  -42x", 0), (5, Some(-42)));
        assert_eq!(strtol(b"0x1F", 0), (4, Some(31)));
        assert_eq!(strtol(b"017", 0), (3, Some(15)));
        assert_eq!(strtol(b"0x", 16).0, -EINVAL);
        assert_eq!(strtol(b"9", 8).0, -EINVAL);
        assert_eq!(strtol(b"9223372036854775808", 10).0, -ERANGE);
        assert_eq!(strtol(b"-9223372036854775808", 10).1, Some(i64::MIN));
        assert_eq!(strtoul(b"-1", 10).0, -EINVAL);
        assert_eq!(strtoul(b"18446744073709551616", 10).0, -ERANGE);
        assert_eq!(strtoul(b"12", 3).0, -EINVAL);
        assert_eq!(strncmp(b"abc", b"abd\0"), -1);
        assert_eq!(strncmp(b"ab", b"abd\0"), 0);
        assert_eq!(strncmp(b"abe", b"abd\0"), 1);
    }
}
