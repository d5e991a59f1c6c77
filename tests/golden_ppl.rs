//! `llama-perplexity` against llama.cpp's (`../shared/golden/ppl/`): the final
//! estimate must agree within the relative tolerance stored beside it.

mod common;

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
    common::check_perplexity(name, &args, &want);
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
