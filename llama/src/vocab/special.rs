//! Special tokens: the ids named in metadata, the ones llama.cpp recognises by their
//! text when metadata is silent, the end-of-generation set, and per-model attributes.

use std::collections::BTreeSet;

use super::types::{Token, TokenAttr};

/// The special token ids of a vocabulary (`None` where it has none).
///
/// As input to [`Vocab::from_parts`](super::Vocab::from_parts) these are the metadata
/// values (`tokenizer.ggml.bos_token_id`, ...); ids outside the vocabulary are ignored
/// there, as llama.cpp does. As output they are the ids the vocabulary settled on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence (BERT: CLS).
    pub bos: Option<Token>,
    /// End of sequence.
    pub eos: Option<Token>,
    /// End of turn.
    pub eot: Option<Token>,
    /// End of message.
    pub eom: Option<Token>,
    /// Unknown.
    pub unk: Option<Token>,
    /// Separator.
    pub sep: Option<Token>,
    /// Padding.
    pub pad: Option<Token>,
    /// Mask.
    pub mask: Option<Token>,
    /// Fill-in-the-middle: prefix.
    pub fim_pre: Option<Token>,
    /// Fill-in-the-middle: suffix.
    pub fim_suf: Option<Token>,
    /// Fill-in-the-middle: middle.
    pub fim_mid: Option<Token>,
    /// Fill-in-the-middle: padding.
    pub fim_pad: Option<Token>,
    /// Fill-in-the-middle: repository name.
    pub fim_rep: Option<Token>,
    /// Fill-in-the-middle: file separator.
    pub fim_sep: Option<Token>,
}

impl SpecialTokens {
    /// Every field with its GGUF key suffix, for loading and range checks.
    pub(crate) fn fields_mut(&mut self) -> [(&'static str, &mut Option<Token>); 14] {
        [
            ("bos_token_id", &mut self.bos),
            ("eos_token_id", &mut self.eos),
            ("eot_token_id", &mut self.eot),
            ("eom_token_id", &mut self.eom),
            ("unknown_token_id", &mut self.unk),
            ("seperator_token_id", &mut self.sep),
            ("padding_token_id", &mut self.pad),
            ("mask_token_id", &mut self.mask),
            ("fim_pre_token_id", &mut self.fim_pre),
            ("fim_suf_token_id", &mut self.fim_suf),
            ("fim_mid_token_id", &mut self.fim_mid),
            ("fim_pad_token_id", &mut self.fim_pad),
            ("fim_rep_token_id", &mut self.fim_rep),
            ("fim_sep_token_id", &mut self.fim_sep),
        ]
    }
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// gpt-oss tokens llama.cpp always renders.
const ALWAYS_RENDERED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// What the special-token rules read and change of each token.
pub(crate) struct TokenView<'a> {
    pub texts: &'a [Box<[u8]>],
    pub attrs: &'a mut [TokenAttr],
}

impl TokenView<'_> {
    fn is(&self, id: usize, candidates: &[&str]) -> bool {
        candidates.iter().any(|c| c.as_bytes() == &*self.texts[id])
    }
    fn find(&self, text: &str) -> Option<usize> {
        self.texts.iter().rposition(|t| **t == *text.as_bytes())
    }
    fn mark_control(&mut self, id: usize) {
        self.attrs[id] |= TokenAttr::CONTROL;
    }
}

/// Fills the special ids metadata left unset by recognising token texts, marks the
/// tokens found as control tokens, marks control tokens named "unused" as unused, and
/// returns the end-of-generation set (llama.cpp's auto-detection in `load`).
///
/// llama.cpp walks an unordered map here, so when several texts qualify its pick
/// depends on hashing; walking ids from the highest down reproduces its choices for
/// the common vocabularies (`<|eot_id|>` over `<|end_of_text|>`, `<|im_end|>` over
/// `<|endoftext|>`).
pub(crate) fn detect(view: &mut TokenView, special: &mut SpecialTokens) -> BTreeSet<Token> {
    let n = view.texts.len();
    for id in (0..n).rev() {
        let slots: [(&mut Option<Token>, &[&str]); 8] = [
            (&mut special.eot, EOT_TEXTS),
            (&mut special.eom, EOM_TEXTS),
            (&mut special.fim_pre, FIM_PRE_TEXTS),
            (&mut special.fim_suf, FIM_SUF_TEXTS),
            (&mut special.fim_mid, FIM_MID_TEXTS),
            (&mut special.fim_pad, FIM_PAD_TEXTS),
            (&mut special.fim_rep, FIM_REP_TEXTS),
            (&mut special.fim_sep, FIM_SEP_TEXTS),
        ];
        for (slot, texts) in slots {
            if slot.is_none() && view.is(id, texts) {
                *slot = Some(id as Token);
                view.mark_control(id);
            }
        }
    }

    for id in 0..n {
        let attr = view.attrs[id];
        if attr.contains(TokenAttr::CONTROL)
            && !attr.contains(TokenAttr::UNUSED)
            && contains(&view.texts[id], b"unused")
        {
            view.attrs[id] |= TokenAttr::UNUSED;
        }
    }

    let mut eog: BTreeSet<Token> = [special.fim_pad, special.fim_rep, special.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for id in 0..n {
        if view.is(id, EOG_TEXTS) {
            eog.insert(id as Token);
            view.mark_control(id);
        }
        if view.is(id, ALWAYS_RENDERED) {
            view.attrs[id] = TokenAttr::USER_DEFINED;
        }
    }
    eog.extend(
        [special.eos, special.eot, special.eom]
            .into_iter()
            .flatten(),
    );

    let find = |eog: &BTreeSet<Token>, text: &str| {
        eog.iter()
            .copied()
            .find(|&t| *view.texts[t as usize] == *text.as_bytes())
    };
    // o200k_harmony and solar-open: "<|end|>" ends a message, not the generation.
    let has = |text: &str| find(&eog, text).is_some();
    let harmony = (has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"));
    // gemma4 and plamo have an ordinary "</s>".
    let plain_s = has("<|tool_response>") || has("<|plamo:eos|>");
    if let Some(end) = find(&eog, "<|end|>").filter(|_| harmony) {
        eog.remove(&end);
        view.attrs[end as usize] = TokenAttr::USER_DEFINED;
    }
    if let Some(s) = find(&eog, "</s>").filter(|_| plain_s) {
        eog.remove(&s);
        view.attrs[s as usize] = TokenAttr::NORMAL;
    }
    eog
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Per-model attribute fixes llama.cpp applies by model, pre-tokenizer or architecture name.
/// `specials` is the special-token cache (control, user-defined and unknown tokens).
pub(crate) fn model_attributes(
    view: &mut TokenView,
    specials: &[Token],
    model_name: &str,
    pre_name: &str,
    architecture: &str,
) {
    let any = |s: &str, subs: &[&str]| subs.iter().any(|sub| s.contains(sub));
    let model_name = model_name.to_ascii_lowercase();
    if any(pre_name, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
        || any(architecture, &["nomic-bert-moe", "jina-bert-v3"])
    {
        if let Some(id) = view.find("<mask>") {
            view.attrs[id] |= TokenAttr::LSTRIP;
        }
    } else if any(&model_name, &["phi-3", "phi3"]) {
        for &id in specials {
            view.attrs[id as usize] |= TokenAttr::RSTRIP;
        }
        if let Some(id) = view.find("</s>") {
            view.attrs[id] |= TokenAttr::RSTRIP;
        }
        for text in ["<unk>", "<s>", "<|endoftext|>"] {
            if let Some(id) = view.find(text) {
                view.attrs[id] -= TokenAttr::RSTRIP;
            }
        }
    } else if any(&model_name, &["modern-bert"]) {
        if let Some(id) = view.find("[MASK]") {
            view.attrs[id] |= TokenAttr::LSTRIP;
        }
    }
}
