//! Rendering a Jinja chat template with `minijinja`, configured to print what
//! llama.cpp's own Jinja engine (`common/jinja/`) prints: `trim_blocks` and
//! `lstrip_blocks` on, one trailing newline of the source dropped, `none` and
//! undefined printed as nothing, booleans as `True`/`False`, and Hugging Face's
//! helpers (`raise_exception`, `strftime_now`, `tojson` with Python's spacing).
//! Python's string, list and dict methods come from `minijinja-contrib`'s
//! `pycompat`. Fuel and a recursion limit make a hostile template fail instead of
//! running away.

use std::fmt::Write as _;
use std::io;

use super::json_text::{to_json_text, JsonStyle};
use super::ChatError;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};

/// Instructions one render may execute before it fails: far more than any real
/// template needs for a long conversation (the templates of llama.cpp's
/// `models/templates/` use under 3,000 for six messages with tools), few enough to
/// stop a runaway loop in about a second.
pub(crate) const FUEL: u64 = 20_000_000;
/// The budget of the short probe renders done once per template (capabilities,
/// reasoning markers), so that a hostile template costs little to set up.
pub(crate) const PROBE_FUEL: u64 = 500_000;
/// Nesting depth (macro calls, includes, nested loops) a render may reach.
const RECURSION_LIMIT: usize = 200;
/// Largest prompt a render may produce.
pub(crate) const MAX_OUTPUT_BYTES: usize = 256 << 20;
/// The name the template is stored under inside the environment.
const TEMPLATE: &str = "chat_template";
/// Prefix marking an error raised by the template itself.
const RAISED: &str = "raise_exception: ";

/// A parsed Jinja chat template, ready to render.
pub(crate) struct JinjaTemplate {
    name: String,
    env: Environment<'static>,
}

impl std::fmt::Debug for JinjaTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JinjaTemplate")
            .field("name", &self.name)
            .finish()
    }
}

impl JinjaTemplate {
    /// Parses `source`; `name` appears in errors. Errors: [`ChatError::TemplateSyntax`]
    /// with the line.
    pub(crate) fn new(name: &str, source: &str) -> Result<Self, ChatError> {
        Self::with_fuel(name, source, FUEL)
    }

    /// As [`JinjaTemplate::new`], allowing `fuel` instructions per render.
    pub(crate) fn with_fuel(name: &str, source: &str, fuel: u64) -> Result<Self, ChatError> {
        let mut env = environment();
        env.set_fuel(Some(fuel));
        env.add_template_owned(TEMPLATE, normalize_source(source))
            .map_err(|e| to_chat_error(name, &e))?;
        Ok(JinjaTemplate {
            name: name.to_string(),
            env,
        })
    }

    /// The name errors use.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Renders with `context` (a map of variables). Errors: [`ChatError::Raised`]
    /// for `raise_exception`, [`ChatError::TemplateRender`] for anything else
    /// (unknown filter, type error, fuel or output size exhausted), with the line.
    pub(crate) fn render(&self, context: &Value) -> Result<String, ChatError> {
        let tmpl = self
            .env
            .get_template(TEMPLATE)
            .map_err(|e| to_chat_error(&self.name, &e))?;
        let mut out = CappedWriter(Vec::new());
        tmpl.render_captured_to(context, &mut out)
            .map_err(|e| to_chat_error(&self.name, &e))?;
        String::from_utf8(out.0).map_err(|_| ChatError::TemplateRender {
            template: self.name.clone(),
            line: None,
            detail: "the template produced invalid UTF-8".into(),
        })
    }
}

/// The source as llama.cpp's lexer sees it: `\r\n` and `\r` made `\n`, and Hugging
/// Face's `{% generation %}` markers (assistant-mask bookkeeping that prints
/// nothing) made into `{% if true %}`/`{% endif %}` so that lines keep their numbers.
fn normalize_source(source: &str) -> String {
    let mut s = rewrite_list_mutations(&source.replace("\r\n", "\n").replace('\r', "\n"));
    for (from, to) in [("endgeneration", "endif"), ("generation", "if true")] {
        for open in ["{%", "{%-"] {
            for pad in ["", " "] {
                for close in ["%}", "-%}"] {
                    let pat = format!("{open}{pad}{from}{pad}{close}");
                    if s.contains(&pat) {
                        s = s.replace(&pat, &format!("{open} {to} {close}"));
                    }
                }
            }
        }
    }
    s
}

/// minijinja's lists are values, not shared objects, so `list.append(x)` and
/// `list.pop(i)` (which llama.cpp's engine and Python mutate in place) cannot work
/// as calls. On a namespace attribute, the one place a mutation is visible outside
/// the current scope, the statements that use them are rewritten into assignments
/// with the same effect:
/// `{% set _ = ns.a.append(x) %}` → `{% set ns.a = ns.a + [x] %}` and
/// `{% set v = ns.a.pop(i) %}` → `{% set v = ns.a[i] %}{% set ns.a = ns.a[:i] + ns.a[i+1:] %}`
/// (`pop()` takes the last item). Other statements are left alone.
fn rewrite_list_mutations(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(open) = rest.find("{%") {
        // The closing "%}" is searched after the opening "{%" ("{%}" is not a tag).
        let Some(len) = rest[open + 2..].find("%}").map(|l| l + 2) else {
            break;
        };
        let tag = &rest[open..open + len + 2];
        out.push_str(&rest[..open]);
        out.push_str(&rewrite_tag(tag).unwrap_or_else(|| tag.to_string()));
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    out
}

/// The rewrite of one `{% set v = ns.attr.append(..) / .pop(..) %}` tag, if it is one.
fn rewrite_tag(tag: &str) -> Option<String> {
    let inner = &tag[2..tag.len() - 2];
    let (left, inner) = match inner.strip_prefix('-') {
        Some(i) => ("{%-", i),
        None => ("{%", inner),
    };
    let (inner, right) = match inner.strip_suffix('-') {
        Some(i) => (i, "-%}"),
        None => (inner, "%}"),
    };
    let stmt = inner.trim().strip_prefix("set ")?.trim();
    let (var, expr) = stmt.split_once('=')?;
    let var = var.trim();
    let expr = expr.trim().strip_suffix(')')?;
    let is_ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    if !is_ident(var) {
        return None;
    }
    let (target, arg) = if let Some((t, a)) = expr.split_once(".append(") {
        (t.trim(), Some(("append", a.trim())))
    } else if let Some((t, a)) = expr.split_once(".pop(") {
        (t.trim(), Some(("pop", a.trim())))
    } else {
        (expr, None)
    };
    let (method, arg) = arg?;
    let (ns, attr) = target.split_once('.')?;
    if !is_ident(ns) || !is_ident(attr) {
        return None;
    }
    Some(match method {
        "append" => format!("{left} set {target} = {target} + [{arg}] {right}"),
        _ if arg.is_empty() => format!(
            "{left} set {var} = {target}[-1] %}}{{% set {target} = {target}[:-1] {right}"
        ),
        _ => format!(
            "{left} set {var} = {target}[{arg}] %}}{{% set {target} = {target}[:{arg}] + {target}[({arg}) + 1:] {right}"
        ),
    })
}

struct CappedWriter(Vec<u8>);

impl io::Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.len() + buf.len() > MAX_OUTPUT_BYTES {
            return Err(io::Error::other(format!(
                "the template's output exceeds {} MiB",
                MAX_OUTPUT_BYTES >> 20
            )));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn to_chat_error(name: &str, e: &Error) -> ChatError {
    let template = name.to_string();
    let line = e.line();
    // The innermost cause says what happened; the outer ones only where.
    let mut detail = e
        .detail()
        .map(str::to_string)
        .unwrap_or_else(|| e.kind().to_string());
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(inner) = s.downcast_ref::<Error>() {
            if let Some(d) = inner.detail() {
                detail = d.to_string();
            }
        } else {
            detail = s.to_string();
        }
        source = s.source();
    }
    if let Some(msg) = detail.strip_prefix(RAISED) {
        return ChatError::Raised {
            template,
            line,
            message: msg.to_string(),
        };
    }
    match e.kind() {
        ErrorKind::SyntaxError | ErrorKind::BadEscape => ChatError::TemplateSyntax {
            template,
            line: line.unwrap_or(0),
            detail,
        },
        _ => ChatError::TemplateRender {
            template,
            line,
            detail,
        },
    }
}

/// The environment every chat template renders in.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()
    {
        env.set_syntax(syntax);
    }
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env.set_recursion_limit(RECURSION_LIMIT);
    env.set_formatter(format_value);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter("tojson", tojson);
    env.add_filter("string", to_string_filter);
    env.add_filter("safe", to_string_filter);
    env.add_filter("indent", indent);
    env
}

/// `indent(width=4, first=False, blank=False)` as llama.cpp's engine (and Jinja2)
/// do it: every line but the first (unless `first`) and blank ones (unless `blank`)
/// prefixed, a trailing newline kept. `width` may be a number or a string.
fn indent(
    value: &str,
    width: Option<Value>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let width = kwargs.get::<Option<Value>>("width")?.or(width);
    let first = kwargs
        .get::<Option<bool>>("first")?
        .or(first)
        .unwrap_or(false);
    let blank = kwargs
        .get::<Option<bool>>("blank")?
        .or(blank)
        .unwrap_or(false);
    kwargs.assert_all_used()?;
    let prefix = match &width {
        Some(w) if w.is_integer() => " ".repeat(w.as_i64().unwrap_or(0).clamp(0, 1 << 16) as usize),
        Some(w) if w.as_str().is_some() => w.as_str().unwrap_or("").to_string(),
        _ => "    ".to_string(),
    };
    // Line by line as C++'s getline splits (no empty piece after a final newline),
    // with llama.cpp's test of "first" as "nothing written yet".
    let mut lines: Vec<&str> = value.split('\n').collect();
    if value.is_empty() || value.ends_with('\n') {
        lines.pop();
    }
    let mut out = String::new();
    for line in lines {
        let at_start = out.is_empty();
        if !at_start {
            out.push('\n');
        }
        if if at_start {
            first
        } else {
            !line.is_empty() || blank
        } {
            out.push_str(&prefix);
        }
        out.push_str(line);
    }
    if value.ends_with('\n') {
        out.push('\n');
        if blank {
            out.push_str(&prefix);
        }
    }
    Ok(out)
}

fn raise_exception(msg: Value) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{RAISED}{}",
            msg.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| msg.to_string())
        ),
    ))
}

fn strftime_now(format: &str) -> Result<String, Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    super::time::strftime(format, now).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
}

/// How llama.cpp prints a value in `{{ }}`: strings as they are, integers in
/// decimal, floats as C's `%f` without trailing zeros, booleans as `True`/`False`,
/// lists as their items one after the other, and nothing for `none`, undefined,
/// maps and other objects.
fn format_value(
    out: &mut minijinja::Output,
    _state: &mut State,
    value: &Value,
) -> Result<(), Error> {
    let mut s = String::new();
    print_into(&mut s, value);
    out.write_str(&s).map_err(Error::from)
}

fn print_into(s: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::String => s.push_str(value.as_str().unwrap_or("")),
        ValueKind::Bool => s.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => s.push_str(&number_text(value)),
        ValueKind::Seq => {
            if let Some(plain) = super::tracked::untracked(value) {
                return print_into(s, &plain);
            }
            if let Ok(items) = value.try_iter() {
                for item in items {
                    print_into(s, &item);
                }
            }
        }
        _ => {}
    }
}

/// A number as llama.cpp prints it: integers in decimal, floats as `%f` with the
/// trailing zeros removed (one kept after the point).
fn number_text(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(f) if f.is_finite() => {
            let mut t = format!("{f:.6}");
            while t.ends_with('0') {
                t.pop();
            }
            if t.ends_with('.') {
                t.push('0');
            }
            t
        }
        Ok(f) => {
            let mut t = String::new();
            let _ = write!(t, "{f}");
            t.to_lowercase()
        }
        Err(_) => value.to_string(),
    }
}

/// `tojson(value, ensure_ascii=False, indent=None, separators=None)` as llama.cpp
/// writes it: `", "` and `": "` between items without an indent, `","` with one,
/// non-ASCII kept unless `ensure_ascii`, floats as C++ streams print them.
fn tojson(
    value: Value,
    ensure_ascii: Option<Value>,
    indent: Option<Value>,
    separators: Option<Value>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let ensure_ascii = kwargs
        .get::<Option<Value>>("ensure_ascii")?
        .or(ensure_ascii)
        .is_some_and(|v| v.is_true());
    let indent = kwargs.get::<Option<Value>>("indent")?.or(indent);
    let separators = kwargs.get::<Option<Value>>("separators")?.or(separators);
    if kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: sort_keys=true is not supported (llama.cpp does not implement it)",
        ));
    }
    kwargs.assert_all_used()?;
    let indent = indent.and_then(|v| v.as_i64());
    let seps: Vec<String> = separators
        .filter(|v| v.kind() == ValueKind::Seq)
        .and_then(|v| v.try_iter().ok())
        .map(|it| it.map(|x| x.as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default();
    let style = JsonStyle {
        indent: indent.map(|i| i.max(0) as usize),
        item_sep: seps
            .first()
            .cloned()
            .unwrap_or_else(|| if indent.is_none() { ", " } else { "," }.to_string()),
        key_sep: seps.get(1).cloned().unwrap_or_else(|| ": ".to_string()),
        ensure_ascii,
    };
    to_json_text(&value, &style)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))
}

/// `|string` and `|safe`: llama.cpp gives lists and maps as JSON, other values as
/// they print.
fn to_string_filter(value: Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Map | ValueKind::Number => Ok(Value::from(
            to_json_text(&value, &JsonStyle::python())
                .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("string: {e}")))?,
        )),
        ValueKind::String => Ok(value),
        ValueKind::Bool => Ok(Value::from(if value.is_true() { "True" } else { "False" })),
        ValueKind::None | ValueKind::Undefined => Ok(Value::from("None")),
        _ => Ok(Value::from(value.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    fn render(src: &str) -> String {
        JinjaTemplate::new("t", src)
            .unwrap()
            .render(&context! {})
            .unwrap()
    }

    #[test]
    fn list_mutations_on_namespaces() {
        assert_eq!(
            rewrite_tag("{%- set _ = q.ids.append(x) -%}").as_deref(),
            Some("{%- set q.ids = q.ids + [x] -%}")
        );
        assert_eq!(rewrite_tag("{% set _ = ids.append(x) %}"), None);
        assert_eq!(rewrite_list_mutations("a{%}b{%-%}c"), "a{%}b{%-%}c");
        let src = "{%- set q = namespace(ids=[]) -%}{%- for i in range(3) -%}\
                   {%- set _ = q.ids.append(i * 10) -%}{%- endfor -%}\
                   {%- set a = q.ids.pop(0) -%}{%- set b = q.ids.pop() -%}\
                   {{ a }},{{ b }},{{ q.ids|length }}";
        assert_eq!(render(src), "0,20,1");
    }

    #[test]
    fn prints_as_llama_cpp() {
        assert_eq!(
            render("{{ none }}|{{ true }}|{{ 1.5 }}|{{ 2.0 }}|{{ [1, 'a'] }}|{{ {'k': 1} }}"),
            "|True|1.5|2.0|1a|"
        );
        assert_eq!(render("{{ {'a': [1, 2.5]}|tojson }}"), r#"{"a": [1, 2.5]}"#);
        assert_eq!(
            render("{{ {'a': 1}|tojson(indent=2) }}"),
            "{\n  \"a\": 1\n}"
        );
        assert_eq!(render("{{ 'é'|tojson(ensure_ascii=True) }}"), r#""\u00e9""#);
        assert_eq!(render("{{ [1, 2]|string }}"), "[1, 2]");
        assert_eq!(
            render(
                "{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"
            ),
            "012"
        );
        assert_eq!(render("a\n{% if true %}\n  b\n{% endif %}\n"), "a\n  b\n");
        assert_eq!(render("[{{ '{\\n'|indent(4, first=true) }}]"), "[    {\n]");
        assert_eq!(render("[{{ 'a\\n\\nb'|indent(2) }}]"), "[a\n\n  b]");
        assert_eq!(
            render("[{{ 'a\\nb\\n'|indent('> ', blank=true) }}]"),
            "[a\n> b\n> ]"
        );
        assert_eq!(
            render("{{ ' x '.strip() }}{{ 'a,b'.split(',')|length }}{{ 'ab'.upper() }}"),
            "x2AB"
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = JinjaTemplate::new("t", "ok\n{% if x %}").unwrap_err();
        assert!(
            matches!(e, ChatError::TemplateSyntax { line: 2, .. }),
            "{e:?}"
        );
        let e = JinjaTemplate::new("t", "a\nb\n{{ raise_exception('nope') }}")
            .unwrap()
            .render(&context! {})
            .unwrap_err();
        assert_eq!(
            e,
            ChatError::Raised {
                template: "t".into(),
                line: Some(3),
                message: "nope".into()
            }
        );
        let e = JinjaTemplate::new(
            "t",
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        )
        .unwrap()
        .render(&context! {})
        .unwrap_err();
        assert!(matches!(e, ChatError::TemplateRender { .. }), "{e:?}");
    }
}
