//! The printouts of llama.cpp's embedding program, byte for byte: the default one (a
//! few values per vector and the cosine similarity matrix, or rerank scores), the
//! OpenAI-style JSON (`json`, `json+` with the similarity matrix), a JSON array of
//! arrays (`array`) and whitespace-separated rows (`raw`). Numbers are printed as C's
//! `printf` prints them (Rust's fixed-point formatting rounds the same way; only NaN
//! is spelt differently, see [`fixed`]).

use std::io::{self, Write};

use llama::embeddings::cosine_similarity;
use llama::{EmbdNorm, PoolingType};

use super::prompts::c_str;
use crate::cli::output::fixed;
use crate::common::error::ValueError;

/// `--embd-output-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// The empty name: the first values of each vector and the similarity matrix.
    Default,
    /// `array`: `[[...],[...]]`.
    Array,
    /// `json`: OpenAI's embeddings response.
    Json,
    /// `json+`: `json` with the cosine similarity matrix.
    JsonPlus,
    /// `raw`: one vector per line, values separated by spaces.
    Raw,
}

impl OutputFormat {
    /// The format named `s` ("" is the default); [`ValueError::Unknown`] for another
    /// name (llama.cpp prints nothing for one, silently).
    pub fn from_name(s: &str) -> Result<Self, ValueError> {
        Ok(match s {
            "" => OutputFormat::Default,
            "array" => OutputFormat::Array,
            "json" => OutputFormat::Json,
            "json+" => OutputFormat::JsonPlus,
            "raw" => OutputFormat::Raw,
            _ => {
                return Err(ValueError::Unknown {
                    what: "output format",
                    value: s.to_string(),
                    expected: "\"\", array, json, json+ or raw",
                })
            }
        })
    }
}

/// `s` as C's `%{width}.{max}s`: at most `max` bytes (up to a NUL), padded on the
/// left with spaces to `width` bytes.
fn c_s(out: &mut dyn Write, s: &[u8], width: usize, max: usize) -> io::Result<()> {
    let s = c_str(s);
    let s = &s[..s.len().min(max)];
    for _ in s.len()..width {
        out.write_all(b" ")?;
    }
    out.write_all(s)
}

/// What decides the printout besides the vectors.
pub struct Printer<'a> {
    /// The chosen format.
    pub format: OutputFormat,
    /// The normalisation (max-abs vectors print without decimals).
    pub norm: EmbdNorm,
    /// The context's pooling.
    pub pooling: PoolingType,
    /// Values per vector.
    pub n_embd_out: usize,
    /// The classifier's label names (rerank scores).
    pub cls_labels: &'a [String],
    /// The classifier's outputs.
    pub n_cls_out: usize,
}

impl Printer<'_> {
    /// Prints `rows` (one per prompt of `prompts`, or one per token without pooling)
    /// in the chosen format. Fails only when writing does.
    pub fn print(
        &self,
        out: &mut dyn Write,
        prompts: &[Vec<u8>],
        rows: &[Vec<f32>],
    ) -> io::Result<()> {
        match self.format {
            OutputFormat::Default => self.print_default(out, prompts, rows),
            OutputFormat::Array | OutputFormat::Json | OutputFormat::JsonPlus => {
                self.print_json(out, prompts.len(), rows)
            }
            OutputFormat::Raw => self.print_raw(out, rows),
        }
    }

    /// A value in a listing: `%6.0f` for max-abs vectors, else `%9.6f`; then a space.
    fn value(&self, out: &mut dyn Write, x: f32) -> io::Result<()> {
        if self.norm == EmbdNorm::MaxAbs {
            write!(out, "{} ", fixed(x, 6, 0))
        } else {
            write!(out, "{} ", fixed(x, 9, 6))
        }
    }

    /// A value in JSON or raw rows: `%1.0f` for max-abs vectors, else `%1.7f`.
    fn compact(&self, x: f32) -> String {
        if self.norm == EmbdNorm::MaxAbs {
            fixed(x, 1, 0)
        } else {
            fixed(x, 1, 7)
        }
    }

    fn print_default(
        &self,
        out: &mut dyn Write,
        prompts: &[Vec<u8>],
        rows: &[Vec<f32>],
    ) -> io::Result<()> {
        writeln!(out)?;
        let n = self.n_embd_out;
        match self.pooling {
            PoolingType::None => {
                for (j, r) in rows.iter().enumerate() {
                    write!(out, "embedding {j}: ")?;
                    for &x in &r[..n.min(3)] {
                        self.value(out, x)?;
                    }
                    write!(out, " ... ")?;
                    for &x in &r[n.saturating_sub(3)..] {
                        self.value(out, x)?;
                    }
                    writeln!(out)?;
                }
            }
            PoolingType::Rank => {
                for (j, r) in rows.iter().enumerate() {
                    for i in 0..self.n_cls_out {
                        if self.n_cls_out == 1 {
                            writeln!(out, "rerank score {j}: {}", fixed(r[0], 8, 3))?;
                        } else {
                            let label = match self.cls_labels.get(i) {
                                Some(l) if !l.is_empty() => l.clone(),
                                _ => i.to_string(),
                            };
                            let x = r.get(i).copied().unwrap_or(0.0);
                            writeln!(out, "rerank score {j}: {} [{label}]", fixed(x, 8, 3))?;
                        }
                    }
                }
            }
            _ => {
                let shown = if prompts.len() > 1 { n.min(16) } else { n };
                for (j, r) in rows.iter().enumerate().take(prompts.len()) {
                    write!(out, "embedding {j}: ")?;
                    for &x in &r[..shown] {
                        self.value(out, x)?;
                    }
                    writeln!(out)?;
                }
                if prompts.len() > 1 {
                    write!(out, "\ncosine similarity matrix:\n\n")?;
                    for p in prompts {
                        c_s(out, p, 6, 6)?;
                        write!(out, " ")?;
                    }
                    writeln!(out)?;
                    for (i, a) in rows.iter().enumerate().take(prompts.len()) {
                        for b in rows.iter().take(prompts.len()) {
                            write!(out, "{} ", fixed(cosine_similarity(a, b), 6, 2))?;
                        }
                        c_s(out, &prompts[i], 1, 10)?;
                        writeln!(out)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn print_json(
        &self,
        out: &mut dyn Write,
        n_prompts: usize,
        rows: &[Vec<f32>],
    ) -> io::Result<()> {
        let object = self.format != OutputFormat::Array;
        write!(
            out,
            "{}",
            if object {
                "{\n  \"object\": \"list\",\n  \"data\": [\n"
            } else {
                "["
            }
        )?;
        for (j, r) in rows.iter().enumerate() {
            if j > 0 {
                write!(out, "{}", if object { ",\n" } else { "," })?;
            }
            if object {
                write!(out, "    {{\n      \"object\": \"embedding\",\n      \"index\": {j},\n      \"embedding\": ")?;
            }
            let values: Vec<String> = r.iter().map(|&x| self.compact(x)).collect();
            write!(out, "[{}]", values.join(","))?;
            if object {
                write!(out, "\n    }}")?;
            }
        }
        write!(out, "{}", if object { "\n  ]" } else { "]\n" })?;
        if self.format == OutputFormat::JsonPlus && n_prompts > 1 {
            write!(out, ",\n  \"cosineSimilarity\": [\n")?;
            for (i, a) in rows.iter().enumerate() {
                if i > 0 {
                    writeln!(out, ",")?;
                }
                let sims: Vec<String> = rows
                    .iter()
                    .map(|b| fixed(cosine_similarity(a, b), 6, 2))
                    .collect();
                write!(out, "    [{} ]", sims.join(", "))?;
            }
            write!(out, "\n  ]")?;
        }
        if object {
            write!(out, "\n}}\n")?;
        }
        Ok(())
    }

    fn print_raw(&self, out: &mut dyn Write, rows: &[Vec<f32>]) -> io::Result<()> {
        let cols = if self.pooling == PoolingType::Rank {
            self.n_embd_out.min(self.n_cls_out)
        } else {
            self.n_embd_out
        };
        for r in rows {
            let values: Vec<String> = r[..cols.min(r.len())]
                .iter()
                .map(|&x| self.compact(x))
                .collect();
            writeln!(out, "{}", values.join(" "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_matches_printf() {
        assert_eq!(fixed(0.5, 6, 0), "     0");
        assert_eq!(fixed(2.5, 6, 0), "     2");
        assert_eq!(fixed(-1e-9, 9, 6), "-0.000000");
        assert_eq!(fixed(0.125, 6, 2), "  0.12");
        assert_eq!(fixed(f32::NAN, 6, 2), "   nan");
        assert_eq!(fixed(f32::INFINITY, 1, 7), "inf");
    }

    #[test]
    fn strings_truncate_and_pad_by_bytes() {
        let mut v = Vec::new();
        c_s(&mut v, b"Once upon", 6, 6).unwrap();
        c_s(&mut v, b"hi", 6, 6).unwrap();
        c_s(&mut v, b"a\0b", 1, 10).unwrap();
        assert_eq!(v, b"Once u    hia");
    }

    #[test]
    fn format_names() {
        assert_eq!(
            OutputFormat::from_name("json+").unwrap(),
            OutputFormat::JsonPlus
        );
        assert_eq!(OutputFormat::from_name("").unwrap(), OutputFormat::Default);
        assert!(OutputFormat::from_name("csv").is_err());
    }
}
