//! Claude Code hooks, opt-in: the CLI tells KARL about itself, and KARL answers its
//! permission requests without a keystroke.
//!
//! - [`settings`]: KARL's entry in a Claude Code `settings.json` — added with a backup,
//!   marked (`--karl-managed` in the command) so `uninstall` removes exactly what
//!   `install` added, nothing else touched (pure, over `serde_json::Value`).
//! - [`launch`]: `drive --launch`: Claude Code started with `--settings FILE` holding only
//!   KARL's hook, so nothing global changes.
//! - [`report`]: `karl-agent hook claude --socket PATH`, the command Claude Code runs for
//!   each hook event: reads the event (JSON on stdin), hands it to the local karl-agent
//!   over its unix socket and, for `PermissionRequest`, prints the decision if one comes
//!   within [`report::WAIT`] — otherwise nothing, and the CLI shows its prompt as usual.
//! - [`socket`]: the agent's side of that socket: each event goes to the coordinator
//!   (`AgentEvent.hook`, for watched panes only) and the coordinator's `HookAnswer`
//!   goes back to the waiting hook.
//!
//! The pane is known from the hook's own environment (`TMUX_PANE`, inherited from the
//! CLI). What is not here: deciding (the coordinator's engine does, by the session's
//! permission policy and the gate).

pub mod launch;
pub mod report;
pub mod settings;
pub mod socket;

use std::path::PathBuf;

/// `s` as one shell word (the CLIs run hook commands through a shell; KARL types launch
/// command lines at one).
pub fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The socket the hook reporter talks to: `$HOME/.karl/agent.sock` unless configured.
pub fn default_socket() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".karl/agent.sock"))
}

/// One hook event as the reporter hands it to the agent (one JSON line).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HookMessage {
    /// `%id` of the pane the CLI runs in (`TMUX_PANE`); empty outside tmux.
    pub pane: String,
    /// The event as Claude Code wrote it on the hook's stdin.
    pub event: serde_json::Value,
}

/// The agent's answer to a waiting hook (one JSON line): `decision` is `allow`, `deny`
/// or absent (step aside).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HookReply {
    pub decision: Option<String>,
    #[serde(default)]
    pub message: String,
}

impl HookReply {
    /// What Claude Code reads on the hook's stdout for `PermissionRequest`; `None` when
    /// the hook steps aside (prints nothing).
    pub fn permission_output(&self) -> Option<serde_json::Value> {
        let behavior = match self.decision.as_deref()? {
            "allow" => "allow",
            "deny" => "deny",
            _ => return None,
        };
        let mut decision = serde_json::json!({ "behavior": behavior });
        if behavior == "deny" && !self.message.is_empty() {
            decision["message"] = self.message.clone().into();
        }
        Some(serde_json::json!({
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": decision,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_output_is_claude_s_shape() {
        let allow = HookReply {
            decision: Some("allow".into()),
            message: String::new(),
        };
        assert_eq!(
            allow.permission_output().unwrap_or_default().to_string(),
            r#"{"hookSpecificOutput":{"decision":{"behavior":"allow"},"hookEventName":"PermissionRequest"}}"#
        );
        let deny = HookReply {
            decision: Some("deny".into()),
            message: "policy deny".into(),
        };
        assert_eq!(
            deny.permission_output().unwrap_or_default()["hookSpecificOutput"]["decision"]
                ["message"],
            "policy deny"
        );
        assert_eq!(HookReply::default().permission_output(), None);
    }
}
