//! The pre-tokenizers of BPE vocabularies: which `tokenizer.ggml.pre` names map to
//! which kind, the settings each name implies, and each kind's split patterns (the
//! same pattern text as llama.cpp, so that its hand-written matchers are chosen alike).

/// How a BPE vocabulary splits text into words before merging (llama.cpp's
/// `llama_vocab_pre_type`). SentencePiece and WordPiece vocabularies use [`PreType::Default`].
/// Each variant lists the `tokenizer.ggml.pre` names that select it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PreType {
    /// `default`
    Default,
    /// `llama3`, `llama-v3`, `llama-bpe`, `falcon3`, `falcon-h1`, `pixtral`, `midm-2.0`, `lfm2`, `jina-v5-nano`
    Llama3,
    /// `deepseek-llm`
    DeepseekLlm,
    /// `deepseek-coder`
    DeepseekCoder,
    /// `deepseek-v3`
    Deepseek3Llm,
    /// `falcon`
    Falcon,
    /// `mpt`
    Mpt,
    /// `starcoder`
    Starcoder,
    /// `gpt-2`, `phi-2`, `jina-es`, `jina-de`, `gigachat`, `jina-v2-es`, `jina-v2-de`, `a.x-4.0`, `mellum`, `modern-bert`, `exaone4`, `jina-v1-en`, `jina-v2-code`, `roberta-bpe`
    Gpt2,
    /// `refact`
    Refact,
    /// `command-r`
    CommandR,
    /// `stablelm2`
    Stablelm2,
    /// `qwen2`, `deepseek-r1-qwen`, `kormo`, `f2llmv2`, `megrez`
    Qwen2,
    /// `qwen35`
    Qwen35,
    /// `olmo`
    Olmo,
    /// `dbrx`
    Dbrx,
    /// `smaug-bpe`
    Smaug,
    /// `poro-chat`
    Poro,
    /// `chatglm-bpe`, `glm4`, `glm5`
    Chatglm4,
    /// `viking`
    Viking,
    /// `jais`
    Jais,
    /// `jais-2`
    Jais2,
    /// `tekken`
    Tekken,
    /// `smollm`
    Smollm,
    /// `codeshell`
    Codeshell,
    /// `bloom`
    Bloom,
    /// `gpt3-finnish`
    Gpt3Finnish,
    /// `exaone`
    Exaone,
    /// `chameleon`
    Chameleon,
    /// `minerva-7b`
    Minerva,
    /// `gpt-4o`, `llama4`, `kanana2`, `talkie`
    Gpt4o,
    /// `granite-embed-multi-97m`
    GraniteEmbMulti,
    /// `trillion`
    Trillion,
    /// `granite-docling`
    GraniteDocling,
    /// `bailingmoe`, `bailingmoe2`, `llada-moe`
    Bailingmoe,
    /// `seed-coder`
    SeedCoder,
    /// `hunyuan`
    Hunyuan,
    /// `hunyuan-dense`
    HunyuanDense,
    /// `hy_v4`
    HyV4,
    /// `joyai-llm`
    JoyaiLlm,
    /// `spark2_5`
    Spark25,
    /// `youtu`
    Youtu,
    /// `ufakzeka`
    Ufakzeka,
    /// `grok-2`
    Grok2,
    /// `laguna`
    Laguna,
    /// `minimax-m2`
    MinimaxM2,
    /// `solar-open`
    SolarOpen,
    /// `mellum2`
    Mellum2,
    /// `minicpm5`
    Minicpm5,
    /// `gemma4`, `granite-embed-multi-311m`: SentencePiece-style BPE (spaces written
    /// as `▁`, merges over raw UTF-8, only newlines split)
    Gemma4,
}

/// What a `tokenizer.ggml.pre` name sets besides the kind (llama.cpp's `load`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PreSettings {
    pub ignore_merges: bool,
    /// `clean_spaces` stays on (the BPE default) unless this is set.
    pub keep_spaces: bool,
    pub add_bos: bool,
    pub add_sep: bool,
    /// The vocabulary has no BOS token.
    pub no_bos: bool,
}

const NONE: PreSettings = PreSettings {
    ignore_merges: false,
    keep_spaces: false,
    add_bos: false,
    add_sep: false,
    no_bos: false,
};
const KEEP: PreSettings = PreSettings {
    keep_spaces: true,
    ..NONE
};
const KEEP_IGNORE: PreSettings = PreSettings {
    keep_spaces: true,
    ignore_merges: true,
    ..NONE
};

/// Every supported `tokenizer.ggml.pre` name.
const NAMES: &[(&[&str], PreType, PreSettings)] = {
    use PreType::*;
    &[
        (&["default"], Default, NONE),
        (
            &[
                "llama3",
                "llama-v3",
                "llama-bpe",
                "falcon3",
                "falcon-h1",
                "pixtral",
                "midm-2.0",
                "lfm2",
                "jina-v5-nano",
            ],
            Llama3,
            PreSettings {
                ignore_merges: true,
                add_bos: true,
                ..NONE
            },
        ),
        (
            &["minicpm5"],
            Minicpm5,
            PreSettings {
                ignore_merges: true,
                ..NONE
            },
        ),
        (&["deepseek-llm"], DeepseekLlm, KEEP),
        (&["deepseek-coder"], DeepseekCoder, KEEP),
        (&["deepseek-v3"], Deepseek3Llm, KEEP),
        (&["spark2_5"], Spark25, KEEP),
        (&["youtu"], Youtu, KEEP_IGNORE),
        (&["falcon"], Falcon, NONE),
        (&["mpt"], Mpt, NONE),
        (&["starcoder"], Starcoder, NONE),
        (
            &[
                "gpt-2",
                "phi-2",
                "jina-es",
                "jina-de",
                "gigachat",
                "jina-v2-es",
                "jina-v2-de",
                "a.x-4.0",
                "mellum",
                "modern-bert",
                "exaone4",
            ],
            Gpt2,
            NONE,
        ),
        (
            &["jina-v1-en", "jina-v2-code", "roberta-bpe"],
            Gpt2,
            PreSettings {
                add_sep: true,
                ..NONE
            },
        ),
        (&["jais-2"], Jais2, NONE),
        (&["refact"], Refact, NONE),
        (&["command-r"], CommandR, KEEP),
        (
            &["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"],
            Qwen2,
            KEEP,
        ),
        (&["megrez"], Qwen2, NONE),
        (&["qwen35"], Qwen35, KEEP),
        (&["stablelm2"], Stablelm2, NONE),
        (&["olmo"], Olmo, NONE),
        (&["dbrx"], Dbrx, NONE),
        (&["smaug-bpe"], Smaug, NONE),
        (&["poro-chat"], Poro, KEEP),
        (
            &["chatglm-bpe"],
            Chatglm4,
            PreSettings {
                no_bos: true,
                ..NONE
            },
        ),
        (
            &["glm4", "glm5"],
            Chatglm4,
            PreSettings {
                no_bos: true,
                ignore_merges: true,
                ..NONE
            },
        ),
        (&["viking"], Viking, KEEP),
        (&["jais"], Jais, NONE),
        (
            &["tekken"],
            Tekken,
            PreSettings {
                add_bos: true,
                ..KEEP_IGNORE
            },
        ),
        (&["smollm"], Smollm, KEEP),
        (&["codeshell"], Codeshell, NONE),
        (&["bloom"], Bloom, NONE),
        (&["gpt3-finnish"], Gpt3Finnish, NONE),
        (&["exaone"], Exaone, NONE),
        (
            &["chameleon"],
            Chameleon,
            PreSettings {
                add_bos: true,
                ..KEEP
            },
        ),
        (&["minerva-7b"], Minerva, NONE),
        (&["gpt-4o", "llama4", "kanana2", "talkie"], Gpt4o, KEEP),
        (&["granite-embed-multi-97m"], GraniteEmbMulti, KEEP_IGNORE),
        (&["trillion"], Trillion, KEEP),
        (&["granite-docling"], GraniteDocling, KEEP),
        (
            &["bailingmoe", "bailingmoe2", "llada-moe"],
            Bailingmoe,
            KEEP,
        ),
        (&["seed-coder"], SeedCoder, KEEP),
        (&["hunyuan"], Hunyuan, KEEP),
        (&["hunyuan-dense"], HunyuanDense, KEEP),
        (&["hy_v4"], HyV4, KEEP),
        (&["joyai-llm"], JoyaiLlm, KEEP),
        (&["ufakzeka"], Ufakzeka, KEEP),
        (&["grok-2"], Grok2, KEEP),
        (&["laguna"], Laguna, KEEP),
        (&["minimax-m2"], MinimaxM2, KEEP),
        (&["solar-open"], SolarOpen, KEEP),
        (&["mellum2"], Mellum2, NONE),
        (&["gemma4", "granite-embed-multi-311m"], Gemma4, NONE),
    ]
};

pub(crate) const LLAMA3: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
pub(crate) const QWEN2: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
pub(crate) const QWEN35: &str = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
pub(crate) const NEWLINES: &str = "[^\\n]+|[\\n]+";
pub(crate) const GPT2: &str =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const DEEPSEEK3: &str = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const CJK: &str = "[一-龥ࠀ-一가-퟿]+";
const BLOOM: &str = " ?[^(\\s|.,!?…。，、।۔،)]+";
const GPT4O: &str = "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

impl PreType {
    /// SentencePiece-style BPE (llama.cpp's `escape_whitespaces` on a BPE vocabulary):
    /// spaces become `▁` before the merges, which run on raw UTF-8 rather than
    /// GPT-2's byte characters, and pieces are written back with spaces.
    pub(crate) fn spm_style(self) -> bool {
        matches!(self, PreType::Gemma4)
    }

    /// The kind a `tokenizer.ggml.pre` name selects, or `None` for a name this crate
    /// does not support. An empty name means [`PreType::Default`], as in llama.cpp.
    pub fn from_name(name: &str) -> Option<PreType> {
        Self::lookup(name).map(|(pre, _)| pre)
    }

    /// Every supported kind (some more than once).
    #[cfg(test)]
    pub(crate) fn all() -> impl Iterator<Item = PreType> {
        NAMES.iter().map(|&(_, pre, _)| pre)
    }

    pub(crate) fn lookup(name: &str) -> Option<(PreType, PreSettings)> {
        if name.is_empty() {
            return Some((PreType::Default, NONE));
        }
        NAMES
            .iter()
            .find(|(names, _, _)| names.contains(&name))
            .map(|&(_, pre, settings)| (pre, settings))
    }

    /// The split patterns, applied in turn, each to the pieces of the one before.
    pub(crate) fn patterns(self) -> &'static [&'static str] {
        use PreType::*;
        match self {
            Llama3 | Dbrx | Smaug | Chatglm4 => &[LLAMA3],
            Jais2 => &["(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"],
            DeepseekLlm => &[
                "[\r\n]",
                "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
                "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
                "\\s+$",
                CJK,
                "\\p{N}+",
            ],
            Deepseek3Llm | HunyuanDense | JoyaiLlm | HyV4 => &["\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK3],
            Spark25 => &[
                "\\p{N}{1,3}",
                "[一-龥぀-ゟ゠-ヿ]+",
                "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
                "\\p{N}",
            ],
            Youtu => &[
                "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
                "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            ],
            DeepseekCoder => &["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK, "\\p{N}"],
            Falcon => &["[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"],
            Starcoder | Refact | CommandR | Smollm | Codeshell | Exaone | Minerva | Mellum2 => &["\\p{N}", GPT2],
            Gpt2 | Mpt | Olmo | Jais | Trillion | GraniteDocling => &[GPT2],
            Stablelm2 | Qwen2 | Hunyuan | SolarOpen | Grok2 => &[QWEN2],
            Qwen35 => &[QWEN35],
            Poro | Bloom | Gpt3Finnish => &[BLOOM],
            Viking => &[BLOOM, "\\p{N}"],
            Tekken => &["[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
            Chameleon => &[
                "<sentinel:[0-9]+>",
                "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                "([\\t\\n]|    |  )",
                "\\p{N}",
                "[\\p{P}!-/:-@\\[-`{-~]",
                GPT2,
            ],
            Gpt4o | MinimaxM2 => &[GPT4O],
            GraniteEmbMulti => &["[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
            Bailingmoe => &["'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"],
            SeedCoder => &["(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
            Ufakzeka => &["[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
            Laguna => &[NEWLINES, QWEN2],
            Gemma4 => &[NEWLINES],
            Minicpm5 => &["\\p{N}{1,3}", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
            Default => &["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_kinds() {
        assert_eq!(PreType::from_name("llama-bpe"), Some(PreType::Llama3));
        assert_eq!(PreType::from_name(""), Some(PreType::Default));
        assert_eq!(PreType::from_name("megrez"), Some(PreType::Qwen2));
        assert_eq!(PreType::from_name("kimi-k2"), None);
        let (_, s) = PreType::lookup("llama3").unwrap();
        assert!(s.ignore_merges && s.add_bos && !s.keep_spaces);
    }
}
