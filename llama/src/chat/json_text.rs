//! JSON text as templates' `tojson` writes it in llama.cpp (and Python's
//! `json.dumps`): chosen item and key separators, an optional indent, optional
//! `\uXXXX` escapes for non-ASCII, and floats as a C++ stream prints them
//! (`%g`, six significant digits). serde_json writes the JSON; this only sets the
//! whitespace and number text.

use std::io;

use serde::Serialize;

/// Layout of the JSON text.
#[derive(Clone, Debug)]
pub(crate) struct JsonStyle {
    /// Spaces per level; `None` for everything on one line.
    pub indent: Option<usize>,
    /// Between items (`", "` on one line, `","` when indented).
    pub item_sep: String,
    /// Between a key and its value (`": "`).
    pub key_sep: String,
    /// Whether non-ASCII characters in strings become `\uXXXX` escapes.
    pub ensure_ascii: bool,
}

impl JsonStyle {
    /// Python's `json.dumps` defaults as llama.cpp applies them: one line, `", "`
    /// and `": "`, non-ASCII kept.
    pub(crate) fn python() -> Self {
        JsonStyle {
            indent: None,
            item_sep: ", ".into(),
            key_sep: ": ".into(),
            ensure_ascii: false,
        }
    }
}

/// `value` as JSON text in `style`. Errors: a value serde cannot write as JSON
/// (a map with non-string keys of an unsupported kind).
pub(crate) fn to_json_text(value: &impl Serialize, style: &JsonStyle) -> Result<String, String> {
    let mut text = Vec::new();
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            &mut text,
            Formatter::new(style),
        ))
        .map_err(|e| e.to_string())?;
    String::from_utf8(text).map_err(|e| e.to_string())
}

/// A serde_json formatter for [`JsonStyle`].
pub(crate) struct Formatter<'a> {
    style: &'a JsonStyle,
    level: usize,
    has_value: bool,
}

impl<'a> Formatter<'a> {
    pub(crate) fn new(style: &'a JsonStyle) -> Self {
        Formatter {
            style,
            level: 0,
            has_value: false,
        }
    }

    fn newline_indent<W: ?Sized + io::Write>(&self, w: &mut W, level: usize) -> io::Result<()> {
        if let Some(n) = self.style.indent {
            w.write_all(b"\n")?;
            for _ in 0..level * n {
                w.write_all(b" ")?;
            }
        }
        Ok(())
    }

    fn open<W: ?Sized + io::Write>(&mut self, w: &mut W, c: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(c)
    }

    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, c: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline_indent(w, self.level)?;
        }
        self.has_value = true;
        w.write_all(c)
    }

    fn item<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(self.style.item_sep.as_bytes())?;
        }
        self.newline_indent(w, self.level)
    }
}

impl serde_json::ser::Formatter for Formatter<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(self.style.key_sep.as_bytes())
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(format_g(value).as_bytes())
    }
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(w, value as f64)
    }
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.style.ensure_ascii || fragment.is_ascii() {
            return w.write_all(fragment.as_bytes());
        }
        let mut buf = [0u16; 2];
        for c in fragment.chars() {
            if c.is_ascii() {
                w.write_all(&[c as u8])?;
            } else {
                for unit in c.encode_utf16(&mut buf) {
                    write!(w, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// A double as C++'s `ostream << double` prints it (`%g`: six significant digits,
/// exponent form below 1e-4 or from 1e6, trailing zeros dropped).
pub(crate) fn format_g(x: f64) -> String {
    format_g_digits(x, 6)
}

/// A double as C's `%.{digits}g` prints it (`digits` significant digits, at least 1;
/// exponent form below 1e-4 or from `10^digits`, trailing zeros dropped).
pub(crate) fn format_g_digits(x: f64, digits: usize) -> String {
    let digits = digits.max(1);
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{x:.*e}", digits - 1);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= digits as i32 {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        strip_zeros(&format!("{x:.*}", (digits as i32 - 1 - exp) as usize)).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_spacing_and_indent() {
        let v = json!({"a": [1, 2.5, "é"], "b": {}, "c": []});
        assert_eq!(
            to_json_text(&v, &JsonStyle::python()).unwrap(),
            r#"{"a": [1, 2.5, "é"], "b": {}, "c": []}"#
        );
        let style = JsonStyle {
            indent: Some(2),
            item_sep: ",".into(),
            ..JsonStyle::python()
        };
        assert_eq!(
            to_json_text(&v, &style).unwrap(),
            "{\n  \"a\": [\n    1,\n    2.5,\n    \"é\"\n  ],\n  \"b\": {},\n  \"c\": []\n}"
        );
        let ascii = JsonStyle {
            ensure_ascii: true,
            ..JsonStyle::python()
        };
        assert_eq!(
            to_json_text(&json!("é😀\n"), &ascii).unwrap(),
            r#""\u00e9\ud83d\ude00\n""#
        );
    }

    #[test]
    fn floats_as_cpp_streams() {
        for (x, s) in [
            (0.1, "0.1"),
            (2.0, "2"),
            (1.23456789, "1.23457"),
            (1e20, "1e+20"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(format_g(x), s, "{x}");
        }
    }
}
