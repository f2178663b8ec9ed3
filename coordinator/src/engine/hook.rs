//! Claude Code hook events (`karl-agent hooks install`): a `PermissionRequest` is answered
//! through the hook's allow/deny decision — never by keystrokes — by the session's
//! permission policy, the gate judging the exact tool input. When KARL would not answer
//! on its own (policy `escalate`, a destructive action under `approve-safe`, a paused or
//! stopped session) it steps aside: the CLI shows its prompt and the screen path
//! escalates it as before. `impl Session`; no IO.

use std::sync::Arc;

use karl_common::evidence::ToolCall;
use karl_common::gate::{GateContext, Rule};
use karl_common::pb;

use super::machine::{Effect, Session};
use crate::records::{AuditKind, PermissionPolicy, Status};

impl Session {
    pub(super) fn on_hook(&mut self, h: Arc<pb::HookEvent>) {
        self.hooks_expected = true;
        if h.event != "PermissionRequest" || h.hook_request == 0 {
            tracing::debug!(target: "coord.engine", session = %self.rec.id, event = %h.event, "hook event");
            return;
        }
        self.hook_seen_ms = self.now.max(1);
        let call = ToolCall {
            id: String::new(),
            name: h.tool_name.clone(),
            input: h.tool_input.clone(),
        };
        let action = call.command();
        let what = format!("{} {}", h.tool_name, action);
        let decision = if self.rec.status != Status::Running {
            None
        } else {
            match self.rec.permissions {
                PermissionPolicy::Escalate => None,
                PermissionPolicy::Deny => Some(false),
                PermissionPolicy::ApproveSafe => {
                    // A command the gate is in doubt about is left to a human.
                    let v = self.deps.gate.check(&action, &GateContext::default());
                    (!v.has(Rule::Destructive) && v.doubt.is_none()).then_some(true)
                }
            }
        };
        let (answer, detail) = match decision {
            Some(true) => (
                pb::HookDecision::Allow,
                format!(
                    "approved through the PermissionRequest hook by policy {}: {what}",
                    self.rec.permissions.as_str()
                ),
            ),
            Some(false) => (
                pb::HookDecision::Deny,
                format!(
                    "denied through the PermissionRequest hook by policy {}: {what}",
                    self.rec.permissions.as_str()
                ),
            ),
            None => (
                pb::HookDecision::StepAside,
                format!(
                    "the PermissionRequest hook steps aside ({}): the CLI asks on screen: {what}",
                    if self.rec.status != Status::Running {
                        "the session is not running"
                    } else {
                        "the policy wants a human"
                    }
                ),
            ),
        };
        tracing::info!(target: "coord.engine", session = %self.rec.id, %detail, "hook");
        self.out.push(Effect::AnswerHook(pb::HookAnswer {
            hook_request: h.hook_request,
            decision: answer as i32,
            message: if answer == pb::HookDecision::Deny {
                "KARL's permission policy denies this action".into()
            } else {
                String::new()
            },
        }));
        if answer != pb::HookDecision::StepAside {
            self.hook_answered_ms = self.now.max(1);
            self.audit(AuditKind::Permission, &what, detail);
        }
    }
}
