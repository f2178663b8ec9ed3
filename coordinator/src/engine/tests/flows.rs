//! One behaviour a test, end to end through the machine.

use karl_common::pb;

use super::*;
use crate::records::{InjectStatus, PermissionPolicy, TurnOutcome, TurnSource};

const GOOD: &str = "Add a GET /health route in src/routes.rs that returns ok, then run cargo test";
const NEXT: &str = "Run cargo clippy and fix every warning it reports in src/";

fn started(h: &mut Harness) {
    h.feed(Event::Start { connected: true });
}

/// A session under `approve-safe`, started on `screen`.
fn approve_safe_on(screen: &str) -> Harness {
    let mut rec = record();
    rec.permissions = PermissionPolicy::ApproveSafe;
    let mut h = Harness::new(rec);
    h.screen = snapshot(screen, 1);
    started(&mut h);
    h
}

#[test]
fn a_turn_is_committed_to_disk_before_it_is_typed() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    assert_eq!(h.typed(), [GOOD]);
    let commit = h
        .position(|e| {
            matches!(
                e,
                Effect::CommitTurn {
                    ack: true,
                    durable: true,
                    ..
                }
            )
        })
        .unwrap();
    let typed = h.position(|e| matches!(e, Effect::Type { .. })).unwrap();
    assert!(commit < typed, "committed at {commit}, typed at {typed}");
    let t = &h.turns()[0];
    assert_eq!(
        (t.n, t.source, t.inject),
        (1, TurnSource::Model, InjectStatus::Submitted)
    );
    assert_eq!(h.rec().turns, 1);
    assert!(h.rec().awaiting_busy && h.rec().awaiting_outcome);
}

#[test]
fn an_agent_offline_at_start_is_waited_for() {
    let mut h = Harness::new(record());
    h.feed(Event::Start { connected: false });
    assert_eq!(h.rec().status, Status::Waiting);
    assert!(
        h.rec().reason.contains("not connected"),
        "{}",
        h.rec().reason
    );
    assert!(h.typed().is_empty());
    h.model.push_back(Ok(GOOD.into()));
    h.feed(Event::AgentConnected);
    assert_eq!(h.rec().status, Status::Running);
    assert_eq!(h.typed(), [GOOD]);
}

#[test]
fn a_refused_answer_is_regenerated_then_the_plan_step_is_used() {
    let mut h = Harness::new(record());
    for _ in 0..3 {
        h.model
            .push_back(Ok("rm -rf / and force push to main".into()));
    }
    started(&mut h);
    let t = &h.turns()[0];
    assert_eq!(t.source, TurnSource::Plan);
    assert_eq!(h.typed(), ["Add a GET /health route that returns ok"]);
    assert_eq!(h.rec().gated, 3);
    assert_eq!(t.gate.len(), 4, "{:?}", t.gate);
    assert!(h
        .rec()
        .rejections
        .contains_key(&karl_common::gate::Rule::Destructive));
}

#[test]
fn a_model_error_falls_back_to_the_plan_at_once() {
    let mut h = Harness::new(record());
    h.model.push_back(Err("connection refused".into()));
    started(&mut h);
    assert_eq!(h.turns()[0].source, TurnSource::Plan);
    assert_eq!(h.rec().model_errors, 1);
}

#[test]
fn a_turn_that_cannot_be_recorded_is_never_typed() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(GOOD.into()));
    h.commit_error = Some("No space left on device".into());
    started(&mut h);
    assert!(h.typed().is_empty());
    assert_eq!(h.rec().status, Status::Failed);
    assert!(
        h.rec().reason.contains("No space left"),
        "{}",
        h.rec().reason
    );
    assert!(h.released());
}

#[test]
fn a_refused_injection_escalates_and_blocks_the_turn() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(GOOD.into()));
    h.inject.push_back(Ok(pb::InjectResult {
        outcome: pb::InjectOutcome::Refused as i32,
        reason: "a human is typing in the pane".into(),
        ..Default::default()
    }));
    started(&mut h);
    let t = &h.turns()[0];
    assert_eq!(
        (t.inject, t.outcome),
        (InjectStatus::Refused, TurnOutcome::Blocked)
    );
    assert_eq!(t.reason, "a human is typing in the pane");
    assert_eq!(h.rec().status, Status::Escalated);
    assert!(h.rec().inject_hash.is_empty());
    assert_eq!(h.audits(AuditKind::Refused).len(), 1);
}

#[test]
fn the_turn_is_judged_on_the_next_settled_screen_and_the_next_one_fires() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    h.show(WORKING);
    assert_eq!(h.turns()[0].outcome, TurnOutcome::Pending);
    h.model.push_back(Ok(
        "Write a test for GET /health in tests/health.rs and run it".into(),
    ));
    h.show(IDLE);
    let turns = h.turns();
    assert_eq!(turns[0].outcome, TurnOutcome::Progress);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(h.rec().stalled, 0);
}

#[test]
fn a_snapshot_from_before_our_typing_is_never_acted_on() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    let typed_at = h.rec().typed_at_seq;
    assert!(typed_at > 0);
    // Late: the idle pane from before the prompt went in, with the seq it had then.
    let stale = snapshot(IDLE, typed_at);
    h.model
        .push_back(Ok("Run cargo test and fix what fails".into()));
    h.feed(Event::Snapshot(stale));
    assert_eq!(h.typed().len(), 1, "typed again on a stale screen");
    assert_eq!(h.turns()[0].outcome, TurnOutcome::Pending);
}

#[test]
fn pause_holds_every_action_until_resume() {
    let mut h = approve_safe_on(WORKING);
    h.feed(Event::Operator(super::super::Command::Pause));
    assert_eq!(h.rec().status, Status::Paused);
    for screen in [PERMISSION, DIALOG, EXITED, LIMITED, IDLE] {
        h.show(screen);
        assert_eq!(h.rec().status, Status::Paused, "after {screen}");
    }
    h.feed(Event::AgentDisconnected);
    assert_eq!(h.rec().status, Status::Paused);
    assert!(
        h.typed().is_empty() && h.keys().is_empty(),
        "{:?}",
        h.effects
    );
    h.model.push_back(Ok(GOOD.into()));
    h.feed(Event::Operator(super::super::Command::Resume));
    assert_eq!(h.rec().status, Status::Running, "{}", h.rec().reason);
    assert_eq!(h.typed(), [GOOD], "resume acts on the last screen");
}

#[test]
fn approve_safe_answers_by_label_after_seeing_the_selection() {
    let h = approve_safe_on(PERMISSION);
    assert_eq!(h.keys(), [vec!["Enter".to_string()]]);
    let a = h.audits(AuditKind::Permission);
    assert_eq!(a.len(), 1);
    assert!(
        a[0].detail.starts_with("approved by policy"),
        "{}",
        a[0].detail
    );
    assert!(h.rec().pending_permission.is_none());
}

/// Claude Code may draw its permission prompt while KARL's hook is still deciding: when the
/// hook's answer comes in while the screen path is checking its selection, the CLI closes
/// the prompt itself and no Enter is pressed (it would land on whatever comes next).
#[test]
fn a_hook_answer_while_the_screen_answers_drops_the_screen_answer() {
    let mut h = approve_safe_on(WORKING);
    let perm = snapshot(PERMISSION, 5);
    let fx = h.s.on(h.now, Event::Snapshot(perm.clone()));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::Capture)),
        "the screen path checks the selection first: {fx:?}"
    );
    let fx =
        h.s.on(h.now + 20, permission_hook("touch karl-marker.txt", 9));
    assert!(
        fx.iter().any(|e| matches!(e, Effect::AnswerHook(_))),
        "{fx:?}"
    );
    let fx = h.s.on(h.now + 40, Event::Captured(Ok(perm.clone())));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::SendKeys(_))),
        "no key after the hook answered: {fx:?}"
    );
    // The prompt still on the next screen is the one the CLI is closing.
    let fx =
        h.s.on(h.now + 100, Event::Snapshot(snapshot(PERMISSION, 6)));
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::SendKeys(_) | Effect::Capture)),
        "{fx:?}"
    );
    assert_eq!(h.rec().status, Status::Running, "{}", h.rec().reason);
}

#[test]
fn a_selection_that_never_lands_escalates_without_pressing_enter() {
    let mut rec = record();
    rec.permissions = PermissionPolicy::Deny;
    let mut h = Harness::new(rec);
    // The pane keeps showing the selection where it was.
    h.screen = snapshot(PERMISSION, 1);
    started(&mut h);
    let keys = h.keys();
    assert_eq!(keys.len(), 1, "moves only, no Enter: {keys:?}");
    assert!(keys[0].iter().all(|k| k == "Down"), "{keys:?}");
    assert_eq!(h.rec().status, Status::Escalated);
    assert!(
        h.rec().reason.contains("did not reach"),
        "{}",
        h.rec().reason
    );
    assert!(h.now - T0 >= super::super::permission::SELECTION_TIMEOUT_MS);
}

#[test]
fn a_usage_limit_waits_and_looks_again_a_minute_later() {
    let mut h = Harness::new(record());
    h.screen = snapshot(LIMITED, 1);
    started(&mut h);
    assert_eq!(h.rec().status, Status::Waiting);
    assert!(
        h.rec().reason.starts_with("usage limit reached"),
        "{}",
        h.rec().reason
    );
    let captures = |h: &Harness| {
        h.effects
            .iter()
            .filter(|e| matches!(e, Effect::Capture))
            .count()
    };
    let before = captures(&h);
    h.advance(59_000);
    assert_eq!(captures(&h), before);
    h.screen = snapshot(IDLE, 9);
    h.model.push_back(Ok(GOOD.into()));
    h.advance(1_000);
    assert_eq!(captures(&h), before + 1);
    assert_eq!(h.rec().status, Status::Running);
    assert_eq!(h.typed(), [GOOD]);
}

#[test]
fn an_exited_agent_is_restarted_when_configured_else_escalated() {
    let mut h = Harness::new(record());
    h.screen = snapshot(WORKING, 1);
    started(&mut h);
    h.show(EXITED);
    assert_eq!(h.rec().status, Status::Escalated);
    assert!(h.typed().is_empty());

    let cfg = EngineConfig {
        restart_command: Some("claude --continue".into()),
        ..EngineConfig::default()
    };
    let mut h = Harness::with(record(), cfg);
    h.screen = snapshot(WORKING, 1);
    started(&mut h);
    h.show(EXITED);
    assert_eq!(h.typed(), ["claude --continue"]);
    assert_eq!(h.audits(AuditKind::Restart).len(), 1);
    assert_eq!(h.rec().status, Status::Running);
}

#[test]
fn a_closed_pane_fails_the_session_and_frees_the_pane() {
    let mut h = Harness::new(record());
    h.screen = snapshot(WORKING, 1);
    started(&mut h);
    h.feed(Event::PaneClosed);
    assert_eq!(h.rec().status, Status::Failed);
    assert!(h.released());
    assert_eq!(h.audits(AuditKind::Session).len(), 1);
}

#[test]
fn a_dry_run_records_turns_paced_by_settle_time_and_types_nothing() {
    let mut rec = record();
    rec.dry_run = true;
    rec.max_turns = 3;
    let mut h = Harness::new(rec);
    for _ in 0..3 {
        h.model.push_back(Ok(GOOD.into()));
    }
    started(&mut h);
    assert_eq!(h.turns().len(), 1);
    h.advance(500);
    assert_eq!(h.turns().len(), 1, "paced");
    for _ in 0..8 {
        h.advance(1_000);
    }
    assert!(h.typed().is_empty());
    assert!(h.turns().iter().all(|t| t.inject == InjectStatus::DryRun));
    assert_eq!(h.rec().status, Status::Done, "{}", h.rec().reason);
    assert!(h.released());
    // The summary is frozen at the end: every turn in a phase, in order, none judged.
    let s = h.rec().summary.clone().expect("frozen at the end");
    assert_eq!((s.status, s.turns, s.max_turns), (Status::Done, 3, 3));
    assert_eq!(s.phases.first().map(|p| p.first), Some(1), "{s:?}");
    assert_eq!(s.phases.last().map(|p| p.last), Some(3), "{s:?}");
    assert!(
        s.phases.windows(2).all(|w| w[0].last + 1 == w[1].first),
        "{s:?}"
    );
    let progress = h
        .turns()
        .iter()
        .filter(|t| matches!(t.outcome, TurnOutcome::Progress | TurnOutcome::Complete))
        .count();
    assert_eq!(s.progress_turns as usize, progress, "{s:?}");
    assert_eq!(s.ended_ms, h.rec().updated_ms);
}

#[test]
fn a_watch_the_agent_refuses_fails_and_one_it_cannot_reach_waits() {
    let mut h = Harness::new(record());
    h.watch = Err(CallError {
        fatal: true,
        message: "no pane %1".into(),
    });
    started(&mut h);
    assert_eq!(h.rec().status, Status::Failed);
    let mut h = Harness::new(record());
    h.watch = Err(CallError {
        fatal: false,
        message: "timed out".into(),
    });
    started(&mut h);
    assert_eq!(h.rec().status, Status::Waiting);
    assert!(!h.released());
}

fn launching() -> SessionRecord {
    let mut rec = record();
    rec.launch = "claude".into();
    rec
}

#[test]
fn launch_types_the_command_at_the_shell_then_drives_the_cli_it_starts() {
    let mut h = Harness::new(launching());
    h.screen = shell_snapshot(1);
    h.after_typing = IDLE;
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    assert_eq!(h.launched(), ["claude"]);
    assert!(h.typed().is_empty(), "no prompt into the shell");
    let audit = h.audits(AuditKind::Restart);
    assert!(
        audit[0].detail.starts_with("launched the agent CLI"),
        "{audit:?}"
    );
    assert!(h.rec().launched_ms > 0);
    // The CLI shows its input box: the session drives it.
    h.show(IDLE);
    assert_eq!(h.typed(), [GOOD]);
    assert_eq!(
        h.rec().driven_agent,
        Some(karl_common::detect::AgentKind::Claude)
    );
    // It exits: the launch command restarts it.
    h.show(EXITED);
    assert_eq!(h.launched(), ["claude", "claude"]);
}

#[test]
fn a_launch_that_starts_no_cli_escalates_and_never_types_into_the_shell() {
    let mut h = Harness::new(launching());
    h.screen = shell_snapshot(1);
    h.after_typing = IDLE;
    started(&mut h);
    assert_eq!(h.launched(), ["claude"]);
    h.screen = shell_snapshot(5);
    for _ in 0..70 {
        h.advance(1_000);
        if h.rec().status != Status::Running {
            break;
        }
    }
    assert_eq!(h.rec().status, Status::Escalated);
    assert!(
        h.rec().reason.contains("started no agent CLI"),
        "{}",
        h.rec().reason
    );
    assert!(h.typed().is_empty());
    assert_eq!(h.launched().len(), 1);
}

#[test]
fn a_pane_already_running_the_cli_is_not_launched_into() {
    let mut h = Harness::new(launching());
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    assert!(h.launched().is_empty());
    assert_eq!(h.typed(), [GOOD]);
    let audit = h.audits(AuditKind::Restart);
    assert!(audit[0].detail.contains("already runs"), "{audit:?}");
}

#[test]
fn a_failed_launch_escalates() {
    let mut h = Harness::new(launching());
    h.screen = shell_snapshot(1);
    h.inject.push_back(Err("pane %1 is in copy mode".into()));
    started(&mut h);
    assert_eq!(h.rec().status, Status::Escalated);
    assert!(
        h.rec().reason.contains("could not launch"),
        "{}",
        h.rec().reason
    );
}

/// A prompt whose dangerous command the wording forbids: the rules pass it, in doubt.
const DOUBTFUL: &str = "Make sure the cleanup script never runs `rm -rf /`; delete only target/.";

/// The turn's gate lines mention `what`.
fn assert_gate_says(t: &crate::records::TurnRecord, what: &str) {
    assert!(
        t.gate.iter().any(|l| l.contains(what)),
        "{what:?} not in {:?}",
        t.gate
    );
}

fn opinion_requests(h: &Harness) -> Vec<crate::model::ChatRequest> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::AskModel(r) if r.max_tokens == Some(karl_common::gate::opinion::MAX_TOKENS) => {
                Some(r.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_prompt_in_doubt_is_typed_after_a_safe_second_opinion() {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(DOUBTFUL.into()));
    h.model.push_back(Ok("{\"destructive\": false}".into()));
    started(&mut h);
    assert_eq!(h.typed(), [DOUBTFUL]);
    let asked = opinion_requests(&h);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].temperature, Some(0.0));
    assert!(asked[0].messages[1].content.contains("rm -rf /"));
    let t = &h.turns()[0];
    assert_eq!(t.source, TurnSource::Model);
    assert_gate_says(t, "second opinion: not destructive");
    // Both calls' latency is the turn's.
    assert_eq!(t.model_latency_ms, 80);
}

/// A session whose first answer is in doubt and judged destructive by the second opinion;
/// the model's next answer, GOOD, is typed.
fn judged_destructive_then_good() -> Harness {
    let mut h = Harness::new(record());
    h.model.push_back(Ok(DOUBTFUL.into()));
    h.model.push_back(Ok("{\"destructive\": true}".into()));
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    assert_eq!(h.typed(), [GOOD]);
    h
}

#[test]
fn a_destructive_second_opinion_blocks_and_the_model_is_asked_again() {
    let h = judged_destructive_then_good();
    let t = &h.turns()[0];
    assert_eq!(t.source, TurnSource::Regenerated);
    assert_eq!(h.rec().gated, 1);
    assert!(h
        .rec()
        .rejections
        .contains_key(&karl_common::gate::Rule::Destructive));
    assert_gate_says(t, "second opinion: the model judges it destructive");
    // For export: the refused candidate, against the request it answered; the second
    // opinion's own request is not kept.
    assert_eq!(t.refused.len(), 1);
    assert_eq!(t.refused[0].text, DOUBTFUL);
    assert_eq!(t.refused[0].rules, ["destructive"]);
    assert_eq!((t.refused[0].asked, t.asked.len()), (0, 2));
}

#[test]
fn a_failed_or_unreadable_second_opinion_counts_as_destructive() {
    for answer in [
        Err("timed out after 30 s".to_string()),
        Ok("Looks fine to me!".to_string()),
    ] {
        let mut h = Harness::new(record());
        h.model.push_back(Ok(DOUBTFUL.into()));
        h.model.push_back(answer.clone());
        h.model.push_back(Ok(GOOD.into()));
        started(&mut h);
        assert_eq!(h.typed(), [GOOD], "{answer:?}");
        assert_eq!(h.rec().gated, 1, "{answer:?}");
        // A failed call judged nothing: the candidate is blocked but is no example of a
        // bad answer. An answer that says nothing safe is a refusal like any other.
        let refused = h.turns()[0].refused.len();
        assert_eq!(refused, usize::from(answer.is_ok()), "{answer:?}");
    }
}

#[test]
fn one_text_gets_one_second_opinion() {
    let mut h = Harness::new(record());
    // The same doubtful text twice: the second time the cached "destructive" blocks it
    // without another call.
    h.model.push_back(Ok(DOUBTFUL.into()));
    h.model.push_back(Ok("{\"destructive\": true}".into()));
    h.model.push_back(Ok(DOUBTFUL.into()));
    h.model.push_back(Ok(GOOD.into()));
    started(&mut h);
    assert_eq!(h.typed(), [GOOD]);
    assert_eq!(opinion_requests(&h).len(), 1);
    assert_eq!(h.rec().gated, 2);
}

#[test]
fn a_cached_second_opinion_says_so() {
    let mut h = judged_destructive_then_good();
    // The next turn's first answer is the same text: the cache answers, and says so.
    h.model.push_back(Ok(DOUBTFUL.into()));
    h.model.push_back(Ok(NEXT.into()));
    h.show(WORKING);
    h.show(IDLE);
    assert_eq!(h.typed(), [GOOD, NEXT]);
    assert_eq!(opinion_requests(&h).len(), 1);
    let turns = h.turns();
    assert_gate_says(&turns[0], "second opinion: the model judges it destructive");
    assert!(turns[0].gate.iter().all(|l| !l.contains("(cached)")));
    assert_gate_says(
        &turns[1],
        "second opinion: the model judges it destructive (cached)",
    );
}

#[test]
fn with_second_opinions_off_a_prompt_in_doubt_is_typed() {
    let cfg = EngineConfig {
        second_opinion: false,
        ..EngineConfig::default()
    };
    let mut h = Harness::with(record(), cfg);
    h.model.push_back(Ok(DOUBTFUL.into()));
    started(&mut h);
    assert_eq!(h.typed(), [DOUBTFUL]);
    assert!(opinion_requests(&h).is_empty());
}
