//! A JSON value for a template to read that records what the template read (the
//! capability probe of `super::caps`), and the plain value behind it for printing.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use serde_json::Value as Json;

/// The paths read so far, shared by every wrapper of one probe.
pub(crate) type Log = Arc<Mutex<BTreeSet<String>>>;

/// A JSON list or object that records the path of every element read from it.
#[derive(Debug)]
pub(crate) struct Tracked {
    json: Json,
    path: String,
    log: Log,
}

impl Tracked {
    /// `json` as a template value: a recording wrapper for a list or an object (its
    /// reads go into `log` under `path`), the plain value otherwise.
    pub(crate) fn wrap(json: Json, path: String, log: &Log) -> Value {
        match json {
            Json::Array(_) | Json::Object(_) => Value::from_object(Tracked {
                json,
                path,
                log: log.clone(),
            }),
            other => Value::from(minijinja::value::Serde(&other)),
        }
    }

    fn child(&self, key: &str, json: &Json) -> Value {
        let path = format!("{}.{key}", self.path);
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.clone());
        Tracked::wrap(json.clone(), path, &self.log)
    }
}

impl Object for Tracked {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        match self.json {
            Json::Array(_) => ObjectRepr::Seq,
            _ => ObjectRepr::Map,
        }
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match &self.json {
            Json::Object(m) => {
                let k = key.as_str()?;
                m.get(k).map(|v| self.child(k, v))
            }
            Json::Array(a) => {
                let i = key.as_i64()?;
                let i = if i < 0 { i + a.len() as i64 } else { i };
                let i = usize::try_from(i).ok()?;
                a.get(i).map(|v| self.child(&i.to_string(), v))
            }
            _ => None,
        }
    }

    /// Turning the value into text (`|trim` of a list, `~`) does not count as
    /// reading its elements; llama.cpp's engine does not mark them used either.
    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.json)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match &self.json {
            Json::Array(a) => Enumerator::Seq(a.len()),
            Json::Object(m) => {
                Enumerator::Values(m.keys().map(|k| Value::from(k.as_str())).collect())
            }
            _ => Enumerator::Empty,
        }
    }
}

/// The plain value behind a probe's recording wrapper, so that printing a value
/// does not count as reading it (llama.cpp's printing does not mark values used).
pub(crate) fn untracked(value: &Value) -> Option<Value> {
    value
        .downcast_object_ref::<Tracked>()
        .map(|t| Value::from(minijinja::value::Serde(&t.json)))
}
