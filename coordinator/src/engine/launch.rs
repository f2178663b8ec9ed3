//! `drive --launch CMD`: KARL starts the agent CLI itself. On the first snapshot that shows
//! a plain shell, the command is typed at the prompt (`Effect::Launch`: karl-agent adds
//! KARL's hooks for this process only); the session then waits, without typing anything,
//! until an agent CLI shows in the pane, and escalates when none does within
//! [`LAUNCH_TIMEOUT_MS`]. A pane that already runs an agent CLI is driven as it is. The
//! command also restarts the CLI if it exits. `impl Session`; no IO.

use karl_common::detect::{AgentKind, Detection};
use karl_common::pb;

use super::machine::{Effect, Flow, Session};
use crate::records::{AuditKind, Status};

/// How long a launched CLI may take to show itself.
pub const LAUNCH_TIMEOUT_MS: u64 = 60_000;
/// How often the pane is looked at while the CLI starts.
const LAUNCH_RECHECK_MS: u64 = 1_000;

impl Session {
    /// The launch's part in a snapshot: `true` when it handled the snapshot (typed the
    /// command, or waits for the CLI), `false` when the session decides as usual.
    pub(super) fn launch_step(&mut self, d: &Detection) -> bool {
        if self.rec.launch.is_empty() {
            return false;
        }
        let now = self.now;
        if self.rec.launched_ms == 0 {
            let cmd = self.rec.launch.clone();
            match d.agent {
                AgentKind::Shell if self.rec.dry_run => {
                    self.rec.launched_ms = now;
                    self.audit(
                        AuditKind::DryRun,
                        &cmd,
                        "dry run: would launch the agent CLI here".into(),
                    );
                    self.set_status(
                        Status::Escalated,
                        "dry run: the pane shows a shell; start the CLI to see what KARL would type"
                            .into(),
                        false,
                    );
                }
                AgentKind::Shell => self.call(Effect::Launch(cmd.clone()), Flow::Launching(cmd)),
                AgentKind::Unknown => {
                    // Not a shell prompt KARL can tell: never type a command line blind.
                    if self.rec.unknown_since_ms != 0
                        && now.saturating_sub(self.rec.unknown_since_ms) > LAUNCH_TIMEOUT_MS
                    {
                        self.set_status(
                            Status::Escalated,
                            "--launch needs a shell prompt in the pane; the screen is not one KARL knows"
                                .into(),
                            false,
                        );
                    } else {
                        self.recheck_at_ms = now + LAUNCH_RECHECK_MS;
                        self.save(false);
                    }
                }
                agent => {
                    self.rec.launched_ms = now;
                    self.audit(
                        AuditKind::Restart,
                        &cmd,
                        format!("{} already runs in the pane; not launched", agent.as_str()),
                    );
                    return false;
                }
            }
            return true;
        }
        // Launched: wait for the CLI to show itself.
        let started = self
            .rec
            .driven_agent
            .is_some_and(|a| !matches!(a, AgentKind::Shell | AgentKind::Unknown));
        if started {
            return false;
        }
        if now.saturating_sub(self.rec.launched_ms) > LAUNCH_TIMEOUT_MS {
            self.set_status(
                Status::Escalated,
                format!(
                    "`{}` started no agent CLI within {} s; the pane shows {}",
                    self.rec.launch,
                    LAUNCH_TIMEOUT_MS / 1000,
                    d.state
                ),
                false,
            );
        } else {
            self.recheck_at_ms = now + LAUNCH_RECHECK_MS;
            self.save(false);
        }
        true
    }

    /// The launch command was typed (or not).
    pub(super) fn launched(&mut self, cmd: &str, r: Result<pb::InjectResult, String>) {
        let (status, reason) = match &r {
            Ok(i) => {
                self.rec.typed_at_seq = self.rec.typed_at_seq.max(i.snapshot_seq);
                super::inject_status(i)
            }
            Err(e) => (crate::records::InjectStatus::Failed, e.clone()),
        };
        let label = status.label(&reason);
        self.audit(
            AuditKind::Restart,
            cmd,
            format!("launched the agent CLI ({label})"),
        );
        if status.landed() {
            // A launched Claude Code runs KARL's hook (`--settings`).
            self.hooks_expected = true;
            self.rec.launched_ms = self.now;
            self.recheck_at_ms = self.now + LAUNCH_RECHECK_MS;
            self.rec.driven_agent = None;
            self.rec.agent_processes.clear();
            self.set_status(
                Status::Running,
                "launched the agent CLI; waiting for it to start".into(),
                false,
            );
        } else {
            self.set_status(
                Status::Escalated,
                format!("could not launch the agent CLI: {label}"),
                false,
            );
        }
    }
}
