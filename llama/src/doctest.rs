//! Support for the documentation's examples that load a model: they name the model
//! by its path under the test-data folder `../shared` (relative to the crate), and
//! this finds it as the test suite does. Not part of the API.

use std::path::{Path, PathBuf};

/// `path` (a path through a folder named `shared`) with that folder replaced by
/// `$LLAMA_SHARED_DIR` when set, if the file exists. When it does not: with `CI` set,
/// a panic (a failed doc test); otherwise a loud skip message and `None`.
pub fn model(path: &str) -> Option<PathBuf> {
    let mut p = PathBuf::from(path);
    if let (Some(dir), Some(at)) = (std::env::var_os("LLAMA_SHARED_DIR"), path.find("shared/")) {
        p = Path::new(&dir).join(&path[at + "shared/".len()..]);
    }
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "required test data is missing: {} (CI is set, so this is a failure)",
        p.display()
    );
    eprintln!(
        "\n!!! SKIPPING: test data not found: {} (set LLAMA_SHARED_DIR)\n",
        p.display()
    );
    None
}
