//! Code point properties and UTF-8 handling, with llama.cpp's exact conventions.
//!
//! llama.cpp decodes text with its own lenient decoder (an invalid byte becomes
//! U+FFFD and decoding resumes at the next byte) and classifies code points with
//! tables generated from Unicode 15.1; both matter for matching its token ids.

use super::unicode_tables::{FLAG_RANGES, LOWERCASE, NFD_FIRST};

/// Category and white-space flags of one code point (llama.cpp's `unicode_cpt_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CptFlags(u16);

impl CptFlags {
    pub(crate) const UNDEFINED: u16 = 0x0001;
    pub(crate) const NUMBER: u16 = 0x0002;
    pub(crate) const LETTER: u16 = 0x0004;
    pub(crate) const MARK: u16 = 0x0010;
    pub(crate) const PUNCTUATION: u16 = 0x0020;
    pub(crate) const SYMBOL: u16 = 0x0040;
    pub(crate) const CONTROL: u16 = 0x0080;
    pub(crate) const WHITESPACE: u16 = 0x0100;

    /// Flags of a position outside the text: no bit set, unlike any code point.
    pub(crate) const NONE: CptFlags = CptFlags(0);

    pub(crate) fn bits(self) -> u16 {
        self.0
    }
    /// The general-category bit alone (`\p{L}`, `\p{N}`, ...).
    pub(crate) fn category(self) -> u16 {
        self.0 & 0x00FF
    }
    pub(crate) fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    pub(crate) fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    pub(crate) fn is_mark(self) -> bool {
        self.0 & Self::MARK != 0
    }
    pub(crate) fn is_punctuation(self) -> bool {
        self.0 & Self::PUNCTUATION != 0
    }
    pub(crate) fn is_symbol(self) -> bool {
        self.0 & Self::SYMBOL != 0
    }
    pub(crate) fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }
    pub(crate) fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }
}

/// The flags of `cpt`; code points past U+10FFFF are undefined.
pub(crate) fn flags(cpt: u32) -> CptFlags {
    if cpt >= 0x11_0000 {
        return CptFlags(CptFlags::UNDEFINED);
    }
    let i = FLAG_RANGES.partition_point(|&(start, _)| start <= cpt);
    // FLAG_RANGES starts at 0, so i >= 1.
    CptFlags(FLAG_RANGES[i - 1].1)
}

/// The simple lowercase mapping of `cpt`, or `cpt` itself.
pub(crate) fn to_lower(cpt: u32) -> u32 {
    match LOWERCASE.binary_search_by_key(&cpt, |&(c, _)| c) {
        Ok(i) => LOWERCASE[i].1,
        Err(_) => cpt,
    }
}

/// The first code point of the NFD decomposition of `cpt` (what llama.cpp keeps).
pub(crate) fn nfd_first(cpt: u32) -> u32 {
    let i = NFD_FIRST.partition_point(|&(first, _, _)| first <= cpt);
    match i.checked_sub(1).map(|i| NFD_FIRST[i]) {
        Some((first, last, nfd)) if first <= cpt && cpt <= last => nfd,
        _ => cpt,
    }
}

/// The length of the UTF-8 sequence a lead byte announces (1 for stray continuation bytes).
pub(crate) fn utf8_len(lead: u8) -> usize {
    const LOOKUP: [u8; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(lead >> 4) as usize] as usize
}

/// The code point starting at `bytes[0]` and its length, or `None` when the bytes
/// are not a sequence llama.cpp accepts (it accepts overlong forms and surrogates).
fn decode_one(bytes: &[u8]) -> Option<(u32, usize)> {
    let b0 = *bytes.first()? as u32;
    let cont = |i: usize| match bytes.get(i) {
        Some(&b) if b & 0xC0 == 0x80 => Some((b & 0x3F) as u32),
        _ => None,
    };
    if b0 & 0x80 == 0 {
        return Some((b0, 1));
    }
    if b0 & 0x40 == 0 {
        return None;
    }
    if b0 & 0x20 == 0 {
        return Some((((b0 & 0x1F) << 6) | cont(1)?, 2));
    }
    if b0 & 0x10 == 0 {
        return Some((((b0 & 0x0F) << 12) | (cont(1)? << 6) | cont(2)?, 3));
    }
    if b0 & 0x08 == 0 {
        let cpt = ((b0 & 0x07) << 18) | (cont(1)? << 12) | (cont(2)? << 6) | cont(3)?;
        // llama.cpp throws later on these when it re-encodes them; treat them as invalid.
        return (cpt < 0x11_0000).then_some((cpt, 4));
    }
    None
}

/// Decodes `bytes` like llama.cpp's `unicode_cpts_from_utf8`: each byte that does not
/// start a valid sequence becomes U+FFFD, and decoding resumes at the next byte.
pub(crate) fn cpts_from_utf8(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match decode_one(&bytes[i..]) {
            Some((cpt, n)) => {
                out.push(cpt);
                i += n;
            }
            None => {
                out.push(0xFFFD);
                i += 1;
            }
        }
    }
    out
}

/// Appends the UTF-8 encoding of `cpt` (any value up to U+10FFFF, surrogates included).
pub(crate) fn push_utf8(out: &mut Vec<u8>, cpt: u32) {
    match cpt {
        0..=0x7F => out.push(cpt as u8),
        0x80..=0x7FF => {
            out.extend_from_slice(&[0xC0 | (cpt >> 6) as u8, 0x80 | (cpt & 0x3F) as u8])
        }
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (cpt >> 12) as u8,
            0x80 | ((cpt >> 6) & 0x3F) as u8,
            0x80 | (cpt & 0x3F) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xF0 | ((cpt >> 18) & 0x07) as u8,
            0x80 | ((cpt >> 12) & 0x3F) as u8,
            0x80 | ((cpt >> 6) & 0x3F) as u8,
            0x80 | (cpt & 0x3F) as u8,
        ]),
    }
}

/// GPT-2's byte-to-unicode map: byte `b` is written as code point `BYTE_TO_CPT[b]`,
/// so that every byte of a byte-level BPE token is a printable character.
pub(crate) static BYTE_TO_CPT: [u16; 256] = byte_to_cpt_table();

const fn byte_to_cpt_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut n = 0u16;
    let mut b = 0usize;
    while b < 256 {
        let printable =
            (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if printable {
            table[b] = b as u16;
        } else {
            table[b] = 256 + n;
            n += 1;
        }
        b += 1;
    }
    table
}

/// The byte GPT-2's byte-to-unicode map writes as `cpt`, if any.
pub(crate) fn cpt_to_byte(cpt: u32) -> Option<u8> {
    match cpt {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cpt as u8),
        0x100..=0x143 => BYTE_TO_CPT
            .iter()
            .position(|&c| c as u32 == cpt)
            .map(|b| b as u8),
        _ => None,
    }
}

/// Appends `bytes` written with GPT-2's byte-to-unicode map.
pub(crate) fn push_byte_encoded(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        push_utf8(out, BYTE_TO_CPT[b as usize] as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_of_ascii_and_beyond() {
        assert!(flags('a' as u32).is_letter());
        assert!(flags('7' as u32).is_number());
        assert!(flags(' ' as u32).is_whitespace());
        assert!(flags('\u{3000}' as u32).is_whitespace());
        assert!(flags('!' as u32).is_punctuation());
        assert!(flags('$' as u32).is_symbol());
        assert!(flags(0x0301).is_mark());
        assert!(flags(0x0085).is_control() && flags(0x0085).is_whitespace());
        // U+2FFC was added in Unicode 15.1, the version llama.cpp's tables use.
        assert!(flags(0x2FFC).is_symbol());
        assert_eq!(flags(0x11_0000).bits(), CptFlags::UNDEFINED);
        assert_eq!(flags(0x10FFFF).bits(), CptFlags::UNDEFINED);
    }

    #[test]
    fn lowercase_and_nfd() {
        assert_eq!(to_lower('A' as u32), 'a' as u32);
        assert_eq!(to_lower(0x0130), 'i' as u32);
        assert_eq!(to_lower('a' as u32), 'a' as u32);
        assert_eq!(nfd_first('é' as u32), 'e' as u32);
        assert_eq!(nfd_first('e' as u32), 'e' as u32);
    }

    #[test]
    fn lenient_decoding_matches_llama_cpp() {
        assert_eq!(
            cpts_from_utf8("aé€😀".as_bytes()),
            vec![0x61, 0xE9, 0x20AC, 0x1F600]
        );
        // A truncated sequence yields one U+FFFD per byte.
        assert_eq!(
            cpts_from_utf8(&[0xE2, 0x82, b'a']),
            vec![0xFFFD, 0xFFFD, 0x61]
        );
        // Surrogates and overlong forms pass, as in llama.cpp.
        assert_eq!(cpts_from_utf8(&[0xED, 0xA0, 0x80]), vec![0xD800]);
        assert_eq!(cpts_from_utf8(&[0xC0, 0x80]), vec![0]);
        let mut out = Vec::new();
        push_utf8(&mut out, 0xD800);
        assert_eq!(out, [0xED, 0xA0, 0x80]);
    }

    #[test]
    fn byte_map_round_trips() {
        assert_eq!(BYTE_TO_CPT[b' ' as usize], 0x120); // 'Ġ'
        assert_eq!(BYTE_TO_CPT[b'\n' as usize], 0x10A); // 'Ċ'
        for b in 0..=255u8 {
            assert_eq!(cpt_to_byte(BYTE_TO_CPT[b as usize] as u32), Some(b));
        }
        assert_eq!(cpt_to_byte(0x20), None);
        assert_eq!(utf8_len(0xE2), 3);
        assert_eq!(utf8_len(0x80), 1);
    }
}
