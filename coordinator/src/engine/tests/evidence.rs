//! The machine on the agent CLI's own account: the transcript confirms prompts, holds an
//! idle-looking screen while a turn is in flight, ends turns at once, fills the turn
//! record, and gives the gate the exact tool input.

use std::sync::Arc;

use karl_common::evidence::{wire, CliStatus, Fact, Source, Stamped, TurnEnd};
use karl_common::pb;

use super::*;
use crate::records::{PermissionPolicy, TurnOutcome};

const GOOD: &str = "Add a GET /health route in src/routes.rs that returns ok, then run cargo test";
const NEXT: &str = "Run cargo clippy and fix every warning it reports in src/";

fn evidence(link: pb::EvidenceLink, facts: Vec<Fact>) -> Event {
    let facts = facts
        .into_iter()
        .map(|fact| {
            wire::to_wire(&Stamped {
                fact,
                written_ms: T0,
            })
        })
        .collect();
    Event::Evidence(Arc::new(pb::PaneEvidence {
        pane_id: "%1".into(),
        source: pb::EvidenceSource::Transcript as i32,
        cli_session: "abc-123".into(),
        path: "/Users/dev/.claude/projects/-Users-dev-shop/abc-123.jsonl".into(),
        facts,
        observed_unix_ms: T0,
        link: link as i32,
        detail: "Claude Code 2.1.330 (pid 42)".into(),
        karl_hook: false,
    }))
}

fn attach(h: &mut Harness, replay: Vec<Fact>) {
    h.feed(evidence(pb::EvidenceLink::Attached, replay));
}

fn facts(h: &mut Harness, facts: Vec<Fact>) {
    h.feed(evidence(pb::EvidenceLink::Facts, facts));
}

fn prompt(text: &str) -> Fact {
    Fact::Prompt { text: text.into() }
}

fn ended() -> Fact {
    Fact::TurnEnded {
        how: TurnEnd::Completed,
    }
}

/// Started on an idle screen with the transcript followed: turn 1 typed.
fn typed_first_turn() -> Harness {
    let mut h = Harness::new(record());
    attach(
        &mut h,
        vec![Fact::Status {
            status: CliStatus::Idle,
        }],
    );
    h.model.push_back(Ok(GOOD.into()));
    h.feed(Event::Start { connected: true });
    assert_eq!(h.typed(), [GOOD]);
    assert_eq!(h.rec().evidence, Source::Transcript);
    assert_eq!(h.rec().cli_session, "abc-123");
    h
}

/// Turn 1 typed, confirmed and working; the next model answer ready, and the pane idle
/// for the engine's next look (its facts decide when that is).
fn turn_about_to_end() -> Harness {
    let mut h = typed_first_turn();
    facts(&mut h, vec![prompt(GOOD)]);
    h.show(WORKING);
    h.model.push_back(Ok(NEXT.into()));
    h.screen = snapshot(IDLE, 100);
    h
}

#[test]
fn a_typed_prompt_is_confirmed_by_the_transcript_once() {
    let mut h = typed_first_turn();
    assert_eq!(h.turns()[0].confirmed_by, Source::Screen);
    facts(&mut h, vec![prompt(GOOD)]);
    assert_eq!(h.turns()[0].confirmed_by, Source::Transcript);
    assert_eq!(h.rec().confirmed, 1);
    assert!(h
        .audits(AuditKind::Evidence)
        .iter()
        .all(|a| !a.detail.contains("second time")));
    // The same prompt again: it reached the CLI twice, and that is on record.
    facts(&mut h, vec![ended(), prompt(GOOD)]);
    assert_eq!(h.rec().confirmed, 1);
    let audits = h.audits(AuditKind::Evidence);
    assert!(
        audits.iter().any(|a| a.detail.contains("second time")),
        "{audits:?}"
    );
    // A prompt nobody in KARL typed.
    facts(&mut h, vec![ended(), prompt("what does this repo do?")]);
    let audits = h.audits(AuditKind::Evidence);
    assert!(
        audits.iter().any(|a| a.detail.contains("did not type")),
        "{audits:?}"
    );
}

#[test]
fn an_idle_screen_is_never_typed_into_while_the_transcript_shows_a_turn_in_flight() {
    let mut h = typed_first_turn();
    facts(&mut h, vec![prompt(GOOD)]);
    h.show(WORKING);
    // The screen settles on an idle frame, but the CLI has not closed the turn.
    h.model.push_back(Ok(NEXT.into()));
    h.show(IDLE);
    h.show(IDLE);
    assert_eq!(h.typed(), [GOOD], "typed into a turn in flight");
    assert_eq!(
        h.turns()[0].outcome,
        TurnOutcome::Pending,
        "judged too early"
    );
    assert_eq!(h.rec().disagreements, 1, "one disagreement, audited once");
    let audits = h.audits(AuditKind::Evidence);
    let d: Vec<_> = audits
        .iter()
        .filter(|a| a.detail.contains("disagreement"))
        .collect();
    assert_eq!(d.len(), 1, "{audits:?}");
    assert!(d[0].detail.contains("screen: idle by rule") && d[0].detail.contains(GOOD));
    // The transcript closes the turn: the engine looks at once, the screen agrees, and
    // the turn is judged on the agent's own words.
    let before = h.effects.len();
    facts(
        &mut h,
        vec![
            Fact::ToolCall {
                id: "t1".into(),
                name: "Bash".into(),
                input: r#"{"command":"cargo test"}"#.into(),
            },
            Fact::ToolResult {
                id: "t1".into(),
                ok: true,
                output: "test result: ok".into(),
            },
            Fact::AssistantText {
                text: "Added the route; cargo test passes.".into(),
            },
            ended(),
        ],
    );
    assert!(
        matches!(h.effects.get(before), Some(Effect::Capture)),
        "no capture on the turn end: {:?}",
        &h.effects[before..]
    );
    assert_eq!(h.typed(), [GOOD, NEXT]);
    let t = &h.turns()[0];
    assert_eq!(t.outcome, TurnOutcome::Progress);
    assert_eq!(t.judged_by, Source::Transcript);
    assert_eq!(t.response, "Added the route; cargo test passes.");
    assert_eq!(t.tools, ["Bash cargo test: ok"]);
}

#[test]
fn an_api_error_in_the_transcript_is_an_error_turn_whatever_the_screen() {
    // The error is on screen by the time the engine looks.
    let mut h = turn_about_to_end();
    facts(
        &mut h,
        vec![
            Fact::ApiError {
                status: 529,
                message: "API Error: 529 Overloaded".into(),
                limit: false,
                resets: None,
            },
            Fact::TurnEnded {
                how: TurnEnd::ApiError,
            },
        ],
    );
    let t = &h.turns()[0];
    assert_eq!(t.outcome, TurnOutcome::Error, "{t:?}");
    assert_eq!(t.judged_by, Source::Transcript);
}

#[test]
fn a_lost_enter_is_repaired_from_the_transcript_once() {
    let mut h = typed_first_turn();
    // The screen reads idle, the transcript never shows the prompt.
    h.after_typing = IDLE;
    h.advance(4000);
    h.show(IDLE);
    assert_eq!(h.keys(), [vec!["Enter".to_string()]]);
    assert_eq!(h.audits(AuditKind::Enter).len(), 1);
    h.advance(1000);
    h.show(IDLE);
    assert_eq!(h.keys().len(), 1, "one Enter only");
    // It lands now: no more keys, and the turn goes on.
    facts(&mut h, vec![prompt(GOOD)]);
    assert_eq!(h.turns()[0].confirmed_by, Source::Transcript);
    assert_eq!(h.keys().len(), 1);
}

#[test]
fn approve_safe_judges_the_exact_tool_input_from_the_transcript() {
    // The screen shows `sleep 25 && touch .build-done`; the transcript's pending call is
    // what will actually run.
    for (command, approved) in [
        ("sleep 25 && touch .build-done", true),
        ("rm -rf ~/projects", false),
    ] {
        let mut rec = record();
        rec.permissions = PermissionPolicy::ApproveSafe;
        let mut h = Harness::new(rec);
        h.screen = snapshot(PERMISSION, 1);
        let input = serde_json::json!({ "command": command }).to_string();
        attach(
            &mut h,
            vec![
                prompt("Run the build"),
                Fact::ToolCall {
                    id: "t9".into(),
                    name: "Bash".into(),
                    input,
                },
            ],
        );
        h.feed(Event::Start { connected: true });
        if approved {
            assert_eq!(h.keys(), [vec!["Enter".to_string()]], "{command}");
        } else {
            assert!(h.keys().is_empty(), "{command}: {:?}", h.keys());
            assert_eq!(h.rec().status, Status::Escalated);
            assert!(h.rec().reason.contains("destructive"), "{}", h.rec().reason);
        }
    }
}

#[test]
fn without_a_transcript_the_screen_decides_as_before() {
    let mut h = typed_first_turn();
    facts(&mut h, vec![prompt(GOOD)]);
    h.show(WORKING);
    h.feed(evidence(pb::EvidenceLink::Detached, vec![]));
    assert_eq!(h.rec().evidence, Source::Screen);
    h.model.push_back(Ok(NEXT.into()));
    h.show(IDLE);
    assert_eq!(h.typed(), [GOOD, NEXT], "{:?}", h.turns());
    assert_eq!(h.turns()[0].judged_by, Source::Screen);
}

fn hook_answers(h: &Harness) -> Vec<pb::HookAnswer> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::AnswerHook(a) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_permission_request_hook_is_answered_by_policy_on_the_exact_input() {
    use pb::HookDecision::{Allow, Deny, StepAside};
    for (policy, command, want) in [
        (
            PermissionPolicy::ApproveSafe,
            "touch karl-marker.txt",
            Allow,
        ),
        (
            PermissionPolicy::ApproveSafe,
            "rm -rf ~/projects",
            StepAside,
        ),
        // Only a mention of a dangerous command, but the gate is in doubt: a human decides.
        (
            PermissionPolicy::ApproveSafe,
            "grep -rn 'rm -rf' scripts/",
            StepAside,
        ),
        (PermissionPolicy::Deny, "touch karl-marker.txt", Deny),
        (
            PermissionPolicy::Escalate,
            "touch karl-marker.txt",
            StepAside,
        ),
    ] {
        let mut rec = record();
        rec.permissions = policy;
        let mut h = Harness::new(rec);
        h.model.push_back(Ok(GOOD.into()));
        h.feed(Event::Start { connected: true });
        h.feed(permission_hook(command, 7));
        let answers = hook_answers(&h);
        assert_eq!(answers.len(), 1, "{policy:?} {command}");
        assert_eq!(answers[0].hook_request, 7);
        assert_eq!(answers[0].decision(), want, "{policy:?} {command}");
        let audited = h.audits(AuditKind::Permission);
        assert_eq!(audited.len(), usize::from(want != StepAside), "{audited:?}");
        assert!(h.keys().is_empty(), "a hook is never answered with keys");
    }
    // Paused: the hook steps aside whatever the policy.
    let mut rec = record();
    rec.permissions = PermissionPolicy::Deny;
    let mut h = Harness::new(rec);
    h.model.push_back(Ok(GOOD.into()));
    h.feed(Event::Start { connected: true });
    h.feed(Event::Operator(crate::engine::Command::Pause));
    h.feed(permission_hook("touch x", 8));
    assert_eq!(hook_answers(&h)[0].decision(), StepAside);
}

fn check(exit_code: i32, output: &str) -> Result<pb::CheckResult, String> {
    Ok(pb::CheckResult {
        exit_code,
        output: output.into(),
        elapsed_ms: 1200,
        timed_out: false,
        cwd: "/Users/dev/shop".into(),
    })
}

/// A plan-only session with `--verify`: done only after the command passes; a failure
/// becomes the next turn's task, carrying the failure's last line.
#[test]
fn a_session_is_done_only_after_its_verify_command_passes() {
    let mut rec = record();
    rec.plan_only = true;
    rec.tasks = crate::context::TaskGraph::from_steps(["Add a GET /health route that returns ok"]);
    rec.verify = "cargo test".into();
    let mut h = Harness::new(rec);
    h.checks.push_back(check(
        101,
        "running 3 tests\ntest health ... FAILED\ntest result: FAILED. 2 passed; 1 failed",
    ));
    h.checks.push_back(check(0, "test result: ok. 3 passed"));
    h.feed(Event::Start { connected: true });
    assert_eq!(h.typed().len(), 1);
    h.show(WORKING);
    h.show(IDLE);
    // Every planned task is typed: the verify command runs, fails, and the next turn
    // asks for the fix.
    let typed = h.typed();
    assert_eq!(typed.len(), 2, "{typed:?}");
    assert!(
        typed[1].starts_with(
            "Make `cargo test` pass: it exited 101 with: test result: FAILED. 2 passed; 1 failed"
        ),
        "{} {:?}",
        typed[1],
        h.turns()
    );
    assert_eq!(h.rec().status, Status::Running);
    let v = h.audits(AuditKind::Verify);
    assert_eq!(v.len(), 1);
    assert!(v[0].detail.starts_with("exited 101"), "{}", v[0].detail);
    // The fix turn ends; the command passes: done, and says so.
    h.show(WORKING);
    h.after_typing = IDLE;
    h.screen = snapshot(IDLE, 90);
    h.show(IDLE);
    assert_eq!(h.rec().status, Status::Done, "{}", h.rec().reason);
    assert!(
        h.rec().reason.contains("verified: `cargo test` exited 0"),
        "{}",
        h.rec().reason
    );
    assert_eq!(h.rec().verify_runs, 2);
    // Both turns made progress; the summary froze at the end says so.
    let summary = h.rec().summary.clone().expect("frozen at the end");
    assert_eq!(
        (summary.turns, summary.progress_turns),
        (2, 2),
        "{summary:?}"
    );
    assert!((summary.efficiency - 1.0).abs() < 1e-9);
    let end = h.audits(AuditKind::Session);
    assert!(
        end.last()
            .is_some_and(|a| a.detail.contains("2 with progress (efficiency 100%)")),
        "{end:?}"
    );
}

#[test]
fn a_verify_command_that_keeps_failing_is_escalated() {
    let mut rec = record();
    rec.plan_only = true;
    rec.tasks = crate::context::TaskGraph::from_steps(["Add a GET /health route that returns ok"]);
    rec.verify = "cargo test".into();
    let mut h = Harness::new(rec);
    for _ in 0..2 {
        h.checks
            .push_back(check(1, "error[E0308]: mismatched types"));
    }
    h.feed(Event::Start { connected: true });
    for _ in 0..3 {
        h.show(WORKING);
        h.show(IDLE);
    }
    assert_eq!(
        h.rec().status,
        Status::Escalated,
        "{} {:?}",
        h.rec().reason,
        h.turns()
    );
    assert!(
        h.rec()
            .reason
            .contains("`cargo test` failed the same way after the fix turn: error[E0308]"),
        "{}",
        h.rec().reason
    );
    assert_eq!(h.rec().verify_runs, 2);
    assert_eq!(h.typed().len(), 2, "no third turn on a repeated failure");
    // And a verify that cannot run at all says why.
    let mut rec = record();
    rec.plan_only = true;
    rec.tasks = crate::context::TaskGraph::from_steps(["Add a GET /health route that returns ok"]);
    rec.verify = "cargo test".into();
    let mut h = Harness::new(rec);
    h.checks.push_back(Err("the agent is gone".into()));
    h.feed(Event::Start { connected: true });
    h.show(WORKING);
    h.show(IDLE);
    assert_eq!(h.rec().status, Status::Escalated);
    assert!(
        h.rec().reason.contains("could not run: the agent is gone"),
        "{}",
        h.rec().reason
    );
}

/// The agent saying "Done" closes nothing: a model-written turn closes its task only when
/// the transcript shows a tool call that succeeded.
#[test]
fn the_agent_s_claim_alone_never_closes_a_task() {
    let mut h = turn_about_to_end();
    facts(
        &mut h,
        vec![
            Fact::AssistantText {
                text: "Done. The health endpoint is in place.".into(),
            },
            ended(),
        ],
    );
    assert_eq!(
        h.turns()[0].outcome,
        TurnOutcome::Progress,
        "the turn was judged"
    );
    assert_eq!(h.rec().tasks.done_count(), 0, "closed on words alone");
    // With a tool call that succeeded, the same words close the task.
    let mut h = turn_about_to_end();
    facts(
        &mut h,
        vec![
            Fact::ToolCall {
                id: "w1".into(),
                name: "Write".into(),
                input: r#"{"file_path":"src/health.rs"}"#.into(),
            },
            Fact::ToolResult {
                id: "w1".into(),
                ok: true,
                output: "File created".into(),
            },
            Fact::AssistantText {
                text: "Done. The health endpoint is in place.".into(),
            },
            ended(),
        ],
    );
    assert_eq!(h.turns()[0].outcome, TurnOutcome::Progress);
    assert_eq!(h.rec().tasks.done_count(), 1);
}

/// The agent found the transcript only after our prompt was typed and answered: the
/// replay it attaches with confirms the prompt.
#[test]
fn a_late_attach_confirms_the_prompt_from_its_replay() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(GOOD.into()));
    h.feed(Event::Start { connected: true });
    assert_eq!(h.typed(), [GOOD]);
    attach(&mut h, vec![prompt(GOOD), ended()]);
    assert_eq!(h.turns()[0].confirmed_by, Source::Transcript);
    assert_eq!(h.rec().confirmed, 1);
    let audits = h.audits(AuditKind::Evidence);
    assert!(
        audits.iter().all(|a| !a.detail.contains("did not type")),
        "{audits:?}"
    );
}

/// Reports lost on the way (the session fell behind its agent): the transcript state is
/// dropped, the screen decides, and a new watch asks the agent for the whole state again.
#[test]
fn lost_reports_hand_back_to_the_screen_and_watch_again() {
    let mut h = typed_first_turn();
    let watches = |h: &Harness| {
        h.effects
            .iter()
            .filter(|e| matches!(e, Effect::Watch))
            .count()
    };
    let before = watches(&h);
    h.feed(Event::ReportsLost);
    assert_eq!(h.rec().evidence, Source::Screen);
    assert_eq!(watches(&h), before + 1, "no new watch");
    // The agent's new follower attaches with the state so far.
    attach(&mut h, vec![prompt(GOOD)]);
    assert_eq!(h.rec().evidence, Source::Transcript);
    assert_eq!(h.turns()[0].confirmed_by, Source::Transcript);
}

/// A session under `approve-safe` on a working pane whose transcript is attached; with
/// `hooked`, the agent found KARL's hook in the CLI's settings.
fn approve_safe_attached(hooked: bool) -> Harness {
    let mut rec = record();
    rec.permissions = PermissionPolicy::ApproveSafe;
    let mut h = Harness::new(rec);
    h.screen = snapshot(WORKING, 1);
    let Event::Evidence(ev) = evidence(pb::EvidenceLink::Attached, Vec::new()) else {
        unreachable!("evidence() builds an evidence event");
    };
    let mut ev = (*ev).clone();
    ev.karl_hook = hooked;
    h.feed(Event::Evidence(Arc::new(ev)));
    h.feed(Event::Start { connected: true });
    h
}

/// Claude Code runs its `PermissionRequest` hook while it draws the prompt: with KARL's hook
/// in its settings, the prompt on screen is left to the hook, and no key is pressed when
/// the hook comes late.
#[test]
fn a_prompt_is_left_to_an_expected_hook_that_comes_late() {
    let mut h = approve_safe_attached(true);
    h.show(PERMISSION);
    h.advance(1_500);
    h.advance(1_500);
    assert!(h.keys().is_empty(), "{:?}", h.keys());
    assert!(h.audits(AuditKind::Permission).is_empty());
    h.feed(permission_hook("touch karl-marker.txt", 7));
    assert!(
        h.effects.iter().any(|e| matches!(e, Effect::AnswerHook(_))),
        "the hook is answered"
    );
    h.show(PERMISSION);
    h.advance(1_000);
    assert!(h.keys().is_empty(), "{:?}", h.keys());
    let a = h.audits(AuditKind::Permission);
    assert_eq!(a.len(), 1, "{a:?}");
    assert!(
        a[0].detail.contains("through the PermissionRequest hook"),
        "{}",
        a[0].detail
    );
}

/// A hook that never comes (the agent's socket is gone, the hook was removed) holds the
/// prompt only for its wait; then the screen answers it as without hooks.
#[test]
fn an_expected_hook_that_never_comes_is_answered_on_screen_after_the_wait() {
    let mut h = approve_safe_attached(true);
    h.show(PERMISSION);
    let shown = h.now;
    while h.keys().is_empty() && h.now < shown + 20_000 {
        h.advance(500);
    }
    assert_eq!(h.keys(), [vec!["Enter".to_string()]]);
    assert!(
        h.now >= shown + super::super::decide::HOOK_WAIT_MS,
        "{}",
        h.now - shown
    );
    let a = h.audits(AuditKind::Permission);
    assert!(
        a[0].detail.starts_with("approved by policy"),
        "{}",
        a[0].detail
    );
}

/// Without KARL's hook in sight the screen answers at once, as it always did.
#[test]
fn without_a_hook_in_sight_the_screen_answers_at_once() {
    let mut h = approve_safe_attached(false);
    h.show(PERMISSION);
    assert_eq!(h.keys(), [vec!["Enter".to_string()]]);
}
