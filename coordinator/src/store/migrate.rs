//! Store migrations, one schema version at a time, on the records' JSON.
//! (v2 → v3 rewrites nothing; see `Store`'s module doc.)
//!
//! v1 → v2: the enums. Sessions: `driven_agent` and `last_source` `""` → null, an empty
//! `last_state` or `agent_kind` → `unknown`. Turns: `inject` `"refused: why"` →
//! `"refused"` with `reason: "why"` (likewise `failed`), an empty `outcome` → `pending`,
//! `source` → `model`, `state` → `unknown`. Audit kinds keep their names; an unknown kind
//! becomes `session` with the old kind kept in the detail. Every step is idempotent (a
//! v2 record passes through unchanged), so a crash mid-migration is repaired by the next
//! open: the version is written only after the last record.

use serde_json::{Map, Value};

use super::{from_json, to_json, Result, StoreError};

/// Migrates `db` from schema `from` to the current one.
pub(super) fn run(db: &sled::Db, from: u32) -> Result<()> {
    if from < 2 {
        rewrite(db, "sessions", session_v2)?;
        rewrite(db, "turns", turn_v2)?;
        rewrite(db, "audit", audit_v2)?;
    }
    // v2 → v3 changes no record: v3 only adds compressed values, which are written from
    // now on and read beside plain ones.
    Ok(())
}

fn rewrite(db: &sled::Db, tree: &'static str, f: fn(&mut Map<String, Value>)) -> Result<()> {
    let t = db.open_tree(tree)?;
    for row in t.iter() {
        let (k, v) = row?;
        let mut value: Value = from_json(tree, &v)?;
        let Some(obj) = value.as_object_mut() else {
            return Err(StoreError::Corrupt {
                tree,
                message: "a record is not a JSON object".into(),
            });
        };
        f(obj);
        // Written as every record is: large ones compressed.
        t.insert(k, to_json(&value))?;
    }
    Ok(())
}

fn text<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Sets `key` to `to` when it holds an empty string.
fn empty_to(o: &mut Map<String, Value>, key: &str, to: Value) {
    if o.get(key).and_then(Value::as_str) == Some("") {
        o.insert(key.into(), to);
    }
}

fn session_v2(o: &mut Map<String, Value>) {
    empty_to(o, "driven_agent", Value::Null);
    empty_to(o, "last_source", Value::Null);
    empty_to(o, "last_state", "unknown".into());
    empty_to(o, "agent_kind", "unknown".into());
}

const INJECT_STATUSES: [&str; 7] = [
    "pending",
    "dry-run",
    "submitted",
    "submitted-after-retry",
    "refused",
    "failed",
    "unconfirmed",
];

pub(super) fn turn_v2(o: &mut Map<String, Value>) {
    let inject = text(o, "inject").to_string();
    if !INJECT_STATUSES.contains(&inject.as_str()) {
        let (status, why) = match inject.split_once(':') {
            Some((s, why)) if s == "refused" || s == "failed" => (s.to_string(), why.trim()),
            _ => ("failed".to_string(), inject.as_str()),
        };
        if text(o, "reason").is_empty() {
            o.insert("reason".into(), why.into());
        }
        o.insert("inject".into(), status.into());
    }
    empty_to(o, "outcome", "pending".into());
    empty_to(o, "source", "model".into());
    empty_to(o, "state", "unknown".into());
}

const AUDIT_KINDS: [&str; 12] = [
    "session",
    "intent",
    "dry-run",
    "inject",
    "refused",
    "blocked",
    "forced",
    "failed",
    "permission",
    "escalated",
    "enter",
    "restart",
];

fn audit_v2(o: &mut Map<String, Value>) {
    let kind = text(o, "kind").to_string();
    if !AUDIT_KINDS.contains(&kind.as_str()) {
        let detail = format!("[{kind}] {}", text(o, "detail"));
        o.insert("detail".into(), detail.into());
        o.insert("kind".into(), "session".into());
    }
}
