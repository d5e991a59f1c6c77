//! Printing a tensor's values: nested brackets by dimension, truncated like numpy's
//! and candle's printers when the tensor is large.

use std::collections::HashMap;
use std::fmt;

use crate::context::Context;
use crate::error::Result;
use crate::tensor::{TensorId, MAX_DIMS};
use crate::types::GgmlType;

/// A tensor's values ready to print, made by [`Context::display`].
///
/// The first line names the tensor ([`Context::label`]) with its type and shape
/// (`ne`, innermost first); then come the values as nested brackets, outermost
/// dimension first, so that each innermost bracket is one row of `ne[0]` values:
/// `ne = [3, 2]` prints as `[[a, b, c], [d, e, f]]` on two lines. Dimensions of size 1
/// above the last larger one are left out. A tensor of more than 1000 elements
/// ([`TensorDisplay::threshold`]) is summarised: of each dimension longer than
/// `2 * edge_items`, only the first and last `edge_items` entries are shown around a
/// `...` (only those rows are read).
///
/// ```
/// use ggml::{Context, GgmlType};
/// let mut ctx = Context::new();
/// let x = ctx.new_tensor_from_f32(GgmlType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.])?;
/// ctx.set_name(x, "x");
/// assert_eq!(
///     ctx.display(x).to_string(),
///     "x: f32 [3, 2, 1, 1]\n\
///      [[1.0000, 2.0000, 3.0000],\n \
///       [4.0000, 5.0000, 6.0000]]"
/// );
/// # Ok::<(), ggml::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct TensorDisplay<'a> {
    ctx: &'a Context,
    id: TensorId,
    edge_items: usize,
    threshold: usize,
    precision: usize,
}

/// # Printing
impl Context {
    /// The values of `id` for printing with `{}` (see [`TensorDisplay`] for the
    /// format): 3 edge items per dimension when summarised, 4 digits after the point.
    /// Values print with `precision` digits after the point, or in scientific notation
    /// when the largest is 1e6 or more or would print as zero.
    /// A tensor without data, or whose type cannot be read, prints its first line and
    /// the reason instead of values; printing never panics for a valid handle.
    pub fn display(&self, id: TensorId) -> TensorDisplay<'_> {
        self.tensor(id);
        TensorDisplay {
            ctx: self,
            id,
            edge_items: 3,
            threshold: 1000,
            precision: 4,
        }
    }
}

impl<'a> TensorDisplay<'a> {
    /// Shows `n` entries at each end of a summarised dimension (at least 1).
    pub fn edge_items(mut self, n: usize) -> Self {
        self.edge_items = n.max(1);
        self
    }

    /// Summarises tensors of more than `n` elements (1000 by default, as numpy;
    /// 0 summarises every dimension longer than `2 * edge_items`).
    pub fn threshold(mut self, n: usize) -> Self {
        self.threshold = n;
        self
    }

    /// Shows every value, however large the tensor.
    pub fn full(self) -> Self {
        self.threshold(usize::MAX)
    }

    /// Digits after the decimal point for floating-point values.
    pub fn precision(mut self, digits: usize) -> Self {
        self.precision = digits;
        self
    }

    /// The indices shown along a dimension of `n` entries (`None` marks the `...`).
    fn shown(&self, n: usize, summarized: bool) -> Vec<Option<usize>> {
        let e = self.edge_items;
        if summarized && n > 2 * e {
            (0..e)
                .map(Some)
                .chain(std::iter::once(None))
                .chain((n - e..n).map(Some))
                .collect()
        } else {
            (0..n).map(Some).collect()
        }
    }

    /// The shown rows, each as formatted values (`None` for the `...` column).
    fn read_rows(
        &self,
        rows: &[[usize; 3]],
        cols: &[Option<usize>],
    ) -> Result<Vec<Vec<Option<String>>>> {
        let t = self.ctx.tensor(self.id);
        let mut values: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
        for &[i1, i2, i3] in rows {
            values.push(self.read_row(t.typ, t.ne[0], i1, i2, i3)?);
        }
        let floats = values.iter().flatten().filter_map(|v| match v {
            Value::Float(x) if x.is_finite() => Some(x.abs()),
            _ => None,
        });
        let max = floats.fold(0f32, f32::max);
        // Scientific when fixed notation would be too wide, or would show only zeros.
        let scientific = max >= 1e6 || (max > 0.0 && max < 10f32.powi(-(self.precision as i32)));
        Ok(values
            .iter()
            .map(|row| {
                cols.iter()
                    .map(|c| c.map(|i0| row[i0].format(self.precision, scientific)))
                    .collect()
            })
            .collect())
    }

    fn read_row(
        &self,
        typ: GgmlType,
        ne0: usize,
        i1: usize,
        i2: usize,
        i3: usize,
    ) -> Result<Vec<Value>> {
        Ok(match typ {
            GgmlType::I32 => {
                let b = self.ctx.get_row_bytes(self.id, i1, i2, i3)?;
                b.chunks_exact(4)
                    .map(|c| Value::Int(i32::from_le_bytes([c[0], c[1], c[2], c[3]]).into()))
                    .collect()
            }
            GgmlType::I64 => {
                let b = self.ctx.get_row_bytes(self.id, i1, i2, i3)?;
                b.chunks_exact(8)
                    .map(|c| Value::Int(i64::from_le_bytes(c.try_into().expect("8 bytes"))))
                    .collect()
            }
            _ => {
                let row = self.ctx.get_row_f32(self.id, i1, i2, i3)?;
                debug_assert_eq!(row.len(), ne0);
                row.into_iter().map(Value::Float).collect()
            }
        })
    }

    fn write_values(&self, f: &mut fmt::Formatter<'_>) -> Result<fmt::Result> {
        let t = self.ctx.tensor(self.id);
        let ne = t.ne;
        let nd = (1..MAX_DIMS)
            .rev()
            .find(|&d| ne[d] > 1)
            .map_or(1, |d| d + 1);
        let summarized = t.nelements() > self.threshold;
        let shown: Vec<Vec<Option<usize>>> = (0..MAX_DIMS)
            .map(|d| self.shown(ne[d], summarized))
            .collect();
        // The rows to read: every shown (i1, i2, i3), in ggml order.
        let mut rows = Vec::new();
        for i3 in shown[3].iter().flatten() {
            for i2 in shown[2].iter().flatten() {
                for i1 in shown[1].iter().flatten() {
                    rows.push([*i1, *i2, *i3]);
                }
            }
        }
        if ne.contains(&0) {
            return Ok(write!(f, "[]"));
        }
        let cells = self.read_rows(&rows, &shown[0])?;
        let width = cells
            .iter()
            .flatten()
            .flatten()
            .map(String::len)
            .max()
            .unwrap_or(0);
        let index: HashMap<[usize; 3], usize> =
            rows.iter().enumerate().map(|(k, r)| (*r, k)).collect();
        let row_text = |r: &[usize; 3]| {
            let k = index[r];
            let items: Vec<String> = cells[k]
                .iter()
                .map(|c| {
                    c.as_ref()
                        .map_or_else(|| "...".to_string(), |s| format!("{s:>width$}"))
                })
                .collect();
            format!("[{}]", items.join(", "))
        };
        Ok(write!(
            f,
            "{}",
            self.nest(nd - 1, [0; MAX_DIMS], &shown, &row_text, 0)
        ))
    }

    /// Dimension `d` (and those inside it) at the outer indices `at`, as text;
    /// `depth` is how many brackets are open around it.
    fn nest(
        &self,
        d: usize,
        at: [usize; MAX_DIMS],
        shown: &[Vec<Option<usize>>],
        row_text: &dyn Fn(&[usize; 3]) -> String,
        depth: usize,
    ) -> String {
        if d == 0 {
            return row_text(&[at[1], at[2], at[3]]);
        }
        let indent = " ".repeat(depth + 1);
        let sep = format!(",{}\n{indent}", "\n".repeat(d - 1));
        let parts: Vec<String> = shown[d]
            .iter()
            .map(|i| match i {
                Some(i) => {
                    let mut at = at;
                    at[d] = *i;
                    self.nest(d - 1, at, shown, row_text, depth + 1)
                }
                None => "...".to_string(),
            })
            .collect();
        format!("[{}]", parts.join(&sep))
    }
}

/// One element as read for printing.
enum Value {
    Float(f32),
    Int(i64),
}

impl Value {
    fn format(&self, precision: usize, scientific: bool) -> String {
        match *self {
            Value::Int(i) => i.to_string(),
            Value::Float(x) if x.is_nan() => "NaN".to_string(),
            Value::Float(x) if x.is_infinite() => {
                (if x > 0.0 { "inf" } else { "-inf" }).to_string()
            }
            Value::Float(x) if scientific => format!("{x:.precision$e}"),
            Value::Float(x) => format!("{x:.precision$}"),
        }
    }
}

impl fmt::Display for TensorDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.ctx.tensor(self.id);
        writeln!(
            f,
            "{}: {} {}",
            self.ctx.label(self.id),
            t.typ,
            t.shape_string()
        )?;
        match self.write_values(f) {
            Ok(r) => r,
            Err(e) => write!(f, "<values not readable: {e}>"),
        }
    }
}

impl fmt::Debug for TensorDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_with(typ: GgmlType, ne: &[usize], values: &[f32]) -> (Context, TensorId) {
        let mut ctx = Context::new();
        let t = ctx.new_tensor_from_f32(typ, ne, values).unwrap();
        (ctx, t)
    }

    #[test]
    fn vectors_matrices_and_cubes() {
        let (ctx, v) = ctx_with(GgmlType::F32, &[3], &[1.0, -2.5, 3.0]);
        assert_eq!(
            ctx.display(v).to_string(),
            "#0 (NONE): f32 [3, 1, 1, 1]\n[ 1.0000, -2.5000,  3.0000]"
        );
        let (ctx, c) = ctx_with(GgmlType::F32, &[2, 2, 2], &[0., 1., 2., 3., 4., 5., 6., 7.]);
        let s = ctx.display(c).precision(1).to_string();
        assert_eq!(
            s,
            "#0 (NONE): f32 [2, 2, 2, 1]\n\
             [[[0.0, 1.0],\n  \
               [2.0, 3.0]],\n\
             \n \
              [[4.0, 5.0],\n  \
               [6.0, 7.0]]]"
        );
    }

    #[test]
    fn large_tensors_are_summarised_from_the_shown_rows() {
        let values: Vec<f32> = (0..100 * 50).map(|i| i as f32).collect();
        let (mut ctx, m) = ctx_with(GgmlType::F32, &[100, 50], &values);
        let s = ctx.display(m).precision(0).to_string();
        let lines: Vec<&str> = s.lines().collect();
        // Header, 3 rows, "...", 3 rows.
        assert_eq!(lines.len(), 8, "{s}");
        assert_eq!(lines[1], "[[   0,    1,    2, ...,   97,   98,   99],");
        assert_eq!(lines[4], " ...,");
        assert_eq!(lines[7], " [4900, 4901, 4902, ..., 4997, 4998, 4999]]");
        let full = ctx.display(m).full().to_string();
        assert_eq!(full.lines().count(), 51);
        let small = ctx
            .new_tensor_from_f32(GgmlType::F32, &[8], &values[..8])
            .unwrap();
        let s = ctx
            .display(small)
            .threshold(0)
            .edge_items(2)
            .precision(0)
            .to_string();
        assert!(s.ends_with("[0, 1, ..., 6, 7]"), "{s}");
        let two = ctx.display(m).edge_items(1).precision(0).to_string();
        assert!(
            two.contains("[[   0, ...,   99],\n ...,\n [4900, ..., 4999]]"),
            "{two}"
        );
    }

    #[test]
    fn integers_special_values_and_missing_data() {
        let mut ctx = Context::new_no_alloc();
        let i = ctx.new_tensor_from_i32(&[3], &[7, -1, 16_777_217]).unwrap();
        assert!(ctx
            .display(i)
            .to_string()
            .ends_with("[       7,       -1, 16777217]"));
        let x = ctx
            .new_tensor_from_f32(GgmlType::F16, &[3], &[f32::NAN, f32::NEG_INFINITY, 1e-6])
            .unwrap();
        let s = ctx.display(x).to_string();
        assert!(
            s.contains("NaN") && s.contains("-inf") && s.contains("e-"),
            "{s}"
        );
        let big = ctx
            .new_tensor_from_f32(GgmlType::F32, &[2], &[2e7, 1.5])
            .unwrap();
        assert!(ctx
            .display(big)
            .to_string()
            .ends_with("[2.0000e7, 1.5000e0]"));
        let empty = ctx.new_tensor_1d(GgmlType::F32, 4);
        ctx.set_name(empty, "pending");
        let s = ctx.display(empty).to_string();
        assert!(
            s.starts_with("pending: f32 [4, 1, 1, 1]\n<values not readable: "),
            "{s}"
        );
    }

    #[test]
    fn quantized_and_strided_tensors_print_their_values() {
        let (ctx, q) = ctx_with(GgmlType::Q8_0, &[32, 2], &[0.5; 64]);
        assert!(ctx.display(q).to_string().contains("0.5000"));
        let (mut ctx, m) = ctx_with(GgmlType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let t = ctx.transpose(m);
        assert!(
            ctx.display(t)
                .precision(0)
                .to_string()
                .ends_with("[[1, 4],\n [2, 5],\n [3, 6]]"),
            "{}",
            ctx.display(t)
        );
    }
}
