//! KARL's entry in a Claude Code `settings.json` or a Codex `hooks.json`, added and removed
//! without touching anything else (pure, over `serde_json::Value`).
//!
//! Both CLIs read hooks as `hooks.<Event>` = a list of `{matcher, hooks: [{type:
//! "command", command, timeout}]}` (Codex 0.169 takes Claude's shape and answers; its
//! matcher is a pattern, so KARL's Codex entry has none and matches every tool). KARL adds one such group per event it handles, whose
//! command carries the marker [`MARKER`]; uninstall removes the hook entries that carry
//! it (and groups or event lists left empty by that), nothing else.

use serde_json::{json, Map, Value};

/// In every command KARL installs; how uninstall and status recognise KARL's entries.
pub const MARKER: &str = "--karl-managed";

/// The hook events KARL installs.
pub const EVENTS: [&str; 1] = ["PermissionRequest"];

/// Seconds Claude Code gives the hook before it gives up on it (the reporter itself
/// steps aside well before).
pub const TIMEOUT_SECS: u64 = 30;

fn is_ours(hook: &Value) -> bool {
    hook.get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| c.contains(MARKER))
}

/// Why a settings file cannot take KARL's hooks.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingsError {
    #[error("the settings are not a JSON object")]
    NotObject,
    #[error("`hooks` in the settings is not a JSON object")]
    HooksNotObject,
    #[error("`hooks.{0}` in the settings is not a list")]
    EventNotList(String),
}

/// Adds KARL's hook (running `command`, for tools matching `matcher` when given) for each
/// of [`EVENTS`], replacing an older KARL entry; returns whether anything changed.
pub fn install(
    settings: &mut Value,
    command: &str,
    matcher: Option<&str>,
) -> Result<bool, SettingsError> {
    let root = settings.as_object_mut().ok_or(SettingsError::NotObject)?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(SettingsError::HooksNotObject)?;
    let mut changed = false;
    for event in EVENTS {
        let list = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| SettingsError::EventNotList(event.to_string()))?;
        let mut wanted = json!({
            "hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_SECS}],
        });
        if let Some(m) = matcher {
            wanted["matcher"] = m.into();
        }
        if list.contains(&wanted) {
            continue;
        }
        remove_ours(list);
        list.push(wanted);
        changed = true;
    }
    Ok(changed)
}

/// Removes KARL's hook entries from one event's list; returns how many.
fn remove_ours(list: &mut Vec<Value>) -> usize {
    let mut removed = 0;
    for group in list.iter_mut() {
        if let Some(hs) = group.get_mut("hooks").and_then(Value::as_array_mut) {
            let before = hs.len();
            hs.retain(|h| !is_ours(h));
            removed += before - hs.len();
        }
    }
    // A group KARL emptied goes too; groups that were empty already stay.
    if removed > 0 {
        list.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|hs| !hs.is_empty())
        });
    }
    removed
}

/// Removes every KARL hook entry; returns how many. Event lists and the `hooks` table
/// left empty by that are removed too.
pub fn uninstall(settings: &mut Value) -> usize {
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else {
        return 0;
    };
    let mut removed = 0;
    let mut emptied = Vec::new();
    for (event, list) in hooks.iter_mut() {
        if let Some(list) = list.as_array_mut() {
            let n = remove_ours(list);
            removed += n;
            if n > 0 && list.is_empty() {
                emptied.push(event.clone());
            }
        }
    }
    for e in emptied {
        hooks.remove(&e);
    }
    if removed > 0 && hooks.is_empty() {
        if let Some(root) = settings.as_object_mut() {
            root.remove("hooks");
        }
    }
    removed
}

/// The events with a KARL hook, and the command each runs.
pub fn installed(settings: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(hooks) = settings.get("hooks").and_then(Value::as_object) {
        for (event, list) in hooks {
            for group in list.as_array().into_iter().flatten() {
                for h in group
                    .get("hooks")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if is_ours(h) {
                        let cmd = h.get("command").and_then(Value::as_str).unwrap_or("");
                        out.push((event.clone(), cmd.to_string()));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CMD: &str =
        "/usr/local/bin/karl-agent hook claude --socket /h/.karl/agent.sock --karl-managed";

    #[test]
    fn install_then_uninstall_leaves_the_settings_as_they_were() {
        let original = json!({
            "permissions": {"defaultMode": "default"},
            "hooks": {
                "PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-own-hook"}]}],
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
            },
            "model": "opus"
        });
        let mut s = original.clone();
        assert_eq!(install(&mut s, CMD, Some("*")), Ok(true));
        assert_eq!(install(&mut s, CMD, Some("*")), Ok(false), "idempotent");
        assert_eq!(
            installed(&s),
            [("PermissionRequest".to_string(), CMD.to_string())]
        );
        assert_eq!(s["hooks"]["PermissionRequest"].as_array().unwrap().len(), 2);
        assert_eq!(
            s["hooks"]["PermissionRequest"][0]["hooks"][0]["command"],
            "my-own-hook"
        );
        assert_eq!(uninstall(&mut s), 1);
        assert_eq!(s, original);
        assert_eq!(uninstall(&mut s), 0);
    }

    #[test]
    fn empty_settings_get_a_hooks_table_and_lose_it_again() {
        let mut s = json!({});
        install(&mut s, CMD, Some("*")).unwrap();
        assert_eq!(
            s["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
            TIMEOUT_SECS
        );
        uninstall(&mut s);
        assert_eq!(s, json!({}));
    }

    #[test]
    fn a_new_command_replaces_the_old_karl_entry() {
        let mut s = json!({});
        install(&mut s, CMD, Some("*")).unwrap();
        let newer = CMD.replace("/usr/local/bin", "/opt/homebrew/bin");
        assert_eq!(install(&mut s, &newer, Some("*")), Ok(true));
        assert_eq!(installed(&s), [("PermissionRequest".to_string(), newer)]);
    }

    /// Codex's `hooks.json` allows only `description` and `hooks` at its root: KARL adds
    /// nothing else, and its entry has no matcher.
    #[test]
    fn a_codex_hooks_file_gets_an_entry_without_a_matcher() {
        let mut s = json!({"description": "team hooks", "hooks": {"Stop": [
            {"hooks": [{"type": "command", "command": "notify-send done"}]}]}});
        let before = s.clone();
        assert_eq!(install(&mut s, CMD, None), Ok(true));
        assert_eq!(
            s["hooks"]["PermissionRequest"],
            json!([{"hooks": [{"type": "command", "command": CMD, "timeout": TIMEOUT_SECS}]}])
        );
        let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["description", "hooks"]);
        assert_eq!(uninstall(&mut s), 1);
        assert_eq!(s, before);
    }

    #[test]
    fn odd_settings_are_refused_not_overwritten() {
        assert_eq!(
            install(&mut json!([]), CMD, None),
            Err(SettingsError::NotObject)
        );
        assert_eq!(
            install(&mut json!({"hooks": 3}), CMD, None),
            Err(SettingsError::HooksNotObject)
        );
        assert_eq!(
            install(&mut json!({"hooks": {"PermissionRequest": {}}}), CMD, None),
            Err(SettingsError::EventNotList("PermissionRequest".into()))
        );
    }
}
