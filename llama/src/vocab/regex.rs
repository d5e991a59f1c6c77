//! A small backtracking regex engine with the semantics of C++ `std::regex` (ECMAScript),
//! which is what llama.cpp runs its pre-tokenizer patterns through when it has no
//! hand-written matcher for them.
//!
//! It matches over a slice of `u32` "characters": either code points, or llama.cpp's
//! "collapsed" text in which each non-ASCII code point is replaced by one byte naming
//! its category (see [`collapse`]). Supported: literals, `.`, classes with ranges and
//! negation, `\s \S \d \D \w \W \b \B`, `\p{..}` (collapsed mode only), groups,
//! `(?:..)`, lookahead `(?=..)`/`(?!..)`, `^ $`, and the quantifiers `? * + {n} {n,}
//! {n,m}` (greedy or lazy). Alternation is ordered, as in ECMAScript.

use super::unicode::{flags, CptFlags};

/// Collapsed-text byte of a non-ASCII code point in each category (llama.cpp's `k_ucat_cpt`).
const COLLAPSED_NUMBER: u32 = 0xD1;
const COLLAPSED_LETTER: u32 = 0xD2;
const COLLAPSED_PUNCTUATION: u32 = 0xD3;
const COLLAPSED_MARK: u32 = 0xD4;
const COLLAPSED_SYMBOL: u32 = 0xD5;
const COLLAPSED_OTHER: u32 = 0xD0;
/// Non-ASCII white space becomes a vertical tab, which `\s` matches.
const COLLAPSED_SPACE: u32 = 0x0B;

/// Whether a pattern uses `\p{..}` and must run on collapsed text (llama.cpp's `k_ucat_enum`).
pub(crate) fn uses_categories(pattern: &str) -> bool {
    [
        "\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}", "\\p{Lu}", "\\p{Ll}", "\\p{Lt}",
        "\\p{Lm}", "\\p{Lo}",
    ]
    .iter()
    .any(|c| pattern.contains(c))
}

/// llama.cpp's collapsed text: ASCII stays, non-ASCII white space becomes `\v`, other
/// code points become one byte naming their category.
pub(crate) fn collapse(cpts: &[u32]) -> Vec<u32> {
    cpts.iter()
        .map(|&c| {
            if c < 128 {
                return c;
            }
            let f = flags(c);
            if f.is_whitespace() {
                return COLLAPSED_SPACE;
            }
            match f.category() {
                CptFlags::NUMBER => COLLAPSED_NUMBER,
                CptFlags::LETTER => COLLAPSED_LETTER,
                CptFlags::PUNCTUATION => COLLAPSED_PUNCTUATION,
                CptFlags::MARK => COLLAPSED_MARK,
                CptFlags::SYMBOL => COLLAPSED_SYMBOL,
                _ => COLLAPSED_OTHER,
            }
        })
        .collect()
}

/// The text `std::wregex` sees: code points, with non-ASCII white space as `\v`.
pub(crate) fn widen(cpts: &[u32]) -> Vec<u32> {
    cpts.iter()
        .map(|&c| {
            if c > 0x7F && flags(c).is_whitespace() {
                COLLAPSED_SPACE
            } else {
                c
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
enum ClassItem {
    Range(u32, u32),
    Space(bool),
    Digit(bool),
    Word(bool),
}

/// A set of characters: the items (or all but them when negated), and only those
/// also in every class of `also` (what `(?=[a])[b]` matches).
#[derive(Clone, Debug, Default)]
struct Class {
    negated: bool,
    items: Vec<ClassItem>,
    also: Vec<Class>,
}

fn is_space(c: u32) -> bool {
    matches!(c, 0x09..=0x0D | 0x20)
}
fn is_digit(c: u32) -> bool {
    (b'0' as u32..=b'9' as u32).contains(&c)
}
fn is_word(c: u32) -> bool {
    is_digit(c)
        || c == b'_' as u32
        || (b'a' as u32..=b'z' as u32).contains(&c)
        || (b'A' as u32..=b'Z' as u32).contains(&c)
}

impl Class {
    fn matches(&self, c: u32) -> bool {
        let hit = self.items.iter().any(|item| match *item {
            ClassItem::Range(lo, hi) => lo <= c && c <= hi,
            ClassItem::Space(neg) => is_space(c) != neg,
            ClassItem::Digit(neg) => is_digit(c) != neg,
            ClassItem::Word(neg) => is_word(c) != neg,
        });
        hit != self.negated && self.also.iter().all(|class| class.matches(c))
    }
}

#[derive(Clone, Debug)]
enum Node {
    Char(Class),
    Group(Vec<Vec<Node>>),
    Look {
        negated: bool,
        alt: Vec<Vec<Node>>,
    },
    Start,
    End,
    WordBoundary(bool),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: u32,
        greedy: bool,
    },
}

/// A compiled pattern.
#[derive(Clone, Debug)]
pub(crate) struct Regex {
    alt: Vec<Vec<Node>>,
    collapsed: bool,
}

struct Parser<'p> {
    chars: Vec<char>,
    pos: usize,
    collapsed: bool,
    pattern: &'p str,
}

type ParseResult<T> = Result<T, String>;

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> ParseResult<T> {
        Err(format!("regex '{}': {what} at {}", self.pattern, self.pos))
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        self.pos += hit as usize;
        hit
    }

    fn alternation(&mut self) -> ParseResult<Vec<Vec<Node>>> {
        let mut alt = vec![self.sequence()?];
        while self.eat('|') {
            alt.push(self.sequence()?);
        }
        Ok(alt)
    }

    fn sequence(&mut self) -> ParseResult<Vec<Node>> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            seq.push(self.quantified(atom)?);
        }
        Ok(seq)
    }

    fn quantified(&mut self, atom: Node) -> ParseResult<Node> {
        let (min, max) = match self.peek() {
            Some('?') => (0, 1),
            Some('*') => (0, u32::MAX),
            Some('+') => (1, u32::MAX),
            Some('{') => return self.braces(atom),
            _ => return Ok(atom),
        };
        self.pos += 1;
        self.repeat(atom, min, max)
    }

    fn braces(&mut self, atom: Node) -> ParseResult<Node> {
        self.pos += 1;
        let min = self.number()?;
        let max = if self.eat(',') {
            if self.peek() == Some('}') {
                u32::MAX
            } else {
                self.number()?
            }
        } else {
            min
        };
        if !self.eat('}') || max < min {
            return self.err("bad {n,m} quantifier");
        }
        self.repeat(atom, min, max)
    }

    fn number(&mut self) -> ParseResult<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        digits.parse().or_else(|_| self.err("expected a number"))
    }

    fn repeat(&mut self, atom: Node, min: u32, max: u32) -> ParseResult<Node> {
        if matches!(
            atom,
            Node::Start | Node::End | Node::WordBoundary(_) | Node::Look { .. }
        ) {
            return self.err("quantifier on an assertion");
        }
        let greedy = !self.eat('?');
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    fn atom(&mut self) -> ParseResult<Node> {
        let Some(c) = self.peek() else {
            return self.err("unexpected end");
        };
        self.pos += 1;
        Ok(match c {
            '(' => {
                let look = if self.eat('?') {
                    if self.eat(':') {
                        None
                    } else if self.eat('=') {
                        Some(false)
                    } else if self.eat('!') {
                        Some(true)
                    } else {
                        return self.err("unsupported group");
                    }
                } else {
                    None
                };
                let alt = self.alternation()?;
                if !self.eat(')') {
                    return self.err("missing ')'");
                }
                match look {
                    Some(negated) => Node::Look { negated, alt },
                    None => Node::Group(alt),
                }
            }
            '[' => Node::Char(self.class()?),
            '.' => Node::Char(Class {
                negated: true,
                items: vec![
                    ClassItem::Range(0x0A, 0x0A),
                    ClassItem::Range(0x0D, 0x0D),
                    ClassItem::Range(0x2028, 0x2029),
                ],
                ..Default::default()
            }),
            '^' => Node::Start,
            '$' => Node::End,
            '\\' => match self.peek() {
                Some('b') => {
                    self.pos += 1;
                    Node::WordBoundary(false)
                }
                Some('B') => {
                    self.pos += 1;
                    Node::WordBoundary(true)
                }
                _ => Node::Char(Class {
                    negated: false,
                    items: self.escape(false)?,
                    ..Default::default()
                }),
            },
            ')' | '*' | '+' | '?' | '{' => return self.err("unexpected metacharacter"),
            c => Node::Char(Class {
                negated: false,
                items: vec![ClassItem::Range(c as u32, c as u32)],
                ..Default::default()
            }),
        })
    }

    /// The items of the escape after a backslash (the backslash is consumed).
    fn escape(&mut self, in_class: bool) -> ParseResult<Vec<ClassItem>> {
        let Some(c) = self.peek() else {
            return self.err("trailing backslash");
        };
        self.pos += 1;
        let single = |v: u32| Ok(vec![ClassItem::Range(v, v)]);
        match c {
            's' | 'S' => Ok(vec![ClassItem::Space(c == 'S')]),
            'd' | 'D' => Ok(vec![ClassItem::Digit(c == 'D')]),
            'w' | 'W' => Ok(vec![ClassItem::Word(c == 'W')]),
            'n' => single(0x0A),
            'r' => single(0x0D),
            't' => single(0x09),
            'f' => single(0x0C),
            'v' => single(0x0B),
            '0' => single(0),
            'b' if in_class => single(0x08),
            'x' | 'u' => {
                let n = if c == 'x' { 2 } else { 4 };
                let hex: String = self
                    .chars
                    .get(self.pos..self.pos + n)
                    .unwrap_or(&[])
                    .iter()
                    .collect();
                let v = u32::from_str_radix(&hex, 16).or_else(|_| self.err("bad hex escape"))?;
                self.pos += n;
                single(v)
            }
            'p' => self.category(),
            c if c.is_ascii_alphanumeric() => self.err("unsupported escape"),
            c => single(c as u32),
        }
    }

    /// `\p{..}` in collapsed mode: the category byte plus its ASCII members (llama.cpp's `k_ucat_map`).
    fn category(&mut self) -> ParseResult<Vec<ClassItem>> {
        if !self.collapsed || !self.eat('{') {
            return self.err("\\p is only supported with collapsed text");
        }
        let start = self.pos;
        while self.peek().is_some_and(|c| c != '}') {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().collect();
        if !self.eat('}') {
            return self.err("missing '}'");
        }
        let r = |a: u8, b: u8| ClassItem::Range(a as u32, b as u32);
        let c = |a: u8| ClassItem::Range(a as u32, a as u32);
        let k = |v: u32| ClassItem::Range(v, v);
        Ok(match name.as_str() {
            "N" => vec![k(COLLAPSED_NUMBER), r(b'0', b'9')],
            "L" | "Lu" | "Ll" | "Lt" | "Lm" | "Lo" => {
                vec![k(COLLAPSED_LETTER), r(b'A', b'Z'), r(b'a', b'z')]
            }
            "P" => vec![
                k(COLLAPSED_PUNCTUATION),
                r(b'!', b'#'),
                r(b'%', b'*'),
                r(b',', b'/'),
                r(b':', b';'),
                r(b'?', b'@'),
                r(b'[', b']'),
                c(b'_'),
                c(b'{'),
                c(b'}'),
            ],
            "M" => vec![k(COLLAPSED_MARK)],
            "S" => vec![
                k(COLLAPSED_SYMBOL),
                c(b'$'),
                c(b'+'),
                r(b'<', b'>'),
                c(b'^'),
                c(b'`'),
                c(b'|'),
                c(b'~'),
            ],
            _ => return self.err("unsupported unicode category"),
        })
    }

    fn class(&mut self) -> ParseResult<Class> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return self.err("missing ']'");
            };
            self.pos += 1;
            if c == ']' {
                break;
            }
            let lo = if c == '\\' {
                let mut esc = self.escape(true)?;
                match esc.as_slice() {
                    [ClassItem::Range(a, b)] if a == b => *a,
                    _ => {
                        items.append(&mut esc);
                        continue;
                    }
                }
            } else {
                c as u32
            };
            // A '-' between two characters makes a range; before ']' it is literal.
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let hi = match self.peek() {
                    Some('\\') => {
                        self.pos += 1;
                        match self.escape(true)?.as_slice() {
                            [ClassItem::Range(a, b)] if a == b => *a,
                            _ => return self.err("class escape in a range"),
                        }
                    }
                    Some(h) => {
                        self.pos += 1;
                        h as u32
                    }
                    None => return self.err("missing ']'"),
                };
                if hi < lo {
                    return self.err("inverted range");
                }
                items.push(ClassItem::Range(lo, hi));
            } else {
                items.push(ClassItem::Range(lo, lo));
            }
        }
        Ok(Class {
            negated,
            items,
            ..Default::default()
        })
    }
}

/// The one character class an alternation matches, if it is exactly that.
fn single_class(alt: &[Vec<Node>]) -> Option<&Class> {
    match alt {
        [seq] => match seq.as_slice() {
            [Node::Char(class)] => Some(class),
            _ => None,
        },
        _ => None,
    }
}

fn simplify_alt(alt: Vec<Vec<Node>>) -> Vec<Vec<Node>> {
    alt.into_iter().map(simplify_seq).collect()
}

/// Rewrites `(?=[a])[b]` and `(?![a])[b]` as one class, so that their repetition
/// (`((?=[\p{L}])([^a-z]))*` in GPT-4o-style patterns) takes the fast path.
fn simplify_seq(seq: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::with_capacity(seq.len());
    for node in seq.into_iter().map(simplify_node) {
        if let (Node::Char(b), Some(Node::Look { negated, alt })) = (&node, out.last()) {
            if let Some(a) = single_class(alt).filter(|a| !*negated || a.also.is_empty()) {
                let mut a = a.clone();
                a.negated ^= *negated;
                let mut both = b.clone();
                both.also.push(a);
                out.pop();
                out.push(Node::Char(both));
                continue;
            }
        }
        out.push(node);
    }
    out
}

fn simplify_node(node: Node) -> Node {
    match node {
        Node::Group(alt) => {
            let alt = simplify_alt(alt);
            match single_class(&alt) {
                Some(class) => Node::Char(class.clone()),
                None => Node::Group(alt),
            }
        }
        Node::Look { negated, alt } => Node::Look {
            negated,
            alt: simplify_alt(alt),
        },
        Node::Repeat {
            node,
            min,
            max,
            greedy,
        } => Node::Repeat {
            node: Box::new(simplify_node(*node)),
            min,
            max,
            greedy,
        },
        other => other,
    }
}

/// Whether matching recurses a bounded number of times whatever the text: repeated
/// single characters are matched in a loop, but each repetition of a group nests.
fn bounded_recursion(alt: &[Vec<Node>]) -> bool {
    alt.iter().flatten().all(bounded_node)
}

fn bounded_node(node: &Node) -> bool {
    const MAX_GROUP_REPEAT: u32 = 16;
    match node {
        Node::Group(alt) | Node::Look { alt, .. } => bounded_recursion(alt),
        Node::Repeat { node, max, .. } => {
            matches!(**node, Node::Char(_)) || (*max <= MAX_GROUP_REPEAT && bounded_node(node))
        }
        _ => true,
    }
}

type Cont<'k> = dyn FnMut(usize) -> bool + 'k;

struct Matcher<'t> {
    text: &'t [u32],
}

impl Matcher<'_> {
    fn alt(&self, alt: &[Vec<Node>], pos: usize, k: &mut Cont<'_>) -> bool {
        for seq in alt {
            if self.seq(seq, pos, k) {
                return true;
            }
        }
        false
    }

    fn seq(&self, seq: &[Node], pos: usize, k: &mut Cont<'_>) -> bool {
        match seq.split_first() {
            None => k(pos),
            Some((first, rest)) => self.node(first, pos, &mut |p| self.seq(rest, p, k)),
        }
    }

    fn is_word_at(&self, pos: usize) -> bool {
        self.text.get(pos).is_some_and(|&c| is_word(c))
    }

    fn node(&self, node: &Node, pos: usize, k: &mut Cont<'_>) -> bool {
        match node {
            Node::Char(class) => {
                pos < self.text.len() && class.matches(self.text[pos]) && k(pos + 1)
            }
            Node::Group(alt) => self.alt(alt, pos, k),
            Node::Look { negated, alt } => {
                // Lookahead is atomic: once it holds, it is not backtracked into.
                let found = self.alt(alt, pos, &mut |_| true);
                found != *negated && k(pos)
            }
            Node::Start => pos == 0 && k(pos),
            Node::End => pos == self.text.len() && k(pos),
            Node::WordBoundary(negated) => {
                let before = pos > 0 && self.is_word_at(pos - 1);
                (before != self.is_word_at(pos)) != *negated && k(pos)
            }
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => match &**node {
                Node::Char(class) => self.repeat_char(class, *min, *max, *greedy, pos, k),
                node => self.repeat(node, *min, *max, *greedy, 0, pos, k),
            },
        }
    }

    /// A repeated single-character matcher, without recursion per repetition.
    fn repeat_char(
        &self,
        class: &Class,
        min: u32,
        max: u32,
        greedy: bool,
        pos: usize,
        k: &mut Cont<'_>,
    ) -> bool {
        let limit = (max as usize).min(self.text.len() - pos);
        let run = self.text[pos..pos + limit]
            .iter()
            .take_while(|&&c| class.matches(c))
            .count();
        let min = min as usize;
        if run < min {
            return false;
        }
        if greedy {
            (min..=run).rev().any(|n| k(pos + n))
        } else {
            (min..=run).any(|n| k(pos + n))
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &self,
        node: &Node,
        min: u32,
        max: u32,
        greedy: bool,
        count: u32,
        pos: usize,
        k: &mut Cont<'_>,
    ) -> bool {
        let done = count >= min;
        if !greedy && done && k(pos) {
            return true;
        }
        if count < max {
            let more = self.node(node, pos, &mut |p| {
                // ECMAScript: an iteration that matches empty once `min` is met fails.
                if p == pos && done {
                    return false;
                }
                self.repeat(node, min, max, greedy, count + 1, p, k)
            });
            if more {
                return true;
            }
        }
        greedy && done && k(pos)
    }
}

impl Regex {
    /// Compiles `pattern`; `collapsed` selects llama.cpp's collapsed-text mode, in which
    /// `\p{..}` is allowed and the text must come from [`collapse`].
    pub(crate) fn new(pattern: &str, collapsed: bool) -> Result<Regex, String> {
        let mut p = Parser {
            chars: pattern.chars().collect(),
            pos: 0,
            collapsed,
            pattern,
        };
        let alt = p.alternation()?;
        if p.pos != p.chars.len() {
            return p.err("unbalanced ')'");
        }
        let alt = simplify_alt(alt);
        if !bounded_recursion(&alt) {
            return p
                .err("unbounded repetition of a group (the matcher would recurse per repetition)");
        }
        Ok(Regex { alt, collapsed })
    }

    /// Whether the pattern runs on collapsed text ([`collapse`]) rather than [`widen`]ed text.
    pub(crate) fn collapsed(&self) -> bool {
        self.collapsed
    }

    /// The first match at or after `start`, as `(begin, end)`. With `continuous` only a
    /// match beginning at `start` counts; with `not_null` an empty match does not count.
    fn find(
        &self,
        text: &[u32],
        start: usize,
        continuous: bool,
        not_null: bool,
    ) -> Option<(usize, usize)> {
        let m = Matcher { text };
        let last = if continuous { start } else { text.len() };
        (start..=last).find_map(|s| {
            let mut end = None;
            let hit = m.alt(&self.alt, s, &mut |p| {
                if not_null && p == s {
                    return false;
                }
                end = Some(p);
                true
            });
            hit.then(|| (s, end.unwrap_or(s)))
        })
    }

    /// Splits `text` like llama.cpp's `unicode_regex_split_stl`: matches and the text
    /// between them each become a piece; returns the piece lengths in order. Empty
    /// matches are handled as `std::regex_iterator` does.
    pub(crate) fn split_lengths(&self, text: &[u32], out: &mut Vec<usize>) {
        let mut prev_end = 0;
        let mut next = self.find(text, 0, false, false);
        while let Some((begin, end)) = next {
            if begin > prev_end {
                out.push(begin - prev_end);
            }
            out.push(end - begin);
            prev_end = end;
            next = if begin == end {
                if end == text.len() {
                    None
                } else {
                    self.find(text, end, true, true)
                        .or_else(|| self.find(text, end + 1, false, false))
                }
            } else {
                self.find(text, end, false, false)
            };
        }
        if prev_end < text.len() {
            out.push(text.len() - prev_end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pattern: &str, text: &str) -> Vec<String> {
        let collapsed = uses_categories(pattern);
        let re = Regex::new(pattern, collapsed).unwrap();
        let cpts: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let view = if collapsed {
            collapse(&cpts)
        } else {
            widen(&cpts)
        };
        let mut lens = Vec::new();
        re.split_lengths(&view, &mut lens);
        crate::vocab::split_custom::tests::pieces(text, &lens)
    }

    #[test]
    fn classes_quantifiers_and_unmatched_text() {
        assert_eq!(
            split("[0-9][0-9][0-9]", "12345 6789"),
            ["123", "45 ", "678", "9"]
        );
        assert_eq!(split("\\p{N}+", "ab12c٣4"), ["ab", "12", "c", "٣4"]);
        assert_eq!(
            split("\\s?\\p{L}+", "hi  there é"),
            ["hi", " ", " there", " é"]
        );
        assert_eq!(split("[\r\n]", "a\r\nb"), ["a", "\r", "\n", "b"]);
        assert_eq!(split("\\s+$", "a  b  "), ["a  b", "  "]);
    }

    #[test]
    fn ordered_alternation_and_lookahead() {
        // ECMAScript takes the first alternative that matches, not the longest.
        assert_eq!(split("a|ab", "ab"), ["a", "b"]);
        assert_eq!(split("\\s+(?!\\S)|\\s+", "a   b"), ["a", "  ", " ", "b"]);
        assert_eq!(split("x(?=y)", "xyxz"), ["x", "yxz"]);
        assert_eq!(split("(?:ab){1,3}?c|ab", "ababc"), ["ababc"]);
        assert_eq!(
            split("\\d{1,3}(?=(?:\\d{3}){0,4}\\b)", "1234567"),
            ["1", "234", "567"]
        );
    }

    #[test]
    fn collapsed_categories_follow_llama_cpp() {
        // Non-ASCII white space is \v in collapsed text, so \s matches it.
        assert_eq!(split("\\s?\\p{P}+", "a\u{3000}!?"), ["a", "\u{3000}!?"]);
        // \p{Lu} means any letter in llama.cpp's collapsed mode.
        assert_eq!(split("\\p{Lu}+", "abC"), ["abC"]);
    }

    #[test]
    fn empty_matches_advance() {
        assert_eq!(split("x*", "ab"), ["", "a", "", "b", ""]);
        assert!(Regex::new("(", false).is_err());
        assert!(Regex::new("\\p{L}", false).is_err());
        assert!(Regex::new("[b-a]", false).is_err());
    }

    #[test]
    fn lookahead_classes_fold_and_group_repeats_are_bounded() {
        // GPT-4o's "uppercase-ish letters" idiom becomes one class, repeated in a loop.
        let re = Regex::new("((?=[\\p{L}])([^a-z]))+", true).unwrap();
        assert!(
            matches!(&re.alt[0][0], Node::Repeat { node, .. } if matches!(**node, Node::Char(_)))
        );
        assert_eq!(split("((?=[\\p{L}])([^a-z]))+", "ABc1É"), ["AB", "c1", "É"]);
        assert_eq!(split("(?![a-c])[a-z]+", "abxyc"), ["ab", "xyc"]);
        // A long run must not recurse per character.
        let long = "A".repeat(200_000);
        assert_eq!(split("((?=[\\p{L}])([^a-z]))*", &long).len(), 2);
        assert!(Regex::new("(?:ab)+", false).is_err());
        assert!(Regex::new("(?:ab){2,16}", false).is_ok());
    }
}
