//! `llama-perplexity` against llama.cpp's (`../shared/golden/ppl/`): the final
//! estimate must agree within the relative tolerance stored beside it.

mod common;

use llamars::cli::perplexity;

fn run_case(name: &str) {
    let Some(args) = common::shared_file(&format!("golden/ppl/{name}.args")) else {
        return;
    };
    let Some(want) = common::shared_file(&format!("golden/ppl/{name}.ppl")) else {
        return;
    };
    let shared = common::shared_dir().display().to_string();
    let args = common::args_words(&std::fs::read_to_string(args).expect("args"), &shared);
    let want = std::fs::read_to_string(want).expect("ppl");
    let mut fields = want
        .split_whitespace()
        .map(|w| w.parse::<f64>().expect("number"));
    let (want_ppl, rel_tol) = (
        fields.next().expect("ppl"),
        fields.next().expect("tolerance"),
    );
    let params = perplexity::parse_args(&args)
        .expect("arguments")
        .expect("not -h");
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let est = match perplexity::run(&params, &mut out, &mut log) {
        Ok(est) => est,
        Err(e) => panic!("{name}: {e}\nlog:\n{}", String::from_utf8_lossy(&log)),
    };
    let rel = (est.ppl - want_ppl).abs() / want_ppl;
    assert!(
        rel <= rel_tol,
        "{name}: PPL {:.4} vs llama.cpp's {want_ppl:.4} (relative {rel:.2e} > {rel_tol:e})",
        est.ppl
    );
    // Our arithmetic is llama.cpp's, so the printed estimate is the same too.
    let want_text = want.split_whitespace().next().unwrap_or_default();
    assert_eq!(
        format!("{:.4}", est.ppl),
        want_text,
        "{name}: printed estimate"
    );
    let printed = String::from_utf8_lossy(&out);
    assert!(
        printed.starts_with("[1]"),
        "{name}: per-chunk line missing: {printed:?}"
    );
    let log = String::from_utf8_lossy(&log);
    assert!(
        log.contains("Final estimate: PPL = "),
        "{name}: no final line in\n{log}"
    );
}

#[test]
fn stories260k_c128() {
    run_case("stories260K-c128");
}

#[test]
fn synth_qwen2_f32_c64() {
    run_case("synth-qwen2-f32-c64");
}

#[test]
fn synth_llama_q4_k_m_c64() {
    run_case("synth-llama-q4_k_m-c64");
}
