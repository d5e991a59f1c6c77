//! `llama-lookup-merge`: llama.cpp's tool adding the counts of several n-gram cache
//! files (`-lcs` / `-lcd` caches) into one.

use std::ffi::OsStr;
use std::path::PathBuf;

use llama::speculative::NgramCache;

use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::program::{entry_points, Program, Streams};

/// `llama-lookup-merge`'s parameters: the caches to merge, then the output.
#[derive(Default)]
pub struct MergeParams {
    /// Input files, in order.
    pub inputs: Vec<PathBuf>,
    /// The merged file.
    pub out: PathBuf,
}

/// `llama-lookup-merge` as a [`Program`].
pub struct LookupMerge;

impl Program for LookupMerge {
    type Params = MergeParams;
    const NAME: &'static str = "llama-lookup-merge";
    const ABOUT: &'static str = "Merges lookup cache files into one (llama.cpp's llama-lookup-merge).\n\nusage: llama-lookup-merge lookup_part_1.bin lookup_part_2.bin ... lookup_merged.bin";

    fn options() -> Vec<Opt<MergeParams>> {
        Vec::new()
    }

    fn parse_args<A: AsRef<OsStr>>(args: &[A]) -> Result<Option<MergeParams>> {
        let args: Vec<&OsStr> = args.iter().map(|a| a.as_ref()).collect();
        if args.iter().any(|a| *a == "-h" || *a == "--help") {
            return Ok(None);
        }
        if let Some(flag) = args.iter().find(|a| a.as_encoded_bytes().starts_with(b"-")) {
            return Err(CliError::UnknownArgument(
                flag.to_string_lossy().into_owned(),
            ));
        }
        let Some((out, inputs)) = args.split_last().filter(|(_, i)| !i.is_empty()) else {
            return Err(CliError::Usage(
                "give at least one cache file to merge and the output file".into(),
            ));
        };
        Ok(Some(MergeParams {
            inputs: inputs.iter().map(PathBuf::from).collect(),
            out: PathBuf::from(out),
        }))
    }

    fn run(p: &MergeParams, io: Streams<'_>) -> Result<()> {
        // The first file is the base (its n-grams keep their order), as llama.cpp's.
        let _ = writeln!(
            io.log,
            "lookup-merge: loading file {}",
            p.inputs[0].display()
        );
        let mut merged = NgramCache::load(&p.inputs[0])?;
        for path in &p.inputs[1..] {
            let _ = writeln!(io.log, "lookup-merge: loading file {}", path.display());
            merged.merge(&NgramCache::load(path)?);
        }
        let _ = writeln!(io.log, "lookup-merge: saving file {}", p.out.display());
        merged.save(&p.out)?;
        Ok(())
    }
}

entry_points!(LookupMerge);
