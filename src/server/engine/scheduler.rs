//! Admission and slot choice: the queue of tasks waiting for a slot (bounded by the
//! handle's pending count), which waiting task starts next and on which slot.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::handle::shutting_down;
use super::job::Phase;
use super::slot::{common_prefix, Slot};
use crate::server::task::{Event, Task};

/// The waiting tasks, oldest first.
pub struct Scheduler {
    queue: VecDeque<Task>,
    /// Tasks sent and not yet taken by a slot, shared with the handle that bounds it.
    pending: Arc<AtomicUsize>,
    /// Least prompt similarity for picking a slot by its cache.
    slot_prompt_similarity: f32,
}

impl Scheduler {
    /// An empty queue.
    pub fn new(pending: Arc<AtomicUsize>, slot_prompt_similarity: f32) -> Self {
        Scheduler {
            queue: VecDeque::new(),
            pending,
            slot_prompt_similarity,
        }
    }

    /// How many tasks wait.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn taken(&self, n: usize) {
        self.pending.fetch_sub(n, Ordering::SeqCst);
    }

    /// Queues a submitted task, or refuses it when the engine is stopping.
    pub fn admit(&mut self, task: Task, stopping: bool) {
        if stopping {
            self.taken(1);
            let _ = task.events.send(Event::Error(shutting_down()));
        } else {
            self.queue.push_back(task);
        }
    }

    /// Refuses every waiting task (the engine is stopping).
    pub fn refuse_all(&mut self) {
        for t in std::mem::take(&mut self.queue) {
            self.taken(1);
            let _ = t.events.send(Event::Error(shutting_down()));
        }
    }

    /// Drops the tasks whose clients went away; returns how many.
    pub fn drop_cancelled(&mut self) -> usize {
        let before = self.queue.len();
        self.queue.retain(|t| !t.events.is_closed());
        let n = before - self.queue.len();
        if n > 0 {
            self.taken(n);
        }
        n
    }

    /// The oldest waiting task that can start now and its slot; a task waiting for a
    /// named busy slot does not hold up the ones behind it.
    pub fn next(&mut self, slots: &[Slot]) -> Option<(usize, Task)> {
        if !slots.iter().any(|s| !s.is_processing()) {
            return None;
        }
        let (k, id) = (0..self.queue.len())
            .filter(|&k| !self.waits_for_shared_prompt(slots, &self.queue[k]))
            .find_map(|k| self.pick_slot(slots, &self.queue[k]).map(|id| (k, id)))?;
        let task = self.queue.remove(k)?;
        self.taken(1);
        Some((id, task))
    }

    /// A later completion of an `n` > 1 request waits while the first one is queued or
    /// still evaluating the prompt it will copy; once that one generates (or is gone)
    /// it may start.
    fn waits_for_shared_prompt(&self, slots: &[Slot], task: &Task) -> bool {
        let Some(first) = task.share_from else {
            return false;
        };
        self.queue.iter().any(|t| t.id == first)
            || slots.iter().any(|s| {
                s.job
                    .as_ref()
                    .is_some_and(|j| j.task.id == first && j.phase != Phase::Generating)
            })
    }

    /// llama.cpp's `get_available_slot`: the slot asked for; else the idle slot whose
    /// cache shares the largest part of the prompt (above the similarity threshold);
    /// else the least recently used idle slot.
    fn pick_slot(&self, slots: &[Slot], task: &Task) -> Option<usize> {
        if task.params.id_slot >= 0 {
            let id = task.params.id_slot as usize % slots.len();
            return (!slots[id].is_processing()).then_some(id);
        }
        let idle = || slots.iter().filter(|s| !s.is_processing());
        let threshold = self.slot_prompt_similarity;
        if threshold > 0.0 && !task.prompt.is_empty() {
            let mut best: Option<(f32, usize)> = None;
            for s in idle().filter(|s| !s.cache.is_empty()) {
                let sim = common_prefix(&s.cache, &task.prompt) as f32 / task.prompt.len() as f32;
                if sim > threshold && best.is_none_or(|(b, _)| sim > b) {
                    best = Some((sim, s.id));
                }
            }
            if let Some((sim, id)) = best {
                slot_log!(
                    id,
                    "selected slot by LCP similarity, sim_best = {sim:.3} (> {threshold:.3} thold)"
                );
                return Some(id);
            }
        }
        // Never used first, then the oldest; among equals the last slot, as llama.cpp
        // (the slots a batch of requests lands on decide the batch's row order).
        idle().rev().min_by_key(|s| s.t_last_used).map(|s| s.id)
    }
}
