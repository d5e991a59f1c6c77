//! The engine's counters and their Prometheus text, with llama.cpp's metric names
//! (`llamacpp:prompt_tokens_total`, ...) plus the KV cache use and the queue.

use std::fmt::Write;

/// Counters the engine keeps (llama.cpp's `server_metrics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Prompt tokens evaluated (cached ones excluded).
    pub n_prompt_tokens: u64,
    /// Prompt tokens reused from a slot's cache.
    pub n_prompt_cached: u64,
    /// Seconds spent on prompts.
    pub t_prompt: f64,
    /// Tokens generated.
    pub n_predicted: u64,
    /// Seconds spent generating.
    pub t_predicted: f64,
    /// `decode` calls.
    pub n_decode: u64,
    /// Busy slots summed over `decode` calls.
    pub n_busy_slots: u64,
    /// Longest sequence seen (prompt + generation).
    pub n_tokens_max: u64,
    /// Requests answered (finished or failed).
    pub n_requests: u64,
    /// Requests cancelled by a client that went away.
    pub n_cancelled: u64,
    /// Speculative decoding: draft tokens proposed.
    pub n_draft_tokens: u64,
    /// Speculative decoding: draft tokens accepted.
    pub n_draft_accepted: u64,
    /// Speculative decoding: verification steps (decodes of a draft).
    pub n_draft_steps: u64,
}

/// A moment's view of the engine for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// The counters.
    pub metrics: Metrics,
    /// Slots busy now.
    pub n_processing: usize,
    /// Requests waiting for a slot.
    pub n_deferred: usize,
    /// KV cells in use.
    pub kv_used: u32,
    /// KV cells in all.
    pub kv_size: u32,
}

impl MetricsSnapshot {
    /// The Prometheus text exposition.
    pub fn to_prometheus(&self) -> String {
        let m = &self.metrics;
        let per = |n: u64, t: f64| if t > 0.0 { n as f64 / t } else { 0.0 };
        let counters = [
            (
                "prompt_tokens_total",
                "Number of prompt tokens processed, excluding cached tokens",
                m.n_prompt_tokens as f64,
            ),
            (
                "prompt_tokens_cached_total",
                "Number of prompt tokens reused from the cache",
                m.n_prompt_cached as f64,
            ),
            (
                "prompt_seconds_total",
                "Total time spent processing prompts",
                m.t_prompt,
            ),
            (
                "tokens_predicted_total",
                "Number of generation tokens processed",
                m.n_predicted as f64,
            ),
            (
                "tokens_predicted_seconds_total",
                "Total time spent generating tokens",
                m.t_predicted,
            ),
            (
                "n_decode_total",
                "Total number of llama_decode() calls",
                m.n_decode as f64,
            ),
            (
                "n_tokens_max",
                "Largest observed sequence length (prompt + generation)",
                m.n_tokens_max as f64,
            ),
            (
                "spec_decode_num_draft_tokens_total",
                "Speculative: Total draft tokens generated",
                m.n_draft_tokens as f64,
            ),
            (
                "spec_decode_num_accepted_tokens_total",
                "Speculative: Total draft tokens accepted by the target model",
                m.n_draft_accepted as f64,
            ),
            (
                "spec_decode_num_drafts_total",
                "Speculative: Total speculative decoding verification steps",
                m.n_draft_steps as f64,
            ),
            (
                "requests_total",
                "Number of requests answered",
                m.n_requests as f64,
            ),
            (
                "requests_cancelled_total",
                "Number of requests cancelled because the client went away",
                m.n_cancelled as f64,
            ),
        ];
        let gauges = [
            (
                "prompt_tokens_seconds",
                "Average prompt throughput in tokens/s",
                per(m.n_prompt_tokens, m.t_prompt),
            ),
            (
                "predicted_tokens_seconds",
                "Average generation throughput in tokens/s",
                per(m.n_predicted, m.t_predicted),
            ),
            (
                "requests_processing",
                "Number of requests processing",
                self.n_processing as f64,
            ),
            (
                "requests_deferred",
                "Number of requests deferred",
                self.n_deferred as f64,
            ),
            (
                "n_busy_slots_per_decode",
                "Average number of busy slots per llama_decode() call",
                m.n_busy_slots as f64 / (m.n_decode.max(1)) as f64,
            ),
            (
                "kv_cache_tokens",
                "KV cache cells in use",
                self.kv_used as f64,
            ),
            (
                "kv_cache_usage_ratio",
                "KV cache usage: 1 means full",
                self.kv_used as f64 / self.kv_size.max(1) as f64,
            ),
        ];
        let mut s = String::new();
        for (kind, items) in [("counter", &counters[..]), ("gauge", &gauges[..])] {
            for (name, help, v) in items {
                let _ = writeln!(s, "# HELP llamacpp:{name} {help}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {v}");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_has_llama_cpp_names() {
        let s = MetricsSnapshot {
            metrics: Metrics {
                n_prompt_tokens: 10,
                t_prompt: 2.0,
                ..Default::default()
            },
            kv_used: 64,
            kv_size: 256,
            ..Default::default()
        }
        .to_prometheus();
        assert!(s.contains(
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 10\n"
        ));
        assert!(s.contains("llamacpp:prompt_tokens_seconds 5\n"));
        assert!(s.contains("llamacpp:kv_cache_usage_ratio 0.25\n"));
    }
}
