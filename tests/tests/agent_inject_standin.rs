//! The agent's injection path (`karl_agent::panes::PaneHost::inject`, with the real
//! classifier) against the stand-in coding agent in a real tmux pane: tricky multi-line
//! text arrives byte for byte as one prompt, a dropped first Enter still gives exactly one
//! prompt, text is never pasted twice while Enter keeps getting lost, a human draft, a dialog, a busy agent and copy mode are refused, and dim ghost
//! suggestion text is not mistaken for a draft.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use karl_agent::panes::PaneHost;
use karl_common::pb;
use karl_tests::standin::log::LogEvent;
use karl_tests::standin::tmux::{StandinPane, StandinSpec};
use karl_tests::tmux_server::TmuxServer;
use tokio::sync::mpsc;

const BIN: &str = env!("CARGO_BIN_EXE_karl-standin");
const WAIT: Duration = Duration::from_secs(15);

/// Every character class that has broken prompt injection somewhere: shell
/// metacharacters, command substitution, quotes, backslashes, tabs, non-ASCII, and the
/// tmux key names `Enter` and `C-c` as plain words.
const TRICKY: &str = "Fix the parser; then run `cargo test` && echo ok | tee log.txt\n\
Check $(whoami) and ${HOME}, 'single' \"double\" \\backslash\\ \\n (not a newline)\n\
\tthis line starts with a tab\tand has another\n\
unicode: naïve café 日本語 🚀 — done\n\
literal words: Enter C-c Escape\n\
last line;";

fn server() -> TmuxServer {
    TmuxServer::start().expect("tmux is required for these tests (CI installs it)")
}

fn host(server: &TmuxServer) -> PaneHost {
    let (tx, _rx) = mpsc::channel(64);
    PaneHost::new(server.tmux(), tx)
}

fn inject(target: &str, text: &str) -> pb::Inject {
    pb::Inject {
        target: target.into(),
        text: text.into(),
        ..Default::default()
    }
}

fn outcome(r: &pb::InjectResult) -> pb::InjectOutcome {
    pb::InjectOutcome::try_from(r.outcome).unwrap()
}

/// Polls `check` every 50 ms (without blocking the runtime) until it holds; panics with
/// `describe()` after 15 s.
async fn until(what: &str, mut check: impl FnMut() -> bool, describe: impl Fn() -> String) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "timed out after {WAIT:?} waiting for {what}; last seen:\n{}",
                describe()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn screen_shows(p: &StandinPane<'_>, marker: &str) {
    until(
        marker,
        || p.screen().is_ok_and(|s| s.contains(marker)),
        || p.screen().unwrap_or_default(),
    )
    .await;
}

async fn some_prompt(p: &StandinPane<'_>) {
    until(
        "a prompt in the log",
        || !p.prompts().is_empty(),
        || format!("{:?}", p.log()),
    )
    .await;
}

async fn idle(p: &StandinPane<'_>) {
    screen_shows(p, "? for shortcuts").await;
}

fn dropped_enters(p: &StandinPane<'_>) -> usize {
    p.log()
        .iter()
        .filter(|l| matches!(l.event, LogEvent::DroppedEnter))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tricky_multi_line_text_arrives_byte_for_byte_as_one_prompt() {
    let tmux = server();
    let p = StandinSpec::new(BIN).start(&tmux).unwrap();
    idle(&p).await;
    let host = host(&tmux);
    let r = host.inject(inject(&p.pane, TRICKY)).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Submitted,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    assert_eq!(r.enter_retries, 0);
    assert_eq!(r.pane_id, p.pane);
    some_prompt(&p).await;
    // Let any stray second submission show up before checking there is none.
    idle(&p).await;
    assert_eq!(p.prompts(), vec![TRICKY.to_string()]);
    assert_eq!(
        tmux.run(&["list-buffers"]).unwrap(),
        "",
        "the paste buffer is deleted"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_first_enter_still_gives_the_prompt_exactly_once() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .arg("--drop-first-enter")
        .start(&tmux)
        .unwrap();
    idle(&p).await;
    let host = host(&tmux);
    let text = "add a health endpoint\nwith a test";
    let r = host.inject(inject(&p.pane, text)).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::SubmittedAfterRetry,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    assert_eq!(r.enter_retries, 1);
    some_prompt(&p).await;
    idle(&p).await;
    assert_eq!(p.prompts(), vec![text.to_string()]);
    assert_eq!(dropped_enters(&p), 1);
    host.shutdown().await;
}

/// Enter keeps getting lost: Enter is resent a bounded number of times, the text stays in
/// the box and is never pasted again — the same prompt again sends Enter only, another
/// prompt is refused — until an Enter is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_is_never_pasted_twice_when_enter_keeps_getting_lost() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .arg("--drop-enters")
        .arg("4")
        .start(&tmux)
        .unwrap();
    idle(&p).await;
    let host = host(&tmux);
    let mut i = inject(&p.pane, "please run the tests");
    i.max_enter_retries = 1;
    let r = host.inject(i.clone()).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Failed, "{r:?}");
    assert_eq!(r.enter_retries, 1);
    assert!(r.reason.contains("left in the input box"), "{}", r.reason);
    // The same prompt again: the box already holds it, so only Enter is sent.
    let r = host.inject(i.clone()).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Failed, "{r:?}");
    // A different prompt would land on top of ours: refused.
    let r = host.inject(inject(&p.pane, "something else")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(r.reason.contains("earlier prompt"), "{}", r.reason);
    // Four Enters were dropped; the fifth is taken.
    let r = host.inject(i).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Submitted,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    some_prompt(&p).await;
    assert_eq!(p.prompts(), vec!["please run the tests".to_string()]);
    assert_eq!(dropped_enters(&p), 4);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_draft_is_refused_and_left_alone() {
    let tmux = server();
    let p = StandinSpec::new(BIN).start(&tmux).unwrap();
    idle(&p).await;
    tmux.run(&["send-keys", "-t", &p.pane, "-l", "my own half-written idea"])
        .unwrap();
    screen_shows(&p, "my own half-written idea").await;
    let host = host(&tmux);
    let r = host.inject(inject(&p.pane, "run the tests")).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Refused,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    assert!(r.reason.contains("did not type"), "{}", r.reason);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(p.prompts().is_empty());
    let screen = p.screen().unwrap();
    assert!(
        screen.contains("my own half-written idea") && !screen.contains("run the tests"),
        "{screen}"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ghost_suggestion_text_is_not_a_draft() {
    let tmux = server();
    let ghost = "Try \"refactor the parser\"";
    let p = StandinSpec::new(BIN)
        .arg("--ghost")
        .arg(ghost)
        .start(&tmux)
        .unwrap();
    screen_shows(&p, ghost).await;
    let host = host(&tmux);
    let r = host.inject(inject(&p.pane, "write the changelog")).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Submitted,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    some_prompt(&p).await;
    assert_eq!(
        p.prompts(),
        vec!["write the changelog".to_string()],
        "the ghost text is not part of it"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_busy_agents_and_copy_mode_are_refused() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .arg("--dialog")
        .script(r#"{"turns": [{"work_ms": 3000, "reply": {"answer": "done slowly"}}]}"#)
        .start(&tmux)
        .unwrap();
    screen_shows(&p, "Quick safety check").await;
    let host = host(&tmux);
    let r = host.inject(inject(&p.pane, "hello there")).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Refused,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    assert!(r.reason.contains("dialog"), "{}", r.reason);

    p.keys(&["Enter"]).unwrap();
    idle(&p).await;
    let r = host.inject(inject(&p.pane, "start the slow turn")).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Submitted,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    screen_shows(&p, "esc to interrupt").await;
    let r = host.inject(inject(&p.pane, "while it works")).await;
    assert_eq!(
        outcome(&r),
        pb::InjectOutcome::Refused,
        "{r:?}\n{}",
        p.screen().unwrap()
    );
    assert!(r.reason.contains("busy"), "{}", r.reason);

    idle(&p).await;
    tmux.run(&["copy-mode", "-t", &p.pane]).unwrap();
    let r = host.inject(inject(&p.pane, "in copy mode")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(r.reason.contains("copy mode"), "{}", r.reason);

    assert_eq!(p.prompts(), vec!["start the slow turn".to_string()]);
    assert!(
        !p.log()
            .iter()
            .any(|l| matches!(l.event, LogEvent::Stray { .. })),
        "nothing was typed into the dialog: {:?}",
        p.log()
    );
    host.shutdown().await;
}
