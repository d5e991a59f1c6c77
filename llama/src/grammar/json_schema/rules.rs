//! The rules of a grammar being built, by name (llama.cpp's converter `_rules` and
//! `_add_rule`).

use std::collections::BTreeMap;

use super::literal::sanitize_rule_name;

/// Rules by name, written out in name order (bytewise, as a C++ `std::map`).
#[derive(Clone, Debug)]
pub(crate) struct Rules {
    map: BTreeMap<String, String>,
}

/// The whitespace rule every grammar has.
pub(crate) const SPACE_RULE: &str = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

impl Rules {
    /// Rules with only `space`.
    pub(crate) fn new() -> Self {
        let mut map = BTreeMap::new();
        map.insert("space".to_string(), SPACE_RULE.to_string());
        Rules { map }
    }

    /// Adds `rule` under `name` (sanitised); a name taken by a different body gets
    /// the first free numeric suffix (`name0`, `name1`, ...). Returns the name used.
    pub(crate) fn add(&mut self, name: &str, rule: &str) -> String {
        let esc_name = sanitize_rule_name(name);
        match self.map.get(&esc_name) {
            None => {
                self.map.insert(esc_name.clone(), rule.to_string());
                return esc_name;
            }
            Some(existing) if existing == rule => return esc_name,
            Some(_) => {}
        }
        let mut i = 0u64;
        loop {
            let key = format!("{esc_name}{i}");
            match self.map.get(&key) {
                Some(existing) if existing != rule => i += 1,
                _ => {
                    self.map.insert(key.clone(), rule.to_string());
                    return key;
                }
            }
        }
    }

    /// Whether a rule named `name` exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// The grammar text: `name ::= body` lines in name order.
    pub(crate) fn format(&self) -> String {
        let mut out = String::new();
        for (name, rule) in &self.map {
            out.push_str(name);
            out.push_str(" ::= ");
            out.push_str(rule);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_by_body() {
        let mut r = Rules::new();
        assert_eq!(r.add("a b", "x"), "a-b");
        assert_eq!(r.add("a-b", "x"), "a-b");
        assert_eq!(r.add("a-b", "y"), "a-b0");
        assert_eq!(r.add("a-b", "z"), "a-b1");
        assert_eq!(r.add("a-b", "y"), "a-b0");
    }
}
