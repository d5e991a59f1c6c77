//! Against llama.cpp's own files: (1) dequantizing one tensor of each type from the
//! synth models gives `golden/quants/TYPE.json` bit for bit; (2) quantizing the F32
//! synth models with `ggml::quants::quantize` gives the bytes llama-quantize wrote
//! (exactly for the legacy types; for K-quants and IQ4 at least 97% of blocks, and
//! an error against the F32 data within 0.1% of the file's).

mod common;

use ggml::gguf::GgufFile;
use ggml::{CpuTypeTraits, GgmlType};

fn open(rel: &str) -> Option<GgufFile> {
    let path = common::shared_file(rel)?;
    Some(GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn dequantize(typ: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    (typ.traits().to_float.expect("dequantizer"))(&bytes[..typ.row_size(n)], &mut out);
    out
}

#[test]
fn dequantization_matches_the_golden_values_bit_for_bit() {
    let Some(dir) = common::shared_file("golden/quants") else {
        return;
    };
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let text = std::fs::read_to_string(path).expect("golden file");
        let golden: serde_json::Value = serde_json::from_str(&text).expect("golden json");
        let field = |k: &str| {
            golden[k]
                .as_str()
                .unwrap_or_else(|| panic!("{}: no '{k}'", path.display()))
        };
        let (file, tensor) = (field("file"), field("tensor"));
        let typ = GgmlType::from_name(field("type")).expect("known type");
        let values: Vec<f32> = golden["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| v.as_f64().expect("number") as f32)
            .collect();
        let Some(model) = open(&format!("models/{file}")) else {
            continue;
        };
        let info = model.tensor_info(tensor).expect("tensor in file");
        assert_eq!(info.typ, typ, "{tensor} in {file}");
        let got = dequantize(
            typ,
            model.tensor_bytes(tensor).expect("tensor bytes"),
            values.len(),
        );
        let bad: Vec<usize> = (0..values.len())
            .filter(|&i| got[i].to_bits() != values[i].to_bits())
            .collect();
        assert!(
            bad.is_empty(),
            "{typ} ({tensor} in {file}): {} of {} values differ, first at {}: {} vs golden {}",
            bad.len(),
            values.len(),
            bad[0],
            got[bad[0]],
            values[bad[0]]
        );
        checked += 1;
    }
    if checked > 0 {
        assert_eq!(
            checked,
            14,
            "expected one golden file per type in {}",
            dir.display()
        );
    }
}

/// Root-mean-square error of `a` against `b`.
fn rmse(a: &[f32], b: &[f32]) -> f64 {
    (common::nmse(a, b) * b.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / b.len() as f64)
        .sqrt()
}

/// Quantizes every quantized tensor of `models/{quantized}` from the same tensor of
/// `models/{f32}` and compares with the file's bytes.
fn requantize(f32_file: &str, quantized: &str) {
    let (Some(src), Some(file)) = (
        open(&format!("models/{f32_file}")),
        open(&format!("models/{quantized}")),
    ) else {
        return;
    };
    let (mut tensors, mut identical, mut total) = (0, 0, 0);
    for info in file.tensor_infos().iter().filter(|t| t.typ.is_quantized()) {
        let (typ, name) = (info.typ, info.name.as_str());
        let src_info = src.tensor_info(name).expect("tensor in the F32 file");
        assert_eq!(src_info.typ, GgmlType::F32, "{name}");
        assert_eq!(src_info.ne, info.ne, "{name}");
        let data: Vec<f32> = src
            .tensor_bytes(name)
            .expect("f32 bytes")
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let ours = ggml::quants::quantize(typ, &data, info.ne[0]).expect("quantize");
        let theirs = file.tensor_bytes(name).expect("quantized bytes");
        assert_eq!(ours.len(), theirs.len(), "{name}");
        let bs = typ.type_size();
        let same = ours
            .chunks(bs)
            .zip(theirs.chunks(bs))
            .filter(|(a, b)| a == b)
            .count();
        let blocks = ours.len() / bs;
        let legacy = matches!(
            typ,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0
        );
        if legacy {
            assert_eq!(
                same,
                blocks,
                "{typ} {name} in {quantized}: {} of {blocks} blocks differ",
                blocks - same
            );
        } else {
            assert!(
                same * 100 >= blocks * 97,
                "{typ} {name} in {quantized}: only {same} of {blocks} blocks identical"
            );
            let (e_ours, e_theirs) = (
                rmse(&dequantize(typ, &ours, data.len()), &data),
                rmse(&dequantize(typ, theirs, data.len()), &data),
            );
            assert!(
                e_ours <= e_theirs * 1.001,
                "{typ} {name} in {quantized}: RMSE {e_ours} vs the file's {e_theirs}"
            );
        }
        tensors += 1;
        identical += same;
        total += blocks;
    }
    assert!(tensors > 0, "{quantized} has no quantized tensors");
    eprintln!("{quantized}: {tensors} quantized tensors, {identical} of {total} blocks identical");
}

macro_rules! requantize_tests {
    ($($test:ident: $f32:literal => $quantized:literal;)*) => {$(
        #[test]
        fn $test() {
            requantize($f32, $quantized);
        }
    )*};
}

requantize_tests! {
    llama_q4_0: "synth-llama-f32.gguf" => "synth-llama-q4_0.gguf";
    llama_q4_1: "synth-llama-f32.gguf" => "synth-llama-q4_1.gguf";
    llama_q5_0: "synth-llama-f32.gguf" => "synth-llama-q5_0.gguf";
    llama_q5_1: "synth-llama-f32.gguf" => "synth-llama-q5_1.gguf";
    llama_q8_0: "synth-llama-f32.gguf" => "synth-llama-q8_0.gguf";
    llama_q2_k: "synth-llama-f32.gguf" => "synth-llama-q2_k.gguf";
    llama_q3_k_m: "synth-llama-f32.gguf" => "synth-llama-q3_k_m.gguf";
    llama_q4_k_m: "synth-llama-f32.gguf" => "synth-llama-q4_k_m.gguf";
    llama_q5_k_m: "synth-llama-f32.gguf" => "synth-llama-q5_k_m.gguf";
    llama_q6_k: "synth-llama-f32.gguf" => "synth-llama-q6_k.gguf";
    llama_iq4_nl: "synth-llama-f32.gguf" => "synth-llama-iq4_nl.gguf";
    llama_iq4_xs: "synth-llama-f32.gguf" => "synth-llama-iq4_xs.gguf";
    qwen2_q4_0: "synth-qwen2-f32.gguf" => "synth-qwen2-q4_0.gguf";
    qwen2_q8_0: "synth-qwen2-f32.gguf" => "synth-qwen2-q8_0.gguf";
    qwen2_q4_k_m: "synth-qwen2-f32.gguf" => "synth-qwen2-q4_k_m.gguf";
    qwen2_q6_k: "synth-qwen2-f32.gguf" => "synth-qwen2-q6_k.gguf";
}
