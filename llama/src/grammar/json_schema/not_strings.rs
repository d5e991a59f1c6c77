//! A rule for a JSON string that is none of a set of strings (llama.cpp's
//! `_not_strings`), used for the keys of additional properties.

use std::collections::BTreeMap;

#[derive(Default)]
struct Node {
    children: BTreeMap<char, usize>,
    is_end: bool,
}

/// A rule body matching a quoted JSON string other than each of `strings`, built on
/// a trie of their characters: for `["a"]`, `["] ( [a] char+ | [^"a] char* )? ["]`.
/// `char_rule` names the rule of one string character. In strict mode, an error
/// message when a character of the strings cannot stand in a character class as
/// llama.cpp writes it (`]`, `\`, or `-` between other characters).
///
/// The rule compares the key's characters as written: a key spelled with JSON
/// escapes (`"\u0061"` for `"a"`) is not recognised as one of the strings, as in
/// llama.cpp.
pub(crate) fn not_strings(
    strings: &[String],
    char_rule: &str,
    strict: bool,
) -> Result<String, String> {
    let mut nodes = vec![Node::default()];
    for s in strings {
        let mut cur = 0;
        for c in s.chars() {
            cur = match nodes[cur].children.get(&c) {
                Some(&next) => next,
                None => {
                    nodes.push(Node::default());
                    let next = nodes.len() - 1;
                    nodes[cur].children.insert(c, next);
                    next
                }
            };
        }
        nodes[cur].is_end = true;
    }
    if strict {
        for node in &nodes {
            let chars: Vec<char> = node.children.keys().copied().collect();
            for (i, &c) in chars.iter().enumerate() {
                if c == ']' || c == '\\' || (c == '-' && i + 1 < chars.len()) {
                    return Err(format!(
                        "property names with {c:?} beside additional properties are not supported"
                    ));
                }
            }
        }
    }
    let mut out = String::from("[\"] ( ");
    visit(&nodes, 0, char_rule, &mut out);
    out.push_str(" )");
    if !nodes[0].is_end {
        out.push('?');
    }
    out.push_str(" [\"]");
    Ok(out)
}

fn visit(nodes: &[Node], idx: usize, char_rule: &str, out: &mut String) {
    let node = &nodes[idx];
    let mut rejects = String::new();
    for (i, (&c, &child)) in node.children.iter().enumerate() {
        rejects.push(c);
        if i > 0 {
            out.push_str(" | ");
        }
        out.push('[');
        out.push(c);
        out.push(']');
        if !nodes[child].children.is_empty() {
            out.push_str(" (");
            visit(nodes, child, char_rule, out);
            out.push(')');
        } else {
            out.push(' ');
            out.push_str(char_rule);
            out.push('+');
        }
    }
    if !node.children.is_empty() {
        out.push_str(" | [^\"");
        out.push_str(&rejects);
        out.push_str("] ");
        out.push_str(char_rule);
        out.push('*');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_documented_by_llama_cpp() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            not_strings(&s(&["a"]), "char", true).as_deref(),
            Ok("[\"] ( [a] char+ | [^\"a] char* )? [\"]")
        );
        assert_eq!(
            not_strings(&s(&["and", "also"]), "char", true).as_deref(),
            Ok("[\"] ( [a] ([l] ([s] ([o] char+ | [^\"o] char*) | [^\"s] char*) | [n] ([d] char+ | [^\"d] char*) | [^\"ln] char*) | [^\"a] char* )? [\"]")
        );
        assert!(not_strings(&s(&["a-", "ab"]), "char", true).is_err());
        assert!(not_strings(&s(&["a-", "ab"]), "char", false).is_ok());
    }
}
