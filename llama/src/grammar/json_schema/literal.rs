//! Text helpers of the converter: GBNF string literals, JSON values written the way
//! llama.cpp's JSON library (nlohmann) writes them, and rule names.

use serde_json::Value;

/// A GBNF string literal of `text`: quoted, with `\r`, `\n`, `"` and `\` escaped
/// (llama.cpp's `format_literal`). Never fails.
pub(crate) fn format_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A rule name with every run of characters outside `[a-zA-Z0-9-]` replaced by one
/// `-` (llama.cpp's `INVALID_RULE_CHARS_RE`). Never fails.
pub(crate) fn sanitize_rule_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// `value` as compact JSON text, byte for byte as nlohmann's `dump()` writes it
/// (object keys in their order, floats in the shortest form with nlohmann's
/// exponent style: `1e+100`, `1e-05`, `100.0`). Never fails. One spelling cannot be
/// followed: serde_json reads the integer `-0` as the float `-0.0`, written `-0.0`
/// where nlohmann writes `0`.
pub(crate) fn dump_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                out.push_str(&format_float(n.as_f64().unwrap_or(f64::NAN)));
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_json(v, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as nlohmann writes it: `"` and `\` escaped, `\b \f \n \r \t`, other
/// control characters as `\u00xx` (lowercase hex), everything else as UTF-8.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A double as nlohmann's `to_chars` writes it: the shortest digits that read back
/// to the same value, a decimal point when the exponent is in `-4 < n <= 15`
/// (always with a digit after it), otherwise `d.ddde+XX` with at least two
/// exponent digits. NaN and infinities (not reachable from parsed JSON) give `null`.
fn format_float(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde-N" or "de7".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    // the value is 0.digits * 10^n
    let n = exp + 1;
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    const MIN_EXP: i32 = -4;
    const MAX_EXP: i32 = 15;
    if k <= n && n <= MAX_EXP {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
        out.push_str(".0");
    } else if 0 < n && n <= MAX_EXP {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if MIN_EXP < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = n - 1;
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", e.abs()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_nlohmann_writes_them() {
        let cases = [
            (1.5, "1.5"),
            (100.0, "100.0"),
            (1e100, "1e+100"),
            (1e-5, "1e-05"),
            (0.001, "0.001"),
            (-2.25e-7, "-2.25e-07"),
            (1e14, "100000000000000.0"),
            (1e15, "1e+15"),
            (123456.789, "123456.789"),
            (1.2345e20, "1.2345e+20"),
            (0.0, "0.0"),
        ];
        for (x, want) in cases {
            assert_eq!(format_float(x), want, "{x}");
        }
    }

    #[test]
    fn strings_and_containers() {
        let v: Value = serde_json::from_str(r#"{"b":[1,-2,"x\u0001\n\u00e9/"],"a":null}"#)
            .expect("test JSON parses");
        assert_eq!(dump_json(&v), "{\"b\":[1,-2,\"x\\u0001\\né/\"],\"a\":null}");
    }

    #[test]
    fn rule_names() {
        assert_eq!(sanitize_rule_name("a b__c-d"), "a-b-c-d");
        assert_eq!(sanitize_rule_name("/$defs/foo"), "-defs-foo");
        assert_eq!(sanitize_rule_name("é1"), "-1");
    }

    #[test]
    fn literals() {
        assert_eq!(format_literal("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    }
}
