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
    /// How long an idle-looking screen may disagree with a transcript showing a turn in
    /// flight before a human is asked.
    pub disagree_escalate_ms: u64,
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
            disagree_escalate_ms: 10 * 60 * 1000,
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
        // A session that launches its CLI drives that CLI, not the shell it starts from.
        let launching = !s.launch.is_empty() && d.agent == AgentKind::Shell;
        if d.agent != AgentKind::Unknown && !launching {
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
    /// When a Claude Code `PermissionRequest` hook was last answered for this session (0:
    /// never): the CLI closes its own prompt then, so the screen must not answer it too.
    pub hook_answered_ms: u64,
    /// Until when the prompt on screen is left to a Claude Code `PermissionRequest` hook
    /// that is expected but has not spoken yet (0: none expected): the CLI runs the hook
    /// while it shows the prompt, and an answer by keys would race the hook's.
    pub hook_due_ms: u64,
    /// What the agent CLI's transcript says; `None` when it is not followed (the screen
    /// alone decides).
    pub cli: Option<CliFacts>,
}

/// The transcript's view of the pane, for [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliFacts {
    /// A turn is in flight (a prompt the CLI has not closed).
    pub busy: bool,
    /// Our last typed prompt is in the transcript (true when none is awaited).
    pub prompt_landed: bool,
    /// Since when an idle screen has disagreed with a busy transcript (0: not).
    pub disagree_since_ms: u64,
}

/// How long after a hook answered a permission a permission prompt on screen is taken for
/// the one the CLI is still closing, not a new one to answer by keys.
pub const HOOK_ANSWER_GRACE_MS: u64 = 3_000;

/// How long a permission prompt on screen waits for an expected `PermissionRequest` hook
/// before the screen answers it (the hook reporter itself gives up after 8 s; the hook
/// normally reaches KARL within a second of the prompt).
pub const HOOK_WAIT_MS: u64 = 5_000;

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
        PaneState::Permission
            if f.hook_answered_ms != 0
                && f.now_ms.saturating_sub(f.hook_answered_ms) < HOOK_ANSWER_GRACE_MS =>
        {
            Decision::Recheck("the hook answered this permission; the CLI is closing its prompt")
        }
        PaneState::Permission
            if f.now_ms < f.hook_due_ms && s.permissions != PermissionPolicy::Escalate =>
        {
            Decision::Recheck("waiting for the CLI's PermissionRequest hook to ask KARL")
        }
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
            let landed = f.cli.is_some_and(|c| c.prompt_landed && c.busy);
            if is_ours && landed {
                // The CLI has it (the box has not redrawn yet): never Enter again.
                Decision::Recheck("the transcript shows our prompt landed")
            } else if is_ours && since_typed < limits.draft_grace_ms {
                Decision::Recheck("our prompt may still be landing")
            } else if (s.awaiting_busy || f.cli.is_some_and(|c| !c.prompt_landed))
                && is_ours
                && !s.enter_resent
            {
                // The pane never took it, or the transcript shows it never arrived.
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
            if let Some(cli) = f.cli {
                if cli.busy {
                    let since = f.now_ms.saturating_sub(cli.disagree_since_ms);
                    if cli.disagree_since_ms != 0 && since > limits.disagree_escalate_ms {
                        // A fixed text: the same escalation is not written again each look.
                        return Decision::Escalate(format!(
                            "the screen has looked idle for over {} min while the agent's transcript shows a turn in flight",
                            limits.disagree_escalate_ms / 60_000
                        ));
                    }
                    return Decision::Wait("the transcript shows a turn in flight");
                }
                let since_typed = f
                    .now_ms
                    .saturating_sub(s.inject_times_ms.last().copied().unwrap_or(0));
                if !cli.prompt_landed && s.turns > 0 {
                    if since_typed < limits.draft_grace_ms {
                        return Decision::Recheck("our prompt is not in the transcript yet");
                    }
                    if !s.enter_resent {
                        return Decision::ResendEnter;
                    }
                    if since_typed < 3 * limits.draft_grace_ms {
                        return Decision::Recheck("waiting for the Enter we pressed to land");
                    }
                    return Decision::Escalate(
                        "our prompt never reached the agent's transcript, even after one more Enter"
                            .into(),
                    );
                }
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
