//! A small command-line parser for llama.cpp-style flags: short and long names with
//! aliases (`-n`, `--predict`, `--n-predict`), multi-letter short flags (`-ub`,
//! `-ctk`), values as the next argument or after `=`, and a generated `-h` text.
//!
//! Arguments are `OsStr`s, as the operating system gives them: a prompt or a path
//! may be any bytes; a value that must be text (a number, a name) is checked by
//! [`Value::text`] and refused with an error naming the flag.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::str::FromStr;

use super::error::{CliError, Result, ValueError};

/// One flag's value as given on the command line.
#[derive(Clone, Copy, Debug)]
pub struct Value<'a>(&'a OsStr);

impl<'a> Value<'a> {
    /// Wraps a raw argument.
    pub fn new(v: &'a OsStr) -> Self {
        Value(v)
    }

    /// The value as the operating system gave it.
    pub fn os(self) -> &'a OsStr {
        self.0
    }

    /// The value's bytes (on Unix exactly the argument's bytes).
    pub fn bytes(self) -> &'a [u8] {
        self.0.as_encoded_bytes()
    }

    /// The value as a path.
    pub fn path(self) -> PathBuf {
        PathBuf::from(self.0)
    }

    /// The value as text; [`ValueError::NotText`] when it is not UTF-8.
    pub fn text(self) -> Result<&'a str, ValueError> {
        self.0.to_str().ok_or(ValueError::NotText)
    }

    /// The value parsed as a number (surrounding spaces allowed);
    /// [`ValueError::NotANumber`] otherwise.
    pub fn num<T: FromStr>(self) -> Result<T, ValueError> {
        let t = self.text()?;
        t.trim()
            .parse()
            .map_err(|_| ValueError::NotANumber(t.to_string()))
    }

    /// A number in `min..=max`; [`ValueError::OutOfRange`] with `rule` otherwise.
    pub fn num_in<T: FromStr + PartialOrd + Copy + std::fmt::Display>(
        self,
        min: T,
        max: T,
        rule: &str,
    ) -> Result<T, ValueError> {
        let n: T = match self.num() {
            Ok(n) => n,
            // An integer the type cannot hold (a negative count, 2^40 threads) is
            // out of range rather than "not a number".
            Err(e) => {
                let t = self.text()?.trim();
                return Err(match t.parse::<i128>() {
                    Ok(big) => ValueError::out_of_range(big, rule),
                    Err(_) => e,
                });
            }
        };
        if n < min || n > max {
            return Err(ValueError::out_of_range(n, rule));
        }
        Ok(n)
    }

    /// A floating-point number that is not NaN (infinities allowed);
    /// [`ValueError::OutOfRange`] for NaN.
    pub fn float(self) -> Result<f32, ValueError> {
        let x: f32 = self.num()?;
        if x.is_nan() {
            return Err(ValueError::out_of_range(x, "must be a number"));
        }
        Ok(x)
    }

    /// A finite floating-point number; [`ValueError::OutOfRange`] otherwise.
    pub fn finite(self) -> Result<f32, ValueError> {
        let x: f32 = self.num()?;
        if !x.is_finite() {
            return Err(ValueError::out_of_range(x, "must be finite"));
        }
        Ok(x)
    }

    /// The comma-separated parts of the value, each as an `OsString` (so that a list
    /// of paths may hold any bytes); empty parts are kept.
    pub fn split_commas(self) -> Vec<OsString> {
        self.bytes()
            .split(|&b| b == b',')
            .map(os_from_bytes)
            .collect()
    }
}

/// An `OsString` holding `bytes`. On Unix any bytes; elsewhere (where arguments are
/// UTF-16) the bytes came from a valid `OsStr` split at an ASCII byte, and invalid
/// sequences are replaced.
pub fn os_from_bytes(bytes: &[u8]) -> OsString {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(bytes).to_os_string()
    }
    #[cfg(not(unix))]
    {
        OsString::from(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// How an option sets the parameters.
pub enum Apply<P> {
    /// A flag without value.
    Flag(fn(&mut P)),
    /// An option with a value (named for the help, `N`): sets a field, or says
    /// why the value is refused.
    Value(
        &'static str,
        fn(&mut P, Value<'_>) -> Result<(), ValueError>,
    ),
}

/// One option: its names, its help, and how it sets a field.
pub struct Opt<P> {
    /// Every spelling (`["-n", "--predict", "--n-predict"]`).
    pub names: &'static [&'static str],
    /// One line of help (defaults included).
    pub help: &'static str,
    /// What it does.
    pub apply: Apply<P>,
}

impl<P> Opt<P> {
    /// A flag without value.
    pub fn flag(names: &'static [&'static str], help: &'static str, set: fn(&mut P)) -> Self {
        Opt {
            names,
            help,
            apply: Apply::Flag(set),
        }
    }

    /// An option with a value named `value` in the help.
    pub fn value(
        names: &'static [&'static str],
        value: &'static str,
        help: &'static str,
        set: fn(&mut P, Value<'_>) -> Result<(), ValueError>,
    ) -> Self {
        Opt {
            names,
            help,
            apply: Apply::Value(value, set),
        }
    }

    /// Whether the option takes a value.
    pub fn takes_value(&self) -> bool {
        matches!(self.apply, Apply::Value(..))
    }
}

/// What parsing found beyond setting options.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Run with the parameters.
    Run,
    /// `-h`/`--help` was given: print the usage and exit.
    Help,
}

/// Applies `args` (without the program name) to `p`. Errors name the offending
/// argument: unknown option, missing or bad value.
pub fn parse<P, A: AsRef<OsStr>>(opts: &[Opt<P>], args: &[A], p: &mut P) -> Result<Parsed> {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        let bytes = arg.as_encoded_bytes();
        if bytes == b"-h" || bytes == b"--help" {
            return Ok(Parsed::Help);
        }
        let eq = bytes
            .iter()
            .position(|&b| b == b'=')
            .filter(|_| bytes.starts_with(b"--"));
        let (name_bytes, inline) = match eq {
            Some(k) => (&bytes[..k], Some(os_from_bytes(&bytes[k + 1..]))),
            None => (bytes, None),
        };
        let opt = std::str::from_utf8(name_bytes)
            .ok()
            .and_then(|name| opts.iter().find(|o| o.names.contains(&name)))
            .ok_or_else(|| CliError::UnknownArgument(arg.to_string_lossy().into_owned()))?;
        let name = String::from_utf8_lossy(name_bytes).into_owned();
        match (&opt.apply, inline) {
            (Apply::Flag(set), None) => set(p),
            (Apply::Flag(_), Some(_)) => return Err(CliError::UnexpectedValue(name)),
            (Apply::Value(_, set), inline) => {
                let value = match &inline {
                    Some(v) => v.as_os_str(),
                    None => {
                        i += 1;
                        args.get(i)
                            .map(AsRef::as_ref)
                            .ok_or_else(|| CliError::MissingValue(name.clone()))?
                    }
                };
                set(p, Value(value)).map_err(|source| CliError::BadValue { flag: name, source })?;
            }
        }
        i += 1;
    }
    Ok(Parsed::Run)
}

/// The `-h` text: one line per option with its names, value and help.
pub fn usage<P>(program: &str, about: &str, opts: &[Opt<P>]) -> String {
    let mut s = format!("usage: {program} [options]\n\n{about}\n\n");
    let mut lines: Vec<(String, &str)> =
        vec![("-h,    --help".to_string(), "print this help and exit")];
    for o in opts {
        let mut names = o.names.join(", ");
        if let Apply::Value(v, _) = o.apply {
            names.push(' ');
            names.push_str(v);
        }
        lines.push((names, o.help));
    }
    let width = lines
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0)
        .min(40);
    for (n, h) in lines {
        s.push_str(&format!("{n:<width$}  {h}\n"));
    }
    if opts.iter().any(|o| o.names.contains(&"-m")) {
        let archs: Vec<&str> = llama::arch::ALL_ARCHS.iter().map(|a| a.name()).collect();
        s.push_str(&format!("\nmodel architectures: {}\n", archs.join(", ")));
    }
    s
}

/// A program's whole command line: `P::default()` with `args` applied, `Ok(None)`
/// when `-h` asked for the usage text. Errors name the offending argument.
pub fn parse_params<P: Default, A: AsRef<OsStr>>(opts: &[Opt<P>], args: &[A]) -> Result<Option<P>> {
    let mut p = P::default();
    match parse(opts, args, &mut p)? {
        Parsed::Help => Ok(None),
        Parsed::Run => Ok(Some(p)),
    }
}

/// The body of every program's `main`: the usage text on `out` for `-h`, a parse
/// error or `run`'s error on `log`; returns the exit code (0 on success, else
/// [`CliError::exit_code`]).
pub fn run_main<P>(
    program: &str,
    about: &str,
    opts: &[Opt<P>],
    parsed: Result<Option<P>>,
    out: &mut dyn Write,
    log: &mut dyn Write,
    run: impl FnOnce(&P, &mut dyn Write, &mut dyn Write) -> Result<()>,
) -> i32 {
    let params = match parsed {
        Ok(Some(p)) => p,
        Ok(None) => {
            let _ = write!(out, "{}", usage(program, about, opts));
            return 0;
        }
        Err(e) => {
            let _ = writeln!(log, "{e}");
            let _ = writeln!(log, "run with -h for the list of options");
            return e.exit_code();
        }
    };
    match run(&params, out, log) {
        Ok(()) => 0,
        Err(e) => {
            if !e.is_quiet() {
                let _ = writeln!(log, "{e}");
            }
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct P {
        n: i32,
        flag: bool,
        s: Vec<u8>,
    }

    fn opts() -> Vec<Opt<P>> {
        vec![
            Opt::value(&["-n", "--predict"], "N", "count", |p, v| {
                p.n = v.num_in(-1, 100, "must be in -1..=100")?;
                Ok(())
            }),
            Opt::value(&["-ub"], "S", "bytes", |p, v| {
                p.s = v.bytes().to_vec();
                Ok(())
            }),
            Opt::flag(&["--flag"], "flag", |p| p.flag = true),
        ]
    }

    fn os(a: &[&[u8]]) -> Vec<OsString> {
        a.iter().map(|b| os_from_bytes(b)).collect()
    }

    fn err(a: &[&[u8]]) -> String {
        let mut p = P::default();
        parse(&opts(), &os(a), &mut p).unwrap_err().to_string()
    }

    #[test]
    fn parses_values_flags_and_aliases() {
        let mut p = P::default();
        let r = parse(
            &opts(),
            &os(&[b"--predict", b"7", b"-ub", b"x", b"--flag"]),
            &mut p,
        );
        assert_eq!(r.unwrap(), Parsed::Run);
        assert_eq!((p.n, p.s.as_slice(), p.flag), (7, &b"x"[..], true));
        assert_eq!(
            parse(&opts(), &os(&[b"--predict= 9"]), &mut p).unwrap(),
            Parsed::Run
        );
        assert_eq!(p.n, 9);
        assert_eq!(parse(&opts(), &os(&[b"-h"]), &mut p).unwrap(), Parsed::Help);
        assert!(usage("prog", "about", &opts()).contains("--predict N"));
    }

    #[test]
    fn values_may_be_any_bytes_but_numbers_must_be_text() {
        let mut p = P::default();
        parse(&opts(), &os(&[b"-ub", b"\xff\xfe abc"]), &mut p).unwrap();
        assert_eq!(p.s, b"\xff\xfe abc");
        assert_eq!(
            err(&[b"-n", b"\xff1"]),
            "error: -n: the value is not valid UTF-8 text"
        );
        assert_eq!(err(&[b"\xff"]), "error: invalid argument: \u{fffd}");
    }

    #[test]
    fn errors_name_the_flag() {
        assert_eq!(err(&[b"-n"]), "error: -n needs a value");
        assert_eq!(err(&[b"-n", b"x"]), "error: -n: 'x' is not a valid number");
        assert_eq!(
            err(&[b"-n", b"101"]),
            "error: -n: 101 is out of range: must be in -1..=100"
        );
        assert_eq!(err(&[b"--nope"]), "error: invalid argument: --nope");
        assert_eq!(err(&[b"--flag=1"]), "error: --flag takes no value");
    }
}
