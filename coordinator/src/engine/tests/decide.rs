//! The state table and the permission-menu reading, as pure functions.

#![allow(clippy::unwrap_used)]
use super::super::decide::*;
use crate::context::TaskGraph;
use crate::records::{PermissionPolicy, SessionRecord, Status};
use karl_common::detect::{AgentKind, Detection, PaneState};

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
        hook_answered_ms: 0,
        hook_due_ms: 0,
        cli: None,
    }
}

fn with_cli(
    f: SnapshotFacts<'_>,
    busy: bool,
    prompt_landed: bool,
    since: u64,
) -> SnapshotFacts<'_> {
    SnapshotFacts {
        cli: Some(CliFacts {
            busy,
            prompt_landed,
            disagree_since_ms: since,
        }),
        ..f
    }
}

#[test]
fn an_idle_screen_is_not_typed_into_while_the_transcript_shows_a_turn_in_flight() {
    let s = SessionRecord {
        turns: 1,
        inject_hash: "typed".into(),
        inject_times_ms: vec![900_000],
        ..session()
    };
    let l = Limits::default();
    let idle = det(PaneState::Idle);
    assert_eq!(decide(&s, &facts(&idle, "after"), &l), Decision::Fire);
    assert_eq!(
        decide(
            &s,
            &with_cli(facts(&idle, "after"), true, true, 999_000),
            &l
        ),
        Decision::Wait("the transcript shows a turn in flight")
    );
    // Even with every task done: the turn in flight is not over.
    let mut done = s.clone();
    done.tasks = TaskGraph::from_steps(["only step"]);
    done.tasks.advance(1);
    assert!(matches!(
        decide(
            &done,
            &with_cli(facts(&idle, "after"), true, true, 999_000),
            &l
        ),
        Decision::Wait(_)
    ));
    // A disagreement that lasts is a human's to look at.
    let long = 1_000_000 - l.disagree_escalate_ms - 1;
    assert!(matches!(
        decide(&s, &with_cli(facts(&idle, "after"), true, true, long), &l),
        Decision::Escalate(r) if r.contains("transcript shows a turn in flight")
    ));
    // The transcript says the turn is over: the screen's idle decides as before.
    assert_eq!(
        decide(&s, &with_cli(facts(&idle, "after"), false, true, 0), &l),
        Decision::Fire
    );
}

#[test]
fn a_prompt_missing_from_the_transcript_gets_one_enter() {
    let mut s = SessionRecord {
        turns: 1,
        inject_hash: "typed".into(),
        inject_times_ms: vec![1_000_000 - 5_000],
        awaiting_busy: true,
        history: vec!["Fix the build.".into()],
        ..session()
    };
    let l = Limits::default();
    let idle = det(PaneState::Idle);
    assert_eq!(
        decide(&s, &with_cli(facts(&idle, "typed"), false, false, 0), &l),
        Decision::ResendEnter
    );
    s.enter_resent = true;
    assert!(
        matches!(
            decide(&s, &with_cli(facts(&idle, "typed"), false, false, 0), &l),
            Decision::Recheck(_)
        ),
        "only one Enter"
    );
    s.inject_times_ms = vec![1_000_000 - 10_000];
    assert!(matches!(
        decide(&s, &with_cli(facts(&idle, "typed"), false, false, 0), &l),
        Decision::Escalate(r) if r.contains("never reached the agent's transcript")
    ));
    // Within the grace period: look again, no key.
    s.enter_resent = false;
    s.inject_times_ms = vec![1_000_000 - 500];
    assert!(matches!(
        decide(&s, &with_cli(facts(&idle, "typed"), false, false, 0), &l),
        Decision::Recheck(_)
    ));
    // Our prompt still drawn in the box, but the transcript has it: no Enter.
    s.inject_times_ms = vec![1_000_000 - 5_000];
    let mut draft = det(PaneState::Draft);
    draft.draft = Some("Fix the build.".into());
    assert_eq!(
        decide(&s, &facts(&draft, "typed"), &l),
        Decision::ResendEnter,
        "the screen alone presses Enter"
    );
    assert!(matches!(
        decide(&s, &with_cli(facts(&draft, "typed"), true, true, 0), &l),
        Decision::Recheck(_)
    ));
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

/// A prompt the hook has just answered is the CLI's to close: the screen does not answer it
/// again (its Enter would land on whatever comes next); one still there after the grace is
/// a new prompt and is answered.
#[test]
fn a_permission_the_hook_just_answered_is_left_to_the_cli() {
    let l = Limits::default();
    let p = det(PaneState::Permission);
    let s = SessionRecord {
        permissions: PermissionPolicy::ApproveSafe,
        ..session()
    };
    let mut f = facts(&p, "h");
    f.hook_answered_ms = f.now_ms - 200;
    assert!(matches!(decide(&s, &f, &l), Decision::Recheck(_)));
    f.hook_answered_ms = f.now_ms - HOOK_ANSWER_GRACE_MS;
    assert!(matches!(
        decide(&s, &f, &l),
        Decision::Permission { approve: true, .. }
    ));
}

/// A prompt an expected hook has not spoken for yet waits for it, unless the policy wants a
/// human anyway (the hook would step aside).
#[test]
fn a_permission_waits_for_an_expected_hook_unless_a_human_is_wanted() {
    let l = Limits::default();
    let p = det(PaneState::Permission);
    let mut s = SessionRecord {
        permissions: PermissionPolicy::Deny,
        ..session()
    };
    let mut f = facts(&p, "h");
    f.hook_due_ms = f.now_ms + 1;
    assert!(matches!(decide(&s, &f, &l), Decision::Recheck(_)));
    s.permissions = PermissionPolicy::Escalate;
    assert!(matches!(decide(&s, &f, &l), Decision::Escalate(_)));
    s.permissions = PermissionPolicy::Deny;
    f.hook_due_ms = f.now_ms;
    assert!(matches!(
        decide(&s, &f, &l),
        Decision::Permission { approve: false, .. }
    ));
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
