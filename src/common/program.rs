//! The one entry every program runs through: a [`Program`] names itself, lists its
//! flags, checks what they add up to and runs; [`main_with`] parses the command line,
//! prints the `-h` text or the error and returns the exit code, and [`exit_with`] is
//! the whole `main` of an `examples/` program.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, Write};

use super::args::{parse_params, run_main, Opt};
use super::error::Result;

/// A program of `examples/`: its name and description for `-h`, its flags, the checks
/// after them, and its work.
pub trait Program {
    /// The parameters, `Default` being the program's defaults before any flag.
    type Params: Default;
    /// The name on the usage line (`llama-cli`).
    const NAME: &'static str;
    /// The text under the usage line of `-h`.
    const ABOUT: &'static str;

    /// The flags the program accepts.
    fn options() -> Vec<Opt<Self::Params>>;

    /// Completes the parameters once every flag is applied and checks what only
    /// several flags together decide; an error (usually [`CliError::Usage`]) for
    /// settings that cannot run. The default accepts everything as it is.
    ///
    /// [`CliError::Usage`]: super::error::CliError::Usage
    fn finish(_params: &mut Self::Params) -> Result<()> {
        Ok(())
    }

    /// The command line `args` (without the program name) as parameters: the
    /// defaults, the flags, then [`Program::finish`]; `Ok(None)` for `-h`. Errors
    /// name the offending argument. Programs with positional arguments replace it.
    fn parse_args<A: AsRef<OsStr>>(args: &[A]) -> Result<Option<Self::Params>> {
        let Some(mut params) = parse_params(&Self::options(), args)? else {
            return Ok(None);
        };
        Self::finish(&mut params)?;
        Ok(Some(params))
    }

    /// Does the program's work on `io`: reads the input if it needs to, writes its
    /// results and its log. The error says what failed, for the log.
    fn run(params: &Self::Params, io: Streams<'_>) -> Result<()>;
}

/// The streams a program runs on: standard input, output and error in a process,
/// buffers in tests.
pub struct Streams<'a> {
    /// What the program reads (llama-cli's conversation, llama-tokenize's `--stdin`).
    pub input: &'a mut dyn BufRead,
    /// Where its results go.
    pub out: &'a mut dyn Write,
    /// Where its log, warnings and errors go.
    pub log: &'a mut dyn Write,
}

/// Runs program `P` with `args` (without the program name) on these streams: the
/// usage text on `out` for `-h`, a parse error or the run's error on `log`. Returns
/// the exit code: 0 on success, else the error's [`CliError::exit_code`].
///
/// [`CliError::exit_code`]: super::error::CliError::exit_code
pub fn main_with<P: Program, A: AsRef<OsStr>>(
    args: &[A],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> i32 {
    run_main(
        P::NAME,
        P::ABOUT,
        &P::options(),
        P::parse_args(args),
        out,
        log,
        |params, out, log| P::run(params, Streams { input, out, log }),
    )
}

/// The `main` of program `P`: the process's arguments as the OS gives them (a prompt
/// or a path need not be UTF-8) and its standard streams through [`main_with`], then
/// exits with its code. Never returns.
pub fn exit_with<P: Program>() -> ! {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = main_with::<P, OsString>(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}

/// Gives a program module the functions its tests call, `parse_args(args)` and
/// `main_with(args, input, out, log)`, for its [`Program`] type `$program`.
macro_rules! entry_points {
    ($program:ty) => {
        /// The command line `args` (without the program name) as parameters;
        /// `Ok(None)` for `-h`. Errors name the offending argument, or the settings
        /// that cannot run together.
        pub fn parse_args<A: AsRef<std::ffi::OsStr>>(
            args: &[A],
        ) -> $crate::common::error::Result<
            Option<<$program as $crate::common::program::Program>::Params>,
        > {
            <$program as $crate::common::program::Program>::parse_args(args)
        }

        /// Runs the program with `args` (without the program name) on these streams;
        /// returns the exit code (0 on success, else the error's `exit_code`).
        pub fn main_with<A: AsRef<std::ffi::OsStr>>(
            args: &[A],
            input: &mut dyn std::io::BufRead,
            out: &mut dyn std::io::Write,
            log: &mut dyn std::io::Write,
        ) -> i32 {
            $crate::common::program::main_with::<$program, A>(args, input, out, log)
        }
    };
}

pub(crate) use entry_points;
