//! The task shell and the facade, in-process: the real [`Registry`] with a fake agent
//! that answers from captures, a real sled store in a temp dir, the scripted model, and
//! tokio's paused clock (the 250 ms ticks cost nothing).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use karl_common::pb;
use karl_common::target::PaneTarget;
use tokio::sync::mpsc;

use super::*;
use crate::engine::{Command, Drive, DriveSpec, Engine};
use crate::model::ScriptedModel;
use crate::records::{InjectStatus, PermissionPolicy};
use crate::registry::Registry;
use crate::store::Store;

/// What the fake agent saw.
#[derive(Default)]
struct Seen {
    typed: Vec<String>,
    unwatched: bool,
}

/// Registers an agent for `mac2` whose one pane, `%1`, shows [`IDLE`]; typing into it
/// makes it work and, when `finishes`, settle idle again with new output.
fn fake_agent(registry: Arc<Registry>, finishes: bool) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (tx, mut rx) = mpsc::channel::<pb::AgentCommand>(64);
    let hello = pb::Hello {
        machine: "mac2".into(),
        instance_id: "fake".into(),
        ..Default::default()
    };
    let handle = registry.register(hello, "in-process".into(), tx).unwrap();
    let s = seen.clone();
    tokio::spawn(async move {
        let mut seq = 1;
        let mut screen = IDLE;
        while let Some(cmd) = rx.recv().await {
            let mut after: Vec<Arc<pb::PaneSnapshot>> = Vec::new();
            let detail = match cmd.kind {
                Some(pb::agent_command::Kind::Capture(_)) => Some(
                    pb::command_result::Detail::Snapshot((*snapshot(screen, seq)).clone()),
                ),
                Some(pb::agent_command::Kind::Inject(i)) => {
                    s.lock().unwrap().typed.push(i.text);
                    seq += 1;
                    after.push(snapshot(WORKING, seq + 1));
                    screen = WORKING;
                    if finishes {
                        // A new hash each time: the agent wrote something new.
                        after.push(snapshot(IDLE, seq + 2));
                        screen = IDLE;
                    }
                    Some(pb::command_result::Detail::Inject(pb::InjectResult {
                        outcome: pb::InjectOutcome::Submitted as i32,
                        snapshot_seq: seq,
                        ..Default::default()
                    }))
                }
                Some(pb::agent_command::Kind::Unwatch(_)) => {
                    s.lock().unwrap().unwatched = true;
                    None
                }
                _ => None,
            };
            let result = pb::CommandResult {
                request_id: cmd.request_id,
                ok: true,
                detail,
                ..Default::default()
            };
            registry.on_event(
                &handle,
                pb::AgentEvent {
                    kind: Some(pb::agent_event::Kind::Result(result)),
                },
            );
            for snap in after {
                seq = snap.seq;
                tokio::time::sleep(Duration::from_millis(300)).await;
                registry.on_event(
                    &handle,
                    pb::AgentEvent {
                        kind: Some(pb::agent_event::Kind::Snapshot((*snap).clone())),
                    },
                );
            }
        }
    });
    seen
}

fn spec(max_turns: u32) -> DriveSpec {
    DriveSpec {
        machine: "mac2".into(),
        target: PaneTarget::parse("%1").unwrap(),
        project: "shop".into(),
        goal: "add a health endpoint".into(),
        plan: vec![
            "Add a GET /health route that returns ok".into(),
            "Write a test for the /health route".into(),
        ],
        max_turns: Some(max_turns),
        dry_run: false,
        auto_detect: false,
        permissions: PermissionPolicy::Escalate,
        path: Some("/Users/dev/shop".into()),
        verify: None,
        launch: String::new(),
    }
}

/// Waits (on the paused clock) until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..3_000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never: {what}");
}

struct World {
    engine: Arc<Engine>,
    store: Store,
    seen: Arc<Mutex<Seen>>,
    _dir: tempfile::TempDir,
}

fn world(replies: &[&str], finishes: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let registry = Arc::new(Registry::new());
    let seen = fake_agent(registry.clone(), finishes);
    let model = Arc::new(ScriptedModel::texts(replies.iter().copied()));
    let engine = Engine::new(
        registry,
        store.clone(),
        Detector::embedded(),
        Some(model),
        EngineConfig::default(),
    );
    World {
        engine,
        store,
        seen,
        _dir: dir,
    }
}

#[tokio::test(start_paused = true)]
async fn a_session_runs_to_its_budget_through_the_shell_and_frees_the_pane() {
    let w = world(
        &[
            "Add a GET /health route in src/routes.rs that returns ok, then run cargo test",
            "Write a test for GET /health in tests/health.rs and run it",
        ],
        true,
    );
    let rec = w.engine.drive(Drive::Start(spec(2))).await.unwrap();
    let id = rec.id.clone();
    let store = w.store.clone();
    eventually("the session is done", || {
        store
            .get_session::<SessionRecord>(&id)
            .unwrap()
            .is_some_and(|r| r.status == Status::Done)
    })
    .await;
    let turns: Vec<TurnRecord> = w.store.turns(&id).unwrap();
    assert_eq!(turns.len(), 2);
    assert!(
        turns.iter().all(|t| t.inject == InjectStatus::Submitted),
        "{turns:?}"
    );
    let typed = w.seen.lock().unwrap().typed.clone();
    assert_eq!(
        typed,
        turns.iter().map(|t| t.prompt.clone()).collect::<Vec<_>>()
    );
    eventually("the pane is unwatched", || w.seen.lock().unwrap().unwatched).await;
    assert_eq!(w.store.lock_holder(&rec.pane_key()).unwrap(), None);
    let audit = w.engine.audit_log(&id, 0).unwrap();
    assert!(audit.iter().any(|a| a.kind == AuditKind::Intent));
    assert_eq!(w.engine.list(false).unwrap().len(), 0, "nothing live");
    w.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn pause_and_stop_reach_the_running_session() {
    let w = world(
        &["Add a GET /health route in src/routes.rs that returns ok"],
        false,
    );
    let rec = w.engine.drive(Drive::Start(spec(10))).await.unwrap();
    let id = rec.id.clone();
    eventually("turn 1 is typed", || {
        !w.seen.lock().unwrap().typed.is_empty()
    })
    .await;
    // The reply waits a moment for the command to show; the paused clock may run past
    // that wait while sled syncs on its own thread, so the record is what is checked.
    let status = |e: &Engine| e.record(&id).unwrap().status;
    w.engine.command(&id, Command::Pause).await.unwrap();
    eventually("paused", || status(&w.engine) == Status::Paused).await;
    let again = w.engine.command(&id, Command::Decide(true)).await;
    assert!(again.is_err(), "no permission is pending");
    w.engine.command(&id, Command::Stop).await.unwrap();
    eventually("stopped", || status(&w.engine) == Status::Stopped).await;
    eventually("the pane is unwatched", || w.seen.lock().unwrap().unwatched).await;
    let later = w.engine.command(&id, Command::Resume).await;
    assert!(
        later.is_err_and(|e| e.to_string().contains("karl-ctl drive --resume")),
        "an ended session says how to resume it"
    );
    assert_eq!(w.seen.lock().unwrap().typed.len(), 1);
    w.engine.shutdown().await;
}
