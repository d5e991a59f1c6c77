//! Hand-written matchers for the most common pre-tokenizer patterns, as in llama.cpp's
//! `unicode_regex_split_custom_*`: they give the same pieces as the regexes (up to
//! llama.cpp's own deviations, which are kept) and run in linear time.

use super::pre_type::{GPT2, LLAMA3, NEWLINES, QWEN2, QWEN35};
use super::unicode::{flags, to_lower, CptFlags};

/// Which hand-written matcher a pattern has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CustomSplit {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
    Gpt2,
    /// The llama3 family: `(?i:'s|...)|[^\r\n\p{L}\p{N}]?LETTER+|\p{N}{1,DIGITS}| ?[^\s LETTER \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// where LETTER is `\p{L}` or `[\p{L}\p{M}]`.
    Llama3 {
        /// Longest digit run (3 for llama3, 1 for qwen2).
        max_digits: usize,
        /// Whether combining marks count as letters (qwen35).
        marks_are_letters: bool,
    },
    /// `[^\n]+|[\n]+`
    Newlines,
}

const LLAMA3_ORIG: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

impl CustomSplit {
    /// The hand-written matcher for exactly this pattern text, as llama.cpp picks them.
    pub(crate) fn for_pattern(pattern: &str) -> Option<CustomSplit> {
        Some(match pattern {
            GPT2 => CustomSplit::Gpt2,
            LLAMA3 | LLAMA3_ORIG => CustomSplit::Llama3 {
                max_digits: 3,
                marks_are_letters: false,
            },
            QWEN2 => CustomSplit::Llama3 {
                max_digits: 1,
                marks_are_letters: false,
            },
            QWEN35 => CustomSplit::Llama3 {
                max_digits: 1,
                marks_are_letters: true,
            },
            NEWLINES => CustomSplit::Newlines,
            _ => return None,
        })
    }

    /// Splits one chunk of code points, appending the piece lengths to `out`.
    pub(crate) fn split(self, cpts: &[u32], out: &mut Vec<usize>) {
        match self {
            CustomSplit::Gpt2 => gpt2(&mut Chunk::new(cpts, out)),
            CustomSplit::Llama3 {
                max_digits,
                marks_are_letters,
            } => llama3(&mut Chunk::new(cpts, out), max_digits, marks_are_letters),
            CustomSplit::Newlines => newlines(cpts, out),
        }
    }
}

/// Sentinel for positions outside the chunk.
const OUT_OF_RANGE: u32 = u32::MAX;

/// A chunk being split: lookups that answer "nothing" past the end, and the pieces so far.
struct Chunk<'a> {
    cpts: &'a [u32],
    out: &'a mut Vec<usize>,
    prev_end: usize,
}

impl<'a> Chunk<'a> {
    fn new(cpts: &'a [u32], out: &'a mut Vec<usize>) -> Self {
        Chunk {
            cpts,
            out,
            prev_end: 0,
        }
    }
    fn cpt(&self, pos: usize) -> u32 {
        self.cpts.get(pos).copied().unwrap_or(OUT_OF_RANGE)
    }
    fn flags(&self, pos: usize) -> CptFlags {
        self.cpts.get(pos).map_or(CptFlags::NONE, |&c| flags(c))
    }
    fn len(&self) -> usize {
        self.cpts.len()
    }
    /// Ends the current piece at `end`; returns its length.
    fn piece(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }
    /// The length of a contraction (`'s`, `'re`, ...) at `pos`, or 0.
    fn contraction(&self, pos: usize, ignore_case: bool) -> usize {
        if self.cpt(pos) != '\'' as u32 || pos + 1 >= self.len() {
            return 0;
        }
        let fold = |c: u32| if ignore_case { to_lower(c) } else { c };
        let next = fold(self.cpt(pos + 1));
        if [b's', b't', b'm', b'd'].iter().any(|&c| next == c as u32) {
            return 2;
        }
        if pos + 2 < self.len() {
            let next2 = fold(self.cpt(pos + 2));
            let pair = |a: u8, b: u8| next == a as u32 && next2 == b as u32;
            if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                return 3;
            }
        }
        0
    }
    /// How many white-space code points start at `pos`, and the end of the last `\r`/`\n` among them (0 if none).
    fn whitespace_run(&self, pos: usize) -> (usize, usize) {
        let mut n = 0;
        let mut last_newline_end = 0;
        while self.flags(pos + n).is_whitespace() {
            if matches!(self.cpt(pos + n), 0x0A | 0x0D) {
                last_newline_end = pos + n + 1;
            }
            n += 1;
        }
        (n, last_newline_end)
    }
}

impl Chunk<'_> {
    /// The last alternatives of both patterns: `\s+(?!\S)`, `\s+`, or else one code
    /// point on its own; `n_ws` white-space code points start at `pos`. Returns the new position.
    fn spaces_or_other(&mut self, pos: usize, n_ws: usize) -> usize {
        let end = if n_ws > 1 && self.cpt(pos + n_ws) != OUT_OF_RANGE {
            // leave the last space to start the next word
            pos + n_ws - 1
        } else {
            pos + n_ws.max(1)
        };
        self.piece(end);
        end
    }
}

fn is_symbolic(f: CptFlags, letter_mask: u16) -> bool {
    f.bits() & (CptFlags::WHITESPACE | letter_mask | CptFlags::NUMBER) == 0 && f.bits() != 0
}

fn gpt2(c: &mut Chunk) {
    let mut pos = 0;
    while pos < c.len() {
        let cpt = c.cpt(pos);
        let n = c.contraction(pos, false);
        if n > 0 {
            pos += c.piece(pos + n);
            continue;
        }
        let space = cpt == ' ' as u32;
        let f2 = if space {
            c.flags(pos + 1)
        } else {
            c.flags(pos)
        };
        // <space>?\p{L}+, <space>?\p{N}+, <space>?[^\s\p{L}\p{N}]+
        let run: Option<fn(CptFlags) -> bool> = if f2.is_letter() {
            Some(CptFlags::is_letter)
        } else if f2.is_number() {
            Some(CptFlags::is_number)
        } else if is_symbolic(f2, CptFlags::LETTER) {
            Some(|f| is_symbolic(f, CptFlags::LETTER))
        } else {
            None
        };
        if let Some(in_run) = run {
            pos += space as usize;
            while in_run(c.flags(pos)) {
                pos += 1;
            }
            c.piece(pos);
            continue;
        }
        let (n_ws, _) = c.whitespace_run(pos);
        pos = c.spaces_or_other(pos, n_ws);
    }
}

fn llama3(c: &mut Chunk, max_digits: usize, marks_are_letters: bool) {
    let letter_mask = CptFlags::LETTER | if marks_are_letters { CptFlags::MARK } else { 0 };
    let is_letter = |f: CptFlags| f.bits() & letter_mask != 0;
    let mut pos = 0;
    while pos < c.len() {
        let cpt = c.cpt(pos);
        let f = c.flags(pos);
        let n = c.contraction(pos, true);
        if n > 0 {
            pos += c.piece(pos + n);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(cpt == 0x0A || cpt == 0x0D || f.is_number())
            && (is_letter(f) || is_letter(c.flags(pos + 1)))
        {
            pos += 1;
            while is_letter(c.flags(pos)) {
                pos += 1;
            }
            c.piece(pos);
            continue;
        }
        // \p{N}{1,max_digits}
        if f.is_number() {
            let mut start = pos;
            while c.flags(pos).is_number() {
                pos += 1;
                if pos - start >= max_digits {
                    c.piece(pos);
                    start = pos;
                }
            }
            c.piece(pos);
            continue;
        }
        // <space>?[^\s\p{L}\p{N}]+[\r\n]*
        let mut f2 = if cpt == ' ' as u32 {
            c.flags(pos + 1)
        } else {
            f
        };
        // llama.cpp tests the flags of `pos` here, not of `pos + 1`, for "is inside the text".
        if f2.bits() & (CptFlags::WHITESPACE | letter_mask | CptFlags::NUMBER) == 0 && f.bits() != 0
        {
            pos += (cpt == ' ' as u32) as usize;
            while is_symbolic(f2, letter_mask) {
                pos += 1;
                f2 = c.flags(pos);
            }
            while matches!(c.cpt(pos), 0x0A | 0x0D) {
                pos += 1;
            }
            c.piece(pos);
            continue;
        }
        let (n_ws, last_newline_end) = c.whitespace_run(pos);
        if last_newline_end > 0 {
            // \s*[\r\n]+
            pos = last_newline_end;
            c.piece(pos);
            continue;
        }
        pos = c.spaces_or_other(pos, n_ws);
    }
}

fn newlines(cpts: &[u32], out: &mut Vec<usize>) {
    let mut pos = 0;
    while pos < cpts.len() {
        let newline = cpts[pos] == 0x0A;
        let start = pos;
        while pos < cpts.len() && (cpts[pos] == 0x0A) == newline {
            pos += 1;
        }
        out.push(pos - start);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The pieces of `text` (code point counts in `lens`) as strings; shared with the regex tests.
    pub(crate) fn pieces(text: &str, lens: &[usize]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut at = 0;
        lens.iter()
            .map(|&n| {
                at += n;
                chars[at - n..at].iter().collect()
            })
            .collect()
    }

    fn split(kind: CustomSplit, text: &str) -> Vec<String> {
        let cpts: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let mut lens = Vec::new();
        kind.split(&cpts, &mut lens);
        pieces(text, &lens)
    }

    #[test]
    fn gpt2_pieces() {
        let g = CustomSplit::for_pattern(GPT2).unwrap();
        assert_eq!(
            split(g, "Hello world's  123!!\n"),
            ["Hello", " world", "'s", " ", " 123", "!!", "\n"]
        );
        assert_eq!(split(g, "I'M"), ["I", "'", "M"]);
    }

    #[test]
    fn llama3_and_qwen2_pieces() {
        let l3 = CustomSplit::for_pattern(LLAMA3).unwrap();
        assert_eq!(
            split(l3, "I'M 12345 ok?\n\n  x"),
            ["I", "'M", " ", "123", "45", " ok", "?\n\n", " ", " x"]
        );
        let q2 = CustomSplit::for_pattern(QWEN2).unwrap();
        assert_eq!(split(q2, "a 123"), ["a", " ", "1", "2", "3"]);
        assert_eq!(
            split(CustomSplit::Newlines, "ab\n\ncd"),
            ["ab", "\n\n", "cd"]
        );
    }
}
