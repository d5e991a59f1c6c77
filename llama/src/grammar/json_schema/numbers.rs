//! Counted repetitions and integer ranges as GBNF (llama.cpp's `build_repetition`
//! and `build_min_max_int`).

/// `max_items` value that means "no upper bound" (C++ `INT_MAX`).
pub(crate) const UNBOUNDED: i32 = i32::MAX;

/// `item_rule` repeated `min_items..=max_items` times (`max_items == UNBOUNDED` for
/// no bound), items separated by `separator_rule` when it is not empty. Returns an
/// empty string when `max_items` is 0. Never fails.
pub(crate) fn build_repetition(
    item_rule: &str,
    min_items: i32,
    max_items: i32,
    separator_rule: &str,
) -> String {
    let has_max = max_items != UNBOUNDED;
    if max_items == 0 {
        return String::new();
    }
    if min_items == 0 && max_items == 1 {
        return format!("{item_rule}?");
    }
    if separator_rule.is_empty() {
        if min_items == 1 && !has_max {
            return format!("{item_rule}+");
        }
        if min_items == 0 && !has_max {
            return format!("{item_rule}*");
        }
        let max = if has_max {
            max_items.to_string()
        } else {
            String::new()
        };
        return format!("{item_rule}{{{min_items},{max}}}");
    }
    let rest = build_repetition(
        &format!("({separator_rule} {item_rule})"),
        if min_items == 0 { 0 } else { min_items - 1 },
        if has_max { max_items - 1 } else { max_items },
        "",
    );
    let result = format!("{item_rule} {rest}");
    if min_items == 0 {
        format!("({result})?")
    } else {
        result
    }
}

/// The GBNF alternatives for the decimal integers in `min_value..=max_value`;
/// `i64::MIN` / `i64::MAX` stand for an open end. At most one end may be open.
/// Returns `None` when both ends are open.
pub(crate) fn build_min_max_int(min_value: i64, max_value: i64) -> Option<String> {
    let mut out = String::new();
    MinMax { out: &mut out }.build(min_value, max_value, 16, true)?;
    Some(out)
}

struct MinMax<'a> {
    out: &'a mut String,
}

impl MinMax<'_> {
    fn digit_range(&mut self, from: u8, to: u8) {
        self.out.push('[');
        self.out.push(from as char);
        if from != to {
            self.out.push('-');
            self.out.push(to as char);
        }
        self.out.push(']');
    }

    fn more_digits(&mut self, min_digits: i32, max_digits: i32) {
        self.out.push_str("[0-9]");
        if min_digits == max_digits && min_digits == 1 {
            return;
        }
        self.out.push('{');
        self.out.push_str(&min_digits.to_string());
        if max_digits != min_digits {
            self.out.push(',');
            if max_digits != i32::MAX {
                self.out.push_str(&max_digits.to_string());
            }
        }
        self.out.push('}');
    }

    /// Numbers with as many digits as `from`/`to` (same length), from `from` to `to`.
    fn uniform_range(&mut self, from: &[u8], to: &[u8]) {
        let mut i = 0;
        while i < from.len() && i < to.len() && from[i] == to[i] {
            i += 1;
        }
        if i > 0 {
            self.out.push('"');
            self.out.push_str(&String::from_utf8_lossy(&from[..i]));
            self.out.push('"');
        }
        if i < from.len() && i < to.len() {
            if i > 0 {
                self.out.push(' ');
            }
            let sub_len = from.len() - i - 1;
            if sub_len > 0 {
                let from_sub = &from[i + 1..];
                let to_sub = &to[i + 1..];
                let sub_zeros = vec![b'0'; sub_len];
                let sub_nines = vec![b'9'; sub_len];
                let mut to_reached = false;
                self.out.push('(');
                if from_sub == sub_zeros.as_slice() {
                    self.digit_range(from[i], to[i] - 1);
                    self.out.push(' ');
                    self.more_digits(sub_len as i32, sub_len as i32);
                } else {
                    self.out.push('[');
                    self.out.push(from[i] as char);
                    self.out.push_str("] (");
                    self.uniform_range(from_sub, &sub_nines);
                    self.out.push(')');
                    if from[i] < to[i] - 1 {
                        self.out.push_str(" | ");
                        if to_sub == sub_nines.as_slice() {
                            self.digit_range(from[i] + 1, to[i]);
                            to_reached = true;
                        } else {
                            self.digit_range(from[i] + 1, to[i] - 1);
                        }
                        self.out.push(' ');
                        self.more_digits(sub_len as i32, sub_len as i32);
                    }
                }
                if !to_reached {
                    self.out.push_str(" | ");
                    self.digit_range(to[i], to[i]);
                    self.out.push(' ');
                    self.uniform_range(&sub_zeros, to_sub);
                }
                self.out.push(')');
            } else {
                self.out.push('[');
                self.out.push(from[i] as char);
                self.out.push('-');
                self.out.push(to[i] as char);
                self.out.push(']');
            }
        }
    }

    fn build(
        &mut self,
        mut min_value: i64,
        max_value: i64,
        decimals_left: i32,
        top_level: bool,
    ) -> Option<()> {
        let has_min = min_value != i64::MIN;
        let has_max = max_value != i64::MAX;

        if has_min && has_max {
            if min_value < 0 && max_value < 0 {
                self.out.push_str("\"-\" (");
                self.build(-max_value, -min_value, decimals_left, true)?;
                self.out.push(')');
                return Some(());
            }
            if min_value < 0 {
                self.out.push_str("\"-\" (");
                self.build(0, -min_value, decimals_left, true)?;
                self.out.push_str(") | ");
                min_value = 0;
            }
            let mut min_s = min_value.to_string().into_bytes();
            let max_s = max_value.to_string().into_bytes();
            for digits in min_s.len()..max_s.len() {
                self.uniform_range(&min_s, &vec![b'9'; digits]);
                min_s = std::iter::once(b'1')
                    .chain(std::iter::repeat_n(b'0', digits))
                    .collect();
                self.out.push_str(" | ");
            }
            self.uniform_range(&min_s, &max_s);
            return Some(());
        }

        let less_decimals = (decimals_left - 1).max(1);

        if has_min {
            if min_value < 0 {
                self.out.push_str("\"-\" (");
                self.build(i64::MIN, -min_value, decimals_left, false)?;
                self.out.push_str(") | [0] | [1-9] ");
                self.more_digits(0, decimals_left - 1);
            } else if min_value == 0 {
                if top_level {
                    self.out.push_str("[0] | [1-9] ");
                    self.more_digits(0, less_decimals);
                } else {
                    self.more_digits(1, decimals_left);
                }
            } else if min_value <= 9 {
                let c = b'0' + min_value as u8;
                let range_start = if top_level { b'1' } else { b'0' };
                if c > range_start {
                    self.digit_range(range_start, c - 1);
                    self.out.push(' ');
                    self.more_digits(1, less_decimals);
                    self.out.push_str(" | ");
                }
                self.digit_range(c, b'9');
                self.out.push(' ');
                self.more_digits(0, less_decimals);
            } else {
                let min_s = min_value.to_string().into_bytes();
                let len = min_s.len() as i32;
                let c = min_s[0];
                if c > b'1' {
                    self.digit_range(if top_level { b'1' } else { b'0' }, c - 1);
                    self.out.push(' ');
                    self.more_digits(len, less_decimals);
                    self.out.push_str(" | ");
                }
                self.digit_range(c, c);
                self.out.push_str(" (");
                let rest: i64 = std::str::from_utf8(&min_s[1..]).ok()?.parse().ok()?;
                self.build(rest, i64::MAX, less_decimals, false)?;
                self.out.push(')');
                if c < b'9' {
                    self.out.push_str(" | ");
                    self.digit_range(c + 1, b'9');
                    self.out.push(' ');
                    self.more_digits(len - 1, less_decimals);
                }
            }
            return Some(());
        }

        if has_max {
            if max_value >= 0 {
                if top_level {
                    self.out.push_str("\"-\" [1-9] ");
                    self.more_digits(0, less_decimals);
                    self.out.push_str(" | ");
                }
                self.build(0, max_value, decimals_left, true)?;
            } else {
                self.out.push_str("\"-\" (");
                self.build(-max_value, i64::MAX, decimals_left, false)?;
                self.out.push(')');
            }
            return Some(());
        }

        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitions() {
        assert_eq!(build_repetition("a", 0, 1, ""), "a?");
        assert_eq!(build_repetition("a", 1, UNBOUNDED, ""), "a+");
        assert_eq!(build_repetition("a", 2, 5, ""), "a{2,5}");
        assert_eq!(build_repetition("a", 3, UNBOUNDED, ""), "a{3,}");
        assert_eq!(build_repetition("a", 0, 0, ""), "");
        assert_eq!(
            build_repetition("item", 0, UNBOUNDED, "\",\" space"),
            "(item (\",\" space item)*)?"
        );
    }

    #[test]
    fn int_ranges() {
        assert_eq!(
            build_min_max_int(0, i64::MAX).as_deref(),
            Some("[0] | [1-9] [0-9]{0,15}")
        );
        assert_eq!(
            build_min_max_int(10, i64::MAX).as_deref(),
            Some("[1] ([0-9]{1,15}) | [2-9] [0-9]{1,15}")
        );
        assert_eq!(build_min_max_int(i64::MIN, i64::MAX), None);
    }
}
