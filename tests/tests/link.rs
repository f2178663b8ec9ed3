//! The agent–coordinator link with real processes on loopback: the agent appears, the
//! token is enforced on both services, the agent reconnects through coordinator
//! restarts and waits out a coordinator that is not up yet, duplicate machine names are
//! refused, and karl-ctl turns every failure into one plain line.

use std::time::Duration;

use karl_tests::harness::{ctl, free_port, start_agent, wait_agent, wait_for, Coord, Scratch};
use karl_tests::tmux_server::TmuxServer;

const TOKEN: &str = "test-token-0123456789";

#[test]
fn agent_appears_with_its_panes_and_token_is_required() {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    let pane = tmux
        .new_session("agent-codex", 100, 30, "bash --norc --noprofile")
        .expect("tmux new-session");
    let coord = Coord::start(&scratch, Some(TOKEN), &[]);
    let agent = start_agent(&scratch, &coord.url(), "mac2", Some(TOKEN), tmux.socket());

    let entry = wait_agent(&scratch, &coord, "mac2", Duration::from_secs(15))
        .expect("agent never appeared");
    assert!(
        entry["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{entry}"
    );
    // The agent runs the tmux under test (KARL_TMUX_BIN), not whatever is on PATH.
    let under_test = std::process::Command::new(karl_agent::tmux::program_from_env())
        .arg("-V")
        .output()
        .expect("tmux -V");
    assert_eq!(
        entry["tmux_version"].as_str(),
        Some(String::from_utf8_lossy(&under_test.stdout).trim()),
        "{entry}"
    );
    assert!(entry["connected_unix_ms"].as_u64().unwrap_or(0) > 0);
    // Logs written to a file (as launchd and systemd do) carry no colour codes.
    let coord_log = coord.proc.log_text();
    assert!(coord_log.contains("karl-coord listening"), "{coord_log}");
    assert!(!coord_log.contains('\x1b'), "{coord_log}");
    let agent_log = agent.log_text();
    assert!(agent_log.contains("karl-agent starting"), "{agent_log}");
    assert!(!agent_log.contains('\x1b'), "{agent_log}");
    assert!(entry["last_heartbeat_unix_ms"].as_u64().unwrap_or(0) > 0);

    // Text output has the header and the machine.
    let text = ctl(&scratch, Some(&coord.addr), Some(TOKEN), &["agents"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("MACHINE") && text.stdout.contains("mac2"),
        "{text:?}"
    );

    // Panes: written the way tmux users write them, with the %id.
    let panes = ctl(
        &scratch,
        Some(&coord.addr),
        Some(TOKEN),
        &["panes", "mac2", "--json"],
    );
    assert_eq!(panes.code, 0, "{panes:?}");
    let list = panes.json();
    let p = list
        .as_array()
        .and_then(|a| a.iter().find(|p| p["pane_id"] == pane.as_str()))
        .unwrap_or_else(|| panic!("pane {pane} not listed: {list}"));
    assert_eq!(p["target"], "agent-codex:0.0");
    assert_eq!(p["width"], 100);
    assert_eq!(p["height"], 30);
    assert_eq!(p["current_command"], "bash");

    // Missing and wrong tokens are refused in plain words, on the Control service.
    let none = ctl(&scratch, Some(&coord.addr), None, &["agents"]);
    assert_ne!(none.code, 0);
    assert!(none.stderr.contains("no token given"), "{none:?}");
    let wrong = ctl(&scratch, Some(&coord.addr), Some("nope"), &["agents"]);
    assert_ne!(wrong.code, 0);
    assert!(wrong.stderr.contains("wrong token"), "{wrong:?}");
    assert_eq!(
        wrong.stderr.trim().lines().count(),
        1,
        "one line: {wrong:?}"
    );
}

#[test]
fn wrong_token_agent_backs_off_instead_of_hammering() {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    tmux.new_session("s", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let coord = Coord::start(&scratch, Some(TOKEN), &[]);
    let mut agent = start_agent(
        &scratch,
        &coord.url(),
        "mac3",
        Some("bad-token"),
        tmux.socket(),
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        agent.is_running(),
        "a rejected agent keeps running and retrying"
    );
    let log = agent.log_text();
    let attempts = log.matches("rejected our token").count();
    assert!(attempts >= 1, "the rejection must be logged:\n{log}");
    // Backoff jumps to the cap (30 s) after a rejection: one attempt in 4 s, not dozens.
    assert!(
        attempts <= 2,
        "{attempts} attempts in 4s: the agent hammers\n{log}"
    );
    let agents = ctl(
        &scratch,
        Some(&coord.addr),
        Some(TOKEN),
        &["agents", "--json"],
    );
    assert_eq!(agents.json().as_array().map(Vec::len), Some(0));
}

#[test]
fn coordinator_down_then_up_and_restarted() {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    tmux.new_session("s", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");

    // Nothing listens yet: karl-ctl says which address it could not reach, in one line.
    let down = ctl(&scratch, Some(&addr), Some(TOKEN), &["agents"]);
    assert_ne!(down.code, 0);
    assert!(down.stderr.contains(&addr), "{down:?}");
    assert_eq!(down.stderr.trim().lines().count(), 1, "{down:?}");

    // The agent starts first and keeps retrying.
    let mut agent = start_agent(
        &scratch,
        &format!("http://{addr}"),
        "mac4",
        Some(TOKEN),
        tmux.socket(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(agent.is_running());

    let data = scratch.path("coord-data");
    let mut coord = Coord::start_at(&scratch, port, &data, Some(TOKEN), &[]);
    wait_agent(&scratch, &coord, "mac4", Duration::from_secs(15))
        .expect("agent did not connect once the coordinator came up");

    // Restart the coordinator (hard kill): the agent is back within a few seconds.
    coord.proc.kill();
    let gone = ctl(&scratch, Some(&addr), Some(TOKEN), &["agents"]);
    assert_ne!(gone.code, 0);
    let coord = Coord::start_at(&scratch, port, &data, Some(TOKEN), &[]);
    wait_agent(&scratch, &coord, "mac4", Duration::from_secs(10))
        .expect("agent did not come back after a coordinator restart");
    assert!(agent.is_running());
}

#[test]
fn duplicate_machine_name_is_refused_while_first_lives() {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    tmux.new_session("s", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let coord = Coord::start(&scratch, Some(TOKEN), &[]);
    let first = start_agent(&scratch, &coord.url(), "mac1", Some(TOKEN), tmux.socket());
    let entry = wait_agent(&scratch, &coord, "mac1", Duration::from_secs(15)).expect("first agent");
    let first_instance = entry["instance_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    let second = start_agent(&scratch, &coord.url(), "mac1", Some(TOKEN), tmux.socket());
    let refused = wait_for(Duration::from_secs(10), || {
        let log = second.log_text();
        log.contains("already connected from another agent process")
            .then_some(log)
    });
    assert!(
        refused.is_some(),
        "second agent's log:\n{}",
        second.log_text()
    );
    // The first one still holds the name.
    let entry = wait_agent(&scratch, &coord, "mac1", Duration::from_secs(2))
        .expect("first agent still listed");
    assert_eq!(entry["instance_id"], first_instance.as_str());
    drop(first);
    drop(second);
}

#[test]
fn unknown_machine_and_bad_targets_get_clear_errors() {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    tmux.new_session("s", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let coord = Coord::start(&scratch, None, &[]);
    let _agent = start_agent(&scratch, &coord.url(), "mac2", None, tmux.socket());
    wait_agent(&scratch, &coord, "mac2", Duration::from_secs(15)).expect("agent");

    let out = ctl(&scratch, Some(&coord.addr), None, &["panes", "mac9"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("mac9") && out.stderr.contains("connected: mac2"),
        "{out:?}"
    );

    for bad in ["agent-codex", "agent:1", "{last}", "%x", "a b:1.1"] {
        let out = ctl(&scratch, Some(&coord.addr), None, &["capture", "mac2", bad]);
        assert_ne!(out.code, 0, "{bad}");
        assert!(out.stderr.contains("session:window.pane"), "{bad}: {out:?}");
    }
}

#[test]
fn coordinator_refuses_open_address_without_token() {
    let scratch = Scratch::new();
    let mut cmd = karl_tests::harness::karl_command("karl-coord", scratch.dir.path());
    cmd.arg("--listen")
        .arg(format!("0.0.0.0:{}", free_port()))
        .arg("--data-dir")
        .arg(scratch.path("d"));
    let out = cmd.output().expect("run karl-coord");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
}
