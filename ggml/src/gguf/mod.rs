//! GGUF files.

/// A malformed or hostile GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Placeholder until the reader lands.
    #[error("gguf: {0}")]
    Other(String),
}
