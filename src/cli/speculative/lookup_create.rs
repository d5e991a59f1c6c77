//! `llama-lookup-create`: llama.cpp's tool writing a static n-gram cache of a corpus
//! (the 2-grams of its tokens and what followed them) for `llama-lookup -lcs`, in
//! llama.cpp's file format, so caches made by either program work in both.

use std::path::PathBuf;

use llama::speculative::ngram_cache::NGRAM_STATIC;
use llama::speculative::NgramCache;
use llama::TokenizeOptions;

use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::flags::{common_opts, named};
use crate::common::params::CommonParams;
use crate::common::program::{entry_points, Program, Streams};

/// `llama-lookup-create`'s parameters.
#[derive(Default)]
pub struct CreateParams {
    /// The model (its vocabulary tokenizes the corpus) and the corpus (`-p` / `-f`).
    pub common: CommonParams,
    /// Where the cache goes (`-lcs`).
    pub out: Option<PathBuf>,
}

impl AsMut<CommonParams> for CreateParams {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

/// `llama-lookup-create` as a [`Program`].
pub struct LookupCreate;

impl Program for LookupCreate {
    type Params = CreateParams;
    const NAME: &'static str = "llama-lookup-create";
    const ABOUT: &'static str = "Writes a static n-gram cache of a corpus for llama-lookup -lcs (llama.cpp's llama-lookup-create).\n\nexample: llama-lookup-create -m model.gguf -f corpus.txt -lcs corpus.lcs";

    fn options() -> Vec<Opt<CreateParams>> {
        let mut opts: Vec<Opt<CreateParams>> = named(common_opts(), &["-m", "-p", "-f"]);
        opts.push(Opt::value(
            &["-lcs", "--lookup-cache-static"],
            "FNAME",
            "where to write the static lookup cache",
            |p, v| {
                p.out = Some(v.path());
                Ok(())
            },
        ));
        opts
    }

    fn finish(p: &mut CreateParams) -> Result<()> {
        if p.out.is_none() {
            return Err(CliError::Usage("no output file given (-lcs FNAME)".into()));
        }
        if p.common.model.as_os_str().is_empty() {
            return Err(CliError::Usage("no model given (-m FNAME)".into()));
        }
        Ok(())
    }

    fn run(p: &CreateParams, io: Streams<'_>) -> Result<()> {
        let c = &p.common;
        let vocab = llama::load_vocab(&c.model).map_err(|source| CliError::LoadModel {
            path: c.model.display().to_string(),
            source,
        })?;
        let inp = vocab.tokenize(
            &c.prompt,
            TokenizeOptions {
                add_special: true,
                parse_special: true,
            },
        );
        let _ = writeln!(io.log, "main: tokenization done");
        let mut cache = NgramCache::new();
        cache.update(NGRAM_STATIC, NGRAM_STATIC, &inp, inp.len());
        let out = p.out.as_ref().expect("checked in finish");
        let _ = writeln!(
            io.log,
            "main: hashing done, writing file to {}",
            out.display()
        );
        cache.save(out)?;
        Ok(())
    }
}

entry_points!(LookupCreate);
