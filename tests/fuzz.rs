//! Fuzzing on stable Rust: mutated and random inputs for the GGUF reader, the model
//! loader (and a decode of what loads), the tokenizer (bytes and text with special
//! tokens, both ways), every program's argument parser, and the server's request
//! handling (mutated JSON bodies for every endpoint; each must get an answer and the
//! server must keep serving). Each case runs on its own
//! thread under a time budget; a panic or an overrun fails the test with the case's
//! number, which `FUZZ_SEED` and the index reproduce.
//!
//! `FUZZ_ITERS` sets the cases per target (default 200, which keeps the file at a few
//! seconds in release mode; 20000 or more by hand), `FUZZ_SEED` the seed (fixed by
//! default). Every crash the fuzzer found is a fixed case in `regressions_*`.

mod common;
#[path = "common/server.rs"]
mod srv;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ggml::gguf::{Gguf, GgufArray, GgufFile, GgufValue, GgufWriter};
use llama::vocab::{TokenizeOptions, Vocab};
use llama::{Batch, ContextParams, LlamaContext, ModelParams};
use llamars::cli::rng::Rng;
use llamars::cli::{
    bench, chat_template, completion, eval_callback, gen_model, gguf_dump, passkey, perplexity,
    simple, tokenize,
};
use llamars::common::args::{os_from_bytes, Opt};
use serde_json::{json, Value};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn iters() -> usize {
    env_or("FUZZ_ITERS", 200) as usize
}

fn seed() -> u64 {
    env_or("FUZZ_SEED", 0x006c_6c61_6d61_7273)
}

/// A per-case time budget: generous, since the machine may be shared.
const BUDGET: Duration = Duration::from_secs(20);

/// Runs `f` on its own thread; `Err` with a description when it panics or runs
/// past [`BUDGET`] (the thread is then left behind: it cannot be stopped).
fn guarded(f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r.is_ok());
    });
    match rx.recv_timeout(BUDGET) {
        Ok(true) => {
            let _ = handle.join();
            Ok(())
        }
        Ok(false) => {
            let _ = handle.join();
            Err("panicked".into())
        }
        Err(_) => Err(format!("ran longer than {BUDGET:?}")),
    }
}

/// Runs `cases` cases of a target; fails listing the cases that panicked or hung.
fn fuzz(
    target: &str,
    cases: usize,
    mut case: impl FnMut(usize, &mut Rng) -> Box<dyn FnOnce() + Send>,
) {
    let seed = seed();
    let t0 = Instant::now();
    let mut failures = Vec::new();
    for i in 0..cases {
        let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let f = case(i, &mut rng);
        if let Err(e) = guarded(f) {
            failures.push(format!("case {i}: {e}"));
            if failures.len() >= 5 {
                break;
            }
        }
    }
    eprintln!(
        "fuzz {target}: {cases} cases in {:.1} s (FUZZ_SEED={seed})",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "fuzz {target} (FUZZ_SEED={seed}): {}",
        failures.join("; ")
    );
}

// ---------------------------------------------------------------------------
// Mutations

/// Little-endian values that make lengths, counts, types and offsets interesting.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    31,
    32,
    255,
    256,
    0x7f,
    0x80,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// A mutated copy of `base`, most changes in its first `head` bytes (the GGUF
/// header and metadata), some spliced with `other`.
fn mutate(rng: &mut Rng, base: &[u8], head: usize, other: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    let at = |rng: &mut Rng, len: usize| {
        if len == 0 {
            0
        } else if rng.chance(3, 4) {
            rng.below(head.clamp(1, len))
        } else {
            rng.below(len)
        }
    };
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 => {
                for _ in 0..1 + rng.below(8) {
                    let i = at(rng, b.len());
                    if let Some(x) = b.get_mut(i) {
                        *x ^= 1 << rng.below(8);
                    }
                }
            }
            1 => {
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let width = [1, 2, 4, 8][rng.below(4)];
                let i = at(rng, b.len()) & !(width - 1);
                for k in 0..width {
                    if let Some(x) = b.get_mut(i + k) {
                        *x = (v >> (8 * k)) as u8;
                    }
                }
            }
            2 => {
                let n = at(rng, b.len() + 1);
                b.truncate(n);
            }
            3 => {
                let cut = at(rng, b.len() + 1);
                let from = rng.below(other.len() + 1);
                b.truncate(cut);
                b.extend_from_slice(&other[from..]);
            }
            4 => {
                let i = at(rng, b.len() + 1);
                let n = rng.below(64);
                let junk = rng.bytes(n);
                b.splice(i..i, junk);
            }
            5 => {
                let i = at(rng, b.len() + 1);
                let n = rng.below(64).min(b.len() - i);
                b.drain(i..i + n);
            }
            _ => {
                // Random bytes after a valid magic and version, or none at all.
                let n = rng.below(512);
                let mut r = if rng.chance(1, 2) {
                    b"GGUF\x03\0\0\0".to_vec()
                } else {
                    Vec::new()
                };
                r.extend(rng.bytes(n));
                b = r;
            }
        }
    }
    b
}

/// A new value for a metadata key: an interesting number of the same type, a
/// special float, another name, a shortened or emptied array, now and then a value
/// of another type.
fn mutate_value(rng: &mut Rng, v: &GgufValue) -> GgufValue {
    use GgufValue as V;
    let big = INTERESTING[rng.below(INTERESTING.len())];
    let neg = rng.chance(1, 4);
    let int = |x: u64| {
        if neg {
            (x as i64).wrapping_neg()
        } else {
            x as i64
        }
    };
    const FLOATS: &[f32] = &[
        0.0,
        -0.0,
        -1.0,
        1e-30,
        1e-8,
        0.5,
        1e30,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    const NAMES: &[&str] = &[
        "", "llama", "qwen2", "gpt2", "bert", "none", "yarn", "linear", "default", "\0", "x",
    ];
    if rng.chance(1, 10) {
        // Another type altogether.
        return match rng.below(4) {
            0 => V::String(NAMES[rng.below(NAMES.len())].into()),
            1 => V::U32(big as u32),
            2 => V::F32(FLOATS[rng.below(FLOATS.len())]),
            _ => V::Array(GgufArray::I32(vec![int(big) as i32; rng.below(4)])),
        };
    }
    match v {
        V::U8(_) => V::U8(big as u8),
        V::I8(_) => V::I8(int(big) as i8),
        V::U16(_) => V::U16(big as u16),
        V::I16(_) => V::I16(int(big) as i16),
        V::U32(_) => V::U32(big as u32),
        V::I32(_) => V::I32(int(big) as i32),
        V::U64(_) => V::U64(big),
        V::I64(_) => V::I64(int(big)),
        V::F32(_) => V::F32(FLOATS[rng.below(FLOATS.len())]),
        V::F64(_) => V::F64(FLOATS[rng.below(FLOATS.len())] as f64),
        V::Bool(b) => V::Bool(!b),
        V::String(_) => V::String(NAMES[rng.below(NAMES.len())].into()),
        V::Array(a) => {
            let keep = match rng.below(3) {
                0 => 0,
                1 => rng.below(a.len() + 1),
                _ => a.len().saturating_sub(1 + rng.below(3)),
            };
            V::Array(match a {
                GgufArray::String(x) => GgufArray::String(x[..keep].to_vec()),
                GgufArray::F32(x) => GgufArray::F32(x[..keep].to_vec()),
                GgufArray::I32(x) => {
                    let mut x = x.clone();
                    if let Some(e) = x.get_mut(rng.below(keep.max(1))) {
                        *e = int(big) as i32;
                    }
                    GgufArray::I32(x)
                }
                other => other.clone(),
            })
        }
    }
}

/// A file rebuilt with one metadata value changed or removed, and now and then a
/// tensor dropped, renamed or reshaped: files that pass the reader and test the
/// loader's checks. `None` when `bytes` does not parse.
fn mutate_structured(rng: &mut Rng, bytes: &[u8]) -> Option<Vec<u8>> {
    let g = Gguf::parse(bytes).ok()?;
    let mut w = GgufWriter::new();
    let target = rng.below(g.n_kv().max(1));
    let drop_key = rng.chance(1, 5);
    for (i, (key, v)) in g.kv().enumerate() {
        if key == "general.alignment" {
            continue;
        }
        if i == target && drop_key {
            continue;
        }
        let v = if i == target {
            mutate_value(rng, v)
        } else {
            v.clone()
        };
        let _ = w.set(key, v);
    }
    let infos = g.tensor_infos();
    let hit = if rng.chance(1, 3) {
        rng.below(infos.len().max(1))
    } else {
        usize::MAX
    };
    for (i, t) in infos.iter().enumerate() {
        let data = g.tensor_data(bytes, &t.name).ok()?;
        let mut ne = t.ne[..t.n_dims].to_vec();
        let mut name = t.name.clone();
        if i == hit {
            match rng.below(3) {
                0 => continue,
                1 => name = format!("{name}.x"),
                _ => ne.reverse(),
            }
        }
        if w.add_tensor(name, t.typ, &ne, data).is_err() {
            w.add_tensor(t.name.clone(), t.typ, &t.ne[..t.n_dims], data)
                .ok()?;
        }
    }
    Some(w.to_bytes())
}

/// A GGUF file's bytes and the size of its header and metadata.
struct Seed {
    bytes: Arc<Vec<u8>>,
    head: usize,
}

fn seed_file(path: &Path) -> Seed {
    let bytes = std::fs::read(path).expect("seed file");
    let head = Gguf::parse(&bytes).map_or(bytes.len(), |g| g.data_offset());
    Seed {
        bytes: Arc::new(bytes),
        head,
    }
}

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("llamars-fuzz-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Tiny random-weight models of both architectures (made by gen-model), written to
/// `dir`: quick to load and to decode.
fn tiny_models(dir: &Path) -> Vec<PathBuf> {
    [
        ("llama", "q4_0"),
        ("qwen2", "f16"),
        ("llama", "q4_k_m"),
        ("qwen3", "q8_0"),
        ("qwen3moe", "q4_0"),
        ("phi3", "f16"),
        ("gemma3", "q8_0"),
    ]
    .iter()
    .map(|(arch, typ)| {
        let path = dir.join(format!("tiny-{arch}-{typ}.gguf"));
        let args = [
            "--arch",
            arch,
            "--embd",
            "256",
            "--layers",
            "2",
            "--heads",
            "4",
            "--kv-heads",
            "2",
            "--ff",
            "256",
            "--vocab",
            "300",
            "--ctx",
            "128",
            "--type",
            typ,
            "--vocab-file",
            "none",
            "-t",
            "1",
            "-o",
        ];
        let mut argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        argv.push(path.clone().into());
        let (mut out, mut log) = (Vec::new(), Vec::new());
        let code = gen_model::main_with(&argv, &mut std::io::empty(), &mut out, &mut log);
        assert_eq!(code, 0, "gen-model: {}", String::from_utf8_lossy(&log));
        path
    })
    .collect()
}

// ---------------------------------------------------------------------------
// GGUF reader

/// Parses `bytes` and reads everything a loader would: every value, every tensor's
/// data range, the vocabulary. Errors are fine; panics are not.
fn read_gguf(bytes: &[u8]) {
    let Ok(g) = Gguf::parse(bytes) else {
        return;
    };
    for (k, v) in g.kv() {
        std::hint::black_box((k.len(), format!("{v:?}").len()));
        let _ = g.get_arr_n(k);
        let _ = g.get_as::<u32>(k);
        let _ = g.get_as::<String>(k);
        let _ = g.get_as::<Vec<f32>>(k);
    }
    for t in g.tensor_infos() {
        let _ = g.tensor_data(bytes, &t.name);
        let _ = g.tensor_range(&t.name);
        std::hint::black_box(t.nelements());
    }
    let _ = Vocab::from_gguf(&g);
    if let Ok(file) = GgufFile::from_bytes(bytes) {
        let mut ctx = ggml::Context::new_no_alloc();
        let _ = file.create_tensors(&mut ctx);
    }
}

#[test]
fn fuzz_gguf_reader() {
    let Some(models) = common::shared_file("models") else {
        return;
    };
    let mut seeds: Vec<Seed> = ["stories260K.gguf", "synth-qwen2-q4_0.gguf"]
        .iter()
        .map(|m| seed_file(&models.join(m)))
        .collect();
    for v in [
        "ggml-vocab-llama-spm.gguf",
        "ggml-vocab-bert-bge.gguf",
        "ggml-vocab-gpt-2.gguf",
    ] {
        seeds.push(seed_file(&models.join("llama-vocab").join(v)));
    }
    let seeds = Arc::new(seeds);
    fuzz("gguf reader", iters(), |_, rng| {
        let s = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let bytes = mutate(rng, &s.bytes, s.head, &other.bytes);
        Box::new(move || read_gguf(&bytes))
    });
}

// ---------------------------------------------------------------------------
// Model loader

/// Mutated models that loaded, and that then decoded.
static LOADED: AtomicUsize = AtomicUsize::new(0);
static DECODED: AtomicUsize = AtomicUsize::new(0);

/// Loads `path`; when it loads, decodes a few tokens and samples, and dumps it as
/// gguf-dump does. Errors are fine; panics and hangs are not.
fn load_and_run(path: &Path) {
    let dump: [OsString; 1] = [path.into()];
    let _ = gguf_dump::main_with(
        &dump,
        &mut std::io::empty(),
        &mut std::io::sink(),
        &mut std::io::sink(),
    );
    let Ok(model) = llama::load_model(path, ModelParams::default()) else {
        return;
    };
    LOADED.fetch_add(1, Ordering::Relaxed);
    let params = ContextParams {
        n_ctx: 64,
        n_threads: 1,
        ..Default::default()
    };
    let Ok(mut ctx) = LlamaContext::new(Arc::clone(&model), &params) else {
        return;
    };
    let n_vocab = model.vocab.n_tokens() as i32;
    let tokens: Vec<i32> = (0..4).map(|i| (i * 7 + 1) % n_vocab.max(1)).collect();
    if ctx.decode(&Batch::get_one(&tokens)).is_ok() {
        DECODED.fetch_add(1, Ordering::Relaxed);
        if let Some(logits) = ctx.logits_ith(-1) {
            std::hint::black_box(logits.iter().sum::<f32>());
        }
    }
    let _ = model
        .vocab
        .tokenize("Once upon a time", TokenizeOptions::PROMPT);
}

#[test]
fn fuzz_model_loader() {
    let Some(stories) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let dir = TempDir::new("loader");
    let mut seeds: Vec<Seed> = tiny_models(&dir.0).iter().map(|p| seed_file(p)).collect();
    seeds.push(seed_file(&stories));
    let seeds = Arc::new(seeds);
    let dir_path = dir.0.clone();
    fuzz("model loader", iters(), |i, rng| {
        let s = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let bytes = match rng.chance(1, 2) {
            true => mutate_structured(rng, &s.bytes),
            false => None,
        }
        .unwrap_or_else(|| mutate(rng, &s.bytes, s.head, &other.bytes));
        // A fresh file per case: a mapping of a file rewritten under it would fault.
        let path = dir_path.join(format!("case-{i}.gguf"));
        std::fs::write(&path, &bytes).expect("temp file");
        Box::new(move || {
            load_and_run(&path);
            let _ = std::fs::remove_file(&path);
        })
    });
    eprintln!(
        "fuzz model loader: {} mutated models loaded, {} decoded",
        LOADED.load(Ordering::Relaxed),
        DECODED.load(Ordering::Relaxed)
    );
}

// ---------------------------------------------------------------------------
// Tokenizer

/// Characters from scripts and classes the pre-tokenizers treat differently.
const CHAR_RANGES: &[(u32, u32)] = &[
    (0x20, 0x7e),
    (0x00, 0x1f),
    (0x80, 0xff),
    (0x300, 0x36f),
    (0x400, 0x4ff),
    (0x600, 0x6ff),
    (0x900, 0x97f),
    (0x3040, 0x30ff),
    (0x4e00, 0x4fff),
    (0xac00, 0xacff),
    (0x2000, 0x206f),
    (0xfe00, 0xfe0f),
    (0x1f300, 0x1f64f),
    (0xe000, 0xe0ff),
];

/// Text made of token texts of `vocab` (special ones included), characters of many
/// scripts, whitespace runs, digits, and now and then raw bytes.
fn random_text(rng: &mut Rng, vocab: &Vocab) -> Vec<u8> {
    let mut out = Vec::new();
    let specials: Vec<i32> = [
        vocab.bos(),
        vocab.eos(),
        vocab.unk(),
        vocab.eot(),
        vocab.pad(),
    ]
    .into_iter()
    .flatten()
    .collect();
    for _ in 0..rng.below(24) {
        match rng.below(6) {
            0 if !specials.is_empty() => {
                let t = specials[rng.below(specials.len())];
                out.extend_from_slice(vocab.token_to_piece(t, 0, true).unwrap_or_default());
            }
            1 => {
                let t = rng.below(vocab.n_tokens()) as i32;
                out.extend_from_slice(vocab.token_text(t).unwrap_or_default());
            }
            2 => {
                let (lo, hi) = CHAR_RANGES[rng.below(CHAR_RANGES.len())];
                for _ in 0..1 + rng.below(6) {
                    let c = char::from_u32(lo + rng.below((hi - lo + 1) as usize) as u32)
                        .unwrap_or('?');
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
            3 => {
                let ws: &[&[u8]] = &[
                    b" ",
                    b"  ",
                    b"\n",
                    b"\r\n",
                    b"\t",
                    b" \n ",
                    "\u{3000}".as_bytes(),
                ];
                for _ in 0..1 + rng.below(4) {
                    out.extend_from_slice(ws[rng.below(ws.len())]);
                }
            }
            4 => out.extend_from_slice(rng.below(1 << 40).to_string().as_bytes()),
            _ => {
                let n = rng.below(6);
                out.extend(rng.bytes(n));
            }
        }
    }
    out
}

/// Tokenizes `text` both ways and back; ids must stay inside the vocabulary.
fn tokenize_round(vocab: &Vocab, text: &[u8], add_special: bool, parse_special: bool, flags: u64) {
    let tokens = vocab.tokenize(
        text,
        TokenizeOptions {
            add_special,
            parse_special,
        },
    );
    let n = vocab.n_tokens();
    assert!(
        tokens.iter().all(|&t| t >= 0 && (t as usize) < n),
        "token id outside the vocabulary"
    );
    let _ = vocab.detokenize(&tokens, flags & 1 != 0, flags & 2 != 0);
    let mut stream = vocab.text_stream(flags & 4 != 0);
    for &t in &tokens {
        let _ = vocab.token_to_piece(t, (flags >> 3) as usize % 3, flags & 2 != 0);
        let _ = stream.push(t);
    }
    std::hint::black_box(stream.finish());
    // Ids from outside the vocabulary are errors, never panics.
    let _ = vocab.detokenize(&[-1, n as i32, i32::MAX], false, true);
}

#[test]
fn fuzz_tokenizer() {
    let Some(dir) = common::shared_file("models/llama-vocab") else {
        return;
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("vocab dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    paths.sort();
    paths.extend(common::shared_file("models/stories260K.gguf"));
    let vocabs: Arc<Vec<Vocab>> = Arc::new(
        paths
            .iter()
            .map(|p| llama::load_vocab(p).expect("vocab"))
            .collect(),
    );
    fuzz("tokenizer", iters(), |_, rng| {
        let k = rng.below(vocabs.len());
        let text = if rng.chance(1, 3) {
            let n = rng.below(256);
            rng.bytes(n)
        } else {
            random_text(rng, &vocabs[k])
        };
        let (add, parse, flags) = (rng.chance(1, 2), rng.chance(1, 2), rng.next_u64());
        let vocabs = Arc::clone(&vocabs);
        Box::new(move || tokenize_round(&vocabs[k], &text, add, parse, flags))
    });
}

// ---------------------------------------------------------------------------
// Argument parsers

/// A program's flags: every name, and whether it takes a value.
fn flags<P>(opts: Vec<Opt<P>>) -> Vec<(&'static str, bool)> {
    opts.iter()
        .flat_map(|o| o.names.iter().map(|&n| (n, o.takes_value())))
        .collect()
}

/// Values that break parsers: signs, overflow, floats, special floats, ranges,
/// lists, names, empty and non-UTF-8 bytes.
const VALUES: &[&[u8]] = &[
    b"0",
    b"1",
    b"-1",
    b"-2",
    b"-5",
    b"2",
    b"7",
    b"64",
    b"512",
    b"2147483647",
    b"2147483648",
    b"-2147483649",
    b"4294967296",
    b"9223372036854775807",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"1e12",
    b"0.5",
    b"-0.0",
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"infinity",
    b"1e-45",
    b"3.4e39",
    b" 8 ",
    b"0x10",
    b"",
    b"=",
    b",",
    b"1,2",
    b"1,,2",
    b"4,128",
    b"0,0",
    b"1-4",
    b"1-16*2",
    b"0-8+4",
    b"0-4*0",
    b"4-1",
    b"1-1000000000",
    b"1-18446744073709551615+1",
    b"18446744073709551615-18446744073709551615*2",
    b"-",
    b"on",
    b"off",
    b"auto",
    b"q8_0",
    b"f16",
    b"q5_k",
    b"md",
    b"json",
    b"csv",
    b"jsonl",
    b"none",
    b"llama",
    b"qwen2",
    b"exact",
    b"llama.cpp",
    b"q4_k_m",
    b"tiny-llama",
    b"\xff\xfe",
    b"\xc3",
    b"a\x00b",
    b"/nonexistent/file.gguf",
    b"\xe2\x96\x81x",
];

/// A random argument vector from `flags` with random values.
fn random_argv(rng: &mut Rng, flags: &[(&'static str, bool)]) -> Vec<OsString> {
    let mut argv = Vec::new();
    for _ in 0..rng.below(8) {
        let value = |rng: &mut Rng| -> Vec<u8> {
            if rng.chance(1, 6) {
                let n = rng.below(12);
                rng.bytes(n)
            } else {
                VALUES[rng.below(VALUES.len())].to_vec()
            }
        };
        if rng.chance(1, 12) {
            argv.push(os_from_bytes(&value(rng)));
            continue;
        }
        let (name, takes) = flags[rng.below(flags.len())];
        if name == "-f" || name == "--file" {
            // Reading files is not what is fuzzed here; a missing one is an error.
            argv.push(name.into());
            argv.push("/nonexistent/prompt.txt".into());
            continue;
        }
        if takes && name.starts_with("--") && rng.chance(1, 4) {
            let mut a = name.as_bytes().to_vec();
            a.push(b'=');
            a.extend(value(rng));
            argv.push(os_from_bytes(&a));
        } else {
            argv.push(name.into());
            if takes && rng.chance(15, 16) {
                argv.push(os_from_bytes(&value(rng)));
            }
        }
    }
    argv
}

/// Parses `argv` with every program and uses what parses: bench's tests, gen-model's
/// shape.
fn parse_everything(argv: &[OsString]) {
    let _ = completion::parse_args(argv);
    let _ = perplexity::parse_args(argv);
    let _ = passkey::parse_args(argv);
    if let Ok(Some(p)) = bench::parse_args(argv) {
        std::hint::black_box(bench::instances(&p).len());
    }
    if let Ok(Some(p)) = gen_model::parse_args(argv) {
        if let Ok(shape) = p.shape() {
            let _ = std::hint::black_box(
                gen_model::plan_tensors(&shape, p.ftype, p.pure, p.scale).map(|p| p.len()),
            );
        }
    }
    let _ = tokenize::parse_args(argv);
    let _ = gguf_dump::parse_args(argv);
    let _ = eval_callback::parse_args(argv);
    let _ = simple::parse_args(argv);
    let _ = chat_template::parse_args(argv);
}

#[test]
fn fuzz_argument_parsers() {
    let programs: Vec<Vec<(&'static str, bool)>> = vec![
        flags(completion::options()),
        flags(perplexity::options()),
        flags(passkey::options()),
        flags(bench::args::options()),
        flags(gen_model::options()),
        flags(tokenize::options()),
        flags(gguf_dump::options()),
        flags(eval_callback::options()),
        flags(simple::options()),
        flags(chat_template::options()),
    ];
    let programs = Arc::new(programs);
    // Parsing is cheap: more cases than the other targets for the same time.
    fuzz("argument parsers", iters() * 10, |_, rng| {
        let flags = &programs[rng.below(programs.len())];
        let argv = random_argv(rng, flags);
        Box::new(move || parse_everything(&argv))
    });
}

// ---------------------------------------------------------------------------
// Regressions: inputs the fuzzer or the flag review found, fixed where they were.

#[test]
fn regressions_argument_parsers() {
    let cases: &[&[&[u8]]] = &[
        // A range past usize::MAX overflowed the step (a panic in debug builds).
        &[b"-p", b"18446744073709551615-18446744073709551615+1"],
        &[b"-t", b"18446744073709551614-18446744073709551615*2"],
        // A range of a billion values filled memory.
        &[b"-n", b"1-1000000000"],
        // Non-UTF-8 arguments panicked in std::env::args.
        &[b"-p", b"\xff\xfe abc", b"\xff"],
        // A shape whose tensors overflow usize.
        &[
            b"--embd",
            b"4294967296",
            b"--vocab",
            b"4294967296",
            b"--heads",
            b"2",
        ],
    ];
    for argv in cases {
        let argv: Vec<OsString> = argv.iter().map(|a| os_from_bytes(a)).collect();
        guarded(move || parse_everything(&argv)).expect("no panic");
    }
}

/// `file` rewritten with `key` set to `value`.
fn with_key(file: &[u8], key: &str, value: GgufValue) -> Vec<u8> {
    let g = Gguf::parse(file).expect("seed parses");
    let mut w = GgufWriter::new();
    for (k, v) in g.kv().filter(|(k, _)| *k != "general.alignment") {
        let v = if k == key { value.clone() } else { v.clone() };
        w.set(k, v).expect("key");
    }
    for t in g.tensor_infos() {
        let data = g.tensor_data(file, &t.name).expect("data");
        w.add_tensor(t.name.clone(), t.typ, &t.ne[..t.n_dims], data)
            .expect("tensor");
    }
    w.to_bytes()
}

#[test]
fn regressions_model_loader() {
    let Some(stories) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let base = std::fs::read(&stories).expect("model");
    let dir = TempDir::new("regressions");
    let cases = [
        // block_count = 2^32 - 1 sized the layer table: a 292 GB allocation aborted.
        (
            "llama.block_count",
            GgufValue::U32(u32::MAX),
            "LLAMA_MAX_LAYERS",
        ),
        ("llama.block_count", GgufValue::U32(513), "LLAMA_MAX_LAYERS"),
    ];
    for (i, (key, value, want)) in cases.into_iter().enumerate() {
        let path = dir.0.join(format!("case-{i}.gguf"));
        std::fs::write(&path, with_key(&base, key, value)).expect("write");
        let err = llama::load_model(&path, ModelParams::default())
            .err()
            .expect("refused");
        assert!(err.to_string().contains(want), "{key}: {err}");
        let p = path.clone();
        guarded(move || load_and_run(&p)).expect("no panic");
    }
}

// ---------------------------------------------------------------------------
// The server: mutated requests

/// Requests the server answers with 200, the seeds of the mutations: every endpoint
/// that takes a body, with most of the fields each one reads.
fn server_seed_requests() -> Vec<(&'static str, Value)> {
    let messages = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Once upon a time"},
        {"role": "assistant", "content": "there was"},
        {"role": "user", "content": [{"type": "text", "text": "a cat"}]}
    ]);
    vec![
        (
            "/completion",
            json!({"prompt": "Once upon a time", "n_predict": 6, "temperature": 0.8,
                   "top_k": 40, "top_p": 0.9, "min_p": 0.05, "typical_p": 1.0,
                   "repeat_penalty": 1.1, "repeat_last_n": 64, "seed": 7,
                   "stop": ["."], "n_probs": 2, "n_keep": 4, "cache_prompt": true,
                   "logit_bias": [[1, -1.0]], "ignore_eos": false, "stream": false}),
        ),
        (
            "/v1/completions",
            json!({"prompt": ["Once", "upon"], "max_tokens": 6,
                   "logprobs": 2, "presence_penalty": 0.5, "frequency_penalty": 0.5,
                   "stream": false}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": messages, "max_tokens": 6,
                   "logprobs": true, "top_logprobs": 2, "logit_bias": {"1": -100},
                   "stream": false, "stream_options": {"include_usage": true}}),
        ),
        (
            "/tokenize",
            json!({"content": "Hello <s> world", "add_special": true,
                   "parse_special": true, "with_pieces": true}),
        ),
        ("/detokenize", json!({"tokens": [1, 300, 2]})),
        ("/apply-template", json!({"messages": messages})),
    ]
}

/// A value of any JSON type that requests get wrong: wrong types, extremes, deep
/// nesting, odd text.
fn hostile_value(rng: &mut Rng) -> Value {
    match rng.below(14) {
        0 => Value::Null,
        1 => json!(rng.chance(1, 2)),
        2 => json!(-1),
        3 => json!(0),
        4 => json!(i64::MAX),
        5 => json!(u64::MAX),
        6 => json!(-1e308),
        7 => json!(1.5),
        8 => json!(""),
        9 => json!("\u{0}\u{feff}\u{10ffff}<|im_end|>\n{{ raise_exception('x') }}"),
        10 => json!([]),
        11 => json!({}),
        12 => {
            // Deeper than serde_json's recursion limit (128) half of the time.
            let mut v = json!(1);
            for _ in 0..(50 + rng.below(150)) {
                v = json!([v]);
            }
            v
        }
        _ => json!(rng.below(100_000) as i64 - 50_000),
    }
}

/// Field names the endpoints read, for mutations that add a field.
const SERVER_FIELDS: &[&str] = &[
    "prompt",
    "messages",
    "n_predict",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repeat_last_n",
    "seed",
    "stop",
    "n_probs",
    "logprobs",
    "top_logprobs",
    "n_keep",
    "n_discard",
    "logit_bias",
    "ignore_eos",
    "stream",
    "cache_prompt",
    "id_slot",
    "n",
    "content",
    "tokens",
    "role",
    "with_pieces",
    "add_special",
    "return_tokens",
    "min_keep",
    "n_cache_reuse",
];

/// `v` with one change at a random place: a value replaced, a key dropped or added,
/// an array element duplicated.
fn mutate_json(rng: &mut Rng, v: &mut Value) {
    let descend = rng.chance(2, 3);
    match v {
        Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(rng.below(map.len())).cloned().unwrap();
            if descend {
                mutate_json(rng, map.get_mut(&key).unwrap());
            } else {
                match rng.below(3) {
                    0 => {
                        map.remove(&key);
                    }
                    1 => {
                        map.insert(key, hostile_value(rng));
                    }
                    _ => {
                        let k = SERVER_FIELDS[rng.below(SERVER_FIELDS.len())];
                        map.insert(k.to_string(), hostile_value(rng));
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let i = rng.below(items.len());
            if descend {
                mutate_json(rng, &mut items[i]);
            } else if rng.chance(1, 2) {
                let copy = items[i].clone();
                items.insert(i, copy);
            } else {
                items[i] = hostile_value(rng);
            }
        }
        _ => *v = hostile_value(rng),
    }
}

/// A mutated request body: one to three structural changes, and sometimes broken
/// bytes (truncated, a byte flipped, not UTF-8).
fn mutated_body(rng: &mut Rng, seed: &Value) -> Vec<u8> {
    let mut v = seed.clone();
    for _ in 0..1 + rng.below(3) {
        mutate_json(rng, &mut v);
    }
    let mut b = v.to_string().into_bytes();
    if rng.chance(1, 5) && !b.is_empty() {
        let i = rng.below(b.len());
        match rng.below(3) {
            0 => b.truncate(i),
            1 => b[i] ^= 1 << rng.below(8),
            _ => b.insert(i, 0xff),
        }
    }
    b
}

/// POSTs `body` to `url`; the status and the body, or why no answer came.
fn post_bytes(url: &str, body: &[u8]) -> Result<(u16, String), String> {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    match agent
        .post(url)
        .set("content-type", "application/json")
        .send_bytes(body)
    {
        Ok(r) => Ok((r.status(), r.into_string().unwrap_or_default())),
        Err(ureq::Error::Status(code, r)) => Ok((code, r.into_string().unwrap_or_default())),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn fuzz_server_requests() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let server = srv::TestServer::start(&model, &["-c", "256", "-np", "2", "-n", "32"]);
    let seeds = Arc::new(server_seed_requests());
    for (path, body) in seeds.iter() {
        let (code, text) = post_bytes(
            &format!("{}{path}", server.url),
            body.to_string().as_bytes(),
        )
        .expect("seed request answered");
        assert_eq!(code, 200, "seed request {path}: {text}");
    }
    let url = server.url.clone();
    // Each case is an HTTP round trip, some with generation: fewer than the others.
    fuzz("server requests", iters() / 2, |_, rng| {
        let (path, seed) = &seeds[rng.below(seeds.len())];
        let body = mutated_body(rng, seed);
        let url = format!("{url}{path}");
        Box::new(move || {
            let (code, text) = post_bytes(&url, &body).unwrap_or_else(|e| {
                panic!("no answer: {e}; body {}", String::from_utf8_lossy(&body))
            });
            let known = matches!(code, 200 | 400 | 404 | 413 | 501 | 503);
            assert!(
                known,
                "status {code} ({text}); body {}",
                String::from_utf8_lossy(&body)
            );
            if code != 200 {
                let v: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|_| panic!("error not JSON: {text}"));
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{text}"
                );
            }
        })
    });
    // Still serving.
    let (path, body) = &seeds[0];
    let (code, text) = post_bytes(
        &format!("{}{path}", server.url),
        body.to_string().as_bytes(),
    )
    .expect("answered after the fuzzing");
    assert_eq!(code, 200, "after the fuzzing: {text}");
}
