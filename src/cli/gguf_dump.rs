//! `gguf-dump`: the key/value pairs and tensors of a GGUF file, printed the way
//! llama.cpp's `gguf-py/gguf/scripts/gguf_dump.py` prints them.
//!
//! Values are shown as Python would show them (`repr`): strings quoted and escaped
//! (cut to 57 characters and `...` when longer than 60), floats in Python's shortest
//! round-trip form, at most the first six elements of an array. A bad file is reported
//! on the log with a non-zero exit status.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::PathBuf;

use ggml::gguf::{GgufArray, GgufFile, GgufValue};

use crate::common::args::{parse_params, Opt};
use crate::common::error::{CliError, Result};
use crate::common::program::{entry_points, Program, Streams};

/// The program's parameters.
#[derive(Default)]
pub struct Params {
    /// The GGUF file (the one positional argument).
    pub path: PathBuf,
    /// Only the key/value pairs (`--no-tensors`).
    pub no_tensors: bool,
    /// Print only the data section's offset (`--data-offset`).
    pub data_offset: bool,
    /// Print only the alignment (`--data-alignment`).
    pub data_alignment: bool,
}

const ABOUT: &str = "Dump a GGUF file's metadata and tensor list (gguf-py's gguf_dump).\n\nusage: gguf-dump [--no-tensors] [--data-offset] [--data-alignment] FILE";

/// The options this program accepts (besides the file).
pub fn options() -> Vec<Opt<Params>> {
    vec![
        Opt::flag(&["--no-tensors"], "do not dump the tensor list", |p| {
            p.no_tensors = true
        }),
        Opt::flag(
            &["--data-offset"],
            "print the offset of the data section and exit",
            |p| p.data_offset = true,
        ),
        Opt::flag(
            &["--data-alignment"],
            "print the data alignment and exit",
            |p| p.data_alignment = true,
        ),
    ]
}

/// `gguf-dump` as a [`Program`].
pub struct GgufDump;

impl Program for GgufDump {
    type Params = Params;
    const NAME: &'static str = "gguf-dump";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// Flags, and exactly one argument not starting with `-`, the file.
    fn parse_args<A: AsRef<OsStr>>(args: &[A]) -> Result<Option<Params>> {
        let (files, flags): (Vec<&OsStr>, Vec<&OsStr>) = args
            .iter()
            .map(AsRef::as_ref)
            .partition(|a| !a.as_encoded_bytes().starts_with(b"-"));
        let mut params = parse_params::<Params, &OsStr>(&options(), &flags)?;
        if let Some(p) = params.as_mut() {
            match files[..] {
                [file] => p.path = PathBuf::from(file),
                [] => return Err(CliError::Usage("no GGUF file given".into())),
                _ => return Err(CliError::Usage("one GGUF file at a time".into())),
            }
        }
        Ok(params)
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log)
    }
}

entry_points!(GgufDump);

/// Reads the file and prints what the flags ask for.
pub fn run(p: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<()> {
    if !p.data_offset && !p.data_alignment {
        let _ = writeln!(log, "INFO:gguf-dump:* Loading: {}", p.path.display());
    }
    let file = GgufFile::open(&p.path).map_err(|source| CliError::Ggml {
        what: format!("cannot read '{}'", p.path.display()),
        source,
    })?;
    let mut out = io::BufWriter::new(out);
    let written = if p.data_offset {
        // gguf-py pads to the alignment even when there are no tensors; the reader,
        // like llama.cpp, only aligns a data section that exists.
        writeln!(
            out,
            "{}",
            file.data_offset().next_multiple_of(file.alignment())
        )
    } else if p.data_alignment {
        writeln!(out, "{}", file.alignment())
    } else {
        dump(&mut out, &file, !p.no_tensors)
    };
    written
        .and_then(|()| out.flush())
        .map_err(CliError::io("writing output"))
}

fn dump(out: &mut impl Write, file: &GgufFile, tensors: bool) -> io::Result<()> {
    let host = if cfg!(target_endian = "little") {
        "LITTLE"
    } else {
        "BIG"
    };
    writeln!(
        out,
        "* File is LITTLE endian, script is running on a {host} endian host."
    )?;
    // gguf-py lists the three header fields as if they were key/value pairs.
    let header = [
        ("GGUF.version", GgufValue::U32(file.version())),
        ("GGUF.tensor_count", GgufValue::U64(file.n_tensors() as u64)),
        ("GGUF.kv_count", GgufValue::U64(file.n_kv() as u64)),
    ];
    writeln!(
        out,
        "* Dumping {} key/value pair(s)",
        file.n_kv() + header.len()
    )?;
    let pairs = header.iter().map(|(k, v)| (*k, v)).chain(file.kv());
    for (n, (key, value)) in pairs.enumerate() {
        writeln!(
            out,
            "  {:5}: {:10} | {:8} | {key} = {}",
            n + 1,
            pretty_type(value),
            leaf_count(value),
            pretty_value(value)
        )?;
    }
    if !tensors {
        return Ok(());
    }
    writeln!(out, "* Dumping {} tensor(s)", file.n_tensors())?;
    for (n, t) in file.tensor_infos().iter().enumerate() {
        let mut shape = t.ne[..t.n_dims].to_vec();
        shape.resize(4, 1);
        let dims: Vec<String> = shape.iter().map(|d| format!("{d:5}")).collect();
        writeln!(
            out,
            "  {:5}: {:10} | {} | {:7} | {}",
            n + 1,
            t.nelements(),
            dims.join(", "),
            t.typ.name().to_uppercase(),
            t.name
        )?;
    }
    Ok(())
}

/// gguf-py's type column: `UINT32`, `[STRING]`, `[[INT32]]`; the nesting is read off
/// the first elements, so an empty array shows as plain `ARRAY`.
fn pretty_type(value: &GgufValue) -> String {
    let Some(mut a) = value.as_array() else {
        return value.typ().name().to_owned();
    };
    let mut nest = 0;
    let leaf = loop {
        if a.is_empty() {
            break "ARRAY";
        }
        nest += 1;
        match a {
            GgufArray::Array(inner) => match inner.first() {
                Some(first) => a = first,
                None => break "ARRAY",
            },
            _ => break a.elem_type().name(),
        }
    };
    format!("{}{leaf}{}", "[".repeat(nest), "]".repeat(nest))
}

/// A scalar, or one innermost element of an array.
enum Leaf<'a> {
    Str(&'a str),
    Other(String),
}

/// How many values gguf-py counts in a field: one for a scalar or string, every
/// innermost element for an array (nested arrays flattened).
fn leaf_count(value: &GgufValue) -> usize {
    fn count(a: &GgufArray) -> usize {
        match a {
            GgufArray::Array(v) => v.iter().map(count).sum(),
            a => a.len(),
        }
    }
    value.as_array().map_or(1, count)
}

/// The first `limit` of the values [`leaf_count`] counts, as Python shows them.
fn leaves(value: &GgufValue, limit: usize) -> Vec<Leaf<'_>> {
    fn walk<'a>(a: &'a GgufArray, limit: usize, out: &mut Vec<Leaf<'a>>) {
        let room = limit.saturating_sub(out.len());
        match a {
            GgufArray::Array(v) => v.iter().for_each(|inner| walk(inner, limit, out)),
            GgufArray::String(v) => out.extend(v.iter().take(room).map(|s| Leaf::Str(s))),
            GgufArray::F32(v) => out.extend(v.iter().take(room).map(|&x| float(x.into()))),
            GgufArray::F64(v) => out.extend(v.iter().take(room).map(|&x| float(x))),
            GgufArray::Bool(v) => out.extend(v.iter().take(room).map(|&x| Leaf::Other(py_bool(x)))),
            ints => {
                let first = ints
                    .to_ints::<i128>()
                    .and_then(Result::ok)
                    .unwrap_or_default();
                out.extend(first.iter().take(room).map(|x| Leaf::Other(x.to_string())));
            }
        }
    }
    match value {
        GgufValue::Array(a) => {
            let mut out = Vec::new();
            walk(a, limit, &mut out);
            out
        }
        GgufValue::String(s) => vec![Leaf::Str(s)],
        GgufValue::F32(x) => vec![float((*x).into())],
        GgufValue::F64(x) => vec![float(*x)],
        GgufValue::Bool(x) => vec![Leaf::Other(py_bool(*x))],
        v => vec![Leaf::Other(v.as_int().unwrap_or_default().to_string())],
    }
}

fn float(x: f64) -> Leaf<'static> {
    Leaf::Other(py_float(x))
}

/// The value column: a scalar as Python prints it, a long string cut, an array as a
/// Python list of its first six innermost elements.
fn pretty_value(value: &GgufValue) -> String {
    let shown = leaves(value, 6);
    let leaf = |l: &Leaf| match l {
        Leaf::Str(s) => py_repr_str(s),
        Leaf::Other(s) => s.clone(),
    };
    match (value, shown.as_slice()) {
        (GgufValue::String(s), _) if s.chars().count() > 60 => {
            let cut: String = s.chars().take(57).collect();
            py_repr_str(&format!("{cut}..."))
        }
        (GgufValue::Array(_), _) => {
            let shown: Vec<String> = shown.iter().map(leaf).collect();
            let more = if leaf_count(value) > 6 { ", ..." } else { "" };
            format!("[{}{more}]", shown.join(", "))
        }
        (_, [l]) => leaf(l),
        _ => String::new(),
    }
}

fn py_bool(b: bool) -> String {
    if b { "True" } else { "False" }.to_owned()
}

/// Python's `repr(float)`: the shortest digits that round-trip, in positional
/// notation for exponents -5 < e < 16 and scientific (`1e-05`, `1e+16`) otherwise.
fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: "-1.2345e-6".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    let decpt = exp + 1; // digits are 0.DIGITS * 10^decpt
    let body = if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            format!("0.{}{digits}", "0".repeat((-decpt) as usize))
        } else if decpt >= n {
            format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
        } else {
            let (int, frac) = digits.split_at(decpt as usize);
            format!("{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{first}{frac}e{esign}{:02}", exp.abs())
    };
    format!("{sign}{body}")
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and no
/// double one; backslash escapes for the quote, `\\`, `\t`, `\n`, `\r` and for
/// characters Python does not print (control, format and separator characters).
fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !py_printable(c) => {
                let cp = c as u32;
                if cp < 0x100 {
                    out.push_str(&format!("\\x{cp:02x}"));
                } else if cp < 0x10000 {
                    out.push_str(&format!("\\u{cp:04x}"));
                } else {
                    out.push_str(&format!("\\U{cp:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// An approximation of Python's `str.isprintable` for one character: everything but
/// control characters, separators other than the space, the common format
/// characters and private-use characters.
fn py_printable(c: char) -> bool {
    let cp = c as u32;
    let format_char = matches!(cp,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F
        | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB);
    let private_use = matches!(cp, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF);
    !(c.is_control() || (c.is_whitespace() && c != ' ') || format_char || private_use)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_does() {
        let cases: [(f64, &str); 12] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-1000.0, "-1000.0"),
            (0.1, "0.1"),
            (1e-5f32 as f64, "9.999999747378752e-06"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (123.456, "123.456"),
            (1.5e300, "1.5e+300"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float(x), want, "{x:e}");
        }
    }

    #[test]
    fn strings_print_as_python_does() {
        assert_eq!(py_repr_str("llama"), "'llama'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("'\""), "'\\'\"'");
        assert_eq!(py_repr_str("a\nb\\"), "'a\\nb\\\\'");
        assert_eq!(py_repr_str("\u{0}\u{7f}▁Ġ"), "'\\x00\\x7f▁Ġ'");
        assert_eq!(py_repr_str("\u{a0}\u{200b}"), "'\\xa0\\u200b'");
    }

    #[test]
    fn types_and_values_print_as_gguf_py_does() {
        let v: GgufValue = vec!["a", "b", "c", "d", "e", "f", "g"].into();
        assert_eq!(pretty_type(&v), "[STRING]");
        assert_eq!(pretty_value(&v), "['a', 'b', 'c', 'd', 'e', 'f', ...]");
        let v: GgufValue = vec![GgufArray::from(vec![1u32, 2]), GgufArray::from(vec![3u32])].into();
        assert_eq!(pretty_type(&v), "[[UINT32]]");
        assert_eq!(leaf_count(&v), 3);
        assert_eq!(pretty_value(&v), "[1, 2, 3]");
        let v = GgufValue::Array(GgufArray::F32(vec![]));
        assert_eq!(
            (pretty_type(&v), pretty_value(&v)),
            ("ARRAY".into(), "[]".into())
        );
        let v: GgufValue = "x".repeat(61).into();
        assert_eq!(pretty_value(&v), format!("'{}...'", "x".repeat(57)));
        let v = GgufValue::Bool(true);
        assert_eq!(pretty_value(&v), "True");
        let v = GgufValue::I16(-3);
        assert_eq!(pretty_value(&v), "-3");
    }
}
