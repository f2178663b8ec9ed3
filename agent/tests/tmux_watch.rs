//! Watching panes on a real tmux server (private socket per test): settle timing, a
//! spinner that never settles, no captures while idle, metadata, panes closing, the server
//! dying and coming back, and control clients that do not leak.
#![allow(clippy::unwrap_used)]

mod tmux_support;

use std::time::{Duration, Instant};

use karl_agent::error::AgentError;
use karl_common::pb;
use karl_tests::tmux_server::TmuxServer;
use tmux_support::*;

const SECS: fn(u64) -> Duration = Duration::from_secs;

async fn closed(rx: &mut tokio::sync::mpsc::Receiver<pb::AgentEvent>, pane: &str) {
    wait_for(
        rx,
        SECS(5),
        |e| {
            is_pane_event(e, pb::PaneEventKind::Closed) && as_pane_event(e).unwrap().pane_id == pane
        },
        |_| {},
    )
    .await
    .unwrap_or_else(|| panic!("CLOSED for {pane}"));
}

/// Prints `line` in `pane` and waits for the settled snapshot that shows it.
async fn settles_showing(
    rx: &mut tokio::sync::mpsc::Receiver<pb::AgentEvent>,
    server: &TmuxServer,
    pane: &str,
    line: &str,
) {
    let tty = pane_tty(server, pane);
    write_output(&tty, format!("{line}\r\n").as_bytes());
    let (ev, _) = wait_for(
        rx,
        SECS(5),
        |e| is_snapshot(e, pb::SnapshotReason::Settled),
        |_| {},
    )
    .await
    .unwrap_or_else(|| panic!("no settled snapshot after printing {line:?}"));
    assert!(as_snapshot(&ev).unwrap().text.contains(line));
}

fn watch(target: &str, settle_ms: u32) -> pb::Watch {
    pb::Watch {
        target: target.into(),
        settle_ms,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_comes_after_settle_ms_of_silence_and_not_before() {
    let server = TmuxServer::new();
    let pane = server.new_session("w", 80, 24, "sleep 100000").unwrap();
    let tty = pane_tty(&server, &pane);
    let (host, mut rx) = host(&server);
    host.watch(watch(&pane, 300)).await.unwrap();
    let (start, _) = wait_for(
        &mut rx,
        SECS(5),
        |e| is_snapshot(e, pb::SnapshotReason::WatchStart),
        |_| {},
    )
    .await
    .expect("a first snapshot when the watch starts");
    assert_eq!(
        as_snapshot(&start).unwrap().pane.as_ref().unwrap().pane_id,
        pane
    );

    for round in 0..3 {
        // A burst of output, 100 ms apart: shorter gaps than settle_ms.
        let mut last = Instant::now();
        for i in 0..5 {
            write_output(&tty, format!("round {round} line {i}\r\n").as_bytes());
            last = Instant::now();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut saw_output_event = false;
        let (ev, at) = wait_for(
            &mut rx,
            SECS(5),
            |e| is_snapshot(e, pb::SnapshotReason::Settled),
            |e| saw_output_event |= is_pane_event(e, pb::PaneEventKind::Output),
        )
        .await
        .expect("a settled snapshot");
        let after = at - last;
        assert!(
            after >= Duration::from_millis(300),
            "settled {after:?} after the last output"
        );
        assert!(
            after <= Duration::from_millis(500),
            "settled {after:?} after the last output"
        );
        assert!(saw_output_event, "the pane turning busy is reported");
        let snap = as_snapshot(&ev).unwrap();
        assert!(snap.text.contains(&format!("round {round} line 4")));
        assert!(snap
            .new_lines
            .iter()
            .any(|l| l == &format!("round {round} line 4")));
        assert!(snap.last_output_unix_ms > 0);
        assert!(snap.novelty > 0.0);
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_spinning_forever_never_settles() {
    let server = TmuxServer::new();
    let spinner = r#"sh -c 'while :; do for c in "⠋" "⠙" "⠹" "⠸"; do printf "\r%s working" "$c"; sleep 0.1; done; done'"#;
    let pane = server.new_session("spin", 80, 24, spinner).unwrap();
    let (host, mut rx) = host(&server);
    host.watch(watch(&pane, 300)).await.unwrap();
    let events = collect_for(&mut rx, SECS(3)).await;
    assert!(events
        .iter()
        .any(|e| is_snapshot(e, pb::SnapshotReason::WatchStart)));
    assert!(
        !events
            .iter()
            .any(|e| is_snapshot(e, pb::SnapshotReason::Settled)),
        "a spinner printing every 100 ms must never settle at 300 ms"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_panes_are_not_captured_except_by_the_safety_timer() {
    let server = TmuxServer::new();
    let quiet = server.new_session("quiet", 80, 24, "sleep 100000").unwrap();
    let safe = server.new_window("quiet", "sleep 100000").unwrap();
    let (host, mut rx) = host(&server);
    host.watch(watch(&quiet, 300)).await.unwrap();
    host.watch(pb::Watch {
        target: safe.clone(),
        settle_ms: 300,
        safety_secs: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    let after_start = host.captures_taken();
    assert_eq!(after_start, 2, "one capture per watch start");
    let events = collect_for(&mut rx, Duration::from_millis(3500)).await;
    let extra = host.captures_taken() - after_start;
    // Only the pane with a 1 s safety timer was captured, about once a second; the
    // unchanged screen was not sent again.
    assert!((2..=4).contains(&extra), "{extra} captures in 3.5 s");
    assert!(
        !events
            .iter()
            .any(|e| as_snapshot(e)
                .is_some_and(|s| s.reason != pb::SnapshotReason::WatchStart as i32)),
        "no snapshot for an unchanged screen: {events:?}"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_reports_metadata_and_the_ansi_variant() {
    let server = TmuxServer::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.sh"),
        "printf '\\033]2;✳ Claude Code\\033\\\\'\nprintf 'plain \\033[2mdim ghost\\033[0m\\n'\nexec sleep 100000\n",
    )
    .unwrap();
    let cmd = format!("cd '{}' && exec sh ./s.sh", dir.path().display());
    let pane = server.new_session("meta", 100, 30, &cmd).unwrap();
    let (host, _rx) = host(&server);
    assert!(wait_for_text(&server, &pane, "dim ghost", SECS(5)).await);

    let snap = host
        .capture(pb::Capture {
            target: "meta:0.0".into(),
            ansi: true,
            history_lines: 0,
        })
        .await
        .unwrap();
    let info = snap.pane.unwrap();
    assert_eq!(info.pane_id, pane);
    assert_eq!(
        (info.session.as_str(), info.window, info.pane),
        ("meta", 0, 0)
    );
    assert_eq!((info.width, info.height), (100, 30));
    assert_eq!(info.current_command, "sleep");
    assert_eq!(info.title, "✳ Claude Code");
    assert!(info.pid > 0);
    assert!(!info.in_mode && !info.dead);
    assert_eq!(
        std::fs::canonicalize(&info.current_path).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap()
    );
    assert_eq!(snap.text, "plain dim ghost");
    assert!(snap.ansi.contains("\x1b[2mdim ghost"), "{:?}", snap.ansi);
    assert_eq!((snap.cursor_x, snap.cursor_y), (0, 1));
    assert_eq!(snap.reason, pb::SnapshotReason::Requested as i32);
    assert_eq!(snap.stable_hash.len(), 32);

    server.run(&["copy-mode", "-t", &pane]).unwrap();
    let snap = host
        .capture(pb::Capture {
            target: pane.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(snap.pane.unwrap().in_mode);
    assert!(snap.ansi.is_empty());

    let panes = host.list_panes().await.unwrap();
    assert_eq!(panes.len(), 1);
    assert_eq!(panes[0].pane_id, pane);
    assert!(host.tmux_version().await.starts_with("tmux "));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_and_unknown_targets_are_refused_with_a_reason() {
    let server = TmuxServer::new();
    server.new_session("t", 80, 24, "sleep 100000").unwrap();
    let (host, _rx) = host(&server);
    let e = host
        .watch(watch("t:0.0; kill-server", 0))
        .await
        .unwrap_err();
    assert!(matches!(e, AgentError::InvalidTarget(_)), "{e}");
    let e = host.watch(watch("%999", 0)).await.unwrap_err();
    assert!(matches!(e, AgentError::PaneNotFound { .. }), "{e}");
    assert!(e.to_string().contains("%999"));
    // `=` makes the session match exact: `t` does not reach a session named `tt`.
    server.new_session("tt", 80, 24, "sleep 100000").unwrap();
    server.run(&["kill-session", "-t", "=t"]).unwrap();
    let e = host.watch(watch("t:0.0", 0)).await.unwrap_err();
    assert!(matches!(e, AgentError::PaneNotFound { .. }), "{e}");
    assert!(host.watching().is_empty());
    // No tmux server at all.
    let none = TmuxServer::new();
    let (lonely, _rx) = tmux_support::host(&none);
    assert!(lonely.list_panes().await.unwrap().is_empty());
    let e = lonely.watch(watch("%0", 0)).await.unwrap_err();
    assert!(matches!(e, AgentError::NoServer { .. }), "{e}");
    assert!(e.to_string().contains("--tmux-socket"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_panes_are_reported_and_the_host_carries_on() {
    let server = TmuxServer::new();
    let keep = server.new_session("c", 80, 24, "sleep 100000").unwrap();
    let split = server
        .run(&[
            "split-window",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-t",
            &keep,
            "sleep 100000",
        ])
        .unwrap()
        .trim()
        .to_string();
    let lone_window = server.new_window("c", "sleep 100000").unwrap();
    let other_session = server.new_session("d", 80, 24, "sleep 100000").unwrap();
    let (host, mut rx) = host(&server);
    for p in [&keep, &split, &lone_window, &other_session] {
        host.watch(watch(p, 300)).await.unwrap();
    }
    assert_eq!(host.watching().len(), 4);

    server.run(&["kill-pane", "-t", &split]).unwrap();
    closed(&mut rx, &split).await;
    server.run(&["kill-window", "-t", &lone_window]).unwrap();
    closed(&mut rx, &lone_window).await;
    server.run(&["kill-session", "-t", "=d"]).unwrap();
    closed(&mut rx, &other_session).await;
    assert_eq!(host.watching(), vec![keep.clone()]);

    // Still watching the survivor.
    settles_showing(&mut rx, &server, &keep, "still here").await;
    assert!(eventually(SECS(5), || control_clients(&server) == 1).await);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_reported_survived_and_watching_resumes() {
    let server = TmuxServer::new();
    let pane = server.new_session("srv", 80, 24, "sleep 100000").unwrap();
    let (host, mut rx) = host(&server);
    host.watch(watch("srv:0.0", 300)).await.unwrap();
    server.kill();
    let (ev, _) = wait_for(
        &mut rx,
        SECS(5),
        |e| is_pane_event(e, pb::PaneEventKind::ServerGone),
        |_| {},
    )
    .await
    .expect("SERVER_GONE");
    assert_eq!(as_pane_event(&ev).unwrap().pane_id, pane);
    assert_eq!(host.watching(), vec![pane.clone()], "still waiting for it");
    // The host keeps answering.
    assert!(host.list_panes().await.unwrap().is_empty());

    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = server.new_session("srv", 80, 24, "sleep 100000").unwrap();
    let (ev, _) = wait_for(
        &mut rx,
        SECS(10),
        |e| is_pane_event(e, pb::PaneEventKind::ServerBack),
        |_| {},
    )
    .await
    .expect("SERVER_BACK");
    assert!(as_pane_event(&ev).unwrap().detail.contains(&again));
    let (ev, _) = wait_for(
        &mut rx,
        SECS(5),
        |e| is_snapshot(e, pb::SnapshotReason::WatchStart),
        |_| {},
    )
    .await
    .expect("a fresh snapshot after the server came back");
    assert_eq!(
        as_snapshot(&ev).unwrap().pane.as_ref().unwrap().pane_id,
        again
    );
    assert_eq!(host.watching(), vec![again.clone()]);

    settles_showing(&mut rx, &server, &again, "back again").await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_is_reported_when_clients_move_instead_of_exiting() {
    let server = TmuxServer::new();
    server.new_session("stay", 80, 24, "sleep 100000").unwrap();
    let doomed = server
        .new_session("doomed", 80, 24, "sleep 100000")
        .unwrap();
    // With this a client whose session dies is moved to another session, not detached.
    server
        .run(&["set-option", "-g", "detach-on-destroy", "off"])
        .unwrap();
    let (host, mut rx) = host(&server);
    host.watch(watch(&doomed, 300)).await.unwrap();
    assert_eq!(control_clients(&server), 1);
    server.run(&["kill-session", "-t", "=doomed"]).unwrap();
    closed(&mut rx, &doomed).await;
    assert!(host.watching().is_empty());
    assert!(
        eventually(SECS(5), || control_clients(&server) == 0).await,
        "the moved client is not left attached to another session"
    );
    host.shutdown().await;
}
