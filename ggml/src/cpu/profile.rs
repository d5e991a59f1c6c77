//! Per-op and per-node timings of graph computations (`GGML_PERF=1`).

use std::collections::BTreeMap;
use std::fmt;

use crate::tensor::Tensor;

/// Time spent in one op type.
#[derive(Clone, Debug, Default)]
pub struct OpProfile {
    /// How many nodes of this op ran.
    pub count: u64,
    /// Total wall time in nanoseconds, barrier included.
    pub total_ns: u64,
}

/// Wall time per op type and per node name, summed over computations.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// By op name (`"MUL_MAT"`, ...), summed.
    pub by_op: BTreeMap<&'static str, OpProfile>,
    /// By node name (numbers stripped so `attn_norm-3` counts as `attn_norm`), summed.
    pub by_node: BTreeMap<String, OpProfile>,
    /// Number of graph computations recorded.
    pub graphs: u64,
}

impl Profile {
    pub(crate) fn record(&mut self, t: &Tensor, ns: u64) {
        let e = self.by_op.entry(t.op.name()).or_default();
        e.count += 1;
        e.total_ns += ns;
        let base = t
            .name
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
        let key = if base.is_empty() {
            t.op.name().to_string()
        } else {
            format!("{base} [{}]", t.op.name())
        };
        let e = self.by_node.entry(key).or_default();
        e.count += 1;
        e.total_ns += ns;
    }

    /// Adds another profile's timings into this one.
    pub fn merge(&mut self, other: &Profile) {
        for (k, v) in &other.by_op {
            let e = self.by_op.entry(k).or_default();
            e.count += v.count;
            e.total_ns += v.total_ns;
        }
        for (k, v) in &other.by_node {
            let e = self.by_node.entry(k.clone()).or_default();
            e.count += v.count;
            e.total_ns += v.total_ns;
        }
        self.graphs += other.graphs;
    }

    /// Total time over all ops, in nanoseconds.
    pub fn total_ns(&self) -> u64 {
        self.by_op.values().map(|p| p.total_ns).sum()
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total_ns().max(1) as f64;
        let table = |f: &mut fmt::Formatter<'_>,
                     title: &str,
                     rows: Vec<(String, &OpProfile)>|
         -> fmt::Result {
            writeln!(
                f,
                "{title:<40} {:>8} {:>12} {:>10} {:>7}",
                "count", "total ms", "us/call", "share"
            )?;
            for (k, v) in rows {
                writeln!(
                    f,
                    "{k:<40} {:>8} {:>12.3} {:>10.2} {:>6.1}%",
                    v.count,
                    v.total_ns as f64 / 1e6,
                    v.total_ns as f64 / 1e3 / v.count.max(1) as f64,
                    100.0 * v.total_ns as f64 / total
                )?;
            }
            Ok(())
        };
        let mut ops: Vec<_> = self.by_op.iter().map(|(k, v)| (k.to_string(), v)).collect();
        ops.sort_by_key(|(_, p)| std::cmp::Reverse(p.total_ns));
        table(f, "op", ops)?;
        writeln!(f)?;
        let mut nodes: Vec<_> = self.by_node.iter().map(|(k, v)| (k.clone(), v)).collect();
        nodes.sort_by_key(|(_, p)| std::cmp::Reverse(p.total_ns));
        table(f, "node", nodes)
    }
}
