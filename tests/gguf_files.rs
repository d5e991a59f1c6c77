//! Every GGUF file under `../shared/models` parses, and what is known about the files
//! (see `../shared/models/MANIFEST.md`) checks out.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ggml::gguf::{Gguf, GgufFile, GgufWriter};
use ggml::{Context, GgmlType};

/// Every `.gguf` below `dir`, recursively, sorted.
fn gguf_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "gguf") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn open(rel: &str) -> Option<GgufFile> {
    let path = common::shared_file(rel)?;
    Some(GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// How many tensors of each type the file has.
fn type_counts(g: &Gguf) -> BTreeMap<GgmlType, usize> {
    let mut counts = BTreeMap::new();
    for t in g.tensor_infos() {
        *counts.entry(t.typ).or_default() += 1;
    }
    counts
}

#[test]
fn every_model_file_parses_and_is_consistent() {
    let Some(dir) = common::shared_file("models") else {
        return;
    };
    let files = gguf_files(&dir);
    assert!(
        files.len() >= 34,
        "expected the 34 model files, found {}",
        files.len()
    );
    for path in &files {
        let name = path.display();
        let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(file.version(), 3, "{name}");
        assert_eq!(file.file_size(), file.bytes().len());
        assert!(file.get_str("general.architecture").is_ok(), "{name}");
        let tokens = file.get_arr_n("tokenizer.ggml.tokens").unwrap();
        for key in ["tokenizer.ggml.scores", "tokenizer.ggml.token_type"] {
            if file.get(key).is_some() {
                assert_eq!(file.get_arr_n(key).unwrap(), tokens, "{name}: {key}");
            }
        }

        let vocab_only = path.parent().is_some_and(|p| p.ends_with("llama-vocab"));
        if vocab_only {
            assert_eq!(file.n_tensors(), 0, "{name}");
            // Without tensors there is no padding: the file ends with the metadata.
            assert_eq!(file.data_offset(), file.file_size(), "{name}");
            continue;
        }
        assert!(file.n_tensors() > 0, "{name}");
        assert_eq!(file.data_offset() % file.alignment(), 0, "{name}");
        let mut end = 0;
        for t in file.tensor_infos() {
            let [ne0, ne1, ne2, ne3] = t.ne;
            assert_eq!(
                t.size,
                t.typ.row_size(ne0) * ne1 * ne2 * ne3,
                "{name}: {}",
                t.name
            );
            assert!((1..=4).contains(&t.n_dims), "{name}: {}", t.name);
            assert_eq!(file.tensor_bytes(&t.name).unwrap().len(), t.size);
            end = end.max(file.data_offset() + t.offset + t.size);
        }
        // llama.cpp writes no trailing bytes after the last tensor's (padded) data.
        assert_eq!(end, file.file_size(), "{name}");
    }
}

#[test]
fn stories260k_facts() {
    let Some(f) = open("models/stories260K.gguf") else {
        return;
    };
    assert_eq!(f.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(f.get_u32("llama.block_count").unwrap(), 5);
    assert_eq!(f.get_u32("llama.embedding_length").unwrap(), 64);
    assert_eq!(f.get_u32("llama.attention.head_count").unwrap(), 8);
    assert_eq!(f.get_u32("llama.attention.head_count_kv").unwrap(), 4);
    assert_eq!(f.get_i32("llama.feed_forward_length").unwrap(), 172);
    assert_eq!(f.get_u32("llama.rope.dimension_count").unwrap(), 8);
    assert_eq!(f.get_u32("llama.context_length").unwrap(), 2048);
    assert_eq!(
        f.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(),
        1e-5
    );
    assert_eq!(f.get_opt::<f32>("llama.rope.freq_base").unwrap(), None);
    assert_eq!(f.get_str("tokenizer.ggml.model").unwrap(), "llama");
    assert_eq!(f.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(f.get_u32("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert_eq!(f.get_u32("tokenizer.ggml.unknown_token_id").unwrap(), 0);
    let tokens = f.get_arr_str("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 512);
    assert_eq!(tokens[..4], ["<unk>", "<s>", "</s>", "<0x00>"]);
    assert_eq!(f.get_arr_f32("tokenizer.ggml.scores").unwrap().len(), 512);
    assert_eq!(
        f.get_arr_i32("tokenizer.ggml.token_type").unwrap()[..4],
        [2, 3, 3, 6]
    );

    assert_eq!(f.n_kv(), 19);
    assert_eq!(f.n_tensors(), 48);
    assert_eq!(type_counts(&f), BTreeMap::from([(GgmlType::F32, 48)]));
    // ggml order, as in the file: ne0 is the row length.
    let emb = f.tensor_info("token_embd.weight").unwrap();
    assert_eq!(
        (emb.n_dims, emb.ne, emb.size),
        (2, [64, 512, 1, 1], 64 * 512 * 4)
    );
    assert_eq!(
        f.tensor_info("blk.0.ffn_down.weight").unwrap().ne,
        [172, 64, 1, 1]
    );
    assert_eq!(f.tensor_info("blk.4.ffn_norm.weight").unwrap().n_dims, 1);
    assert!(f.tensor_info("blk.5.ffn_norm.weight").is_err());
}

#[test]
fn tensors_load_zero_copy_into_a_context() {
    let Some(f) = open("models/stories260K.gguf") else {
        return;
    };
    let mut ctx = Context::new_no_alloc();
    let ids = f.create_tensors(&mut ctx).unwrap();
    assert_eq!(ids.len(), 48);
    let id = ids["output_norm.weight"];
    let t = ctx.tensor(id);
    assert_eq!(
        (t.typ, t.ne, t.name.as_str()),
        (GgmlType::F32, [64, 1, 1, 1], "output_norm.weight")
    );
    let data = t.data.as_ref().unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&data.buffer, f.buffer()),
        "not the file's buffer"
    );
    let want: Vec<f32> = f
        .tensor_bytes("output_norm.weight")
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(ctx.get_f32(id).unwrap(), want);
}

#[test]
fn synth_models_facts() {
    let Some(dir) = common::shared_file("models") else {
        return;
    };
    for path in gguf_files(&dir) {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(quant) = stem
            .strip_prefix("synth-llama-")
            .or(stem.strip_prefix("synth-qwen2-"))
        else {
            continue;
        };
        let f = GgufFile::open(&path).unwrap();
        let qwen = stem.starts_with("synth-qwen2");
        let arch = if qwen { "qwen2" } else { "llama" };
        assert_eq!(f.get_str("general.architecture").unwrap(), arch, "{stem}");
        assert_eq!(f.get_u32(&format!("{arch}.embedding_length")).unwrap(), 256);
        assert_eq!(
            f.get_u32(&format!("{arch}.block_count")).unwrap(),
            if qwen { 3 } else { 4 }
        );
        assert_eq!(f.get_arr_n("tokenizer.ggml.tokens").unwrap(), 512);
        // Qwen2 ties the output projection to the token embeddings.
        assert_eq!(f.find_tensor("output.weight").is_some(), !qwen, "{stem}");
        assert_eq!(f.find_tensor("blk.0.attn_q.bias").is_some(), qwen, "{stem}");
        assert_eq!(f.n_tensors(), if qwen { 38 } else { 39 }, "{stem}");

        let counts = type_counts(&f);
        use GgmlType::*;
        let expect: &[(GgmlType, usize)] = match (qwen, quant) {
            (false, "f32") => &[(F32, 39)],
            (false, "q8_0") => &[(F32, 9), (Q8_0, 30)],
            (false, "q4_0") => &[(F32, 9), (Q4_0, 29), (Q6_K, 1)],
            (false, "q4_k_m") => &[(F32, 9), (Q4_K, 25), (Q6_K, 5)],
            (false, "q3_k_m") => &[(F32, 9), (Q3_K, 17), (Q4_K, 10), (Q5_K, 2), (Q6_K, 1)],
            (false, "iq4_xs") => &[(F32, 9), (IQ4_XS, 25), (Q5_K, 4), (Q6_K, 1)],
            (false, "bf16") => &[(F32, 9), (BF16, 30)],
            _ => &[],
        };
        if !expect.is_empty() {
            assert_eq!(counts, expect.iter().copied().collect(), "{stem}");
        }
    }
}

#[test]
fn rewriting_stories260k_reads_back_identical() {
    let Some(f) = open("models/stories260K.gguf") else {
        return;
    };
    let bytes = GgufWriter::from_file(&f).unwrap().to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.version(), f.version());
    assert!(g.kv().eq(f.kv()), "metadata differs");
    assert_eq!(g.tensor_infos(), f.tensor_infos());
    for t in f.tensor_infos() {
        assert_eq!(
            g.tensor_data(&bytes, &t.name).unwrap(),
            f.tensor_bytes(&t.name).unwrap()
        );
    }
    // llama.cpp lays a file out exactly as the writer does, so even the bytes agree.
    assert!(
        bytes == f.bytes(),
        "rewritten file differs from the original"
    );

    // Through a file on disk as well.
    let path = std::env::temp_dir().join(format!("gguf-rewrite-{}.gguf", std::process::id()));
    GgufWriter::from_file(&f)
        .unwrap()
        .write_to_path(&path)
        .unwrap();
    let back = GgufFile::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(back.bytes() == f.bytes());
}

#[test]
fn vocab_files_round_trip_through_the_writer() {
    let Some(dir) = common::shared_file("models/llama-vocab") else {
        return;
    };
    for path in gguf_files(&dir) {
        let f = GgufFile::open(&path).unwrap();
        let bytes = GgufWriter::from_file(&f).unwrap().to_bytes();
        assert!(
            bytes == f.bytes(),
            "{}: rewritten file differs",
            path.display()
        );
    }
}
