//! A small command-line parser for llama.cpp-style flags: short and long names with
//! aliases (`-n`, `--predict`, `--n-predict`), multi-letter short flags (`-ub`,
//! `-ctk`), values as the next argument or after `=`, and a generated `-h` text.

/// One option: its names, an optional value name, its help, and how it sets a field.
pub struct Opt<P> {
    /// Every spelling (`["-n", "--predict", "--n-predict"]`).
    pub names: &'static [&'static str],
    /// The value's name for help (`Some("N")`), `None` for a flag without value.
    pub value: Option<&'static str>,
    /// One line of help (defaults included).
    pub help: &'static str,
    /// Applies the option to the parameters; an error message for a bad value.
    pub apply: fn(&mut P, &str) -> Result<(), String>,
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
pub fn parse<P>(opts: &[Opt<P>], args: &[String], p: &mut P) -> Result<Parsed, String> {
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "-h" || arg == "--help" {
            return Ok(Parsed::Help);
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let opt = opts
            .iter()
            .find(|o| o.names.contains(&name))
            .ok_or_else(|| format!("error: invalid argument: {arg}"))?;
        let value = match (opt.value, inline) {
            (None, None) => String::new(),
            (None, Some(_)) => return Err(format!("error: {name} takes no value")),
            (Some(_), Some(v)) => v,
            (Some(_), None) => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| format!("error: {name} needs a value"))?
            }
        };
        (opt.apply)(p, &value).map_err(|e| format!("error: {name}: {e}"))?;
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
        if let Some(v) = o.value {
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
    s
}

/// A program's whole command line: `P::default()` with `args` applied, `Ok(None)`
/// when `-h` asked for the usage text. Errors name the offending argument.
pub fn parse_params<P: Default>(opts: &[Opt<P>], args: &[String]) -> Result<Option<P>, String> {
    let mut p = P::default();
    match parse(opts, args, &mut p)? {
        Parsed::Help => Ok(None),
        Parsed::Run => Ok(Some(p)),
    }
}

/// The body of every program's `main`: the usage text on `out` for `-h`, a parse
/// error or `run`'s error on `log`; returns the exit code (0 on success, else 1).
pub fn run_main<P>(
    program: &str,
    about: &str,
    opts: &[Opt<P>],
    parsed: Result<Option<P>, String>,
    out: &mut dyn std::io::Write,
    log: &mut dyn std::io::Write,
    run: impl FnOnce(&P, &mut dyn std::io::Write, &mut dyn std::io::Write) -> Result<(), String>,
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
            return 1;
        }
    };
    match run(&params, out, log) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(log, "{e}");
            1
        }
    }
}

/// Parses a number, naming what was expected in the error.
pub fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("'{v}' is not a valid number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct P {
        n: i32,
        flag: bool,
        s: String,
    }

    fn opts() -> Vec<Opt<P>> {
        vec![
            Opt {
                names: &["-n", "--predict"],
                value: Some("N"),
                help: "count",
                apply: |p, v| {
                    let _: () = p.n = num(v)?;
                    Ok(())
                },
            },
            Opt {
                names: &["-ub"],
                value: Some("S"),
                help: "string",
                apply: |p, v| {
                    let _: () = p.s = v.into();
                    Ok(())
                },
            },
            Opt {
                names: &["--flag"],
                value: None,
                help: "flag",
                apply: |p, _| {
                    let _: () = p.flag = true;
                    Ok(())
                },
            },
        ]
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_values_flags_and_aliases() {
        let mut p = P::default();
        assert_eq!(
            parse(
                &opts(),
                &args(&["--predict", "7", "-ub", "x", "--flag"]),
                &mut p
            ),
            Ok(Parsed::Run)
        );
        assert_eq!((p.n, p.s.as_str(), p.flag), (7, "x", true));
        assert_eq!(
            parse(&opts(), &args(&["--predict=9"]), &mut p),
            Ok(Parsed::Run)
        );
        assert_eq!(p.n, 9);
        assert_eq!(parse(&opts(), &args(&["-h"]), &mut p), Ok(Parsed::Help));
        assert!(parse(&opts(), &args(&["-n"]), &mut p)
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse(&opts(), &args(&["-n", "x"]), &mut p)
            .unwrap_err()
            .contains("not a valid number"));
        assert!(parse(&opts(), &args(&["--nope"]), &mut p)
            .unwrap_err()
            .contains("invalid argument"));
        assert!(usage("prog", "about", &opts()).contains("--predict N"));
    }
}
