//! Several sequences in one batch (`../shared/golden/multiseq/`): four sequences with
//! their own positions from 0, decoded together in a unified cache, give llama.cpp's
//! logits at each sequence's last token; and each gives the same logits decoded alone.

mod common;

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams};

struct Case {
    model: String,
    flash_attn: bool,
    seqs: Vec<(Vec<i32>, Vec<f32>)>,
}

fn read(name: &str) -> Option<Case> {
    let path = common::shared_file(&format!("golden/multiseq/{name}.json"))?;
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    let seqs = v["sequences"]
        .as_array()
        .expect("sequences")
        .iter()
        .map(|s| {
            let toks = s["tokens"]
                .as_array()
                .expect("tokens")
                .iter()
                .map(|t| t.as_i64().expect("id") as i32)
                .collect();
            let logits = s["last_logits"]
                .as_array()
                .expect("logits")
                .iter()
                .map(|x| x.as_f64().expect("f") as f32)
                .collect();
            (toks, logits)
        })
        .collect();
    Some(Case {
        model: v["model"].as_str().expect("model").into(),
        flash_attn: v["flash_attn"].as_i64() == Some(1),
        seqs,
    })
}

fn context(c: &Case, n_seq: u32) -> LlamaContext {
    let model = load_model(
        common::shared_dir().join("models").join(&c.model),
        ModelParams::default(),
    )
    .expect("model");
    let params = ContextParams {
        n_threads: 2,
        n_seq_max: n_seq,
        flash_attn: c.flash_attn,
        ..Default::default()
    };
    LlamaContext::new(model, &params).expect("ctx")
}

fn check(name: &str) {
    let Some(c) = read(name) else { return };
    let quantized = c.model.contains("q8_0") || c.model.contains("q4");
    let tol = if quantized { 1e-6 } else { 1e-8 };
    let mut ctx = context(&c, c.seqs.len() as u32);
    let mut batch = Batch::new();
    let mut last = Vec::new();
    for (s, (toks, _)) in c.seqs.iter().enumerate() {
        for (p, &t) in toks.iter().enumerate() {
            batch.add(t, p as i32, &[s as i32], p + 1 == toks.len());
        }
        last.push(batch.len() - 1);
    }
    ctx.decode(&batch).expect("decode");
    for (s, (_, want)) in c.seqs.iter().enumerate() {
        let got = ctx.logits_ith(last[s] as i32).expect("logits");
        let e = common::nmse(got, want);
        assert!(
            e <= tol,
            "{name}: sequence {s}: NMSE {e:.3e} against llama.cpp"
        );
    }
    // Each sequence alone in a fresh context gives the same logits.
    for (s, (toks, want)) in c.seqs.iter().enumerate() {
        let mut alone = context(&c, 1);
        alone.decode(&Batch::get_one(toks)).expect("decode alone");
        let e = common::nmse(alone.logits_ith(-1).expect("logits"), want);
        assert!(e <= tol, "{name}: sequence {s} decoded alone: NMSE {e:.3e}");
    }
}

#[test]
fn stories260k() {
    check("stories260K");
}

#[test]
fn synth_llama_f32() {
    check("synth-llama-f32");
}

#[test]
fn synth_qwen2_q8_0() {
    check("synth-qwen2-q8_0");
}
