//! `drive --launch`: the command line KARL types to start an agent CLI, with KARL's hook
//! added for that one process. Claude Code gets `--settings FILE`, a file beside the
//! agent's hook socket holding only KARL's `PermissionRequest` hook (Claude Code adds it to
//! the user's own settings, which stay untouched). Other command lines are typed as given:
//! Codex runs a hook only once the user trusts it (`karl-agent hooks install --codex`, then
//! `/hooks`), which no flag KARL could add should decide for them.

use std::path::{Path, PathBuf};

use super::settings;

/// The settings file KARL's launched Claude Code reads, beside the socket.
pub fn settings_path(socket: &Path) -> PathBuf {
    socket.with_file_name("claude-launch-settings.json")
}

/// Whether `cmdline` starts Claude Code: its first word that is not a `NAME=value`
/// assignment (or `env`) is `claude` or a path ending in `/claude`.
pub fn starts_claude(cmdline: &str) -> bool {
    cmdline
        .split_whitespace()
        .find(|w| *w != "env" && !is_assignment(w))
        .is_some_and(|w| w == "claude" || w.ends_with("/claude"))
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// The settings holding only KARL's hook, running `hook_command`.
pub fn launch_settings(hook_command: &str) -> serde_json::Value {
    let mut v = serde_json::json!({});
    // A fresh object always takes the entry.
    let _ = settings::install(&mut v, hook_command, Some("*"));
    v
}

/// The command line to type: `cmdline` with `--settings FILE` when it starts Claude Code
/// (and does not pass its own `--settings`), else `cmdline` unchanged.
pub fn with_settings(cmdline: &str, file: &Path) -> String {
    if !starts_claude(cmdline) || cmdline.split_whitespace().any(|w| w == "--settings") {
        return cmdline.to_string();
    }
    format!(
        "{} --settings {}",
        cmdline.trim_end(),
        super::shell_word(&file.display().to_string())
    )
}

/// Writes the launch settings for `socket` and returns the command line to type. When the
/// file cannot be written the CLI starts without KARL's hook (the screen decides), and the
/// reason is returned with the unchanged command line.
pub fn prepare(cmdline: &str, socket: &Path) -> (String, Option<String>) {
    if !starts_claude(cmdline) {
        return (cmdline.to_string(), None);
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return (
                cmdline.to_string(),
                Some(format!("cannot tell where karl-agent is: {e}")),
            )
        }
    };
    let hook = format!(
        "{} hook claude --socket {} {}",
        super::shell_word(&exe.display().to_string()),
        super::shell_word(&socket.display().to_string()),
        settings::MARKER
    );
    let file = settings_path(socket);
    let text = launch_settings(&hook).to_string();
    let written = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&file, text));
    match written {
        Ok(()) => (with_settings(cmdline, &file), None),
        Err(e) => (
            cmdline.to_string(),
            Some(format!("cannot write {}: {e}", file.display())),
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn claude_command_lines_get_the_settings_file_and_others_do_not() {
        let f = Path::new("/Users/dev/.karl/claude-launch-settings.json");
        assert_eq!(
            with_settings("claude", f),
            "claude --settings /Users/dev/.karl/claude-launch-settings.json"
        );
        assert_eq!(
            with_settings("ANTHROPIC_MODEL=x env FOO=1 /opt/bin/claude --continue ", f),
            "ANTHROPIC_MODEL=x env FOO=1 /opt/bin/claude --continue --settings /Users/dev/.karl/claude-launch-settings.json"
        );
        for other in [
            "codex",
            "claude-monitor",
            "vim claude",
            "claude --settings mine.json",
        ] {
            assert_eq!(with_settings(other, f), other, "{other}");
        }
        assert!(
            !starts_claude("2X=1 claude"),
            "not an assignment: a command named 2X=1"
        );
        let odd = Path::new("/tmp/it's here/s.json");
        assert_eq!(
            with_settings("claude", odd),
            r"claude --settings '/tmp/it'\''s here/s.json'"
        );
    }

    #[test]
    fn the_launch_settings_hold_only_karls_hook() {
        let v = launch_settings("/bin/karl-agent hook claude --socket /s --karl-managed");
        assert_eq!(
            settings::installed(&v),
            [(
                "PermissionRequest".to_string(),
                "/bin/karl-agent hook claude --socket /s --karl-managed".to_string()
            )]
        );
        assert_eq!(v.as_object().unwrap().len(), 1);
    }

    #[test]
    fn prepare_writes_the_file_beside_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let (line, err) = prepare("claude", &socket);
        assert_eq!(err, None);
        let file = dir.path().join("claude-launch-settings.json");
        assert!(line.ends_with(&file.display().to_string()), "{line}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(settings::installed(&v).len(), 1);
        assert_eq!(prepare("codex", &socket), ("codex".to_string(), None));
        let (line, err) = prepare("claude", Path::new("/proc/no/such/agent.sock"));
        assert_eq!(line, "claude");
        assert!(err.unwrap().contains("cannot write"));
    }
}
