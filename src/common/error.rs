//! The programs' error type: what went wrong, worded for the person at the terminal.
//! `main_with` prints the message on the log and exits with [`CliError::exit_code`].

use std::io;

use llama::LlamaError;

/// Why a flag's value was refused (wrapped in [`CliError::BadValue`] with the flag).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// The value is not UTF-8 where text is needed (a number, a name).
    #[error("the value is not valid UTF-8 text")]
    NotText,
    /// The value does not parse as a number of the flag's kind.
    #[error("'{0}' is not a valid number")]
    NotANumber(String),
    /// A number outside what the flag accepts.
    #[error("{value} is out of range: {expected}")]
    OutOfRange {
        /// The value as given.
        value: String,
        /// What is accepted (`must be at least 1`).
        expected: String,
    },
    /// A name the flag does not know.
    #[error("unknown {what} '{value}' (expected {expected})")]
    Unknown {
        /// What kind of name (`cache type`, `output format`).
        what: &'static str,
        /// The value as given.
        value: String,
        /// The accepted names.
        expected: &'static str,
    },
    /// A file named by the flag could not be read.
    #[error("cannot read '{path}': {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A value of the right kind that is still not usable, with the reason.
    #[error("{0}")]
    Invalid(String),
}

impl ValueError {
    /// An [`ValueError::OutOfRange`] for `value` with the rule it broke.
    pub fn out_of_range(value: impl std::fmt::Display, expected: impl Into<String>) -> Self {
        ValueError::OutOfRange {
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

/// Everything a program can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An argument that is not one of the program's flags.
    #[error("error: invalid argument: {0}")]
    UnknownArgument(String),
    /// A flag that takes a value came last.
    #[error("error: {0} needs a value")]
    MissingValue(String),
    /// `--flag=value` for a flag without value.
    #[error("error: {0} takes no value")]
    UnexpectedValue(String),
    /// A flag's value was refused.
    #[error("error: {flag}: {source}")]
    BadValue {
        /// The flag as written on the command line.
        flag: String,
        /// Why.
        source: ValueError,
    },
    /// Settings that are each valid but cannot run together, or a required one missing.
    #[error("error: {0}")]
    Usage(String),
    /// Reading or writing a stream or file failed.
    #[error("error: {what}: {source}")]
    Io {
        /// What was being done (`writing output`).
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A GGUF file could not be read or written, or a tensor not quantized.
    #[error("error: {what}: {source}")]
    Ggml {
        /// Which file, or what was being done.
        what: String,
        /// The GGUF error.
        source: ggml::Error,
    },
    /// The model could not be loaded.
    #[error("error: failed to load model '{path}': {source}")]
    LoadModel {
        /// The model path.
        path: String,
        /// Why.
        source: LlamaError,
    },
    /// The context could not be created with these settings.
    #[error("error: failed to create context: {0}")]
    Context(LlamaError),
    /// Decoding a batch failed.
    #[error("error: failed to decode {what}: {source}")]
    Decode {
        /// Which batch (`the prompt`, `a generated token`).
        what: &'static str,
        /// Why.
        source: LlamaError,
    },
    /// Another runtime operation failed (a KV cache edit, the sampler setup).
    #[error("error: {0}")]
    Llama(#[from] LlamaError),
    /// The input cannot be processed (an empty prompt, a text too short).
    #[error("error: {0}")]
    Input(String),
}

impl CliError {
    /// The process exit code for this error: 0 for a closed output pipe (`prog | head`
    /// is not a failure), else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe => 0,
            _ => 1,
        }
    }

    /// Whether the message is worth printing (not for a closed output pipe).
    pub fn is_quiet(&self) -> bool {
        self.exit_code() == 0
    }

    /// A [`CliError::Io`] closure for `map_err`: `what` was being done.
    pub fn io(what: &str) -> impl Fn(io::Error) -> CliError + '_ {
        move |source| CliError::Io {
            what: what.to_string(),
            source,
        }
    }

    /// A [`CliError::Decode`] closure for `map_err`.
    pub fn decode(what: &'static str) -> impl Fn(LlamaError) -> CliError {
        move |source| CliError::Decode { what, source }
    }
}

/// What the programs return.
pub type Result<T, E = CliError> = std::result::Result<T, E>;
