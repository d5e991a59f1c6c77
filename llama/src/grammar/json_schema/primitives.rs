//! The built-in rules of the converter (llama.cpp's `PRIMITIVE_RULES` and
//! `STRING_FORMAT_RULES`).

/// A built-in rule: its body and the built-in rules it uses.
pub(crate) struct BuiltinRule {
    pub content: &'static str,
    pub deps: &'static [&'static str],
}

const fn rule(content: &'static str, deps: &'static [&'static str]) -> BuiltinRule {
    BuiltinRule { content, deps }
}

/// The JSON value rules, by name.
const PRIMITIVE_RULES: &[(&str, BuiltinRule)] = &[
    ("boolean", rule(r#"("true" | "false")"#, &[])),
    ("decimal-part", rule("[0-9]{1,16}", &[])),
    ("integral-part", rule("[0] | [1-9] [0-9]{0,15}", &[])),
    (
        "number",
        rule(
            r#"("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?"#,
            &["integral-part", "decimal-part"],
        ),
    ),
    (
        "integer",
        rule(r#"("-"? integral-part)"#, &["integral-part"]),
    ),
    (
        "value",
        rule(
            "object | array | string | number | boolean | null",
            &["object", "array", "string", "number", "boolean", "null"],
        ),
    ),
    (
        "object",
        rule(
            r#""{" space ( string ":" space value ("," space string ":" space value)* )? space "}""#,
            &["string", "value"],
        ),
    ),
    (
        "array",
        rule(
            r#""[" space ( value ("," space value)* )? space "]""#,
            &["value"],
        ),
    ),
    (
        "uuid",
        rule(
            r#""\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"""#,
            &[],
        ),
    ),
    (
        "char",
        rule(
            r#"[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})"#,
            &[],
        ),
    ),
    ("string", rule(r#""\"" char* "\"""#, &["char"])),
    ("null", rule(r#""null""#, &[])),
];

/// The string format rules, by name.
const STRING_FORMAT_RULES: &[(&str, BuiltinRule)] = &[
    (
        "date",
        rule(
            r#"[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )"#,
            &[],
        ),
    ),
    (
        "time",
        rule(
            r#"([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )"#,
            &[],
        ),
    ),
    ("date-time", rule(r#"date "T" time"#, &["date", "time"])),
    ("date-string", rule(r#""\"" date "\"""#, &["date"])),
    ("time-string", rule(r#""\"" time "\"""#, &["time"])),
    (
        "date-time-string",
        rule(r#""\"" date-time "\"""#, &["date-time"]),
    ),
];

/// The `date` rule of strict mode: a calendar date, not llama.cpp's any month with
/// days 01-31 (which lets `2222-02-30` through although the schema's `format: date`
/// refuses it). 30-day months end at 30, February at 28, and February 29 only in leap
/// years (divisible by 4, and by 400 at a century).
pub(crate) const STRICT_DATE: BuiltinRule = rule(
    concat!(
        r#"[0-9]{4} "-" ( ( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )"#,
        r#" | ( "04" | "06" | "09" | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" )"#,
        r#" | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )"#,
        r#" | ( [0-9] [0-9] ( [02468] [48] | [13579] [26] | [2468] "0" ) | ( [02468] [048] | [13579] [26] ) "00" ) "-02-29""#,
    ),
    &[],
);

/// The JSON value rule named `name` (`string`, `value`, ...), if there is one.
pub(crate) fn primitive(name: &str) -> Option<&'static BuiltinRule> {
    PRIMITIVE_RULES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| r)
}

/// The built-in rule named `name`, a JSON value rule or a string format rule.
pub(crate) fn builtin(name: &str) -> Option<&'static BuiltinRule> {
    primitive(name).or_else(|| {
        STRING_FORMAT_RULES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| r)
    })
}

/// Names a schema's rule may not take as they are (`root` and the built-ins).
pub(crate) fn is_reserved_name(name: &str) -> bool {
    name == "root" || builtin(name).is_some()
}
