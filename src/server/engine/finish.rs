//! How a job ends: its final result and timing logs, an error, or its client gone.
//! Each frees the slot (its cache stays) and counts the request.

use llama::vocab::TokenizeOptions;

use super::Engine;
use crate::server::error::ApiError;
use crate::server::task::{Event, StopType};

impl Engine {
    /// Sends the final result of slot `i`'s job and frees the slot (its cache stays).
    pub(super) fn finish(&mut self, i: usize) {
        let vocab = &self.model.vocab;
        let slot = &mut self.slots[i];
        let Some(mut job) = slot.job.take() else {
            return;
        };
        let n_stop_tokens = if job.stop == StopType::Word {
            vocab
                .tokenize(&job.stopping_word, TokenizeOptions::TEXT)
                .len()
        } else {
            0
        };
        let fin = job.finish(i, slot.cache.len(), n_stop_tokens);
        let t = fin.timings;
        slot_log!(i, "prompt eval time = {:10.2} ms / {:5} tokens ({:8.2} ms per token, {:8.2} tokens per second)", t.prompt_ms, t.prompt_n, t.prompt_ms / t.prompt_n.max(1) as f64, 1e3 * t.prompt_n as f64 / t.prompt_ms.max(1e-9));
        slot_log!(i, "       eval time = {:10.2} ms / {:5} tokens ({:8.2} ms per token, {:8.2} tokens per second)", t.predicted_ms, t.predicted_n, t.predicted_ms / t.predicted_n.max(1) as f64, 1e3 * t.predicted_n as f64 / t.predicted_ms.max(1e-9));
        slot_log!(
            i,
            "      total time = {:10.2} ms / {:5} tokens",
            t.prompt_ms + t.predicted_ms,
            t.prompt_n + t.predicted_n
        );
        slot_log!(
            i,
            "stop processing: n_tokens = {}, truncated = {}, stop = {}",
            slot.cache.len(),
            fin.truncated,
            fin.stop.name()
        );
        self.metrics.n_predicted += fin.n_decoded as u64;
        self.metrics.n_draft_tokens += job.spec.n_drafted as u64;
        self.metrics.n_draft_accepted += job.spec.n_accepted as u64;
        self.metrics.n_draft_steps += job.spec.n_steps as u64;
        self.metrics.n_requests += 1;
        let _ = job.send(Event::Final(Box::new(fin)));
        slot.t_last_used = Some(std::time::Instant::now());
    }

    /// Ends slot `i`'s job with an error, if it has one.
    pub(super) fn fail(&mut self, i: usize, e: ApiError) {
        if let Some(job) = self.slots[i].end_job() {
            slot_log!(i, "task {} failed: {e}", job.task.id);
            let _ = job.task.events.send(Event::Error(e));
            self.metrics.n_requests += 1;
        }
    }

    /// Frees the slots whose clients went away.
    pub(super) fn drop_cancelled_jobs(&mut self) {
        for slot in &mut self.slots {
            if !slot.job.as_ref().is_some_and(|j| j.task.events.is_closed()) {
                continue;
            }
            if let Some(j) = slot.end_job() {
                slot_log!(
                    slot.id,
                    "task {} cancelled: the client went away",
                    j.task.id
                );
                self.metrics.n_cancelled += 1;
            }
        }
    }
}
