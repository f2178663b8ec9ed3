//! Every session status × every pane state, through the whole machine on real captures:
//! what it does (types, answers, escalates, waits) and the status it leaves.

use super::*;
use crate::records::PermissionPolicy;

const STATES: [(&str, &str); 8] = [
    ("working", WORKING),
    ("idle", IDLE),
    ("permission", PERMISSION),
    ("dialog", DIALOG),
    ("draft", DRAFT),
    ("exited", EXITED),
    ("limited", LIMITED),
    ("unknown", UNKNOWN),
];

/// What one snapshot made the machine do.
fn act(h: &Harness) -> &'static str {
    if !h.typed().is_empty() {
        "type"
    } else if !h.audits(AuditKind::Permission).is_empty() {
        "answer"
    } else if !h.keys().is_empty() {
        "keys"
    } else if !h.audits(AuditKind::Escalated).is_empty() {
        "escalate"
    } else if h.rec().reason.starts_with("usage limit") {
        "wait-limit"
    } else {
        "nothing"
    }
}

#[test]
fn every_status_by_every_pane_state() {
    let live = [
        "nothing",
        "type",
        "answer",
        "escalate",
        "nothing",
        "escalate",
        "wait-limit",
        "nothing",
    ];
    let held = ["nothing"; 8];
    let table: [(Status, [&str; 8]); 7] = [
        (Status::Running, live),
        (Status::Paused, held),
        (Status::Waiting, live),
        (Status::Escalated, live),
        (Status::Done, held),
        (Status::Stopped, held),
        (Status::Failed, held),
    ];
    for (status, row) in table {
        for ((state, screen), want) in STATES.iter().zip(row) {
            let mut rec = record();
            rec.status = status;
            rec.auto_resume = true;
            rec.permissions = PermissionPolicy::ApproveSafe;
            let mut h = Harness::new(rec);
            // The detector must read the capture as the state the row is about.
            let d = h.s.deps.detect(&snapshot(screen, 2));
            assert_eq!(d.state.as_str(), *state, "capture {screen:?}");
            h.model.push_back(Ok(
                "Add a GET /health route in src/routes.rs that returns ok".into(),
            ));
            h.show(screen);
            let got = act(&h);
            assert_eq!(got, want, "{status:?} × {state}: {:?}", h.effects);
            if !status.is_live() || status == Status::Paused {
                assert_eq!(
                    h.rec().status,
                    status,
                    "{status:?} × {state} changed status"
                );
            }
        }
    }
}
