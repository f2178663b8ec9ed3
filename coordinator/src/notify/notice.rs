//! What a human should hear of (pure): a notice from the difference between two versions
//! of a session's record ([`on_change`]) and from agents that stay away ([`LostWatch`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use karl_common::detect::PaneState;

use crate::records::{SessionRecord, Status};

/// The moments a notification is sent for; sinks filter on these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A session needs a human (dialog, stuck, exited, the gate's last word).
    Escalated,
    /// A permission prompt waits for a human under the `escalate` policy.
    Permission,
    /// The agent CLI hit its usage limit; the session waits for the reset.
    UsageLimit,
    Done,
    Failed,
    /// An agent has been disconnected for longer than `agent_lost_secs`.
    AgentLost,
    /// `karl-ctl notify test`: never filtered out.
    Test,
}

impl NoticeKind {
    /// Every kind a sink can ask for (`events = [...]`), in the order they are listed.
    pub const FILTERABLE: [NoticeKind; 6] = [
        NoticeKind::Escalated,
        NoticeKind::Permission,
        NoticeKind::UsageLimit,
        NoticeKind::Done,
        NoticeKind::Failed,
        NoticeKind::AgentLost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Escalated => "escalated",
            NoticeKind::Permission => "permission",
            NoticeKind::UsageLimit => "usage_limit",
            NoticeKind::Done => "done",
            NoticeKind::Failed => "failed",
            NoticeKind::AgentLost => "agent_lost",
            NoticeKind::Test => "test",
        }
    }

    /// Needs a human now: ntfy's high priority, a loud title.
    pub fn urgent(self) -> bool {
        matches!(
            self,
            NoticeKind::Escalated | NoticeKind::Permission | NoticeKind::AgentLost
        )
    }
}

/// One notification, the same for every sink (each shapes its own payload from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub kind: NoticeKind,
    /// The session's id; empty for an agent lost or a test.
    pub session: String,
    pub machine: String,
    /// The pane as the operator named it (`agent-codex:1.1`); empty when not about one.
    pub pane: String,
    pub title: String,
    pub text: String,
    pub unix_ms: u64,
}

impl Notice {
    /// `mac2 agent-codex:1.1`, or the machine alone.
    pub fn place(&self) -> String {
        if self.pane.is_empty() {
            self.machine.clone()
        } else {
            format!("{} {}", self.machine, self.pane)
        }
    }

    /// What `karl-ctl notify test` sends.
    pub fn test(machine: &str, unix_ms: u64) -> Notice {
        Notice {
            kind: NoticeKind::Test,
            session: String::new(),
            machine: machine.to_string(),
            pane: String::new(),
            title: "KARL: test notification".into(),
            text: "If you can read this, KARL can reach you here.".into(),
            unix_ms,
        }
    }
}

/// The notice a record change calls for, if any: entering escalated (or escalated anew for
/// another reason, or for a new permission prompt), a permission waiting under `escalate`,
/// reaching a usage limit, ending done or failed. Stopping (an operator's own act) and
/// pausing call for none.
pub fn on_change(before: &SessionRecord, after: &SessionRecord, now_ms: u64) -> Option<Notice> {
    if before.id != after.id {
        return None;
    }
    let make = |kind: NoticeKind, what: &str, text: String| Notice {
        kind,
        session: after.id.clone(),
        machine: after.machine.clone(),
        pane: after.target.clone(),
        title: format!("KARL: {what} — {}", project(after)),
        text,
        unix_ms: now_ms,
    };
    let entered = after.status != before.status;
    let new_prompt = after.pending_permission.is_some() && before.pending_permission.is_none();
    match after.status {
        Status::Escalated if entered || after.reason != before.reason || new_prompt => {
            return Some(match &after.pending_permission {
                Some(p) => {
                    let asks = format!("{} {}", p.tool, p.action).trim().to_string();
                    let asks = if asks.is_empty() {
                        "a permission prompt".to_string()
                    } else {
                        asks
                    };
                    let why = if after.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", after.reason)
                    };
                    make(
                        NoticeKind::Permission,
                        "permission waiting",
                        format!(
                            "{asks}{why} — answer with karl-ctl approve|deny {}",
                            after.id
                        ),
                    )
                }
                None => make(NoticeKind::Escalated, "needs you", after.reason.clone()),
            });
        }
        Status::Done if entered => {
            return Some(make(NoticeKind::Done, "done", ended(after)));
        }
        Status::Failed if entered => {
            return Some(make(NoticeKind::Failed, "failed", ended(after)));
        }
        _ => {}
    }
    if after.last_state == PaneState::Limited && before.last_state != PaneState::Limited {
        let text = if after.reason.is_empty() {
            "usage limit reached; the session waits for the reset".to_string()
        } else {
            after.reason.clone()
        };
        return Some(make(NoticeKind::UsageLimit, "usage limit", text));
    }
    None
}

fn project(r: &SessionRecord) -> String {
    if r.project.is_empty() {
        format!("{} {}", r.machine, r.target)
    } else {
        r.project.clone()
    }
}

/// `reason — turns 4 of 40, tasks 2/3`.
fn ended(r: &SessionRecord) -> String {
    let reason = if r.reason.is_empty() { "-" } else { &r.reason };
    format!(
        "{reason} — turns {} of {}, tasks done {}/{}",
        r.turns,
        r.max_turns,
        r.tasks.done_count(),
        r.tasks.tasks.len()
    )
}

/// Agents that went away, and which of them have stayed away long enough to tell someone.
/// Fed connect and disconnect moments; [`LostWatch::due`] yields each absence once.
#[derive(Debug, Default)]
pub struct LostWatch {
    /// Machine → when it disconnected, and whether it was reported.
    gone: BTreeMap<String, (u64, bool)>,
}

impl LostWatch {
    pub fn disconnected(&mut self, machine: &str, now_ms: u64) {
        self.gone
            .entry(machine.to_string())
            .or_insert((now_ms, false));
    }

    pub fn connected(&mut self, machine: &str) {
        self.gone.remove(machine);
    }

    /// The machines counted as gone.
    pub fn machines(&self) -> Vec<String> {
        self.gone.keys().cloned().collect()
    }

    /// Machines away for at least `after_ms` and not yet reported, with how long (ms).
    pub fn due(&mut self, now_ms: u64, after_ms: u64) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (machine, (since, told)) in self.gone.iter_mut() {
            let away = now_ms.saturating_sub(*since);
            if !*told && away >= after_ms {
                *told = true;
                out.push((machine.clone(), away));
            }
        }
        out
    }
}

/// The notice for an agent away `away_ms`, with the live sessions that wait on it.
pub fn agent_lost(machine: &str, away_ms: u64, sessions: &[String], now_ms: u64) -> Notice {
    let waiting = match sessions.len() {
        0 => "no session is driving a pane there".to_string(),
        1 => format!("session {} waits on it", sessions[0]),
        n => format!("{n} sessions wait on it: {}", sessions.join(", ")),
    };
    Notice {
        kind: NoticeKind::AgentLost,
        session: String::new(),
        machine: machine.to_string(),
        pane: String::new(),
        title: format!("KARL: agent lost — {machine}"),
        text: format!(
            "karl-agent on {machine} has been disconnected for {} s; {waiting}",
            away_ms / 1000
        ),
        unix_ms: now_ms,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use karl_common::detect::PermissionRequest;

    fn rec() -> SessionRecord {
        SessionRecord {
            id: "s-1".into(),
            machine: "mac2".into(),
            target: "agent-codex:1.1".into(),
            project: "billing".into(),
            max_turns: 40,
            turns: 3,
            ..Default::default()
        }
    }

    fn with(f: impl FnOnce(&mut SessionRecord)) -> SessionRecord {
        let mut r = rec();
        f(&mut r);
        r
    }

    #[test]
    fn escalation_permission_done_and_failed_each_notify_once() {
        let before = rec();
        let esc = with(|r| {
            r.status = Status::Escalated;
            r.reason = "the screen has not changed for 600 s".into();
        });
        let n = on_change(&before, &esc, 7).unwrap();
        assert_eq!(n.kind, NoticeKind::Escalated);
        assert_eq!(n.title, "KARL: needs you — billing");
        assert_eq!(n.text, "the screen has not changed for 600 s");
        assert_eq!(
            (n.session.as_str(), n.place().as_str()),
            ("s-1", "mac2 agent-codex:1.1")
        );
        assert_eq!(n.unix_ms, 7);
        // Saving the same escalated record again says nothing new.
        assert_eq!(on_change(&esc, &esc.clone(), 8), None);
        // Escalated anew for another reason is news.
        let again = with(|r| {
            r.status = Status::Escalated;
            r.reason = "the agent exited; a shell prompt shows".into();
        });
        assert_eq!(
            on_change(&esc, &again, 9).unwrap().kind,
            NoticeKind::Escalated
        );

        let perm = with(|r| {
            r.status = Status::Escalated;
            r.reason = "permission prompt (policy escalate)".into();
            r.pending_permission = Some(PermissionRequest {
                tool: "Bash command".into(),
                action: "rm -rf build".into(),
                ..Default::default()
            });
        });
        let n = on_change(&before, &perm, 1).unwrap();
        assert_eq!(n.kind, NoticeKind::Permission);
        assert_eq!(
            n.text,
            "Bash command rm -rf build (permission prompt (policy escalate)) — answer with karl-ctl approve|deny s-1"
        );
        // A failed answer escalates anew for another reason: news, and it says why.
        let mut unanswered = perm.clone();
        unanswered.reason = "the answer did not land; answer it in the pane".into();
        let n = on_change(&perm, &unanswered, 2).unwrap();
        assert!(n.text.contains("the answer did not land"), "{}", n.text);
        // A second prompt while still escalated for the same reason is news too.
        let mut between = perm.clone();
        between.pending_permission = None;
        assert_eq!(
            on_change(&between, &perm, 3).unwrap().kind,
            NoticeKind::Permission
        );

        let done = with(|r| {
            r.status = Status::Done;
            r.reason = "every task is done".into();
        });
        let n = on_change(&before, &done, 1).unwrap();
        assert_eq!(n.kind, NoticeKind::Done);
        assert_eq!(n.text, "every task is done — turns 3 of 40, tasks done 0/0");
        let failed = with(|r| r.status = Status::Failed);
        assert_eq!(
            on_change(&before, &failed, 1).unwrap().kind,
            NoticeKind::Failed
        );
    }

    #[test]
    fn quiet_changes_and_operator_acts_say_nothing() {
        let before = rec();
        for after in [
            with(|r| r.turns = 4),
            with(|r| r.status = Status::Paused),
            with(|r| r.status = Status::Stopped),
            with(|r| {
                r.status = Status::Waiting;
                r.reason = "agent offline".into();
            }),
            with(|r| r.last_state = PaneState::Working),
        ] {
            assert_eq!(on_change(&before, &after, 1), None, "{after:?}");
        }
        // Another session's record is never compared with this one's.
        let other = with(|r| {
            r.id = "s-2".into();
            r.status = Status::Failed;
        });
        assert_eq!(on_change(&before, &other, 1), None);
    }

    #[test]
    fn a_usage_limit_notifies_when_it_is_reached() {
        let before = rec();
        let limited = with(|r| {
            r.status = Status::Waiting;
            r.reason = "usage limit reached; resets 9:32am (UTC)".into();
            r.last_state = PaneState::Limited;
        });
        let n = on_change(&before, &limited, 1).unwrap();
        assert_eq!(n.kind, NoticeKind::UsageLimit);
        assert_eq!(n.text, "usage limit reached; resets 9:32am (UTC)");
        assert_eq!(on_change(&limited, &limited.clone(), 2), None);
    }

    #[test]
    fn an_agent_is_lost_once_per_absence() {
        let mut w = LostWatch::default();
        w.disconnected("mac2", 1_000);
        w.disconnected("mac2", 5_000); // still the first moment it went
        assert!(w.due(60_999, 60_000).is_empty());
        assert_eq!(w.due(61_000, 60_000), vec![("mac2".to_string(), 60_000)]);
        assert!(w.due(200_000, 60_000).is_empty(), "reported once");
        // Back, then gone again: a new absence.
        w.connected("mac2");
        w.disconnected("mac2", 300_000);
        assert_eq!(w.due(400_000, 60_000).len(), 1);
        // Back within the minute: nothing.
        w.disconnected("mac3", 500_000);
        w.connected("mac3");
        assert!(w.due(900_000, 60_000).is_empty());

        let n = agent_lost("mac2", 61_500, &["s-1".into(), "s-2".into()], 9);
        assert_eq!(n.kind, NoticeKind::AgentLost);
        assert_eq!(
            n.text,
            "karl-agent on mac2 has been disconnected for 61 s; 2 sessions wait on it: s-1, s-2"
        );
    }
}
