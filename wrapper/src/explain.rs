//! `--print`: the plan as one JSON object, so that what would be exec'd can
//! be read without ambiguity (argv as an array, not a quoted line).
//!
//! The object is written as it is serialized, never built in memory first:
//! `argv` and `sources` have one element per word of the kubelet's argv,
//! `env` and `env_sources` one per variable of the files.

use std::io::Write;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};

use crate::chain::{FileStatus, Plan};

/// Writes the JSON object (pretty-printed, keys sorted) to `out`.
/// `wait_limit` is the `--wait` limit in seconds (0: no wait).
pub fn write(plan: &Plan, wait_limit: u64, out: impl Write) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(out, &Explain { plan, wait_limit })
}

struct Explain<'a> {
    plan: &'a Plan,
    wait_limit: u64,
}

impl Serialize for Explain<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let plan = self.plan;
        let argv = || plan.argv.iter();
        let files: Vec<Value> = plan
            .files
            .iter()
            .map(|f| {
                let status = match f.status {
                    FileStatus::Read => "read",
                    FileStatus::Missing => "missing",
                    FileStatus::Ignored => "ignored",
                };
                json!({ "path": f.path.display().to_string(), "role": f.role, "status": status })
            })
            .collect();
        let waits_for = plan
            .missing_config()
            .filter(|_| self.wait_limit > 0)
            .map(|p| p.display().to_string());

        // In alphabetical order, as the object has always been printed.
        let mut map = s.serialize_map(None)?;
        // Words that are not UTF-8 are shown with U+FFFD for the invalid
        // bytes; `argv_not_utf8` lists their indexes.
        map.serialize_entry("argv", &Lazy(|| argv().map(String::from_utf8_lossy)))?;
        map.serialize_entry(
            "argv_not_utf8",
            &Lazy(|| {
                argv()
                    .enumerate()
                    .filter(|(_, w)| std::str::from_utf8(w).is_err())
                    .map(|(i, _)| i)
            }),
        )?;
        map.serialize_entry(
            "config",
            &plan.config.as_ref().map(|p| p.display().to_string()),
        )?;
        map.serialize_entry(
            "env",
            &LazyMap(|| plan.env.iter().map(|(k, v)| (k, &v.value))),
        )?;
        map.serialize_entry(
            "env_sources",
            &LazyMap(|| plan.env.iter().map(|(k, v)| (k, v.origin.location()))),
        )?;
        map.serialize_entry("family", plan.family.name())?;
        map.serialize_entry("family_source", &plan.family_source)?;
        map.serialize_entry("files", &files)?;
        map.serialize_entry("kubelet", &plan.kubelet.display().to_string())?;
        map.serialize_entry("kubelet_exists", &plan.kubelet.is_file())?;
        map.serialize_entry("kubelet_version", &plan.kubelet_version)?;
        map.serialize_entry("sources", &Lazy(|| plan.argv.sources()))?;
        map.serialize_entry("wait_limit_seconds", &self.wait_limit)?;
        map.serialize_entry("waits_for", &waits_for)?;
        map.serialize_entry("warnings", &plan.warnings)?;
        map.end()
    }
}

/// A JSON array written straight from the iterator that `F` makes, one
/// element at a time.
struct Lazy<F>(F);

impl<F, I> Serialize for Lazy<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// A JSON object written straight from the `(key, value)` pairs that `F`
/// makes, one at a time.
struct LazyMap<F>(F);

impl<F, I, K, V> Serialize for LazyMap<F>
where
    F: Fn() -> I,
    I: Iterator<Item = (K, V)>,
    K: Serialize,
    V: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map((self.0)())
    }
}
