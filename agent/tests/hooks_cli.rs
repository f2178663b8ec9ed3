//! `karl-agent hooks install|status|uninstall` on real settings files: a backup before
//! every change, exactly KARL's entry added and removed, bad files refused untouched.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

fn hooks(args: &[&str], settings: &Path, socket: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karl-agent"))
        .arg("hooks")
        .args(args)
        .arg("--settings")
        .arg(settings)
        .arg("--socket")
        .arg(socket)
        .env_remove("KARL_HOOK_SOCKET")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn install_status_uninstall_round_trip_with_backups() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.json");
    let socket = dir.path().join("agent.sock");
    let original = r#"{"permissions":{"defaultMode":"default"},"hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]}}"#;
    std::fs::write(&settings, original).unwrap();

    let out = hooks(&["install", "--claude"], &settings, &socket);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("PermissionRequest hook installed"),
        "{}",
        text(&out)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let cmd = v["hooks"]["PermissionRequest"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        cmd.contains(" hook claude --socket ") && cmd.ends_with("--karl-managed"),
        "{cmd}"
    );
    assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
    let backups = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains("karl-backup")
            })
            .count()
    };
    assert_eq!(backups(dir.path()), 1);

    // Installing again changes nothing and makes no backup.
    let out = hooks(&["install"], &settings, &socket);
    assert!(text(&out).contains("already installed"), "{}", text(&out));
    assert_eq!(backups(dir.path()), 1);

    let out = hooks(&["status"], &settings, &socket);
    assert!(out.status.success());
    assert!(text(&out).contains("PermissionRequest →"), "{}", text(&out));
    assert!(text(&out).contains("not answering"), "{}", text(&out));

    let out = hooks(&["uninstall"], &settings, &socket);
    assert!(
        text(&out).contains("removed 1 KARL hook entry"),
        "{}",
        text(&out)
    );
    let back: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        back,
        serde_json::from_str::<serde_json::Value>(original).unwrap()
    );
    assert_eq!(backups(dir.path()), 2);
}

#[test]
fn bad_settings_are_refused_with_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.json");
    let socket = dir.path().join("agent.sock");
    std::fs::write(&settings, "{ not json").unwrap();
    let out = hooks(&["install"], &settings, &socket);
    assert!(!out.status.success());
    assert!(text(&out).contains("not valid JSON"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{ not json");

    let out = hooks(&["install", "--codex"], &settings, &socket);
    assert!(!out.status.success());
    assert!(text(&out).contains("not valid JSON"), "{}", text(&out));

    // One --settings file cannot be both CLIs'.
    let out = hooks(&["install", "--claude", "--codex"], &settings, &socket);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--settings names one file"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{ not json");

    let out = hooks(&["install"], &settings, Path::new("relative.sock"));
    assert!(!out.status.success());
    assert!(text(&out).contains("absolute path"), "{}", text(&out));

    // A missing settings file is created (no backup: there was nothing to keep).
    let fresh = dir.path().join("new/settings.json");
    let out = hooks(&["install"], &fresh, &socket);
    assert!(out.status.success(), "{}", text(&out));
    assert!(fresh.exists());
}

/// Codex's `hooks.json`: KARL's entry reports as `hook codex`, has no matcher, and the
/// install says how Codex comes to trust it.
#[test]
fn codex_hooks_install_into_hooks_json_and_come_out_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("codex/hooks.json");
    let socket = dir.path().join("agent.sock");
    let out = hooks(&["install", "--codex"], &file, &socket);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("/hooks"), "{}", text(&out));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let group = &v["hooks"]["PermissionRequest"][0];
    assert!(group.get("matcher").is_none(), "{group}");
    let cmd = group["hooks"][0]["command"].as_str().unwrap();
    assert!(cmd.contains(" hook codex --socket "), "{cmd}");
    let out = hooks(&["status", "--codex"], &file, &socket);
    assert!(text(&out).contains("PermissionRequest"), "{}", text(&out));
    let out = hooks(&["uninstall", "--codex"], &file, &socket);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&file).unwrap())
            .unwrap(),
        serde_json::json!({})
    );
}
