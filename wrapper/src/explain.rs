//! `--print`: the plan as one JSON object, so that what would be exec'd can
//! be read without ambiguity (argv as an array, not a quoted line).

use serde_json::{json, Map, Value};

use crate::chain::{FileStatus, Plan};

/// `wait_limit` is the `--wait` limit in seconds (0: no wait).
pub fn to_json(plan: &Plan, wait_limit: u64) -> Value {
    let env: Map<String, Value> = plan
        .env
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.value)))
        .collect();
    let env_sources: Map<String, Value> = plan
        .env
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.origin.location())))
        .collect();
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
        .filter(|_| wait_limit > 0)
        .map(|p| p.display().to_string());
    json!({
        "argv": plan.argv.iter().map(|a| &a.value).collect::<Vec<_>>(),
        "sources": plan.argv.iter().map(|a| &a.source).collect::<Vec<_>>(),
        "env": env,
        "env_sources": env_sources,
        "files": files,
        "family": plan.family.name(),
        "family_source": plan.family_source,
        "kubelet": plan.kubelet.display().to_string(),
        "kubelet_version": plan.kubelet_version,
        "kubelet_exists": plan.kubelet.is_file(),
        "config": plan.config.as_ref().map(|p| p.display().to_string()),
        "waits_for": waits_for,
        "wait_limit_seconds": wait_limit,
        "warnings": plan.warnings,
    })
}
