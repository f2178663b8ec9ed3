//! The per-snapshot decision, DESIGN.md's state table as pure functions.
//!
//! [`decide`]: given the session and the classifier's verdict on a settled snapshot, what
//! happens next. [`overrule`] and [`note_driven_agent`]: what the session knows about its
//! agent that the screen does not. [`permission_answer`]: which option of a permission
//! menu means yes-once or no, and the keys that reach it. The machine in
//! [`super::machine`] calls these; nothing here does IO.
//!
//! The prototype's session phases map onto pane states and session signals like this:
//! STARTING → the first snapshot before turn 1 (any state; the engine waits for idle);
//! BUILDING → pane `working`, or `idle` with turns to go; WAITING → `permission`,
//! `dialog`, a human `draft`, `limited` (session status `waiting`/`escalated`);
//! ERROR → `idle` with the error flag (the next turn gets more terminal lines);
//! DONE → every task done or the turn budget spent (status `done`); STUCK → a task on
//! too many turns, or a pane unchanged past its limit (status `escalated`).

use karl_common::detect::{is_shell_command, AgentKind, Detection, Evidence, PaneState};
use karl_common::gate::{LimitBreach, LoopLimits};

use crate::records::{PermissionPolicy, SessionRecord, Status};

/// Tunables the engine applies to every session.
#[derive(Debug, Clone)]
pub struct Limits {
    pub default_max_turns: u32,
    /// Injections per minute and turns without progress before escalating.
    pub loops: LoopLimits,
    pub unchanged_escalate_ms: u64,
    pub unknown_escalate_ms: u64,
    pub task_stuck_turns: u32,
    pub settle_ms: u32,
    /// How long after typing a screen showing our own prompt in the box may be a
    /// capture taken mid-injection (before Enter landed) rather than a lost Enter.
    pub draft_grace_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_max_turns: 30,
            loops: LoopLimits::default(),
            unchanged_escalate_ms: 20 * 60 * 1000,
            unknown_escalate_ms: 5 * 60 * 1000,
            task_stuck_turns: 8,
            settle_ms: 1500,
            draft_grace_ms: 3000,
        }
    }
}

/// Notes which agent the session drives, from the first snapshot whose screen names one,
/// and the pane's non-shell processes then. `processes` is the pane's process tree (empty
/// when the agent could not read it). The processes are noted again when the screen shows
/// the driven agent alive under new process names (a restarted or updated CLI); a pane
/// left with shells only is never taken for a live agent.
pub fn note_driven_agent(s: &mut SessionRecord, d: &Detection, processes: &[String]) {
    let non_shell = || -> Vec<String> {
        processes
            .iter()
            .filter(|p| !is_shell_command(p))
            .cloned()
            .collect()
    };
    let Some(driven) = s.driven_agent else {
        if d.agent != AgentKind::Unknown {
            s.driven_agent = Some(d.agent);
            s.agent_processes = non_shell();
        }
        return;
    };
    let alive_on_screen = d.agent == driven && d.state != PaneState::Exited;
    let recorded_present = s.agent_processes.iter().any(|p| processes.contains(p));
    if alive_on_screen && !recorded_present {
        let now = non_shell();
        if !now.is_empty() {
            s.agent_processes = now;
        }
    }
}

/// Whether the session drives an agent CLI (not a plain shell).
fn drives_an_agent(s: &SessionRecord) -> bool {
    s.driven_agent
        .is_some_and(|a| !matches!(a, AgentKind::Shell | AgentKind::Unknown))
}

/// What the session knows overrules the screen: when it drives an agent CLI and that
/// agent's processes are gone from the pane, or the screen reads as a plain shell, the
/// agent has exited — whatever its last frame shows (a killed CLI leaves its spinner on
/// screen). The detection is rewritten to `exited` with the evidence that decided it, so
/// a turn is never typed into the shell that replaced the agent.
pub fn overrule(s: &SessionRecord, d: &mut Detection, processes: &[String]) {
    if !drives_an_agent(s) || d.state == PaneState::Exited {
        return;
    }
    let gone = !s.agent_processes.is_empty()
        && !processes.is_empty()
        && !s.agent_processes.iter().any(|p| processes.contains(p));
    let evidence = if gone {
        format!(
            "{} is no longer running in the pane (its processes: {})",
            s.agent_processes.join(", "),
            processes.join(", ")
        )
    } else if d.agent == AgentKind::Shell {
        format!(
            "a shell prompt shows where {} was (the screen reads as a plain shell)",
            s.driven_agent.unwrap_or_default().as_str()
        )
    } else {
        return;
    };
    tracing::debug!(target: "coord.engine", state = %d.state, %evidence, "the session overrules the screen: the agent exited");
    d.state = PaneState::Exited;
    d.evidence.insert(
        0,
        Evidence {
            rule: "session/agent-gone".into(),
            line: evidence,
        },
    );
    d.rule = Some("session/agent-gone".into());
}

/// What the engine does after a settled snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to do now.
    Wait(&'static str),
    /// The injection rate limit allows the next turn only at `until_ms`: look again then.
    /// Pacing, not a loop: the session stays running.
    Throttle { until_ms: u64, why: String },
    /// Write the next prompt.
    Fire,
    /// Our own prompt sits unsent in the box: press Enter once.
    ResendEnter,
    /// Look again with a fresh capture shortly (the screen may predate our Enter).
    Recheck(&'static str),
    /// Answer a permission prompt (true = approve).
    Permission { approve: bool, why: String },
    /// Stop acting and tell the operator.
    Escalate(String),
    /// Usage limit: wait for the reset.
    Limited(String),
    /// The agent exited.
    Exited,
    /// The session is finished.
    Done(String),
}

/// Inputs of [`decide`] beyond the record: facts about this snapshot and the clock.
#[derive(Debug, Clone)]
pub struct SnapshotFacts<'a> {
    pub detection: &'a Detection,
    pub stable_hash: &'a str,
    pub now_ms: u64,
    /// The permission request passes the gate's destructive check.
    pub permission_safe: bool,
}

/// DESIGN.md's state table, as a pure function.
pub fn decide(s: &SessionRecord, f: &SnapshotFacts<'_>, limits: &Limits) -> Decision {
    if !s.status.is_live() {
        return Decision::Wait("session ended");
    }
    // Paused means paused: no prompt, no permission answer, no Enter, no restart command,
    // and no status change either — whatever the pane shows, until the operator resumes.
    if s.status == Status::Paused {
        return Decision::Wait("paused");
    }
    let d = f.detection;
    match d.state {
        PaneState::Working => Decision::Wait("agent is working"),
        PaneState::Dialog => Decision::Escalate(format!(
            "a dialog needs a human ({})",
            d.evidence
                .first()
                .map(|e| e.line.trim())
                .unwrap_or("no detail")
        )),
        PaneState::Permission => {
            let what = d
                .permission
                .as_ref()
                .map(|p| format!("{} {}", p.tool, p.action).trim().to_string())
                .unwrap_or_else(|| "a tool action".into());
            match s.permissions {
                PermissionPolicy::Escalate => {
                    Decision::Escalate(format!("permission asked: {what}"))
                }
                PermissionPolicy::Deny => Decision::Permission {
                    approve: false,
                    why: format!("policy deny: {what}"),
                },
                PermissionPolicy::ApproveSafe if f.permission_safe => Decision::Permission {
                    approve: true,
                    why: format!("policy approve-safe: {what}"),
                },
                PermissionPolicy::ApproveSafe => Decision::Escalate(format!(
                    "permission asked for a destructive action, not approved: {what}"
                )),
            }
        }
        PaneState::Draft => {
            let draft = d.draft.as_deref().unwrap_or("").trim();
            let ours = s.history.last().map(|p| p.trim()).unwrap_or("");
            let is_ours = !ours.is_empty()
                && !draft.is_empty()
                && (ours.starts_with(draft) || draft.starts_with(first_line(ours)));
            let since_typed = f
                .now_ms
                .saturating_sub(s.inject_times_ms.last().copied().unwrap_or(0));
            if is_ours && since_typed < limits.draft_grace_ms {
                Decision::Recheck("our prompt may still be landing")
            } else if s.awaiting_busy && is_ours && !s.enter_resent {
                Decision::ResendEnter
            } else if is_ours {
                Decision::Escalate("our prompt is stuck unsent in the input box".into())
            } else {
                Decision::Wait("a human draft is in the input box")
            }
        }
        PaneState::Exited => Decision::Exited,
        PaneState::Limited => Decision::Limited(
            d.limit_reset
                .clone()
                .unwrap_or_else(|| "an unstated time".into()),
        ),
        PaneState::Unknown => {
            if s.unknown_since_ms > 0
                && f.now_ms.saturating_sub(s.unknown_since_ms) > limits.unknown_escalate_ms
            {
                Decision::Escalate("the pane's state has been unreadable for too long".into())
            } else {
                Decision::Wait("pane state unknown")
            }
        }
        PaneState::Idle => {
            if s.status == Status::Escalated && !s.auto_resume {
                return Decision::Wait("escalated: waiting for the operator");
            }
            if s.turns >= s.max_turns {
                return Decision::Done(format!("turn budget of {} reached", s.max_turns));
            }
            if s.tasks.is_complete() {
                return Decision::Done("every planned task is done".into());
            }
            if s.turns > 0 && f.stable_hash == s.inject_hash {
                if f.now_ms.saturating_sub(s.last_change_ms) > limits.unchanged_escalate_ms {
                    return Decision::Escalate(
                        "the pane has not changed since our last prompt".into(),
                    );
                }
                return Decision::Wait("pane unchanged since our last prompt");
            }
            match limits.loops.check(&s.inject_times_ms, f.now_ms, s.stalled) {
                Ok(()) => {}
                Err(breach @ LimitBreach::TooFast { retry_at_ms, .. }) => {
                    return Decision::Throttle {
                        until_ms: retry_at_ms,
                        why: breach.to_string(),
                    }
                }
                Err(breach) => return Decision::Escalate(breach.to_string()),
            }
            if let Some(t) = s.tasks.active() {
                if t.turns_on_it >= limits.task_stuck_turns {
                    return Decision::Escalate(format!(
                        "task {:?} stuck for {} turns",
                        t.title, t.turns_on_it
                    ));
                }
            }
            Decision::Fire
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// How to answer a permission prompt: the option meant, where it is, and the keys that
/// move the menu's selection onto it. Enter confirms it once the selection is seen there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAnswer {
    pub label: String,
    pub index: usize,
    pub moves: Vec<String>,
}

/// Words in a "yes" option that grant more than this one action (2.1.330 also offers to
/// switch the whole session to auto or accept-edits mode).
const BROADER_GRANTS: [&str; 9] = [
    "don't ask",
    "don’t ask",
    "do not ask",
    "always",
    "allow all",
    "all edits",
    "session",
    "switch to",
    "auto mode",
];

/// Picks the option to answer with by its label — approve: the first option that says
/// yes to this action only (`Yes`, `Yes, proceed (y)`), never a standing grant (`Yes, and
/// don't ask again …`); deny: the first that says no — and the Up/Down presses from the
/// current selection. Menus differ between releases (2.1.330 lists `No` first, with no
/// numbers), so no key is fixed. An error says why the menu cannot be answered: the
/// prompt is then escalated, never guessed at.
pub fn permission_answer(
    req: &karl_common::detect::PermissionRequest,
    approve: bool,
) -> Result<PermissionAnswer, String> {
    if req.options.is_empty() {
        return Err("its options cannot be read".into());
    }
    let Some(selected) = req.selected.filter(|&i| i < req.options.len()) else {
        return Err("the selected option cannot be read".into());
    };
    let says = |label: &str, word: &str| {
        let l = label.trim().to_lowercase();
        l == word || l.starts_with(&format!("{word},")) || l.starts_with(&format!("{word} "))
    };
    let index = req
        .options
        .iter()
        .position(|o| {
            if approve {
                let l = o.to_lowercase();
                says(o, "yes") && !BROADER_GRANTS.iter().any(|g| l.contains(g))
            } else {
                says(o, "no")
            }
        })
        .ok_or_else(|| {
            format!(
                "no option means {:?} ({})",
                if approve { "yes, once" } else { "no" },
                req.options.join(" / ")
            )
        })?;
    let key = if index > selected { "Down" } else { "Up" };
    Ok(PermissionAnswer {
        label: req.options[index].clone(),
        index,
        moves: vec![key.to_string(); index.abs_diff(selected)],
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::context::TaskGraph;

    fn det(state: PaneState) -> Detection {
        Detection {
            state,
            ..Default::default()
        }
    }

    fn session() -> SessionRecord {
        SessionRecord {
            max_turns: 10,
            ..Default::default()
        }
    }

    fn facts<'a>(d: &'a Detection, hash: &'a str) -> SnapshotFacts<'a> {
        SnapshotFacts {
            detection: d,
            stable_hash: hash,
            now_ms: 1_000_000,
            permission_safe: true,
        }
    }

    #[test]
    fn never_types_into_busy_dialog_or_human_draft() {
        let s = session();
        let l = Limits::default();
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Working), "h"), &l),
            Decision::Wait(_)
        ));
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Dialog), "h"), &l),
            Decision::Escalate(_)
        ));
        let mut draft = det(PaneState::Draft);
        draft.draft = Some("half-written by a human".into());
        assert!(matches!(
            decide(&s, &facts(&draft, "h"), &l),
            Decision::Wait(_)
        ));
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Unknown), "h"), &l),
            Decision::Wait(_)
        ));
    }

    #[test]
    fn idle_fires_only_after_the_pane_changed() {
        let mut s = session();
        let l = Limits::default();
        let idle = det(PaneState::Idle);
        assert_eq!(decide(&s, &facts(&idle, "a"), &l), Decision::Fire);
        s.turns = 1;
        s.inject_hash = "a".into();
        s.last_change_ms = 1_000_000;
        assert!(matches!(
            decide(&s, &facts(&idle, "a"), &l),
            Decision::Wait(_)
        ));
        assert_eq!(decide(&s, &facts(&idle, "b"), &l), Decision::Fire);
        s.status = Status::Paused;
        assert!(matches!(
            decide(&s, &facts(&idle, "b"), &l),
            Decision::Wait("paused")
        ));
    }

    #[test]
    fn budget_and_plan_end_the_session() {
        let mut s = session();
        s.turns = 10;
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Idle), "x"), &Limits::default()),
            Decision::Done(_)
        ));
        let mut s = session();
        s.tasks = TaskGraph::from_steps(["a"]);
        s.tasks.advance(1);
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Idle), "x"), &Limits::default()),
            Decision::Done(_)
        ));
    }

    #[test]
    fn permission_follows_policy() {
        let l = Limits::default();
        let p = det(PaneState::Permission);
        let mut s = session();
        assert!(matches!(
            decide(&s, &facts(&p, "h"), &l),
            Decision::Escalate(_)
        ));
        s.permissions = PermissionPolicy::Deny;
        assert!(matches!(
            decide(&s, &facts(&p, "h"), &l),
            Decision::Permission { approve: false, .. }
        ));
        s.permissions = PermissionPolicy::ApproveSafe;
        assert!(matches!(
            decide(&s, &facts(&p, "h"), &l),
            Decision::Permission { approve: true, .. }
        ));
        let mut f = facts(&p, "h");
        f.permission_safe = false;
        assert!(matches!(decide(&s, &f, &l), Decision::Escalate(_)));
    }

    fn menu(options: &[&str], selected: Option<usize>) -> karl_common::detect::PermissionRequest {
        karl_common::detect::PermissionRequest {
            tool: "Bash command".into(),
            action: "cargo test".into(),
            options: options.iter().map(|o| o.to_string()).collect(),
            selected,
        }
    }

    #[test]
    fn permissions_are_answered_by_label_never_by_a_fixed_key() {
        // Claude Code 2.1.197: numbered, Yes first, a standing grant in between.
        let m = menu(
            &[
                "Yes",
                "Yes, and don't ask again for cargo test commands",
                "No",
            ],
            Some(0),
        );
        let yes = permission_answer(&m, true).unwrap();
        assert_eq!((yes.label.as_str(), yes.index), ("Yes", 0));
        assert!(yes.moves.is_empty());
        let no = permission_answer(&m, false).unwrap();
        assert_eq!(
            (no.label.as_str(), no.moves.clone()),
            ("No", vec!["Down".to_string(); 2])
        );
        // Claude Code 2.1.330 in auto mode: unnumbered, No first and selected.
        let m = menu(&["No", "Yes"], Some(0));
        assert_eq!(permission_answer(&m, true).unwrap().moves, ["Down"]);
        assert!(permission_answer(&m, false).unwrap().moves.is_empty());
        let m = menu(&["No", "Yes"], Some(1));
        assert_eq!(permission_answer(&m, false).unwrap().moves, ["Up"]);
        // Codex: the once-only yes, not the prefix grant; no ends in a remark.
        let m = menu(
            &[
                "Yes, proceed (y)",
                "Yes, and don't ask again for commands that start with `cargo test` (p)",
                "No, and tell Codex what to do differently (esc)",
            ],
            Some(0),
        );
        assert_eq!(permission_answer(&m, true).unwrap().index, 0);
        assert_eq!(permission_answer(&m, false).unwrap().index, 2);
        // Claude Code 2.1.330 in manual mode: two standing grants between Yes and No.
        let m = menu(
            &[
                "Yes",
                "Yes, and don’t ask again for: git push *",
                "Yes, and switch to auto mode · auto mode handles these prompts for you",
                "No",
            ],
            Some(3),
        );
        let a = permission_answer(&m, true).unwrap();
        assert_eq!((a.index, a.moves.len()), (0, 3));
        // Edits: "allow all edits during this session" is a standing grant.
        let m = menu(
            &[
                "Yes",
                "Yes, allow all edits during this session (shift+tab)",
                "No",
            ],
            Some(1),
        );
        let a = permission_answer(&m, true).unwrap();
        assert_eq!((a.index, a.moves.clone()), (0, vec!["Up".to_string()]));
        // Unreadable menus are never answered.
        assert!(permission_answer(&menu(&[], None), true).is_err());
        assert!(permission_answer(&menu(&["Yes", "No"], None), true).is_err());
        assert!(permission_answer(&menu(&["Yes", "No"], Some(5)), true).is_err());
        let e = permission_answer(&menu(&["Allow", "Deny"], Some(0)), true).unwrap_err();
        assert!(e.contains("Allow / Deny"), "{e}");
        // "Yesterday" is not yes; "Nope" is not no.
        assert!(permission_answer(&menu(&["Yesterday", "Nope"], Some(0)), true).is_err());
        assert!(permission_answer(&menu(&["Yesterday", "Nope"], Some(0)), false).is_err());
    }

    #[test]
    fn our_unsent_prompt_gets_one_enter() {
        let l = Limits::default();
        let mut s = session();
        s.history = vec!["Add a health endpoint".into()];
        s.awaiting_busy = true;
        let mut d = det(PaneState::Draft);
        d.draft = Some("Add a health endpoint".into());
        // Right after typing, the screen may predate the Enter: look again first.
        s.inject_times_ms = vec![1_000_000 - 500];
        assert!(matches!(
            decide(&s, &facts(&d, "h"), &l),
            Decision::Recheck(_)
        ));
        s.inject_times_ms = vec![1_000_000 - 10_000];
        assert_eq!(decide(&s, &facts(&d, "h"), &l), Decision::ResendEnter);
        s.enter_resent = true;
        assert!(matches!(
            decide(&s, &facts(&d, "h"), &l),
            Decision::Escalate(_)
        ));
    }

    /// Quick agents: a full rate window delays the next turn until the oldest prompt in it
    /// leaves the window; it never escalates (regression: six different, productive
    /// prompts in a minute escalated as "looping").
    #[test]
    fn injecting_too_fast_throttles_instead_of_escalating() {
        let l = Limits::default();
        let mut s = session();
        let now = 1_000_000;
        for i in 0..l.loops.max_injections_per_minute {
            s.note_injection(now - 2000 * u64::from(i));
        }
        let oldest = now - 2000 * u64::from(l.loops.max_injections_per_minute - 1);
        match decide(&s, &facts(&det(PaneState::Idle), "x"), &l) {
            Decision::Throttle { until_ms, why } => {
                assert_eq!(until_ms, oldest + karl_common::gate::limits::RATE_WINDOW_MS);
                assert!(
                    why.contains("per minute") && !why.contains("looping"),
                    "{why}"
                );
            }
            d => panic!("{d:?}"),
        }
        // Once the window allows it, the turn fires.
        let idle = det(PaneState::Idle);
        let mut later = facts(&idle, "x");
        later.now_ms = oldest + karl_common::gate::limits::RATE_WINDOW_MS;
        assert_eq!(decide(&s, &later, &l), Decision::Fire);
    }

    /// Every status × every pane state. The column that matters most: a paused session
    /// gets `Wait` whatever the pane shows — nothing typed, nothing answered, no status
    /// change — and a session that ended does nothing.
    #[test]
    fn state_table_every_status_by_every_pane_state() {
        use PaneState::*;
        let l = Limits::default();
        let states = [
            Working, Idle, Permission, Dialog, Draft, Exited, Limited, Unknown,
        ];
        let statuses = [
            Status::Running,
            Status::Paused,
            Status::Waiting,
            Status::Escalated,
            Status::Done,
            Status::Stopped,
            Status::Failed,
        ];
        fn kind(d: &Decision) -> &'static str {
            match d {
                Decision::Wait(_) => "wait",
                Decision::Throttle { .. } => "throttle",
                Decision::Fire => "fire",
                Decision::ResendEnter => "enter",
                Decision::Recheck(_) => "recheck",
                Decision::Permission { .. } => "answer",
                Decision::Escalate(_) => "escalate",
                Decision::Limited(_) => "limited",
                Decision::Exited => "exited",
                Decision::Done(_) => "done",
            }
        }
        // Expected per status, in the order of `states`. Draft is our own prompt, stuck
        // long enough to get its one Enter. Escalated sessions here clear by themselves
        // (auto_resume), so an idle pane fires.
        let expected: [(Status, [&str; 8]); 7] = [
            (
                Status::Running,
                [
                    "wait", "fire", "answer", "escalate", "enter", "exited", "limited", "wait",
                ],
            ),
            (Status::Paused, ["wait"; 8]),
            (
                Status::Waiting,
                [
                    "wait", "fire", "answer", "escalate", "enter", "exited", "limited", "wait",
                ],
            ),
            (
                Status::Escalated,
                [
                    "wait", "fire", "answer", "escalate", "enter", "exited", "limited", "wait",
                ],
            ),
            (Status::Done, ["wait"; 8]),
            (Status::Stopped, ["wait"; 8]),
            (Status::Failed, ["wait"; 8]),
        ];
        assert_eq!(expected.len(), statuses.len());
        for (status, row) in expected {
            for (state, want) in states.iter().zip(row) {
                let mut s = session();
                s.status = status;
                s.auto_resume = true;
                s.permissions = PermissionPolicy::ApproveSafe;
                s.history = vec!["Add a health endpoint".into()];
                s.awaiting_busy = true;
                s.inject_times_ms = vec![1_000_000 - 10_000];
                let mut d = det(*state);
                if *state == Draft {
                    d.draft = Some("Add a health endpoint".into());
                }
                let got = decide(&s, &facts(&d, "h"), &l);
                assert_eq!(kind(&got), want, "{status:?} × {state:?}: {got:?}");
            }
        }
        // Paused holds against every trigger that acts without a turn, too: a stuck
        // draft, a full rate window, a finished plan, a spent budget, an unreadable pane.
        let mut s = session();
        s.status = Status::Paused;
        s.turns = s.max_turns;
        s.stalled = l.loops.max_turns_without_progress;
        s.unknown_since_ms = 1;
        for i in 0..l.loops.max_injections_per_minute {
            s.note_injection(1_000_000 - u64::from(i));
        }
        for state in states {
            assert_eq!(
                decide(&s, &facts(&det(state), "h"), &l),
                Decision::Wait("paused"),
                "{state:?}"
            );
        }
    }

    fn claude_session() -> SessionRecord {
        let mut s = session();
        let mut d = det(PaneState::Idle);
        d.agent = AgentKind::Claude;
        note_driven_agent(&mut s, &d, &["sh".into(), "claude".into()]);
        assert_eq!(s.driven_agent, Some(AgentKind::Claude));
        assert_eq!(s.agent_processes, ["claude"]);
        s
    }

    /// Regression: Claude Code killed mid-answer leaves its spinner on screen and a shell
    /// prompt drawn into it; the session kept reading "working" forever.
    #[test]
    fn a_dead_agent_process_is_exited_whatever_the_screen() {
        let s = claude_session();
        let mut d = det(PaneState::Working);
        d.agent = AgentKind::Claude;
        overrule(&s, &mut d, &["sh".into(), "bash".into()]);
        assert_eq!(d.state, PaneState::Exited);
        assert_eq!(d.rule.as_deref(), Some("session/agent-gone"));
        assert!(d.evidence[0].line.contains("claude is no longer running"));
        assert_eq!(
            decide(&s, &facts(&d, "h"), &Limits::default()),
            Decision::Exited
        );

        // Still running (with a tool child): the screen stands.
        let mut d = det(PaneState::Working);
        d.agent = AgentKind::Claude;
        overrule(&s, &mut d, &["sh".into(), "claude".into(), "bash".into()]);
        assert_eq!(d.state, PaneState::Working);
        // Processes unknown (ps failed): the screen stands.
        overrule(&s, &mut d, &[]);
        assert_eq!(d.state, PaneState::Working);
    }

    /// Regression: after Ctrl-C a Codex pane shows the shell prompt, read as an idle shell,
    /// and a turn would have typed the twin's prompt into bash.
    #[test]
    fn a_shell_where_the_agent_was_is_exited() {
        let mut s = session();
        let mut d = det(PaneState::Idle);
        d.agent = AgentKind::Codex;
        note_driven_agent(&mut s, &d, &[]);
        let mut shell = det(PaneState::Idle);
        shell.agent = AgentKind::Shell;
        overrule(&s, &mut shell, &[]);
        assert_eq!(shell.state, PaneState::Exited);
        assert!(
            shell.evidence[0].line.contains("where codex was"),
            "{shell:?}"
        );
        // A session that drives a shell keeps driving it.
        let mut sh = session();
        let mut idle = det(PaneState::Idle);
        idle.agent = AgentKind::Shell;
        note_driven_agent(&mut sh, &idle, &["bash".into()]);
        overrule(&sh, &mut idle, &["bash".into()]);
        assert_eq!(idle.state, PaneState::Idle);
    }

    #[test]
    fn the_driven_agent_is_noted_once_and_its_processes_follow_a_restart() {
        let mut s = claude_session();
        // The screen reads as a shell later: the driven agent does not change.
        let mut shell = det(PaneState::Idle);
        shell.agent = AgentKind::Shell;
        note_driven_agent(&mut s, &shell, &["bash".into()]);
        assert_eq!(s.driven_agent, Some(AgentKind::Claude));
        assert_eq!(s.agent_processes, ["claude"]);
        // Restarted under another process name (an updated binary): noted again.
        let mut alive = det(PaneState::Idle);
        alive.agent = AgentKind::Claude;
        note_driven_agent(&mut s, &alive, &["zsh".into(), "2.1.331".into()]);
        assert_eq!(s.agent_processes, ["2.1.331"]);
        // A killed CLI's frame with shells only left is not a live agent.
        let mut frame = det(PaneState::Working);
        frame.agent = AgentKind::Claude;
        note_driven_agent(&mut s, &frame, &["zsh".into()]);
        assert_eq!(s.agent_processes, ["2.1.331"]);
        // Unknown screens name no agent.
        let mut fresh = session();
        note_driven_agent(&mut fresh, &det(PaneState::Unknown), &["claude".into()]);
        assert!(fresh.driven_agent.is_none());
    }

    #[test]
    fn stalls_and_stuck_tasks_escalate() {
        let l = Limits::default();
        let mut s = session();
        s.stalled = l.loops.max_turns_without_progress;
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Idle), "x"), &l),
            Decision::Escalate(_)
        ));
        let mut s = session();
        s.tasks = TaskGraph::from_steps(["t", "u"]);
        for turn in 0..l.task_stuck_turns {
            s.tasks.note_turn(turn);
        }
        assert!(matches!(
            decide(&s, &facts(&det(PaneState::Idle), "x"), &l),
            Decision::Escalate(_)
        ));
    }

    #[test]
    fn an_unreadable_pane_escalates_only_after_its_limit() {
        let l = Limits::default();
        let mut s = session();
        s.unknown_since_ms = 1_000_000 - 1000;
        let u = det(PaneState::Unknown);
        assert!(matches!(decide(&s, &facts(&u, "h"), &l), Decision::Wait(_)));
        s.unknown_since_ms = 1_000_000 - l.unknown_escalate_ms - 1;
        assert!(matches!(
            decide(&s, &facts(&u, "h"), &l),
            Decision::Escalate(_)
        ));
    }
}
