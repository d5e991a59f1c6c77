//! The GBNF parser (llama.cpp's `llama_grammar_parser`): rules, alternates, literals
//! and character classes with escapes, `.`, groups, repetitions expanded into
//! helper rules as llama.cpp expands them, comments, and token terminals. Unlike
//! llama.cpp it refuses what it cannot use (an undefined rule, a repetition whose
//! maximum is below its minimum) with the line and column of the problem.

use std::collections::HashMap;

use super::error::GrammarError;
use super::rules::{Elem, Rule};
use crate::vocab::{TokenizeOptions, Vocab};

/// llama.cpp's limit on repetitions (and on rules a repetition may multiply).
const MAX_REPETITION_THRESHOLD: u64 = 2000;

/// A parse failure at a byte offset; turned into a line and column at the end.
struct Fail {
    at: usize,
    message: String,
}

type Res<T> = Result<T, Fail>;

fn fail<T>(at: usize, message: impl Into<String>) -> Res<T> {
    Err(Fail {
        at,
        message: message.into(),
    })
}

/// What the parser produces: rules by id and the ids of the names.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    /// Rules by id.
    pub rules: Vec<Rule>,
    /// Rule ids by name (generated helper rules included, as `name_N`).
    pub symbol_ids: HashMap<String, u32>,
    /// Where each rule was defined (byte offset), by id.
    pub defined_at: Vec<usize>,
}

fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    vocab: Option<&'a Vocab>,
    out: Parsed,
    /// Where each name was first referenced (for "undefined rule").
    first_ref: HashMap<u32, usize>,
}

impl<'a> Parser<'a> {
    fn at(&self, pos: usize) -> u8 {
        self.src.get(pos).copied().unwrap_or(0)
    }

    fn get_symbol_id(&mut self, name: &str) -> u32 {
        let next = self.out.symbol_ids.len() as u32;
        *self.out.symbol_ids.entry(name.to_string()).or_insert(next)
    }

    fn generate_symbol_id(&mut self, base: &str) -> u32 {
        let next = self.out.symbol_ids.len() as u32;
        self.out.symbol_ids.insert(format!("{base}_{next}"), next);
        next
    }

    fn add_rule(&mut self, id: u32, rule: Rule, at: usize) {
        let id = id as usize;
        if self.out.rules.len() <= id {
            self.out.rules.resize(id + 1, Vec::new());
            self.out.defined_at.resize(id + 1, 0);
        }
        self.out.rules[id] = rule;
        self.out.defined_at[id] = at;
    }

    fn parse_space(&self, mut pos: usize, newline_ok: bool) -> usize {
        loop {
            match self.at(pos) {
                b' ' | b'\t' => pos += 1,
                b'\r' | b'\n' if newline_ok => pos += 1,
                b'#' => {
                    while !matches!(self.at(pos), 0 | b'\r' | b'\n') {
                        pos += 1;
                    }
                }
                _ => return pos,
            }
        }
    }

    fn parse_name(&self, pos: usize) -> Res<usize> {
        let mut end = pos;
        while is_word_char(self.at(end)) {
            end += 1;
        }
        if end == pos {
            return fail(pos, "expecting name");
        }
        Ok(end)
    }

    fn parse_int(&self, pos: usize) -> Res<(u64, usize)> {
        let mut end = pos;
        while self.at(end).is_ascii_digit() {
            end += 1;
        }
        if end == pos {
            return fail(pos, "expecting integer");
        }
        let digits = &self.text[pos..end];
        match digits.parse::<u64>() {
            Ok(n) => Ok((n, end)),
            Err(_) => fail(pos, format!("integer {digits} is too large")),
        }
    }

    fn parse_hex(&self, pos: usize, size: usize) -> Res<(u32, usize)> {
        let mut value: u32 = 0;
        for i in 0..size {
            let c = self.at(pos + i);
            let Some(d) = (c as char).to_digit(16).filter(|_| c != 0) else {
                return fail(pos, format!("expecting {size} hex chars"));
            };
            value = (value << 4) | d;
        }
        Ok((value, pos + size))
    }

    fn parse_char(&self, pos: usize) -> Res<(u32, usize)> {
        match self.at(pos) {
            b'\\' => match self.at(pos + 1) {
                b'x' => self.parse_hex(pos + 2, 2),
                b'u' => self.parse_hex(pos + 2, 4),
                b'U' => self.parse_hex(pos + 2, 8),
                b't' => Ok(('\t' as u32, pos + 2)),
                b'r' => Ok(('\r' as u32, pos + 2)),
                b'n' => Ok(('\n' as u32, pos + 2)),
                c @ (b'\\' | b'"' | b'[' | b']' | b'-') => Ok((u32::from(c), pos + 2)),
                0 if pos + 1 >= self.src.len() => fail(pos, "unexpected end of input"),
                _ => fail(pos, "unknown escape"),
            },
            0 if pos >= self.src.len() => fail(pos, "unexpected end of input"),
            _ => {
                // `pos` is at a character boundary: every step advances by whole
                // characters or ASCII bytes.
                let c = self.text[pos..].chars().next().unwrap_or('\0');
                Ok((c as u32, pos + c.len_utf8()))
            }
        }
    }

    fn parse_token(&self, start: usize) -> Res<(u32, usize)> {
        let mut pos = start;
        if self.at(pos) != b'<' {
            return fail(pos, "expecting '<'");
        }
        pos += 1;
        if self.at(pos) == b'[' {
            pos += 1;
            let (id, end) = self.parse_int(pos)?;
            let id = u32::try_from(id).or_else(|_| fail(pos, "token id is too big"))?;
            pos = end;
            if self.at(pos) != b']' {
                return fail(pos, "expecting ']'");
            }
            pos += 1;
            if self.at(pos) != b'>' {
                return fail(pos, "expecting '>'");
            }
            return Ok((id, pos + 1));
        }
        let Some(vocab) = self.vocab else {
            return fail(start, "no vocabulary to look up a token name");
        };
        while pos < self.src.len() && self.at(pos) != b'>' {
            pos += 1;
        }
        if self.at(pos) != b'>' {
            return fail(pos, "expecting '>'");
        }
        pos += 1;
        let text = &self.src[start..pos];
        let tokens = vocab.tokenize(text, TokenizeOptions::PARSE_SPECIAL);
        match tokens.as_slice() {
            [t] => Ok((*t as u32, pos)),
            _ => fail(
                start,
                format!(
                    "invalid token '{}': it is not one token of the vocabulary",
                    String::from_utf8_lossy(text)
                ),
            ),
        }
    }

    fn parse_alternates(
        &mut self,
        src: usize,
        rule_name: &str,
        rule_id: u32,
        nested: bool,
    ) -> Res<usize> {
        let mut rule = Rule::new();
        let mut pos = self.parse_sequence(src, rule_name, &mut rule, nested)?;
        while self.at(pos) == b'|' {
            rule.push(Elem::Alt);
            pos = self.parse_space(pos + 1, true);
            pos = self.parse_sequence(pos, rule_name, &mut rule, nested)?;
        }
        rule.push(Elem::End);
        self.add_rule(rule_id, rule, src);
        Ok(pos)
    }

    /// Rewrites the last symbol of `rule` (from `last_sym_start`) as repeated
    /// `min..=max` times (`max` `None`: unbounded), as llama.cpp does:
    /// `S{m,n}` becomes `m` copies of S then a chain of `n - m` optional helper rules,
    /// `S{m,}` becomes `m` copies then a recursive helper rule.
    #[allow(clippy::too_many_arguments)]
    fn repeat(
        &mut self,
        at: usize,
        rule_name: &str,
        rule: &mut Rule,
        last_sym_start: usize,
        n_prev_rules: &mut u64,
        min: u64,
        max: Option<u64>,
    ) -> Res<()> {
        if last_sym_start == rule.len() {
            return fail(at, "expecting preceding item to */+/?/{");
        }
        if let Some(max) = max {
            if max < min {
                return fail(
                    at,
                    format!("repetition maximum {max} is below its minimum {min}"),
                );
            }
        }
        let prev: Rule = rule[last_sym_start..].to_vec();
        let total = match max {
            Some(m) if m > 0 => m,
            _ if min > 0 => min,
            _ => 1,
        };
        if n_prev_rules.saturating_mul(total) > MAX_REPETITION_THRESHOLD {
            return fail(
                at,
                "number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults, please reduce the number of repetitions or rule complexity",
            );
        }
        if min == 0 {
            rule.truncate(last_sym_start);
        } else {
            for _ in 1..min {
                rule.extend_from_slice(&prev);
            }
        }
        let n_opt = match max {
            None => 1,
            Some(m) => m - min,
        };
        let mut last_rec_id = 0;
        for i in 0..n_opt {
            let mut rec = prev.clone();
            let rec_id = self.generate_symbol_id(rule_name);
            if i > 0 || max.is_none() {
                rec.push(Elem::RuleRef(if max.is_none() {
                    rec_id
                } else {
                    last_rec_id
                }));
            }
            rec.push(Elem::Alt);
            rec.push(Elem::End);
            self.add_rule(rec_id, rec, at);
            last_rec_id = rec_id;
        }
        if n_opt > 0 {
            rule.push(Elem::RuleRef(last_rec_id));
        }
        *n_prev_rules = n_prev_rules.saturating_mul(total).max(1);
        Ok(())
    }

    fn parse_sequence(
        &mut self,
        src: usize,
        rule_name: &str,
        rule: &mut Rule,
        nested: bool,
    ) -> Res<usize> {
        let mut last_sym_start = rule.len();
        let mut pos = src;
        let mut n_prev_rules: u64 = 1;
        while pos < self.src.len() {
            let c = self.at(pos);
            if c == b'"' {
                let open = pos;
                pos += 1;
                last_sym_start = rule.len();
                n_prev_rules = 1;
                while self.at(pos) != b'"' {
                    if pos >= self.src.len() {
                        return fail(open, "unterminated literal: unexpected end of input");
                    }
                    let (ch, next) = self.parse_char(pos)?;
                    pos = next;
                    rule.push(Elem::Char(ch));
                }
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'[' {
                let open = pos;
                pos += 1;
                let negated = self.at(pos) == b'^';
                if negated {
                    pos += 1;
                }
                last_sym_start = rule.len();
                n_prev_rules = 1;
                while self.at(pos) != b']' {
                    if pos >= self.src.len() {
                        return fail(
                            open,
                            "unterminated character class: unexpected end of input",
                        );
                    }
                    let (ch, next) = self.parse_char(pos)?;
                    pos = next;
                    let elem = if last_sym_start < rule.len() {
                        Elem::CharAlt(ch)
                    } else if negated {
                        Elem::CharNot(ch)
                    } else {
                        Elem::Char(ch)
                    };
                    rule.push(elem);
                    if self.at(pos) == b'-' && self.at(pos + 1) != b']' {
                        if pos + 1 >= self.src.len() {
                            return fail(
                                open,
                                "unterminated character class: unexpected end of input",
                            );
                        }
                        let (hi, next) = self.parse_char(pos + 1)?;
                        pos = next;
                        rule.push(Elem::CharRngUpper(hi));
                    }
                }
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'<' || c == b'!' {
                let negated = c == b'!';
                if negated {
                    pos += 1;
                }
                let (id, end) = self.parse_token(pos)?;
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(if negated {
                    Elem::TokenNot(id)
                } else {
                    Elem::Token(id)
                });
                pos = self.parse_space(end, nested);
            } else if is_word_char(c) {
                let end = self.parse_name(pos)?;
                let id = self.get_symbol_id(&self.text[pos..end]);
                self.first_ref.entry(id).or_insert(pos);
                pos = self.parse_space(end, nested);
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Elem::RuleRef(id));
            } else if c == b'(' {
                pos = self.parse_space(pos + 1, true);
                let n_before = self.out.symbol_ids.len() as u64;
                let sub_id = self.generate_symbol_id(rule_name);
                pos = self.parse_alternates(pos, rule_name, sub_id, true)?;
                n_prev_rules = (self.out.symbol_ids.len() as u64 - n_before).max(1);
                last_sym_start = rule.len();
                rule.push(Elem::RuleRef(sub_id));
                if self.at(pos) != b')' {
                    return fail(pos, "expecting ')'");
                }
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'.' {
                last_sym_start = rule.len();
                n_prev_rules = 1;
                rule.push(Elem::CharAny);
                pos = self.parse_space(pos + 1, nested);
            } else if c == b'*' || c == b'+' || c == b'?' {
                let at = pos;
                pos = self.parse_space(pos + 1, nested);
                let (min, max) = match c {
                    b'*' => (0, None),
                    b'+' => (1, None),
                    _ => (0, Some(1)),
                };
                self.repeat(
                    at,
                    rule_name,
                    rule,
                    last_sym_start,
                    &mut n_prev_rules,
                    min,
                    max,
                )?;
            } else if c == b'{' {
                let at = pos;
                pos = self.parse_space(pos + 1, nested);
                if !self.at(pos).is_ascii_digit() {
                    return fail(pos, "expecting an int");
                }
                let (min, end) = self.parse_int(pos)?;
                pos = self.parse_space(end, nested);
                let mut max = None;
                if self.at(pos) == b'}' {
                    max = Some(min);
                    pos = self.parse_space(pos + 1, nested);
                } else if self.at(pos) == b',' {
                    pos = self.parse_space(pos + 1, nested);
                    if self.at(pos).is_ascii_digit() {
                        let (m, end) = self.parse_int(pos)?;
                        max = Some(m);
                        pos = self.parse_space(end, nested);
                    }
                    if self.at(pos) != b'}' {
                        return fail(pos, "expecting '}'");
                    }
                    pos = self.parse_space(pos + 1, nested);
                } else {
                    return fail(pos, "expecting ','");
                }
                if min > MAX_REPETITION_THRESHOLD {
                    return fail(
                        at,
                        "number of repetitions exceeds sane defaults, please reduce the number of repetitions",
                    );
                }
                // llama.cpp treats a maximum above the threshold as no maximum.
                if max.is_some_and(|m| m > MAX_REPETITION_THRESHOLD) {
                    max = None;
                }
                self.repeat(
                    at,
                    rule_name,
                    rule,
                    last_sym_start,
                    &mut n_prev_rules,
                    min,
                    max,
                )?;
            } else {
                break;
            }
        }
        Ok(pos)
    }

    fn parse_rule(&mut self, src: usize) -> Res<usize> {
        let name_end = self.parse_name(src)?;
        let mut pos = self.parse_space(name_end, false);
        let name = self.text[src..name_end].to_string();
        let id = self.get_symbol_id(&name);
        if !self.src[pos..].starts_with(b"::=") {
            return fail(pos, "expecting ::=");
        }
        pos = self.parse_space(pos + 3, true);
        pos = self.parse_alternates(pos, &name, id, false)?;
        if let Some(d) = self.out.defined_at.get_mut(id as usize) {
            *d = src;
        }
        match self.at(pos) {
            b'\r' => pos += if self.at(pos + 1) == b'\n' { 2 } else { 1 },
            b'\n' => pos += 1,
            _ if pos >= self.src.len() => {}
            _ => return fail(pos, "expecting newline or end"),
        }
        Ok(self.parse_space(pos, true))
    }

    fn parse(&mut self) -> Res<()> {
        let mut pos = self.parse_space(0, true);
        while pos < self.src.len() {
            pos = self.parse_rule(pos)?;
        }
        let n = self.out.rules.len();
        let mut names: Vec<(&String, &u32)> = self.out.symbol_ids.iter().collect();
        names.sort_by_key(|(_, &id)| id);
        for (name, &id) in names {
            let defined = self
                .out
                .rules
                .get(id as usize)
                .is_some_and(|r| !r.is_empty());
            if !defined {
                let at = self.first_ref.get(&id).copied().unwrap_or(0);
                return fail(at, format!("undefined rule identifier '{name}'"));
            }
        }
        if n == 0 {
            return fail(pos, "the grammar has no rules");
        }
        Ok(())
    }
}

/// The 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Parses GBNF `text`; named token terminals (`<|name|>`) need `vocab`.
/// [`GrammarError::Parse`] with the line and column of the first problem.
pub fn parse(text: &str, vocab: Option<&Vocab>) -> Result<Parsed, GrammarError> {
    let mut p = Parser {
        src: text.as_bytes(),
        text,
        vocab,
        out: Parsed::default(),
        first_ref: HashMap::new(),
    };
    match p.parse() {
        Ok(()) => Ok(p.out),
        Err(f) => {
            let (line, column) = line_column(text, f.at);
            Err(GrammarError::Parse {
                line,
                column,
                message: f.message,
            })
        }
    }
}
