//! Turn and session events on NATS, end to end: karl-coord with `[events] nats_url`
//! pointed at a real `nats-server` on loopback, its agent and the stand-in in a real tmux
//! pane, and a subscriber reading the wire. The server is killed mid-session — the
//! session carries on untouched — then started again on the same port, and the events
//! flow again; the session's end carries its summary.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use karl_tests::harness::{coord_refuses_config, free_port, wait_until, Fleet};
use karl_tests::nats::{Msg, NatsServer, Subscriber};

/// The turn events of `id`, in order.
fn turns(msgs: &[Msg], id: &str) -> Vec<serde_json::Value> {
    msgs.iter()
        .filter(|m| m.subject == "karl.twin.turn" && m.json["session"] == id)
        .map(|m| m.json.clone())
        .collect()
}

#[test]
fn events_reach_nats_and_a_nats_outage_never_holds_a_session_up() {
    let port = free_port();
    let mut nats = NatsServer::start(port).unwrap();
    let sub = Subscriber::start(port, "karl.>");
    wait_until("the subscription", 10, || sub.subscribed().then_some(()));

    let script =
        serde_json::json!({"default": {"work_ms": 300, "reply": {"answer": "Done: {prompt}"}}});
    let fleet = Fleet::start_with_config(
        Some(&script.to_string()),
        &format!("[events]\nnats_url = \"{}\"\n", nats.url()),
    );
    let plan = fleet.plan_file(40);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "40",
    ]);

    // The start, then each turn typed and again once judged.
    let started = wait_until("karl.session.started", 20, || {
        sub.messages()
            .into_iter()
            .find(|m| m.subject == "karl.session.started")
    });
    assert_eq!(started.json["session"], id.as_str());
    assert_eq!(started.json["machine"], "mac2");
    assert_eq!(started.json["goal"], "Write the parser");
    assert_eq!(started.json["max_turns"], 40);
    let judged = wait_until("turn 1 judged", 60, || {
        turns(&sub.messages(), &id)
            .into_iter()
            .find(|t| t["turn"] == 1 && t["judged"] == true)
    });
    assert_eq!(judged["source"], "plan");
    assert_eq!(judged["outcome"], "progress");
    assert_eq!(judged["inject"], "submitted");
    assert!(
        judged["prompt"]
            .as_str()
            .unwrap()
            .starts_with("Implement step 1 of the parser"),
        "{judged}"
    );
    let typed = turns(&sub.messages(), &id);
    assert!(
        typed.iter().any(|t| t["turn"] == 1 && t["judged"] == false),
        "turn 1 is told when typed, before it is judged: {typed:#?}"
    );

    // NATS goes away: the session goes on typing, and stays running.
    nats.stop();
    let before = fleet.received().len();
    wait_until("three more prompts typed while NATS is away", 60, || {
        (fleet.received().len() >= before + 3).then_some(())
    });
    let show = fleet.show(&id);
    assert_eq!(show["session"]["status"], "running", "{show:#}");
    let seen_while_away = sub.messages().len();

    // NATS is back on the same port: the coordinator reconnects by itself and the turns
    // fired from now on are told.
    let nats = NatsServer::start(port).unwrap();
    wait_until("the subscription again", 10, || {
        sub.subscribed().then_some(())
    });
    let typed_by_now = fleet.received().len();
    let later = wait_until("a turn typed after NATS came back", 60, || {
        turns(&sub.messages(), &id)
            .into_iter()
            .find(|t| t["turn"].as_u64().unwrap() as usize > typed_by_now)
    });
    assert_eq!(later["session"], id.as_str());
    assert!(sub.messages().len() > seen_while_away);
    // The turns typed while it was away waited for it (far fewer than the queue holds).
    let waited = turns(&sub.messages(), &id)
        .into_iter()
        .find(|t| (before + 1..=typed_by_now).contains(&(t["turn"].as_u64().unwrap() as usize)));
    assert!(
        waited.is_some(),
        "no event of turns {}..={typed_by_now}, typed while NATS was away",
        before + 1
    );

    // The end carries the summary.
    let stop = fleet.ctl(&["stop", &id]);
    assert_eq!(stop.code, 0, "{stop:?}");
    let stopped = wait_until("karl.session.stopped", 20, || {
        sub.messages()
            .into_iter()
            .find(|m| m.subject == "karl.session.stopped")
    });
    let show = fleet.show(&id);
    let summary = &stopped.json["summary"];
    assert_eq!(stopped.json["previous"], "running");
    assert_eq!(summary["status"], "stopped");
    assert_eq!(summary["turns"], show["session"]["turns"], "{summary:#}");
    assert_eq!(
        summary, &show["record"]["summary"],
        "the event's summary is the stored one"
    );
    assert!(
        summary["progress_turns"].as_u64().unwrap() >= 4,
        "{summary:#}"
    );
    assert_eq!(summary["phases"][0]["phase"], "explore");
    assert_eq!(summary["phases"][0]["first"], 1);
    drop(nats);
}

#[test]
fn no_nats_server_at_all_is_fine() {
    // Nothing listens there, from the start to the end.
    let url = format!("nats://127.0.0.1:{}", free_port());
    let script =
        serde_json::json!({"default": {"work_ms": 100, "reply": {"answer": "Done: {prompt}"}}});
    let fleet = Fleet::start_with_config(
        Some(&script.to_string()),
        &format!("[events]\nnats_url = \"{url}\"\n"),
    );
    let plan = fleet.plan_file(3);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = fleet.wait_status(&id, Duration::from_secs(60), |s| s == "done");
    assert_eq!(show["session"]["turns"], 3, "{show:#}");
    let metrics = fleet.ctl(&["show", &id]);
    assert!(metrics.stdout.contains("3 with progress"), "{metrics:?}");
}

#[test]
fn a_bad_nats_url_says_what_to_write() {
    let err = coord_refuses_config("[events]\nnats_url = \"http://mac5:4222\"\n");
    assert!(
        err.contains("[events] nats_url") && err.contains("nats://"),
        "{err}"
    );
}
