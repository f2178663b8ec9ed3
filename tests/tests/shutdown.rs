//! Clean stops: karl-coord and karl-agent leave within seconds of SIGTERM or Ctrl-C
//! (SIGINT) while an agent stream, a `karl-ctl logs -f` stream and a session are live —
//! launchd and systemd must never have to SIGKILL them — and a stopped coordinator
//! resumes its sessions on the next start.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use karl_tests::harness::{karl_command, wait_for, Fleet, Proc, FAST_STANDIN};

/// What launchd and systemd wait before they SIGKILL is longer; KARL promises this.
const STOP_WITHIN: Duration = Duration::from_secs(5);

fn signal(proc: &Proc, sig: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(proc.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Sends `sig` and waits for the exit; returns how long it took and the exit status.
fn stop(proc: &mut Proc, sig: &str) -> (Duration, std::process::ExitStatus) {
    let t0 = Instant::now();
    signal(proc, sig);
    let status = wait_for(Duration::from_secs(30), || {
        proc.child.try_wait().ok().flatten()
    })
    .unwrap_or_else(|| {
        panic!(
            "{} still running 30 s after SIG{sig}; log:\n{}",
            proc.name,
            proc.log_text()
        )
    });
    let took = t0.elapsed();
    eprintln!("{} exited {took:?} after SIG{sig} ({status})", proc.name);
    (took, status)
}

fn turns_of(fleet: &Fleet, id: &str) -> u64 {
    let out = fleet.ctl(&["show", id, "--json"]);
    if out.code != 0 {
        return 0;
    }
    out.json()["session"]["turns"].as_u64().unwrap_or(0)
}

/// A `karl-ctl logs -f` child following session `id`.
fn follower(fleet: &Fleet, id: &str) -> Proc {
    let mut cmd = karl_command("karl-ctl", fleet.scratch.dir.path());
    cmd.env("KARL_LOG", "warn")
        .args(["--coord", &fleet.coord.addr, "logs", "-f", id]);
    Proc::spawn("karl-ctl logs -f", cmd, fleet.scratch.path("follow.log"))
}

fn stops_cleanly(sig: &str) {
    let mut fleet = Fleet::start_with(Some(FAST_STANDIN), &[], &[]);
    let plan = fleet.plan_file(40);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() >= 2).then_some(())
    })
    .expect("two prompts typed");
    let mut follow = follower(&fleet, &id);
    wait_for(Duration::from_secs(10), || {
        follow.log_text().contains("turn").then_some(())
    })
    .unwrap_or_else(|| panic!("logs -f printed nothing: {}", follow.log_text()));

    // Everything is live: the agent's stream, the follow stream, a running session.
    let (took, status) = stop(&mut fleet.coord.proc, sig);
    assert!(status.success(), "karl-coord exit status {status}");
    assert!(
        took < STOP_WITHIN,
        "karl-coord took {took:?} to stop after SIG{sig}"
    );
    let log = fleet.coord.proc.log_text();
    assert!(!log.contains("panicked"), "{log}");
    // The follow stream ended with the server instead of hanging.
    let ended = wait_for(STOP_WITHIN, || follow.child.try_wait().ok().flatten());
    assert!(
        ended.is_some(),
        "logs -f still running after the coordinator stopped"
    );
    assert!(
        fleet.agent.is_running(),
        "the agent must outlive its coordinator"
    );
    let typed_before = fleet.received().len();

    // Next start, same data: the session resumes where it was and keeps going.
    fleet.restart_coord();
    let before = turns_of(&fleet, &id);
    assert!(before >= 2, "turns lost across the stop: {before}");
    // Resumed means new prompts reach the pane, once the agent has reconnected.
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() > typed_before + 1).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "session did not resume after a clean stop; log:\n{}",
            fleet.coord.proc.log_text()
        )
    });
    assert!(turns_of(&fleet, &id) > before);

    // The agent stops as promptly, with its stream and control clients live.
    let (took, status) = stop(&mut fleet.agent, sig);
    assert!(status.success(), "karl-agent exit status {status}");
    assert!(
        took < STOP_WITHIN,
        "karl-agent took {took:?} to stop after SIG{sig}"
    );
}

#[test]
fn sigterm_stops_coordinator_and_agent_with_streams_and_sessions_live() {
    stops_cleanly("TERM");
}

#[test]
fn ctrl_c_stops_coordinator_and_agent_with_streams_and_sessions_live() {
    stops_cleanly("INT");
}
