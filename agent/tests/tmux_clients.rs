//! Control clients: one per session that holds a watched pane, attached without resizing
//! anything and without creating sessions, gone when no longer needed, and no process left
//! after shutdown.
#![allow(clippy::unwrap_used)]

mod tmux_support;

use std::time::Duration;

use karl_common::pb;
use karl_tests::tmux_server::TmuxServer;
use tmux_support::*;

fn watch(target: &str) -> pb::Watch {
    pb::Watch {
        target: target.into(),
        settle_ms: 300,
        ..Default::default()
    }
}

fn sessions(server: &TmuxServer) -> Vec<String> {
    let mut s: Vec<String> = server
        .run(&["list-sessions", "-F", "#{session_name}"])
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    s.sort();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_per_watched_session_and_none_left_after_shutdown() {
    let server = TmuxServer::new();
    let a1 = server.new_session("a", 80, 24, "sleep 100000").unwrap();
    let a2 = server.new_window("a", "sleep 100000").unwrap();
    let b = server.new_session("b", 120, 40, "sleep 100000").unwrap();
    let c = server.new_session("c", 80, 24, "sleep 100000").unwrap();
    let (host, _rx) = host(&server);
    for p in [&a1, &a2, &b, &c] {
        host.watch(watch(p)).await.unwrap();
    }
    // Watching a pane twice adds nothing.
    host.watch(watch(&a1)).await.unwrap();
    assert_eq!(control_clients(&server), 3, "one client per session");
    if cfg!(target_os = "linux") {
        assert_eq!(control_processes(&server), 3);
    }
    assert_eq!(
        sessions(&server),
        vec!["a", "b", "c"],
        "attaching creates no session"
    );
    let size = server
        .run(&[
            "display-message",
            "-p",
            "-t",
            &b,
            "#{window_width}x#{window_height}",
        ])
        .unwrap();
    assert_eq!(
        size.trim(),
        "120x40",
        "ignore-size: the client does not resize windows"
    );

    // The last watched pane of a session goes: so does its client.
    host.unwatch(&c).await.unwrap();
    assert!(eventually(Duration::from_secs(5), || control_clients(&server) == 2).await);
    // One of two panes of a session goes: the client stays.
    host.unwatch("a:0.0").await.unwrap();
    assert_eq!(control_clients(&server), 2);
    assert_eq!(host.watching().len(), 2);

    host.shutdown().await;
    assert!(eventually(Duration::from_secs(5), || control_clients(&server) == 0).await);
    if cfg!(target_os = "linux") {
        assert!(
            eventually(Duration::from_secs(5), || control_processes(&server) == 0).await,
            "no control-client process survives shutdown"
        );
    }
    assert!(
        host.watch(watch(&b)).await.is_err(),
        "a stopped host refuses work"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_detached_from_outside_is_replaced() {
    let server = TmuxServer::new();
    let pane = server.new_session("x", 80, 24, "sleep 100000").unwrap();
    let (host, mut rx) = host(&server);
    host.watch(watch(&pane)).await.unwrap();
    assert_eq!(control_clients(&server), 1);
    let names = |server: &TmuxServer| -> Vec<String> {
        server
            .run(&["list-clients", "-F", "#{client_name}"])
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let old = names(&server);
    for name in &old {
        server.run(&["detach-client", "-t", name]).unwrap();
    }
    assert!(
        eventually(Duration::from_secs(5), || {
            let now = names(&server);
            now.len() == 1 && !old.contains(&now[0])
        })
        .await,
        "a new client is attached"
    );
    // Output is seen again through the new client.
    let tty = pane_tty(&server, &pane);
    tokio::time::sleep(Duration::from_millis(200)).await;
    write_output(&tty, b"after reattach\r\n");
    let got = wait_for(
        &mut rx,
        Duration::from_secs(5),
        |e| is_snapshot(e, pb::SnapshotReason::Settled),
        |_| {},
    )
    .await;
    assert!(as_snapshot(&got.expect("settled after re-attach").0)
        .unwrap()
        .text
        .contains("after reattach"));
    host.shutdown().await;
    if cfg!(target_os = "linux") {
        assert!(eventually(Duration::from_secs(5), || control_processes(&server) == 0).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attach_says_why_and_leaves_nothing_behind() {
    use karl_agent::control::ControlClient;
    let server = TmuxServer::new();
    server.new_session("only", 80, 24, "sleep 100000").unwrap();
    let e = ControlClient::attach(&server.tmux(), "$99", |_| {}, |_| {})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("can't find session"), "{e}");
    assert_eq!(control_clients(&server), 0);
    if cfg!(target_os = "linux") {
        assert!(eventually(Duration::from_secs(5), || control_processes(&server) == 0).await);
    }
}
