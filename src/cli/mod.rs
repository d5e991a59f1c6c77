//! The programs of `examples/` as library code, so that tests run them in-process
//! with captured output: one module per program, plus what only the programs share
//! (their output, the conversation, the random numbers); what they share with the
//! server (flags, loading, errors) is [`crate::common`].
//!
//! Each program is a [`Program`](crate::common::program::Program) (its name, flags,
//! checks and work) and has `options()`, `parse_args(args)` and
//! `main_with(args, stdin, stdout, stderr) -> exit code` for tests; the `examples/`
//! mains are `exit_with::<the program>()`.

pub mod bench;
pub mod chat_template;
pub mod completion;
pub mod conversation;
pub mod embedding;
pub mod eval_callback;
pub mod finetune;
pub mod gen_model;
pub mod gguf_dump;
pub mod output;
pub mod passkey;
pub mod perplexity;
pub mod rng;
pub mod simple;
pub mod speculative;
pub mod tokenize;
