//! What the dashboard's pages show, as plain serializable data built from records (pure):
//! a row per session, a session's page, the fleet. The handlers in [`super::api`] read the
//! engine and registry and hand the values here; the page scripts only lay them out.

use std::collections::BTreeMap;

use karl_common::context::phase_label;
use karl_common::gate::Phase;
use karl_common::pb;
use serde::Serialize;

use crate::records::{SessionRecord, Status, TurnRecord};
use crate::summary::SessionSummary;

/// One session in the list, and the head of its page.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub machine: String,
    pub target: String,
    pub pane_id: String,
    pub project: String,
    pub goal: String,
    pub status: &'static str,
    pub reason: String,
    pub turns: u32,
    pub max_turns: u32,
    pub dry_run: bool,
    pub phase: &'static str,
    /// What the last settled screen showed (`idle`, `working`, `permission`, …).
    pub pane_state: &'static str,
    /// What decided it: `screen`, or the CLI's transcript.
    pub evidence: &'static str,
    /// The active task's title.
    pub task: Option<String>,
    pub last_prompt: Option<String>,
    /// The pane last changed at (ms since the epoch).
    pub last_change_ms: u64,
    pub updated_ms: u64,
    pub started_ms: u64,
    /// A permission menu waits for an answer (`Bash rm -rf build`).
    pub permission: Option<String>,
    /// Escalated or waiting for a permission answer: a human is needed.
    pub needs_human: bool,
    pub live: bool,
}

pub fn row(rec: &SessionRecord, phase: Phase) -> SessionRow {
    let permission = rec
        .pending_permission
        .as_ref()
        .map(|p| format!("{} {}", p.tool, p.action).trim().to_string());
    SessionRow {
        id: rec.id.clone(),
        machine: rec.machine.clone(),
        target: rec.target.clone(),
        pane_id: rec.pane_id.clone(),
        project: rec.project.clone(),
        goal: rec.goal.clone(),
        status: rec.status.as_str(),
        reason: rec.reason.clone(),
        turns: rec.turns,
        max_turns: rec.max_turns,
        dry_run: rec.dry_run,
        phase: phase_label(phase),
        pane_state: rec.last_state.as_str(),
        evidence: rec.evidence.label(),
        task: rec.tasks.active().map(|t| t.title.clone()),
        last_prompt: rec.history.last().cloned(),
        last_change_ms: rec.last_change_ms,
        updated_ms: rec.updated_ms,
        started_ms: rec.started_ms,
        needs_human: rec.status == Status::Escalated
            || (rec.status.is_live() && permission.is_some()),
        permission,
        live: rec.status.is_live(),
    }
}

/// Sessions in the order the list shows them: those needing a human first, then the
/// live ones, then the ended ones; the most recently changed first within each.
pub fn sort_rows(rows: &mut [SessionRow]) {
    rows.sort_by(|a, b| {
        let rank = |r: &SessionRow| match (r.needs_human, r.live) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => 2,
        };
        rank(a)
            .cmp(&rank(b))
            .then(b.updated_ms.cmp(&a.updated_ms))
            .then(a.id.cmp(&b.id))
    });
}

/// One turn on the session page's timeline.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnView {
    pub n: u32,
    pub prompt: String,
    pub source: &'static str,
    /// Every gate verdict of the turn: rejected candidates with the reason, then the
    /// verdict on the prompt typed.
    pub gate: Vec<String>,
    pub outcome: &'static str,
    pub inject: String,
    pub model_latency_ms: u64,
    pub unix_ms: u64,
    /// The pane state that fired it.
    pub state: &'static str,
    pub tools: Vec<String>,
    pub response: String,
}

pub fn turn(t: &TurnRecord) -> TurnView {
    TurnView {
        n: t.n,
        prompt: t.prompt.clone(),
        source: t.source.as_str(),
        gate: t.gate.clone(),
        outcome: t.outcome.as_str(),
        inject: t.inject_label(),
        model_latency_ms: t.model_latency_ms,
        unix_ms: t.unix_ms,
        state: t.state.as_str(),
        tools: t.tools.clone(),
        response: t.response.clone(),
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskView {
    pub title: String,
    pub status: &'static str,
    pub turns_on_it: u32,
    pub blocker: Option<String>,
}

/// A session's page.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionPage {
    pub session: SessionRow,
    /// Newest first.
    pub turns: Vec<TurnView>,
    pub tasks: Vec<TaskView>,
    /// The digest's lines and milestones, oldest first.
    pub digest: Vec<String>,
    pub rejections: BTreeMap<&'static str, u32>,
    pub fallbacks: u32,
    /// The session in figures, and as lines of text.
    pub summary: SessionSummary,
    pub summary_lines: Vec<String>,
    /// The pane's last settled screen with its colours (HTML), while the session runs.
    pub screen_html: Option<String>,
    pub screen_ms: u64,
    /// What the operator may do now: `pause`, `resume`, `stop`, `approve`, `deny`, `send`.
    pub actions: Vec<&'static str>,
    pub now_ms: u64,
}

pub fn page(
    rec: &SessionRecord,
    phase: Phase,
    turns: &[TurnRecord],
    screen: Option<&pb::PaneSnapshot>,
    now_ms: u64,
) -> SessionPage {
    let session = row(rec, phase);
    let mut actions = Vec::new();
    if session.live {
        match rec.status {
            Status::Paused => actions.push("resume"),
            Status::Escalated => actions.extend(["resume", "pause"]),
            _ => actions.push("pause"),
        }
        actions.push("stop");
        if session.permission.is_some()
            || rec.last_state == karl_common::detect::PaneState::Permission
        {
            actions.extend(["approve", "deny"]);
        }
        actions.push("send");
    }
    let mut digest: Vec<String> = rec.digest.entries.iter().map(|e| e.line()).collect();
    digest.extend(
        rec.digest
            .milestones
            .iter()
            .map(|m| format!("turn {}: {}", m.turn, m.text)),
    );
    let screen_text = screen.map(|s| if s.ansi.is_empty() { &s.text } else { &s.ansi });
    let summary = rec.summary();
    SessionPage {
        turns: turns.iter().rev().map(turn).collect(),
        tasks: rec
            .tasks
            .tasks
            .iter()
            .map(|t| TaskView {
                title: t.title.clone(),
                status: t.status.as_str(),
                turns_on_it: t.turns_on_it,
                blocker: t.blocker.clone(),
            })
            .collect(),
        digest,
        rejections: rec
            .rejections
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect(),
        fallbacks: rec.fallbacks,
        summary_lines: summary.lines(),
        summary,
        screen_html: screen_text.map(|t| karl_common::screen_html::to_html(t)),
        screen_ms: screen.map_or(0, |s| s.captured_unix_ms),
        actions,
        now_ms,
        session,
    }
}

/// One pane of an agent, and the session driving it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PaneView {
    pub pane_id: String,
    /// `session:window.pane`.
    pub target: String,
    pub command: String,
    pub title: String,
    pub path: String,
    pub driven_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AgentView {
    pub machine: String,
    pub version: String,
    pub hostname: String,
    pub tmux_version: String,
    pub peer: String,
    pub connected_ms: u64,
    pub heartbeat_ms: u64,
    pub panes: Vec<PaneView>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetView {
    pub agents: Vec<AgentView>,
    pub now_ms: u64,
}

/// The fleet: every connected agent with its panes, each pane with the live session
/// driving it (from `live`).
pub fn fleet(
    agents: &[pb::AgentStatus],
    panes: impl Fn(&str) -> Vec<pb::PaneInfo>,
    live: &[SessionRecord],
    now_ms: u64,
) -> FleetView {
    let agents = agents
        .iter()
        .map(|a| AgentView {
            machine: a.machine.clone(),
            version: a.version.clone(),
            hostname: a.hostname.clone(),
            tmux_version: a.tmux_version.clone(),
            peer: a.peer.clone(),
            connected_ms: a.connected_unix_ms,
            heartbeat_ms: a.last_heartbeat_unix_ms,
            panes: panes(&a.machine)
                .into_iter()
                .map(|p| PaneView {
                    driven_by: live
                        .iter()
                        .find(|r| r.machine == a.machine && r.pane_id == p.pane_id)
                        .map(|r| r.id.clone()),
                    target: format!("{}:{}.{}", p.session, p.window, p.pane),
                    pane_id: p.pane_id,
                    command: p.current_command,
                    title: p.title,
                    path: p.current_path,
                })
                .collect(),
        })
        .collect();
    FleetView { agents, now_ms }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use karl_common::detect::PermissionRequest;

    fn rec(id: &str, status: Status, updated_ms: u64) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            machine: "mac2".into(),
            status,
            updated_ms,
            ..Default::default()
        }
    }

    #[test]
    fn sessions_needing_a_human_come_first_then_live_then_ended() {
        let mut waiting = rec("perm", Status::Running, 1);
        waiting.pending_permission = Some(PermissionRequest {
            tool: "Bash command".into(),
            action: "rm -rf build".into(),
            ..Default::default()
        });
        let mut rows: Vec<SessionRow> = [
            rec("done", Status::Done, 90),
            rec("running-old", Status::Running, 10),
            rec("escalated", Status::Escalated, 5),
            rec("running-new", Status::Running, 50),
            waiting,
        ]
        .iter()
        .map(|r| row(r, Phase::Build))
        .collect();
        sort_rows(&mut rows);
        let order: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            order,
            ["escalated", "perm", "running-new", "running-old", "done"]
        );
        assert_eq!(
            rows[1].permission.as_deref(),
            Some("Bash command rm -rf build")
        );
    }

    #[test]
    fn actions_follow_the_status() {
        let page_of = |r: &SessionRecord| page(r, Phase::Explore, &[], None, 0).actions;
        assert_eq!(
            page_of(&rec("a", Status::Running, 0)),
            ["pause", "stop", "send"]
        );
        assert_eq!(
            page_of(&rec("a", Status::Paused, 0)),
            ["resume", "stop", "send"]
        );
        let mut perm = rec("a", Status::Escalated, 0);
        perm.last_state = karl_common::detect::PaneState::Permission;
        assert_eq!(
            page_of(&perm),
            ["resume", "pause", "stop", "approve", "deny", "send"]
        );
        assert!(page_of(&rec("a", Status::Done, 0)).is_empty());
    }

    #[test]
    fn the_screen_keeps_its_colours_and_turns_run_newest_first() {
        let snap = pb::PaneSnapshot {
            text: "plain".into(),
            ansi: "\x1b[31mred\x1b[0m".into(),
            captured_unix_ms: 7,
            ..Default::default()
        };
        let turns: Vec<TurnRecord> = (1..=3)
            .map(|n| TurnRecord {
                n,
                prompt: format!("p{n}"),
                ..Default::default()
            })
            .collect();
        let p = page(
            &rec("a", Status::Running, 0),
            Phase::Build,
            &turns,
            Some(&snap),
            9,
        );
        assert_eq!(
            p.screen_html.as_deref(),
            Some("<span style=\"color:#cd0000;\">red</span>")
        );
        assert_eq!(p.screen_ms, 7);
        assert_eq!(p.turns.iter().map(|t| t.n).collect::<Vec<_>>(), [3, 2, 1]);
        assert_eq!(p.session.phase, "BUILD");
    }

    #[test]
    fn the_fleet_names_the_session_driving_each_pane() {
        let agents = [pb::AgentStatus {
            machine: "mac2".into(),
            tmux_version: "3.5a".into(),
            ..Default::default()
        }];
        let mut live = rec("mac2_1", Status::Running, 0);
        live.pane_id = "%3".into();
        let panes = |_: &str| {
            vec![
                pb::PaneInfo {
                    pane_id: "%3".into(),
                    session: "agent".into(),
                    window: 1,
                    pane: 1,
                    ..Default::default()
                },
                pb::PaneInfo {
                    pane_id: "%4".into(),
                    ..Default::default()
                },
            ]
        };
        let f = fleet(&agents, panes, &[live], 5);
        assert_eq!(f.agents[0].panes[0].target, "agent:1.1");
        assert_eq!(f.agents[0].panes[0].driven_by.as_deref(), Some("mac2_1"));
        assert_eq!(f.agents[0].panes[1].driven_by, None);
        assert_eq!(f.agents[0].tmux_version, "3.5a");
    }
}
