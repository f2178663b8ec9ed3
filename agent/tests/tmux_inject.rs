//! Injection and send-keys against a real tmux pane running a small bracketed-paste TUI
//! (tmux_support/tui.py, python3): text arrives byte for byte as one submission, a program
//! KARL cannot read gets the text once and one Enter, copy mode and dead panes are refused,
//! injections into one pane are serialized, and send-keys holds to its allowlist.
//!
//! KARL has no rules for this TUI (python3 in the foreground), so these injections are
//! forced and unverified: they test the typing mechanics. Enter resends, the never-paste-
//! twice rule and what the classifier lets through are tested against `karl-standin`, whose
//! screens KARL reads, in the tests crate.
#![allow(clippy::unwrap_used)]

mod tmux_support;

use std::time::Duration;

use karl_agent::error::AgentError;
use karl_common::pb;
use karl_tests::tmux_server::TmuxServer;
use tmux_support::*;

const NASTY: &str = "Fix the parser; then run `cargo test`.\n\
    Check $(whoami) and ${HOME} — don't expand them!\n\
    'single' \"double\" back\\slash \\n \\\\ tab\there\n\
    unicode: ünïcødé ✓ 日本語 🚀\n\
    literal words: Enter C-c Escape \\; ;";

fn inject(target: &str, text: &str) -> pb::Inject {
    pb::Inject {
        target: target.into(),
        text: text.into(),
        force: true,
        ..Default::default()
    }
}

fn outcome(r: &pb::InjectResult) -> pb::InjectOutcome {
    pb::InjectOutcome::try_from(r.outcome).unwrap()
}

async fn ready(server: &TmuxServer, pane: &str) {
    assert!(
        wait_for_text(server, pane, "stand-in tui", Duration::from_secs(10)).await,
        "the TUI did not start (is python3 installed?)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_line_text_arrives_byte_for_byte_as_one_submission() {
    let server = TmuxServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "inj", dir.path(), "");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);
    let r = host.inject(inject("inj:0.0", NASTY)).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Submitted, "{r:?}");
    assert_eq!(r.pane_id, pane);
    assert_eq!(r.enter_retries, 0);
    assert!(r.elapsed_ms >= 150, "waited the enter delay: {r:?}");
    assert!(eventually(Duration::from_secs(5), || prompts(&log).len() == 1).await);
    assert_eq!(prompts(&log), vec![NASTY.to_string()]);
    assert_eq!(pastes(&log), 1);
    // The buffer was deleted by the paste.
    assert_eq!(server.run(&["list-buffers"]).unwrap(), "");

    // A second prompt is a second submission, also exact.
    let r = host.inject(inject(&pane, "second\tprompt")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Submitted, "{r:?}");
    assert!(eventually(Duration::from_secs(5), || prompts(&log).len() == 2).await);
    assert_eq!(prompts(&log)[1], "second\tprompt");
    host.shutdown().await;
}

/// The TUI is a program KARL has no rules for (python3 in the foreground): an unforced
/// send is refused naming it; a forced one is typed once with one Enter and reported as
/// submitted — no Enter resends where no input box can be read (regression: `send --force`
/// into a REPL pressed Enter three times and reported failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_karl_cannot_read_gets_the_text_once_and_one_enter() {
    let server = TmuxServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "repl", dir.path(), "--drop-enters 1");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);

    let mut unforced = inject(&pane, "print(1)");
    unforced.force = false;
    let r = host.inject(unforced).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(
        r.reason.contains("\"python3\"") && r.reason.contains("--force"),
        "{}",
        r.reason
    );
    assert_eq!(pastes(&log), 0, "nothing typed when refused");

    let r = host.inject(inject(&pane, "print(1)")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Submitted, "{r:?}");
    assert_eq!(r.enter_retries, 0);
    assert!(r.reason.contains("not verified"), "{}", r.reason);
    assert!(eventually(Duration::from_secs(5), || pastes(&log) == 1).await);
    // The one Enter was the one this TUI drops: nothing submitted, and no second Enter
    // came to submit it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(pastes(&log), 1, "pasted once");
    assert!(
        prompts(&log).is_empty(),
        "a second Enter was sent: {:?}",
        prompts(&log)
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_mode_dead_panes_and_control_characters_are_refused() {
    let server = TmuxServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "cm", dir.path(), "");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);

    server.run(&["copy-mode", "-t", &pane]).unwrap();
    let r = host.inject(inject(&pane, "hello")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(r.reason.contains("copy mode"), "{}", r.reason);
    let e = host
        .send_keys(pb::SendKeys {
            target: pane.clone(),
            keys: vec!["Enter".into()],
        })
        .await
        .unwrap_err();
    assert!(matches!(e, AgentError::PaneInMode { .. }), "{e}");
    server
        .run(&["send-keys", "-t", &pane, "-X", "cancel"])
        .unwrap();

    let r = host.inject(inject(&pane, "a\x1b[201~\rrm -rf /\r")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(r.reason.contains("control character"), "{}", r.reason);
    let r = host.inject(inject(&pane, "  ")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    let r = host.inject(inject("not a target", "hi")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    let r = host.inject(inject("%9999", "hi")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Failed, "{r:?}");
    assert!(r.reason.contains("%9999"), "{}", r.reason);

    server
        .run(&["set-option", "-g", "remain-on-exit", "on"])
        .unwrap();
    let dead = server.new_window("cm", "true").unwrap();
    assert!(
        eventually(Duration::from_secs(5), || server
            .run(&["display-message", "-p", "-t", &dead, "#{pane_dead}"])
            .unwrap()
            .trim()
            == "1")
        .await
    );
    let r = host.inject(inject(&dead, "hello")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(r.reason.contains("dead"), "{}", r.reason);

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        prompts(&log).is_empty() && pastes(&log) == 0,
        "nothing reached the TUI"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_injections_into_one_pane_are_serialized() {
    let server = TmuxServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "par", dir.path(), "");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);
    let texts: Vec<String> = (0..4)
        .map(|n| format!("prompt {n}\nwith a second line {n}"))
        .collect();
    let runs = texts.iter().map(|t| {
        let host = host.clone();
        let i = inject(&pane, t);
        async move { host.inject(i).await }
    });
    let results = futures::future::join_all(runs).await;
    for r in &results {
        assert_eq!(outcome(r), pb::InjectOutcome::Submitted, "{r:?}");
    }
    assert!(eventually(Duration::from_secs(5), || prompts(&log).len() == 4).await);
    let mut got = prompts(&log);
    got.sort();
    assert_eq!(got, texts, "each prompt whole, none interleaved");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_keys_holds_to_the_allowlist() {
    let server = TmuxServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "keys", dir.path(), "");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);
    let keys = |ks: &[&str]| pb::SendKeys {
        target: pane.clone(),
        keys: ks.iter().map(|k| k.to_string()).collect(),
    };
    for bad in [
        &["a"][..],
        &["y", "rm -rf ~"],
        &["C-d"],
        &["-X", "cancel"],
        &[],
    ] {
        let e = host.send_keys(keys(bad)).await.unwrap_err();
        assert!(
            matches!(e, AgentError::KeyNotAllowed { .. } | AgentError::NoKeys),
            "{bad:?}: {e}"
        );
    }
    host.send_keys(keys(&["y", "3", "n"])).await.unwrap();
    assert!(wait_for_text(&server, &pane, "> y3n", Duration::from_secs(5)).await);
    host.send_keys(keys(&["Enter"])).await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || prompts(&log)
            == vec!["y3n".to_string()])
        .await
    );
    // Nothing from the refused calls arrived.
    assert_eq!(pastes(&log), 0);
    host.shutdown().await;
}
