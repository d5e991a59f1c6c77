//! The batch of one step: the next token of every generating slot, then prompt chunks
//! of the slots still reading their prompt, up to `n_batch` rows; each row remembers
//! its slot.

use llama::memory::Pos;
use llama::{Batch, LlamaError, Token};

use super::job::Phase;
use super::kv;
use super::slot::Slot;
use super::Engine;
use crate::server::error::ApiError;

/// A batch whose rows each belong to one slot (the slot's id is the row's sequence).
#[derive(Default)]
pub struct StepBatch {
    batch: Batch,
    /// The slot of each row.
    owner: Vec<usize>,
}

impl StepBatch {
    /// The batch to decode.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    /// Rows in all.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// Drops every row.
    pub fn clear(&mut self) {
        self.batch.clear();
        self.owner.clear();
    }

    /// The slot of row `row`.
    pub fn owner(&self, row: usize) -> usize {
        self.owner[row]
    }

    /// Whether row `row` asks for logits.
    pub fn wants_logits(&self, row: usize) -> bool {
        self.batch.tokens()[row].logits
    }

    /// The slots with rows, in row order, each once per run of rows.
    pub fn slots(&self) -> Vec<usize> {
        let mut v = self.owner.clone();
        v.dedup();
        v
    }

    /// How many rows belong to slots for which `pred` holds.
    pub fn count_rows(&self, pred: impl Fn(usize) -> bool) -> usize {
        self.owner.iter().filter(|&&s| pred(s)).count()
    }

    /// Adds `tok` at the slot's next position to the batch and to the slot's cache.
    pub fn push(&mut self, slot: &mut Slot, tok: Token, logits: bool) {
        self.batch
            .add(tok, slot.pos_next, &[slot.id as i32], logits);
        self.owner.push(slot.id);
        if slot.n_exact == slot.cache.len() {
            slot.n_exact += 1;
        }
        slot.cache.push(tok);
        slot.pos_next += 1;
    }

    /// The position of slot `s`'s first row (0 when it has none).
    pub fn first_pos(&self, s: usize) -> Pos {
        self.owner
            .iter()
            .position(|&o| o == s)
            .and_then(|k| self.batch.tokens()[k].pos)
            .unwrap_or(0)
    }

    /// The rows of the slots for which `keep` holds; with `keep_logits` false no row
    /// asks for logits.
    fn filtered(&self, keep: impl Fn(usize) -> bool, keep_logits: bool) -> StepBatch {
        let mut out = StepBatch::default();
        for (t, &o) in self.batch.tokens().iter().zip(&self.owner) {
            if keep(o) {
                let logits = keep_logits && t.logits;
                out.batch
                    .add(t.token, t.pos.unwrap_or(0), &t.seq_ids, logits);
                out.owner.push(o);
            }
        }
        out
    }

    /// Slot `s`'s rows alone, their logits wanted or (with `keep_logits` false) not.
    pub fn rows_of(&self, s: usize, keep_logits: bool) -> StepBatch {
        self.filtered(|o| o == s, keep_logits)
    }

    /// Takes slot `s`'s rows out.
    pub fn remove_slot(&mut self, s: usize) {
        *self = self.filtered(|o| o != s, true);
    }

    /// Appends `other`'s rows.
    pub fn append(&mut self, other: StepBatch) {
        for (t, o) in other.batch.tokens().iter().zip(other.owner) {
            self.batch
                .add(t.token, t.pos.unwrap_or(0), &t.seq_ids, t.logits);
            self.owner.push(o);
        }
    }
}

impl Engine {
    /// Applies Self-Extend's KV-shift form to slot `i` before it adds tokens.
    fn self_extend(&mut self, i: usize) -> Result<(), LlamaError> {
        let slot = &mut self.slots[i];
        if let Some(se) = slot.ga.as_mut() {
            slot.pos_next = kv::self_extend(&mut self.ctx, se, i, slot.pos_next)?;
        }
        Ok(())
    }

    /// Fills the step's batch: each generating slot's sampled token, then prompt
    /// chunks (starting the prompts of slots that just took a task).
    pub(super) fn build_batch(&mut self) {
        self.batch.clear();
        let n_batch = self.ctx.cparams().n_batch as usize;
        for i in 0..self.slots.len() {
            let Some(tok) = self.slots[i]
                .job
                .as_ref()
                .filter(|j| j.phase == Phase::Generating)
                .and_then(|j| j.sampled)
            else {
                continue;
            };
            if self.batch.len() >= n_batch {
                break;
            }
            if let Err(e) = self.self_extend(i) {
                self.fail(i, ApiError::Server(format!("self-extend failed: {e}")));
                continue;
            }
            let draft = self.draft_for(i, tok, n_batch - self.batch.len());
            self.batch.push(&mut self.slots[i], tok, true);
            for &d in &draft {
                self.batch.push(&mut self.slots[i], d, true);
            }
            if let Some(j) = self.slots[i].job.as_mut() {
                j.sampled = None;
                j.spec.draft = draft;
            }
        }
        for i in 0..self.slots.len() {
            if self.batch.len() >= n_batch {
                break;
            }
            let phase = match &self.slots[i].job {
                Some(j) => j.phase,
                None => continue,
            };
            if self.runs_embedding(i) {
                if phase == Phase::Started {
                    if let Err(e) = self.start_embedding(i) {
                        self.fail(i, e);
                        continue;
                    }
                }
                self.push_embedding_prompt(i, n_batch);
                continue;
            }
            if phase == Phase::Started {
                if let Err(e) = self.start_prompt(i) {
                    self.fail(i, e);
                    continue;
                }
            } else if phase != Phase::Prompt {
                continue;
            }
            if let Err(e) = self.self_extend(i) {
                self.fail(i, ApiError::Server(format!("self-extend failed: {e}")));
                continue;
            }
            self.push_prompt_chunk(i, n_batch);
        }
    }

    /// Adds slot `i`'s next prompt tokens; a sliding-window model's chunk stops where
    /// a checkpoint is due, and the checkpoint is made.
    fn push_prompt_chunk(&mut self, i: usize, n_batch: usize) {
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_mut() else {
            return;
        };
        let prompt = std::mem::take(&mut job.task.prompt);
        let spans = std::mem::take(&mut job.task.spans);
        let (id_task, from) = (job.task.id, job.n_fed);
        let n_ubatch = self.ctx.cparams().n_ubatch as usize;
        let policy = &self.cfg.checkpoints;
        let mut n_fed = from;
        while n_fed < prompt.len() && self.batch.len() < n_batch {
            self.batch
                .push(slot, prompt[n_fed], n_fed + 1 == prompt.len());
            n_fed += 1;
            if slot
                .checkpoints
                .cut_after(policy, &spans, n_fed, prompt.len(), n_batch, n_ubatch)
            {
                break;
            }
        }
        let made = slot.checkpoints.maybe_create(
            &mut self.ctx,
            i,
            policy,
            &spans,
            id_task,
            n_fed,
            n_fed - from,
            prompt.len(),
            n_ubatch,
        );
        match made {
            Ok(true) => slot_log!(
                i,
                "created context checkpoint {} of {} at {} prompt tokens",
                slot.checkpoints.len(),
                policy.max,
                from
            ),
            Ok(false) => {}
            Err(e) => slot_log!(i, "could not make a context checkpoint: {e}"),
        }
        if let Some(job) = slot.job.as_mut() {
            job.task.prompt = prompt;
            job.task.spans = spans;
            job.n_fed = n_fed;
        }
    }
}
