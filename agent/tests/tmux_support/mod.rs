//! Shared helpers for the agent's real-tmux tests: a pane host on a private server, waiting
//! for events with deadlines, writing output into a pane, and a small bracketed-paste TUI.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use karl_agent::panes::PaneHost;
use karl_common::pb;
use karl_tests::tmux_server::TmuxServer;
use tokio::sync::mpsc;

pub const TUI: &str = include_str!("tui.py");

/// A host on `server` and the receiving end of its events.
pub fn host(server: &TmuxServer) -> (PaneHost, mpsc::Receiver<pb::AgentEvent>) {
    let (tx, rx) = mpsc::channel(1024);
    (PaneHost::new(server.tmux(), tx), rx)
}

/// An event as a snapshot, if it is one.
pub fn as_snapshot(ev: &pb::AgentEvent) -> Option<&pb::PaneSnapshot> {
    match &ev.kind {
        Some(pb::agent_event::Kind::Snapshot(s)) => Some(s),
        _ => None,
    }
}

/// An event as a pane event, if it is one.
pub fn as_pane_event(ev: &pb::AgentEvent) -> Option<&pb::PaneEvent> {
    match &ev.kind {
        Some(pb::agent_event::Kind::PaneEvent(e)) => Some(e),
        _ => None,
    }
}

pub fn is_snapshot(ev: &pb::AgentEvent, reason: pb::SnapshotReason) -> bool {
    as_snapshot(ev).is_some_and(|s| s.reason == reason as i32)
}

pub fn is_pane_event(ev: &pb::AgentEvent, kind: pb::PaneEventKind) -> bool {
    as_pane_event(ev).is_some_and(|e| e.kind == kind as i32)
}

/// Waits up to `within` for an event matching `pred`; returns it and when it arrived.
/// Events that do not match are passed to `skipped`.
pub async fn wait_for(
    rx: &mut mpsc::Receiver<pb::AgentEvent>,
    within: Duration,
    mut pred: impl FnMut(&pb::AgentEvent) -> bool,
    mut skipped: impl FnMut(&pb::AgentEvent),
) -> Option<(pb::AgentEvent, Instant)> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ev)) => {
                let at = Instant::now();
                if pred(&ev) {
                    return Some((ev, at));
                }
                skipped(&ev);
            }
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Every event that arrives within `within`.
pub async fn collect_for(
    rx: &mut mpsc::Receiver<pb::AgentEvent>,
    within: Duration,
) -> Vec<pb::AgentEvent> {
    let mut all = Vec::new();
    let _ = wait_for(rx, within, |_| false, |ev| all.push(ev.clone())).await;
    all
}

/// Polls `check` every 20 ms until it is true or `within` passes.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pane's tty; writing to it is output of the pane, exactly timed.
pub fn pane_tty(server: &TmuxServer, pane: &str) -> PathBuf {
    PathBuf::from(
        server
            .run(&["display-message", "-p", "-t", pane, "#{pane_tty}"])
            .unwrap()
            .trim(),
    )
}

pub fn write_output(tty: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(tty).unwrap();
    f.write_all(bytes).unwrap();
    f.flush().unwrap();
}

/// A session running the TUI; returns the pane id and the log path (kept alive by `dir`).
pub fn start_tui(server: &TmuxServer, session: &str, dir: &Path, extra: &str) -> (String, PathBuf) {
    let script = dir.join("tui.py");
    std::fs::write(&script, TUI).unwrap();
    let log = dir.join(format!("{session}.log"));
    std::fs::write(&log, "").unwrap();
    let cmd = format!(
        "python3 {} --log {} {extra}",
        script.display(),
        log.display()
    );
    let pane = server.new_session(session, 100, 20, &cmd).unwrap();
    (pane, log)
}

/// The TUI's log entries.
pub fn tui_log(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn prompts(log: &Path) -> Vec<String> {
    tui_log(log)
        .iter()
        .filter_map(|v| v.get("prompt").and_then(|p| p.as_str()).map(str::to_string))
        .collect()
}

pub fn pastes(log: &Path) -> usize {
    tui_log(log)
        .iter()
        .filter(|v| v.get("paste").is_some())
        .count()
}

/// Waits until the pane shows `needle`.
pub async fn wait_for_text(
    server: &TmuxServer,
    pane: &str,
    needle: &str,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let screen = server
            .run(&["capture-pane", "-p", "-t", pane])
            .unwrap_or_default();
        if screen.contains(needle) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Live tmux control-client processes (`-C`) whose command line names this server's socket
/// (Linux; 0 elsewhere).
pub fn control_processes(server: &TmuxServer) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmd| {
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            args.iter().any(|a| *a == server.socket().as_bytes())
                && args.iter().any(|a| *a == b"-C")
        })
        .count()
}

/// Control clients attached to the server.
pub fn control_clients(server: &TmuxServer) -> usize {
    server
        .run(&["list-clients", "-F", "#{client_control_mode}"])
        .unwrap_or_default()
        .lines()
        .filter(|l| l.trim() == "1")
        .count()
}
