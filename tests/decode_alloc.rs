//! The decode loop allocates nothing per token once warm: a counting global allocator
//! around single-token decodes of stories260K (the graph is reused while `n_kv` stays,
//! every buffer of `decode`, the executor and the KV bookkeeping is reused), at one
//! thread and on the executor's worker pool (which publishes each graph without
//! allocating).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn decode_steps_allocate_nothing_once_warm() {
    let Some(path) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = load_model(path, ModelParams::default()).expect("model");
    for n_threads in [1, 2] {
        let p = ContextParams {
            n_threads,
            n_ctx: 512,
            ..Default::default()
        };
        let mut ctx = LlamaContext::new(Arc::clone(&m), &p).expect("context");
        ctx.decode(&Batch::get_one(&[1, 400, 401, 402]))
            .expect("prompt");
        let mut batch = Batch::new();
        let mut counts = Vec::with_capacity(64);
        for i in 0..40 {
            batch.clear();
            batch.add(300 + i, 4 + i, &[0], true);
            let before = ALLOCS.load(Ordering::Relaxed);
            ctx.decode(&batch).expect("decode");
            let _ = ctx.logits_ith(-1).expect("logits");
            counts.push(ALLOCS.load(Ordering::Relaxed) - before);
        }
        // The first steps may grow buffers; after that, none.
        assert!(
            counts[8..].iter().all(|&c| c == 0),
            "{n_threads} threads: allocations per decode step {counts:?}"
        );
    }
}
