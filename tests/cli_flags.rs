//! Bad flags, program by program: each is refused before any work with exit code 1
//! and a message naming the flag; values llama.cpp accepts are accepted with its
//! meaning; arguments and prompts that are not UTF-8 work where bytes make sense.

mod common;

use std::ffi::OsString;
use std::io::{BufRead, Write};

use llamars::cli::speculative::{draft, lookup, lookup_create, lookup_merge};
use llamars::cli::{
    bench, completion, eval_callback, finetune, gen_model, gguf_dump, passkey, perplexity, simple,
    tokenize,
};
use llamars::common::args::os_from_bytes;

type Main = fn(&[OsString], &mut dyn BufRead, &mut dyn Write, &mut dyn Write) -> i32;

/// Runs a program in-process; returns (exit code, stdout, stderr).
fn run(main: Main, argv: &[&[u8]]) -> (i32, Vec<u8>, String) {
    let argv: Vec<OsString> = argv.iter().map(|a| os_from_bytes(a)).collect();
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = main(&argv, &mut std::io::empty(), &mut out, &mut log);
    (code, out, String::from_utf8_lossy(&log).into_owned())
}

/// (program, its main, arguments, the message on stderr).
type Case = (&'static str, Main, &'static [&'static [u8]], &'static str);

const CLI: Main = completion::main_with::<OsString>;
const PPL: Main = perplexity::main_with::<OsString>;
const FT: Main = finetune::main_with::<OsString>;
const PASSKEY: Main = passkey::main_with::<OsString>;
const BENCH: Main = bench::main_with::<OsString>;
const GEN: Main = gen_model::main_with::<OsString>;
const TOKENIZE: Main = tokenize::main_with::<OsString>;
const DUMP: Main = gguf_dump::main_with::<OsString>;
const EVAL: Main = eval_callback::main_with::<OsString>;
const SIMPLE: Main = simple::main_with::<OsString>;
const SPEC: Main = draft::main_with::<OsString>;
const LOOKUP: Main = lookup::main_with::<OsString>;
const CREATE: Main = lookup_create::main_with::<OsString>;
const MERGE: Main = lookup_merge::main_with::<OsString>;

const BAD: &[Case] = &[
    // Speculative decoding.
    (
        "llama-speculative",
        SPEC,
        &[b"-m", b"t.gguf", b"-p", b"x"],
        "error: --model-draft is required",
    ),
    (
        "llama-speculative",
        SPEC,
        &[b"-m", b"t.gguf", b"-md", b"d.gguf", b"-np", b"3"],
        "error: -np: 3 is out of range: tree drafts (-np > 1) are not implemented",
    ),
    (
        "llama-speculative",
        SPEC,
        &[
            b"-m",
            b"t.gguf",
            b"-md",
            b"d.gguf",
            b"--spec-draft-n-max",
            b"-1",
        ],
        "error: --spec-draft-n-max: -1 is out of range",
    ),
    (
        "llama-lookup",
        LOOKUP,
        &[b"-m", b"t.gguf", b"-md", b"d.gguf"],
        "error: invalid argument: -md",
    ),
    (
        "llama-lookup",
        LOOKUP,
        &[b"-m", b"t.gguf", b"-lcs"],
        "error: -lcs needs a value",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--spec-draft-p-min", b"1.5"],
        "error: --spec-draft-p-min: 1.5 is out of range",
    ),
    (
        "llama-lookup-create",
        CREATE,
        &[b"-m", b"t.gguf", b"-p", b"x"],
        "error: no output file given (-lcs FNAME)",
    ),
    (
        "llama-lookup-merge",
        MERGE,
        &[b"only.lcs"],
        "error: give at least one cache file to merge and the output file",
    ),
    // The common flags (llama-cli, llama-perplexity, llama-passkey).
    (
        "llama-cli",
        CLI,
        &[b"-b", b"0"],
        "error: -b: 0 is out of range: must be at least 1",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--batch-size", b"-3"],
        "error: --batch-size: -3 is out of range",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-ub", b"-1"],
        "error: -ub: -1 is out of range",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-c", b"1e12"],
        "error: -c: '1e12' is not a valid number",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-c", b"99999999"],
        "error: -c: 99999999 is out of range: must be in 0..=16777216",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-c", b"-1"],
        "error: -c: -1 is out of range",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-n", b"-5"],
        "error: -n: -5 is out of range: must be >= 0, or -1 (infinity) or -2",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-n", b"4294967296"],
        "error: -n: 4294967296 is out of range",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-t", b"600"],
        "error: -t: 600 is out of range: at most 512 threads",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-s", b"x"],
        "error: -s: 'x' is not a valid number",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--temp", b"nan"],
        "error: --temp: NaN is out of range: must be a number",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--top-p", b"NaN"],
        "error: --top-p: NaN is out of range",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--repeat-penalty", b"0"],
        "must be finite and greater than 0",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--repeat-penalty", b"1e-45"],
        "must be finite and greater than 0",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--repeat-last-n", b"-1"],
        "error: --repeat-last-n: -1 is out of range: must be >= 0",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--presence-penalty", b"inf"],
        "error: --presence-penalty: inf is out of range: must be finite",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--frequency-penalty", b"-inf"],
        "must be finite",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--keep", b"-2"],
        "error: --keep: -2 is out of range: must be >= 0, or -1 for all",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-gan", b"0"],
        "error: -gan: 0 is out of range: must be positive",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-gaw", b"-4"],
        "error: -gaw: -4 is out of range: must be positive",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-gan", b"3", b"-gaw", b"128"],
        "must be a multiple of grp_attn_n",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--self-extend", b"4"],
        "error: --self-extend: expected G,W",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-ctk", b"q5_k"],
        "error: -ctk: unknown cache type 'q5_k'",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-fa", b"maybe"],
        "error: -fa: unknown switch value 'maybe'",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--grp-attn-shift", b"sideways"],
        "unknown shift form",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--rope-freq-base", b"-1"],
        "error: --rope-freq-base: -1 is out of range",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--rope-freq-scale", b"inf"],
        "must be finite",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-n", b"\xff"],
        "error: -n: the value is not valid UTF-8 text",
    ),
    (
        "llama-cli",
        CLI,
        &[b"-f", b"/nonexistent/prompt.txt"],
        "error: -f: cannot read '/nonexistent/prompt.txt'",
    ),
    ("llama-cli", CLI, &[b"-n"], "error: -n needs a value"),
    (
        "llama-cli",
        CLI,
        &[b"--ignore-eos=1"],
        "error: --ignore-eos takes no value",
    ),
    (
        "llama-cli",
        CLI,
        &[b"--bogus"],
        "error: invalid argument: --bogus",
    ),
    ("llama-cli", CLI, &[b"-p", b"x"], "error: no model given"),
    (
        "llama-cli",
        CLI,
        &[b"-m", b"/nonexistent\xff.gguf", b"-p", b"x"],
        "failed to load model",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-epochs", b"0"],
        "error: -epochs: 0 is out of range: must be at least 1",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-val-split", b"1.5"],
        "error: -val-split: 1.5 is out of range: must be in [0, 1)",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-opt", b"lion"],
        "error: -opt: lion is out of range: valid options: adamw, sgd",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-lr", b"0"],
        "error: -lr: 0 is out of range: must be > 0",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-fa", b"on"],
        "training does not implement flash attention",
    ),
    (
        "llama-finetune",
        FT,
        &[b"--temp", b"0.5"],
        "error: invalid argument: --temp",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-ctk", b"f32"],
        "error: invalid argument: -ctk",
    ),
    (
        "llama-finetune",
        FT,
        &[b"-s", b"42"],
        "error: invalid argument: -s",
    ),
    (
        "llama-perplexity",
        PPL,
        &[b"-c", b"0"],
        "perplexity tool requires '--ctx-size' > 0",
    ),
    (
        "llama-perplexity",
        PPL,
        &[b"-c", b"2"],
        "--ctx-size 2 is too small",
    ),
    (
        "llama-perplexity",
        PPL,
        &[b"--chunks", b"0"],
        "error: --chunks: 0 is out of range: must be at least 1, or -1 for all",
    ),
    (
        "llama-perplexity",
        PPL,
        &[b"--chunks", b"-2"],
        "error: --chunks: -2 is out of range",
    ),
    (
        "llama-passkey",
        PASSKEY,
        &[b"--junk", b"0"],
        "error: --junk: 0 is out of range",
    ),
    (
        "llama-passkey",
        PASSKEY,
        &[b"--junk", b"2000000"],
        "error: --junk: 2000000 is out of range: must be in 1..=1000000",
    ),
    (
        "llama-passkey",
        PASSKEY,
        &[b"--pos", b"-2"],
        "error: --pos: -2 is out of range: must be >= 0, or -1 for random",
    ),
    (
        "llama-passkey",
        PASSKEY,
        &[b"--junk", b"10", b"--pos", b"10"],
        "error: --pos: 10 is out of range: must be below --junk (10)",
    ),
    (
        "llama-passkey",
        PASSKEY,
        &[b"--keep", b"-1"],
        "error: --keep: -1 is out of range: must be >= 0 for the passkey test",
    ),
    (
        "llama-passkey",
        PASSKEY,
        &[b"-b", b"64", b"-gan", b"3"],
        "must be divisible by n_grp",
    ),
    // llama-bench.
    (
        "llama-bench",
        BENCH,
        &[b"-p", b"1-100000"],
        "error: -p: '1-100000' has more than 4096 values",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-p", b"99999999"],
        "error: -p: 99999999 is out of range: at most 16777216 tokens",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-n", b"18446744073709551615-18446744073709551615+1"],
        "out of range: at most 16777216 tokens",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-p", b"16777216", b"-d", b"1"],
        "does not fit the largest context",
    ),
    (
        "llama-bench",
        BENCH,
        &[
            b"-p", b"1-64", b"-n", b"1-64", b"-t", b"1-64", b"-b", b"1-64",
        ],
        "combine to more than 65536 tests",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-p", b"1-4*1"],
        "invalid range '1-4*1'",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-b", b"0"],
        "error: -b: 0 is out of range: a batch size must be in 1..=",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-b", b"4294967296"],
        "error: -b: 4294967296 is out of range",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-t", b"0"],
        "error: -t: 0 is out of range: thread counts must be in 1..=512",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-t", b"513"],
        "thread counts must be in 1..=512",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-r", b"0"],
        "error: -r: 0 is out of range: repetitions must be at least 1",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"--membw-mib", b"100000"],
        "error: --membw-mib: 100000 is out of range: must be in 0..=4096",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-o", b"xml"],
        "error: -o: unknown output format 'xml'",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-fa", b"2"],
        "unknown flash attention value '2'",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-pg", b"1"],
        "expected two numbers PP,TG",
    ),
    (
        "llama-bench",
        BENCH,
        &[b"-r", b"1"],
        "error: no model given",
    ),
    // gen-model.
    (
        "gen-model",
        GEN,
        &[b"--embd", b"0"],
        "error: --embd: 0 is out of range: must be at least 1",
    ),
    (
        "gen-model",
        GEN,
        &[b"--layers", b"-1"],
        "error: --layers: -1 is out of range: must be in 1..=512",
    ),
    (
        "gen-model",
        GEN,
        &[b"--ctx", b"0"],
        "error: --ctx: 0 is out of range",
    ),
    (
        "gen-model",
        GEN,
        &[b"--rope-base", b"0"],
        "error: --rope-base: 0 is out of range: must be greater than 0",
    ),
    (
        "gen-model",
        GEN,
        &[b"--rms-eps", b"nan"],
        "error: --rms-eps: NaN is out of range: must be finite",
    ),
    (
        "gen-model",
        GEN,
        &[b"--scale", b"-1"],
        "error: --scale: -1 is out of range: must be >= 0",
    ),
    (
        "gen-model",
        GEN,
        &[b"--type", b"q9"],
        "error: --type: unknown file type 'q9'",
    ),
    (
        "gen-model",
        GEN,
        &[b"--preset", b"gpt5"],
        "unknown preset 'gpt5'",
    ),
    (
        "gen-model",
        GEN,
        &[b"-t", b"1000"],
        "error: -t: 1000 is out of range: at most 512 threads",
    ),
    (
        "gen-model",
        GEN,
        &[
            b"--embd",
            b"100",
            b"--heads",
            b"3",
            b"-o",
            b"/nonexistent/x.gguf",
        ],
        "3 heads do not divide --embd 100",
    ),
    (
        "gen-model",
        GEN,
        &[
            b"--embd",
            b"1048576",
            b"--vocab",
            b"1048576",
            b"-o",
            b"/nonexistent/x.gguf",
        ],
        "the shape is too large to write",
    ),
    (
        "gen-model",
        GEN,
        &[
            b"--vocab",
            b"100",
            b"--vocab-file",
            b"none",
            b"-o",
            b"/nonexistent/x.gguf",
        ],
        "needs at least 259 tokens",
    ),
    (
        "gen-model",
        GEN,
        &[b"--preset", b"tiny-llama"],
        "error: no output file given",
    ),
    // The small programs.
    (
        "llama-tokenize",
        TOKENIZE,
        &[b"-p", b"x"],
        "error: --model is required",
    ),
    (
        "llama-tokenize",
        TOKENIZE,
        &[b"-m", b"m.gguf"],
        "must specify one of: --stdin, --file or --prompt",
    ),
    (
        "llama-tokenize",
        TOKENIZE,
        &[b"-m", b"/nonexistent.gguf", b"-p", b"x"],
        "failed to load model '/nonexistent.gguf'",
    ),
    ("gguf-dump", DUMP, &[], "error: no GGUF file given"),
    (
        "gguf-dump",
        DUMP,
        &[b"a.gguf", b"b.gguf"],
        "one GGUF file at a time",
    ),
    (
        "gguf-dump",
        DUMP,
        &[b"--tensors"],
        "error: invalid argument: --tensors",
    ),
    (
        "gguf-dump",
        DUMP,
        &[b"/nonexistent\xff.gguf"],
        "cannot read '/nonexistent",
    ),
    (
        "eval-callback",
        EVAL,
        &[b"-m", b"m.gguf"],
        "give -p TEXT or --tokens IDS",
    ),
    (
        "eval-callback",
        EVAL,
        &[b"-m", b"m.gguf", b"--tokens", b"1,-2"],
        "error: --tokens: '-2' is not a token id",
    ),
    (
        "eval-callback",
        EVAL,
        &[b"-t", b"9999"],
        "error: -t: 9999 is out of range",
    ),
    (
        "simple",
        SIMPLE,
        &[b"-n", b"5"],
        "error: -m MODEL is required",
    ),
    (
        "simple",
        SIMPLE,
        &[b"-m", b"m.gguf", b"-n", b"99999999999"],
        "error: -n: 99999999999 is out of range",
    ),
    (
        "simple",
        SIMPLE,
        &[b"-m", b"m.gguf", b"-n", b"-1"],
        "error: -n: -1 is out of range: must fit a context",
    ),
];

#[test]
fn bad_flags_are_clear_errors() {
    let mut failed = Vec::new();
    for (program, main, argv, want) in BAD {
        let (code, out, log) = run(*main, argv);
        if code != 1 || !log.contains(want) || !out.is_empty() {
            failed.push(format!(
                "{program} {:?}: exit {code}, stderr {log:?}, want {want:?}",
                argv.iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Values llama.cpp accepts mean what they mean there.
#[test]
fn accepted_values_keep_llama_cpp_meanings() {
    let p = |a: &[&str]| {
        completion::parse_args(a)
            .expect("accepted")
            .expect("not -h")
            .common
    };
    // A negative temperature is greedy (clamped to 0), as llama.cpp's --temp.
    assert_eq!(p(&["--temp", "-1"]).sampling.temp, 0.0);
    // -t 0 or negative: all cores.
    let cores = llamars::common::threads::default_threads();
    assert_eq!(p(&["-t", "0"]).n_threads, cores);
    assert_eq!(p(&["-t", "4", "-t", "-1"]).n_threads, cores);
    // -ub 0 is the logical batch.
    let c = p(&["-b", "64", "-ub", "0"]);
    assert_eq!(c.context_params().n_ubatch, 64);
    // -1 / -2, and 0 tokens to predict.
    for n in [-2, -1, 0] {
        assert_eq!(p(&["-n", &n.to_string()]).n_predict, n);
    }
    // -s -1 is LLAMA_DEFAULT_SEED (0xFFFFFFFF), as std::stoul then the cast.
    assert_eq!(p(&["-s", "-1"]).sampling.seed, u32::MAX);
    // --keep -1 keeps the whole prompt; --repeat-last-n 0 disables the penalty.
    assert_eq!(p(&["--keep", "-1"]).n_keep, -1);
    assert_eq!(p(&["--repeat-last-n", "0"]).sampling.penalty_last_n, 0);
    // --temperature and --typical-p are llama.cpp's long names.
    assert_eq!(p(&["--temperature", "0.5"]).sampling.temp, 0.5);
    // Escapes in reverse prompts, as llama.cpp processes them.
    assert_eq!(p(&["-r", "a\\nb"]).antiprompt, [b"a\nb".to_vec()]);
    // Weight placement: repacking and the file mapping, with llama.cpp's flags.
    let m = |a: &[&str]| {
        let mp = p(a).model_params();
        (mp.repack, mp.load_mode.name())
    };
    assert_eq!(m(&[]), (true, "auto"));
    assert_eq!(m(&["-nr"]), (false, "auto"));
    assert_eq!(m(&["--no-repack", "--repack"]), (true, "auto"));
    assert_eq!(m(&["-lm", "mmap"]), (true, "mmap"));
    assert_eq!(m(&["--mmap", "--no-mmap"]), (true, "none"));
    assert_eq!(m(&["--load-mode", "none"]), (true, "none"));
    assert!(completion::parse_args(&["-lm", "dio"]).is_err());
    let b = bench::parse_args(&["-m", "x", "--repack", "0,1", "-lm", "mmap,auto", "-n", "0"])
        .unwrap()
        .unwrap();
    let insts = bench::instance::instances(&b);
    let loads: Vec<(bool, &str)> = insts
        .iter()
        .map(|i| (i.repack, i.load_mode.name()))
        .collect();
    assert_eq!(
        loads,
        [
            (false, "mmap"),
            (true, "mmap"),
            (false, "auto"),
            (true, "auto")
        ]
    );
    assert!(bench::parse_args(&["-m", "x", "--repack", "2"]).is_err());
    // A bench -ub 0 and a range ending at the largest number parse.
    let b = bench::parse_args(&["-m", "x", "-ub", "0", "-p", "1-16*2"])
        .unwrap()
        .unwrap();
    assert_eq!(
        (b.n_ubatch.clone(), b.n_prompt.clone()),
        (vec![0], vec![1, 2, 4, 8, 16])
    );
}

/// The warning for more threads than cores, on the log of the run.
#[test]
fn more_threads_than_cores_warn() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let t = (llamars::common::threads::default_threads() + 1).to_string();
    let m = model.display().to_string();
    let (code, _, log) = run(
        CLI,
        &[
            b"-m",
            m.as_bytes(),
            b"-p",
            b"Once",
            b"-n",
            b"1",
            b"--temp",
            b"0",
            b"-t",
            t.as_bytes(),
        ],
    );
    assert_eq!(code, 0, "{log}");
    assert!(log.contains(&format!("warning: {t} threads on")), "{log}");
}

/// A prompt that is not UTF-8 is tokenized as bytes, as llama.cpp's tokenizer takes
/// it, by every program that takes a prompt.
#[test]
fn non_utf8_prompts_are_bytes() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    let m = m.as_bytes();
    let prompt: &[u8] = b"\xff\xfe Once upon a time";
    let (code, out, log) = run(TOKENIZE, &[b"-m", m, b"-p", prompt, b"--ids"]);
    assert_eq!(code, 0, "{log}");
    let vocab = llama::load_vocab(&model).unwrap();
    let want = vocab.tokenize(prompt, llama::TokenizeOptions::ADD_SPECIAL);
    let want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("[{}]\n", want.join(", "))
    );
    // The byte tokens of 0xFF and 0xFE, not U+FFFD.
    assert!(want.len() > 2 && vocab.is_byte(want[2].parse().unwrap()));

    let (code, out, log) = run(
        CLI,
        &[
            b"-m",
            m,
            b"-p",
            prompt,
            b"-n",
            b"4",
            b"--temp",
            b"0",
            b"-t",
            b"1",
            b"--verbose-prompt",
        ],
    );
    assert_eq!(code, 0, "{log}");
    // The prompt is shown as its tokens' pieces: SentencePiece's leading space, then
    // the two raw bytes (byte tokens, not U+FFFD).
    assert!(out.starts_with(b" \xff\xfe"), "{out:?}");
    assert!(out.windows(4).any(|w| w == b"Once"), "{out:?}");
    assert!(log.contains("main: number of tokens in prompt"), "{log}");

    let (code, out, log) = run(SIMPLE, &[b"-m", m, b"-p", prompt, b"-n", b"2", b"-t", b"1"]);
    assert_eq!(code, 0, "{log}");
    assert!(out.starts_with(prompt));

    // A flag's file path may be any bytes too: a missing one is a clear error.
    let (code, _, log) = run(CLI, &[b"-m", m, b"-f", b"/nonexistent/\xff.txt"]);
    assert_eq!(code, 1);
    assert!(
        log.contains("error: -f: cannot read '/nonexistent/"),
        "{log}"
    );
}

#[test]
fn help_names_every_architecture() {
    let server: Main =
        llamars::common::program::main_with::<llamars::server::LlamaServer, OsString>;
    for (name, main) in [
        ("llama-cli", CLI),
        ("llama-perplexity", PPL),
        ("llama-passkey", PASSKEY),
        ("llama-tokenize", TOKENIZE),
        ("simple", SIMPLE),
        ("llama-server", server),
    ] {
        let (code, out, _) = run(main, &[b"--help"]);
        assert_eq!(code, 0, "{name}");
        let out = String::from_utf8_lossy(&out).into_owned();
        for arch in llama::arch::ALL_ARCHS {
            assert!(
                out.contains(arch.name()),
                "{name} --help does not name {}:\n{out}",
                arch.name()
            );
        }
    }
}
