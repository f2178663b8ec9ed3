//! Injection and send-keys against a real tmux pane running a small bracketed-paste TUI
//! (tmux_support/tui.py, python3): text arrives byte for byte as one submission, a lost
//! Enter is resent alone, text is never pasted twice, copy mode and dead panes are refused,
//! injections into one pane are serialized, and send-keys holds to its allowlist.
//!
//! The classifier reads this TUI as a shell running a command (python3 in the foreground),
//! i.e. busy, so these injections are forced: they test the typing mechanics. What the
//! classifier lets through or refuses is tested against `karl-standin` in the tests crate.
#![allow(clippy::unwrap_used)]

mod tmux_support;

use std::time::Duration;

use karl_agent::error::AgentError;
use karl_agent::test_server::TestServer;
use karl_common::pb;
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

async fn ready(server: &TestServer, pane: &str) {
    assert!(
        wait_for_text(server, pane, "stand-in tui", Duration::from_secs(10)).await,
        "the TUI did not start (is python3 installed?)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_line_text_arrives_byte_for_byte_as_one_submission() {
    let server = TestServer::new();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_enter_is_resent_alone_and_the_prompt_arrives_once() {
    let server = TestServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "drop", dir.path(), "--drop-enters 1");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);
    let r = host.inject(inject(&pane, "line one\nline two")).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::SubmittedAfterRetry, "{r:?}");
    assert_eq!(r.enter_retries, 1);
    assert!(eventually(Duration::from_secs(5), || prompts(&log).len() == 1).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(prompts(&log), vec!["line one\nline two"]);
    assert_eq!(pastes(&log), 1, "pasted once");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_is_never_pasted_twice_when_enter_keeps_getting_lost() {
    let server = TestServer::new();
    let dir = tempfile::tempdir().unwrap();
    let (pane, log) = start_tui(&server, "deaf", dir.path(), "--drop-enters 4");
    ready(&server, &pane).await;
    let (host, _rx) = host(&server);
    let mut i = inject(&pane, "please run the tests");
    i.max_enter_retries = 1;
    let r = host.inject(i.clone()).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Failed, "{r:?}");
    assert_eq!(r.enter_retries, 1);
    assert!(r.reason.contains("left in the input box"), "{}", r.reason);
    // The same prompt again: the box already holds it, so only Enter is sent.
    let r = host.inject(i.clone()).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Failed, "{r:?}");
    // A different prompt would land on top of ours: refused (unless forced).
    let mut other = inject(&pane, "something else");
    other.force = false;
    let r = host.inject(other).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Refused, "{r:?}");
    assert!(r.reason.contains("earlier prompt"), "{}", r.reason);
    // Four Enters were dropped; the fifth is taken.
    let r = host.inject(i).await;
    assert_eq!(outcome(&r), pb::InjectOutcome::Submitted, "{r:?}");
    assert!(eventually(Duration::from_secs(5), || prompts(&log).len() == 1).await);
    assert_eq!(prompts(&log), vec!["please run the tests"]);
    assert_eq!(pastes(&log), 1, "the text was pasted exactly once");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_mode_dead_panes_and_control_characters_are_refused() {
    let server = TestServer::new();
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
    let dead = server.new_window("cm", Some("true")).unwrap();
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
    let server = TestServer::new();
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
    let server = TestServer::new();
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
