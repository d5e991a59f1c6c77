//! Whether a draft model can speculate for a target: the same tokenizer, the same
//! BOS/EOS handling, vocabularies of nearly the same size whose tokens from id 5 on
//! are spelled alike (llama.cpp's `common_speculative_are_compatible`).

use crate::vocab::Vocab;

/// Vocabulary sizes may differ by this much (padding tokens at the end).
pub const VOCAB_MAX_SIZE_DIFFERENCE: usize = 128;
/// Tokens below this id are not compared (control tokens differ between families).
pub const VOCAB_CHECK_START_TOKEN_ID: usize = 5;

/// `Ok` when `draft`'s tokens can be verified by `target`; otherwise the first
/// difference, worded as llama.cpp words it.
pub fn check_vocab_compat(target: &Vocab, draft: &Vocab) -> Result<(), String> {
    if target.kind() != draft.kind() {
        return Err(format!(
            "draft model vocab type must match target model to use speculation but vocab_type_dft = {:?} while vocab_type_tgt = {:?}",
            draft.kind(),
            target.kind()
        ));
    }
    let id = |t: Option<i32>| t.unwrap_or(-1);
    if target.add_bos() != draft.add_bos() || (target.add_bos() && target.bos() != draft.bos()) {
        return Err(format!(
            "draft model bos tokens must match target model to use speculation. add: {} - {}, id: {} - {}",
            target.add_bos() as i32,
            draft.add_bos() as i32,
            id(target.bos()),
            id(draft.bos())
        ));
    }
    if target.add_eos() != draft.add_eos() || (target.add_eos() && target.eos() != draft.eos()) {
        return Err(format!(
            "draft model eos tokens must match target model to use speculation. add: {} - {}, id: {} - {}",
            target.add_eos() as i32,
            draft.add_eos() as i32,
            id(target.eos()),
            id(draft.eos())
        ));
    }
    let (nt, nd) = (target.n_tokens(), draft.n_tokens());
    if nt.abs_diff(nd) > VOCAB_MAX_SIZE_DIFFERENCE {
        return Err(format!(
            "draft model vocab must closely match target model to use speculation but target vocab size {nt} does not match draft vocab size {nd} - difference {}, max allowed {VOCAB_MAX_SIZE_DIFFERENCE}",
            nt.abs_diff(nd)
        ));
    }
    for i in VOCAB_CHECK_START_TOKEN_ID..nt.min(nd) {
        let (a, b) = (target.token_text(i as i32), draft.token_text(i as i32));
        if a.ok() != b.ok() {
            let show = |t: Result<&[u8], _>| String::from_utf8_lossy(t.unwrap_or(b"")).into_owned();
            return Err(format!(
                "draft model vocab must match target model to use speculation but token {i} content differs - target '{}', draft '{}'",
                show(target.token_text(i as i32)),
                show(draft.token_text(i as i32))
            ));
        }
    }
    Ok(())
}
