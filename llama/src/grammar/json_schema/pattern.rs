//! A schema's `pattern` (a regular expression anchored with `^...$`) as a GBNF rule
//! (llama.cpp's `_pattern_to_rule`).
//!
//! The translation is llama.cpp's: literals, `.`, groups (`(...)`, `(?:...)`),
//! character classes copied as they are, `|`, `*`, `+`, `?` and `{m,n}`. Escapes are
//! the ones GBNF itself understands plus the regex metacharacters. Everything else
//! (`\d`, lookarounds, inner anchors, ...) is [`PatternError::Unsupported`].
//!
//! The pattern is walked by characters where llama.cpp walks bytes: the two differ
//! only for a quantifier right after a multi-byte character, where llama.cpp's
//! output splits the character (and is not valid UTF-8).
//!
//! As in llama.cpp, the rule matches the string's characters as they are written
//! between the quotes, without JSON escaping: a pattern that allows `"`, `\` or a
//! control character (`.`, `[^a]`, a literal `"`) lets the model write them raw,
//! which is not valid JSON.

use std::collections::HashMap;

use super::numbers::{build_repetition, UNBOUNDED};
use super::rules::Rules;

/// Why a pattern has no grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// A valid regular expression the translation does not handle.
    Unsupported(String),
    /// Not a valid regular expression.
    Invalid(String),
}

const MAX_PATTERN_DEPTH: usize = 100;

fn is_non_literal(c: char) -> bool {
    matches!(
        c,
        '|' | '.' | '(' | ')' | '[' | ']' | '{' | '}' | '*' | '+' | '?' | '^' | '$'
    )
}

fn escaped_in_regexps_but_not_in_literals(c: char) -> bool {
    matches!(
        c,
        '^' | '$' | '.' | '[' | ']' | '(' | ')' | '|' | '{' | '}' | '*' | '+' | '?'
    )
}

/// Length of the GBNF escape at `pos` (`\x..`, `\u....`, `\U........`, `\t`, `\r`,
/// `\n`, `\\`, `\"`, `\[`, `\]`, `\-`), or 0 when there is none there.
fn gbnf_escape_length(p: &[char], pos: usize) -> usize {
    if pos + 1 >= p.len() || p[pos] != '\\' {
        return 0;
    }
    let n_hex = match p[pos + 1] {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        't' | 'r' | 'n' | '\\' | '"' | '[' | ']' | '-' => return 2,
        _ => return 0,
    };
    if pos + 2 + n_hex > p.len() {
        return 0;
    }
    if p[pos + 2..pos + 2 + n_hex]
        .iter()
        .all(|h| h.is_ascii_hexdigit())
    {
        2 + n_hex
    } else {
        0
    }
}

fn text(p: &[char]) -> String {
    p.iter().collect()
}

/// C++ `std::stoi`: leading blanks, a sign, the leading digits; `None` where it
/// throws (no digits, out of `int` range).
fn stoi_like(s: &str) -> Option<i32> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = &t[..t.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    let v: i64 = digits.parse().ok()?;
    i32::try_from(if neg { -v } else { v }).ok()
}

/// One element of a sequence: literal text (to be quoted) or a rule fragment.
#[derive(Clone, Debug)]
struct Item {
    text: String,
    literal: bool,
}

impl Item {
    fn rule(&self) -> String {
        if self.literal {
            format!("\"{}\"", self.text)
        } else {
            self.text.clone()
        }
    }
}

struct Translator<'a> {
    rules: &'a mut Rules,
    p: Vec<char>,
    i: usize,
    name: &'a str,
    dotall: bool,
    paren_depth: usize,
    sub_rule_ids: HashMap<String, String>,
}

/// Adds the rules for `pattern` to `rules` and returns the name of the rule that
/// matches a JSON string whose content matches it. [`PatternError`] when it cannot;
/// `rules` may then hold partial rules (callers restore a snapshot).
pub(crate) fn pattern_to_rule(
    rules: &mut Rules,
    pattern: &str,
    name: &str,
    dotall: bool,
) -> Result<String, PatternError> {
    let chars: Vec<char> = pattern.chars().collect();
    if chars.len() < 2 || chars[0] != '^' || chars[chars.len() - 1] != '$' {
        return Err(PatternError::Unsupported(
            "not anchored with '^' and '$'".into(),
        ));
    }
    let mut t = Translator {
        rules,
        p: chars[1..chars.len() - 1].to_vec(),
        i: 0,
        name,
        dotall,
        paren_depth: 0,
        sub_rule_ids: HashMap::new(),
    };
    let rule = t.transform()?.rule();
    if t.paren_depth != 0 {
        return Err(PatternError::Invalid("unbalanced parentheses".into()));
    }
    Ok(t.rules.add(name, &format!("\"\\\"\" ({rule}) \"\\\"\"")))
}

impl Translator<'_> {
    fn dot(&mut self) -> String {
        let rule = if self.dotall {
            "[\\U00000000-\\U0010FFFF]"
        } else {
            "[^\\x0A\\x0D]"
        };
        self.rules.add("dot", rule)
    }

    /// The sequence joined with spaces, consecutive literals merged into one.
    fn join_seq(seq: &[Item]) -> Item {
        let mut parts: Vec<String> = Vec::new();
        let mut literal = String::new();
        for item in seq {
            if item.literal {
                literal.push_str(&item.text);
            } else {
                if !literal.is_empty() {
                    parts.push(format!("\"{literal}\""));
                    literal.clear();
                }
                parts.push(item.text.clone());
            }
        }
        if !literal.is_empty() {
            parts.push(format!("\"{literal}\""));
        }
        Item {
            text: parts.join(" "),
            literal: false,
        }
    }

    fn transform(&mut self) -> Result<Item, PatternError> {
        let mut seq: Vec<Item> = Vec::new();
        let length = self.p.len();
        while self.i < length {
            let c = self.p[self.i];
            match c {
                '.' => {
                    let dot = self.dot();
                    seq.push(Item {
                        text: dot,
                        literal: false,
                    });
                    self.i += 1;
                }
                '(' => {
                    self.i += 1;
                    if self.i < length && self.p[self.i] == '?' {
                        if self.i + 1 < length && self.p[self.i + 1] == ':' {
                            self.i += 2;
                        } else {
                            return Err(PatternError::Unsupported(
                                "unsupported group syntax".into(),
                            ));
                        }
                    }
                    self.paren_depth += 1;
                    if self.paren_depth > MAX_PATTERN_DEPTH {
                        return Err(PatternError::Unsupported("pattern nesting too deep".into()));
                    }
                    let inner = self.transform()?.rule();
                    seq.push(Item {
                        text: format!("({inner})"),
                        literal: false,
                    });
                }
                ')' => {
                    self.i += 1;
                    if self.paren_depth == 0 {
                        return Err(PatternError::Invalid("unbalanced parentheses".into()));
                    }
                    self.paren_depth -= 1;
                    return Ok(Self::join_seq(&seq));
                }
                '^' | '$' => {
                    return Err(PatternError::Unsupported(
                        "anchor inside the pattern".into(),
                    ));
                }
                '[' => {
                    let mut class = String::from("[");
                    self.i += 1;
                    while self.i < length && self.p[self.i] != ']' {
                        if self.p[self.i] == '\\' {
                            let n = gbnf_escape_length(&self.p, self.i);
                            if n == 0 {
                                let end = (self.i + 2).min(length);
                                return Err(PatternError::Unsupported(format!(
                                    "unsupported escape in character class: {}",
                                    text(&self.p[self.i..end])
                                )));
                            }
                            class.push_str(&text(&self.p[self.i..self.i + n]));
                            self.i += n;
                        } else {
                            class.push(self.p[self.i]);
                            self.i += 1;
                        }
                    }
                    if self.i >= length {
                        return Err(PatternError::Invalid("unterminated character class".into()));
                    }
                    class.push(']');
                    self.i += 1;
                    seq.push(Item {
                        text: class,
                        literal: false,
                    });
                }
                '|' => {
                    seq.push(Item {
                        text: "|".into(),
                        literal: false,
                    });
                    self.i += 1;
                }
                '*' | '+' | '?' => {
                    let Some(last) = seq.last_mut() else {
                        return Err(PatternError::Invalid("nothing to repeat".into()));
                    };
                    *last = Item {
                        text: format!("{}{c}", last.rule()),
                        literal: false,
                    };
                    self.i += 1;
                }
                '{' => self.curly(&mut seq)?,
                _ => self.literal(&mut seq, c)?,
            }
        }
        Ok(Self::join_seq(&seq))
    }

    fn curly(&mut self, seq: &mut [Item]) -> Result<(), PatternError> {
        let length = self.p.len();
        let mut inner = String::new();
        self.i += 1;
        while self.i < length && self.p[self.i] != '}' {
            inner.push(self.p[self.i]);
            self.i += 1;
        }
        if self.i >= length {
            return Err(PatternError::Unsupported(
                "unterminated curly brackets".into(),
            ));
        }
        self.i += 1;
        let nums: Vec<&str> = inner.split(',').collect();
        let bad_number = || PatternError::Unsupported("invalid number in curly brackets".into());
        let (min_times, max_times) = match nums.as_slice() {
            [n] => {
                let n = stoi_like(n).ok_or_else(bad_number)?;
                (n, n)
            }
            [a, b] => (
                if a.is_empty() {
                    0
                } else {
                    stoi_like(a).ok_or_else(bad_number)?
                },
                if b.is_empty() {
                    UNBOUNDED
                } else {
                    stoi_like(b).ok_or_else(bad_number)?
                },
            ),
            _ => {
                return Err(PatternError::Unsupported(
                    "wrong number of values in curly brackets".into(),
                ))
            }
        };
        let Some(last) = seq.last_mut() else {
            return Err(PatternError::Invalid("nothing to repeat".into()));
        };
        let sub = if last.literal {
            format!("\"{}\"", last.text)
        } else {
            let next_id = self.sub_rule_ids.len() + 1;
            match self.sub_rule_ids.get(&last.text) {
                Some(id) => id.clone(),
                None => {
                    let id = self
                        .rules
                        .add(&format!("{}-{next_id}", self.name), &last.text);
                    self.sub_rule_ids.insert(last.text.clone(), id.clone());
                    id
                }
            }
        };
        *last = Item {
            text: build_repetition(&sub, min_times, max_times, ""),
            literal: false,
        };
        Ok(())
    }

    fn literal(&mut self, seq: &mut Vec<Item>, c: char) -> Result<(), PatternError> {
        let length = self.p.len();
        let mut literal = String::new();
        while self.i < length {
            let ch = self.p[self.i];
            if ch == '\\' {
                if self.i == length - 1 {
                    return Err(PatternError::Invalid("trailing backslash".into()));
                }
                let next = self.p[self.i + 1];
                if escaped_in_regexps_but_not_in_literals(next) {
                    literal.push(next);
                    self.i += 2;
                } else {
                    let n = gbnf_escape_length(&self.p, self.i);
                    if n == 0 {
                        return Err(PatternError::Unsupported(format!(
                            "unsupported escape: {}",
                            text(&self.p[self.i..self.i + 2])
                        )));
                    }
                    literal.push_str(&text(&self.p[self.i..self.i + n]));
                    self.i += n;
                }
            } else if ch == '"' {
                literal.push_str("\\\"");
                self.i += 1;
            } else if !is_non_literal(ch)
                && (self.i == length - 1
                    || literal.is_empty()
                    || self.p[self.i + 1] == '.'
                    || !is_non_literal(self.p[self.i + 1]))
            {
                literal.push(ch);
                self.i += 1;
            } else {
                break;
            }
        }
        if literal.is_empty() {
            return Err(PatternError::Unsupported(format!(
                "unsupported character: {c}"
            )));
        }
        seq.push(Item {
            text: literal,
            literal: true,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(pattern: &str) -> Result<String, PatternError> {
        let mut rules = Rules::new();
        let name = pattern_to_rule(&mut rules, pattern, "root", false)?;
        assert_eq!(name, "root");
        Ok(rules.format())
    }

    #[test]
    fn literals_classes_and_repetitions() {
        let g = convert("^a[0-9]{2,3}(x|y)*$").expect("pattern converts");
        assert!(
            g.contains("root ::= \"\\\"\" (\"a\" root-1{2,3} (\"x\" | \"y\")*) \"\\\"\""),
            "{g}"
        );
        assert!(g.contains("root-1 ::= [0-9]"), "{g}");
    }

    #[test]
    fn errors() {
        assert!(matches!(convert("^(a$"), Err(PatternError::Invalid(_))));
        assert!(matches!(
            convert("^\\d$"),
            Err(PatternError::Unsupported(_))
        ));
        assert!(matches!(convert("abc"), Err(PatternError::Unsupported(_))));
        assert!(matches!(convert("^*$"), Err(PatternError::Invalid(_))));
    }

    #[test]
    fn stoi_as_cpp() {
        assert_eq!(stoi_like(" 3"), Some(3));
        assert_eq!(stoi_like("2x"), Some(2));
        assert_eq!(stoi_like(""), None);
        assert_eq!(stoi_like("99999999999"), None);
    }
}
