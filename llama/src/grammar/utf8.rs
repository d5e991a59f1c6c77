//! UTF-8 decoding as llama.cpp's grammar does it: code points of a token's piece,
//! continuing a sequence a previous piece left unfinished, and the unfinished tail.

/// An unfinished UTF-8 sequence carried from one piece to the next (llama.cpp's
/// `llama_partial_utf8`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartialUtf8 {
    /// The bits decoded so far (not shifted into place).
    pub value: u32,
    /// Continuation bytes still expected; 0 when complete, -1 after an invalid byte.
    pub n_remain: i32,
}

impl PartialUtf8 {
    /// Whether the sequence is invalid.
    pub fn is_invalid(self) -> bool {
        self.n_remain < 0
    }
}

/// Sequence length by the high nibble of a lead byte (0: a continuation byte).
const LEAD_LEN: [i32; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];

/// Appends to `out` the code points of `bytes` (up to a NUL byte), starting inside
/// the sequence `start` left open, and returns the state after the last byte. An
/// invalid lead or continuation byte clears what this piece added and returns an
/// invalid state (as llama.cpp's `decode_utf8`, whose result then matches nothing).
pub fn decode(bytes: &[u8], start: PartialUtf8, out: &mut Vec<u32>) -> PartialUtf8 {
    let base = out.len();
    let bytes = match bytes.iter().position(|&b| b == 0) {
        Some(n) => &bytes[..n],
        None => bytes,
    };
    let mut pos = 0;
    let mut value = start.value;
    let mut n_remain = start.n_remain;
    while pos < bytes.len() && n_remain > 0 {
        let b = bytes[pos];
        if b >> 6 != 2 {
            return PartialUtf8 {
                value: 0,
                n_remain: -1,
            };
        }
        value = (value << 6) + u32::from(b & 0x3F);
        pos += 1;
        n_remain -= 1;
    }
    if start.n_remain > 0 && n_remain == 0 {
        out.push(value);
    }
    while pos < bytes.len() {
        let first = bytes[pos];
        n_remain = LEAD_LEN[usize::from(first >> 4)] - 1;
        if n_remain < 0 {
            out.truncate(base);
            return PartialUtf8 { value: 0, n_remain };
        }
        let mask = (1u32 << (7 - n_remain)) - 1;
        value = u32::from(first) & mask;
        pos += 1;
        while pos < bytes.len() && n_remain > 0 {
            value = (value << 6) + u32::from(bytes[pos] & 0x3F);
            pos += 1;
            n_remain -= 1;
        }
        if n_remain == 0 {
            out.push(value);
        }
    }
    PartialUtf8 { value, n_remain }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(b: &[u8], s: PartialUtf8) -> (Vec<u32>, PartialUtf8) {
        let mut v = Vec::new();
        let p = decode(b, s, &mut v);
        (v, p)
    }

    #[test]
    fn whole_and_split_sequences() {
        let (v, p) = dec("aé€".as_bytes(), PartialUtf8::default());
        assert_eq!(v, vec!['a' as u32, 'é' as u32, '€' as u32]);
        assert_eq!(p.n_remain, 0);
        // "€" is E2 82 AC: split after its first byte.
        let (v, p) = dec(&[b'x', 0xE2], PartialUtf8::default());
        assert_eq!(v, vec!['x' as u32]);
        assert_eq!(
            p,
            PartialUtf8 {
                value: 2,
                n_remain: 2
            }
        );
        let (v, p) = dec(&[0x82, 0xAC, b'y'], p);
        assert_eq!(v, vec!['€' as u32, 'y' as u32]);
        assert_eq!(p.n_remain, 0);
    }

    #[test]
    fn invalid_bytes_and_nul() {
        let (v, p) = dec(&[b'a', 0x80], PartialUtf8::default());
        assert!(v.is_empty() && p.is_invalid());
        let (v, p) = dec(
            b"a",
            PartialUtf8 {
                value: 2,
                n_remain: 1,
            },
        );
        assert!(v.is_empty() && p.is_invalid());
        let (v, _) = dec(b"ab\0cd", PartialUtf8::default());
        assert_eq!(v, vec!['a' as u32, 'b' as u32]);
    }
}
