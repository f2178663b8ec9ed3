//! Faults, with real processes: karl-coord and karl-agent on loopback, the stand-in
//! coding agent in a real tmux pane, real sled on disk.
//!
//! - The coordinator SIGKILLed at seeded random points of 50-turn sessions (ten seeds),
//!   restarted on the same port and data directory each time; and the narrowest window
//!   (turn recorded, not yet typed) reproduced exactly.
//! - The agent SIGKILLed at seeded random points and restarted.
//! - The tmux server killed under a driven pane.
//! - The model endpoint answering 500s, hanging past the timeout, and sending garbage.
//! - The database on a read-only disk at start (clear error, database untouched) and on
//!   a disk that fills up mid-session (the session fails with the reason, nothing is
//!   typed unrecorded, the database reopens whole).
//!
//! The disk faults need real read-only and full filesystems: a read-only bind mount of
//! the data directory and a small tmpfs, both made with `mount` (which needs root with
//! CAP_SYS_ADMIN). Where `mount` is not permitted, those tests say so on stderr and skip
//! the mounted part; the read-only test still checks the disk fault that needs no
//! privilege, a data directory that cannot be created. A disk cannot be flipped read-only under a running karl-coord this way (the
//! kernel refuses to remount read-only while a file is open for writing), so read-only
//! is checked at start.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use karl_coord::records::{
    InjectStatus, SessionRecord, Status, TurnOutcome, TurnRecord, TurnSource,
};
use karl_coord::store::Store;
use karl_tests::harness::{
    bin, free_port, karl_command, shell_quote, start_agent, tail, turns, wait_agent, wait_for,
    Coord, Fleet, Scratch, TEST_COORD_CONFIG,
};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};
use karl_tests::tmux_server::TmuxServer;
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A quick stand-in: each prompt works for 100 ms and answers `Done: <prompt>`.
const FAST: &str = r#"{"default": {"work_ms": 100, "reply": {"answer": "Done: {prompt}"}}}"#;

/// No model: a closed port, so sessions run plan-only without waiting on timeouts.
const NO_MODEL: &str = "http://127.0.0.1:9/v1";

// ───────────────────────────── helpers ─────────────────────────────

/// The seeded generator of kill schedules: ChaCha8 gives the same sequence on every
/// machine, so a failing seed replays.
fn seeded(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A fleet like [`Fleet::start_with`], with the coordinator's config file, data
/// directory and flags chosen by the test.
fn fleet_with(script: &str, config: &str, data_dir: Option<&Path>, coord_args: &[&str]) -> Fleet {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    let standin_log = scratch.path("standin.log");
    let script_path = scratch.path("standin-script.json");
    std::fs::write(&script_path, script).unwrap();
    let cmdline = [
        bin("karl-standin").display().to_string(),
        "--log".into(),
        standin_log.display().to_string(),
        "--script".into(),
        script_path.display().to_string(),
    ]
    .iter()
    .map(|a| shell_quote(a))
    .collect::<Vec<_>>()
    .join(" ");
    let pane = tmux
        .new_session("work", 120, 40, &cmdline)
        .expect("tmux new-session");
    let config_path = scratch.path("karl-coord.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut args = vec!["--config", config_path.to_str().unwrap()];
    if !coord_args.contains(&"--model-url") {
        args.extend(["--model-url", NO_MODEL]);
    }
    args.extend_from_slice(coord_args);
    let data_dir = data_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| scratch.path("coord-data"));
    let coord = Coord::start_at(&scratch, free_port(), &data_dir, None, &args);
    let agent = start_agent(&scratch, &coord.url(), "mac2", None, tmux.socket());
    wait_agent(&scratch, &coord, "mac2", Duration::from_secs(15)).expect("agent did not connect");
    wait_for(Duration::from_secs(10), || {
        tmux.capture(&pane)
            .expect("tmux capture-pane")
            .contains('❯')
            .then_some(())
    })
    .expect("stand-in did not draw its input box");
    Fleet {
        scratch,
        tmux,
        coord,
        agent,
        pane,
        standin_log,
        config: config_path,
    }
}

fn str_of<'a>(v: &'a serde_json::Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

fn submitted(turn: &serde_json::Value) -> bool {
    str_of(turn, "inject").starts_with("submitted")
}

/// `show` against whatever coordinator currently serves the fleet's address, or None
/// while it is down.
fn try_show(fleet: &Fleet, id: &str) -> Option<serde_json::Value> {
    let out = fleet.ctl(&["show", id, "--json"]);
    (out.code == 0).then(|| out.json())
}

/// The invariants every fault must keep, checked on the final record and the
/// stand-in's log of what actually arrived in the pane:
/// turn numbers are 1..=n with no gap; nothing was typed twice; everything typed was
/// recorded as a turn first; every turn recorded as submitted was typed.
fn check_record(fleet: &Fleet, show: &serde_json::Value) {
    let t = turns(show);
    for (i, turn) in t.iter().enumerate() {
        assert_eq!(turn["n"], i as u64 + 1, "turn numbers have a gap: {show:#}");
    }
    let received = fleet.received();
    let mut seen = HashSet::new();
    for p in &received {
        assert!(
            seen.insert(p),
            "typed twice: {p:?}\nall typed: {received:#?}"
        );
    }
    let recorded: HashSet<&str> = t.iter().map(|x| str_of(x, "prompt")).collect();
    for p in &received {
        assert!(
            recorded.contains(p.as_str()),
            "typed but never recorded: {p:?}\n{show:#}"
        );
    }
    for turn in t.iter().filter(|x| submitted(x)) {
        let p = str_of(turn, "prompt");
        assert!(
            received.iter().any(|r| r == p),
            "turn {} is recorded as submitted but never arrived: {p:?}",
            turn["n"]
        );
    }
}

/// A filesystem mounted for one test, unmounted (lazily, so a process still holding
/// it cannot keep it) before its directory is removed.
struct Mount {
    path: PathBuf,
    mounted: bool,
    /// The mount point's parent, when the mount made its own directory.
    _dir: Option<tempfile::TempDir>,
}

impl Mount {
    /// A tmpfs of `size` (e.g. `"4m"`); None where mounting is not permitted.
    fn tmpfs(size: &str) -> Option<Mount> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fs");
        std::fs::create_dir(&path).unwrap();
        let ok = run_quiet(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                path.to_str().unwrap(),
            ],
        );
        ok.then_some(Mount {
            path,
            mounted: true,
            _dir: Some(dir),
        })
    }

    /// `path` bound onto itself, so it can be flipped read-only later.
    fn bind(path: &Path) -> Option<Mount> {
        let p = path.to_str().unwrap();
        run_quiet("mount", &["--bind", p, p]).then(|| Mount {
            path: path.to_path_buf(),
            mounted: true,
            _dir: None,
        })
    }

    fn set_read_only(&self, ro: bool) {
        let opts = if ro {
            "remount,bind,ro"
        } else {
            "remount,bind,rw"
        };
        assert!(
            run_quiet("mount", &["-o", opts, self.path.to_str().unwrap()]),
            "remount {opts} failed"
        );
    }

    fn unmount(&mut self) {
        if self.mounted {
            self.mounted = !run_quiet("umount", &["-l", self.path.to_str().unwrap()]);
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        self.unmount();
    }
}

fn run_quiet(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn no_mount_note(test: &str) {
    eprintln!(
        "{test}: `mount` is not permitted here (needs root with CAP_SYS_ADMIN); \
         checking only the unprivileged disk fault"
    );
}

/// Opens the database the way karl-coord does and reads every session and every turn,
/// typed. Panics if anything is unreadable.
fn read_back(data_dir: &Path) -> Vec<(SessionRecord, Vec<TurnRecord>)> {
    let store = Store::open(data_dir)
        .unwrap_or_else(|e| panic!("cannot reopen {}: {e}", data_dir.display()));
    let sessions: Vec<SessionRecord> = store.sessions().expect("sessions readable");
    sessions
        .into_iter()
        .map(|s| {
            let t: Vec<TurnRecord> = store.turns(&s.id).expect("turns readable");
            (s, t)
        })
        .collect()
}

/// Starts karl-coord on `data_dir` and waits for it to exit (it must, within 20 s);
/// returns (exit code, stderr).
fn coord_expect_exit(scratch: &Scratch, data_dir: &Path) -> (i32, String) {
    let mut cmd = karl_command("karl-coord", scratch.dir.path());
    cmd.env("KARL_LOG", "warn")
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--model-url")
        .arg(NO_MODEL)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let status = wait_for(Duration::from_secs(20), || child.try_wait().ok().flatten());
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "karl-coord kept running on an unusable data dir {}",
            data_dir.display()
        );
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_alive(fleet: &mut Fleet) {
    assert!(
        fleet.coord.proc.is_running(),
        "karl-coord died; log:\n{}",
        tail(&fleet.coord.proc.log_text(), 40)
    );
    assert!(
        fleet.agent.is_running(),
        "karl-agent died; log:\n{}",
        tail(&fleet.agent.log_text(), 40)
    );
    assert!(
        !fleet.coord.proc.log_text().contains("panicked"),
        "karl-coord panicked:\n{}",
        tail(&fleet.coord.proc.log_text(), 40)
    );
}

// ───────────────────────────── coordinator SIGKILL ─────────────────────────────

/// One 50-turn session; for each seed, wait for a seeded number of prompts plus a
/// seeded delay of up to one turn, SIGKILL the coordinator, restart it on the same port
/// and data directory. Before each kill the recorded turns are read; after every
/// restart each of them must still be there, unchanged.
fn sigkill_session(seeds: std::ops::RangeInclusive<u64>) {
    let mut fleet = fleet_with(FAST, TEST_COORD_CONFIG, None, &[]);
    let plan = fleet.plan_file(60);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "50",
    ]);
    let mut at = 0usize;
    for seed in seeds {
        let mut rng = seeded(seed);
        at += 2 + rng.gen_range(0..6usize);
        let delay = Duration::from_millis(rng.gen_range(0..900));
        wait_for(Duration::from_secs(90), || {
            (fleet.received().len() >= at).then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "seed {seed}: {at} prompts never arrived; coord log:\n{}",
                tail(&fleet.coord.proc.log_text(), 40)
            )
        });
        std::thread::sleep(delay);
        let before = try_show(&fleet, &id).map(|s| turns(&s)).unwrap_or_default();
        fleet.coord.proc.kill();
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..300)));
        fleet.restart_coord();
        let after = wait_for(Duration::from_secs(20), || try_show(&fleet, &id))
            .map(|s| turns(&s))
            .expect("session readable after restart");
        for b in &before {
            let n = b["n"].as_u64().unwrap() as usize;
            let a = after
                .get(n - 1)
                .unwrap_or_else(|| panic!("seed {seed}: turn {n} lost in the kill"));
            assert_eq!(a["prompt"], b["prompt"], "seed {seed}: turn {n} changed");
            if submitted(b) {
                assert!(submitted(a), "seed {seed}: turn {n} lost its result: {a}");
            }
        }
        eprintln!(
            "seed {seed}: killed after {at} prompts + {} ms with {} turns recorded",
            delay.as_millis(),
            before.len()
        );
    }
    let show = fleet.wait_status(&id, Duration::from_secs(180), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    assert_eq!(turns(&show).len(), 50, "{show:#}");
    check_record(&fleet, &show);
    let unconfirmed = turns(&show)
        .iter()
        .filter(|t| t["inject"] == "unconfirmed")
        .count();
    eprintln!(
        "50 turns, {} typed, {unconfirmed} left unconfirmed by a kill",
        fleet.received().len()
    );
}

#[test]
fn coordinator_sigkill_seeds_1_to_5_lose_no_turn_and_type_nothing_twice() {
    sigkill_session(1..=5);
}

#[test]
fn coordinator_sigkill_seeds_6_to_10_lose_no_turn_and_type_nothing_twice() {
    sigkill_session(6..=10);
}

// ───────────────────────────── agent SIGKILL ─────────────────────────────

#[test]
fn agent_sigkilled_at_random_points_and_restarted_never_double_types() {
    let mut fleet = fleet_with(FAST, TEST_COORD_CONFIG, None, &[]);
    let plan = fleet.plan_file(40);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "15",
    ]);
    let mut rng = seeded(42);
    let mut at = 0;
    for round in 0..3 {
        at += 2 + rng.gen_range(0..3usize);
        wait_for(Duration::from_secs(60), || {
            (fleet.received().len() >= at).then_some(())
        })
        .unwrap_or_else(|| panic!("round {round}: {at} prompts never arrived"));
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..700)));
        fleet.agent.kill();
        std::thread::sleep(Duration::from_millis(rng.gen_range(200..1000)));
        fleet.restart_agent();
    }
    // The session either finishes, or stops on the one injection the kill cut off and
    // says so; either way nothing is typed twice and the record is whole.
    let show = fleet.wait_status(&id, Duration::from_secs(120), |s| {
        s == "done" || s == "escalated" || s == "failed"
    });
    let status = show["session"]["status"].as_str().unwrap_or("");
    eprintln!(
        "after 3 agent kills: {status} ({}), {} turns recorded, {} typed",
        show["session"]["reason"],
        turns(&show).len(),
        fleet.received().len()
    );
    if status != "done" {
        let reason = show["session"]["reason"].as_str().unwrap_or("");
        assert!(
            reason.contains("could not type") || reason.contains("agent"),
            "unclear reason: {show:#}"
        );
    }
    check_record(&fleet, &show);
    assert_alive(&mut fleet);
}

// ───────────────────────────── tmux server killed ─────────────────────────────

#[test]
fn tmux_server_killed_mid_session_is_reported_and_survived() {
    let mut fleet = fleet_with(FAST, TEST_COORD_CONFIG, None, &[]);
    let plan = fleet.plan_file(30);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() >= 2).then_some(())
    })
    .expect("two prompts");
    fleet.tmux.kill();
    let show = fleet.wait_status(&id, Duration::from_secs(20), |s| {
        s == "waiting" || s == "failed"
    });
    let reason = show["session"]["reason"].as_str().unwrap_or("");
    eprintln!(
        "tmux server killed: session {}: {reason}",
        show["session"]["status"]
    );
    assert!(
        reason.contains("tmux server is gone") || reason.contains("pane was closed"),
        "unclear reason: {show:#}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_alive(&mut fleet);
    check_record(&fleet, &fleet.show(&id));
    // The agent still serves: a new server on the same socket is seen.
    let pane = fleet
        .tmux
        .new_session("again", 80, 24, "cat")
        .expect("tmux new-session");
    let listed = wait_for(Duration::from_secs(10), || {
        let out = fleet.ctl(&["panes", "mac2", "--json"]);
        (out.code == 0 && out.stdout.contains(&pane)).then_some(())
    });
    assert!(
        listed.is_some(),
        "the agent does not see the new tmux server"
    );
    assert!(
        wait_agent(&fleet.scratch, &fleet.coord, "mac2", Duration::from_secs(5)).is_some(),
        "the agent dropped off"
    );
}

// ───────────────────────────── model faults ─────────────────────────────

/// A fleet whose coordinator talks to `stub` with a short timeout and one attempt
/// per turn.
fn model_fleet(stub: &StubModel) -> Fleet {
    let config = format!(
        "{TEST_COORD_CONFIG}\n[model]\ntimeout_ms = 400\nconnect_timeout_ms = 400\nretries = 0\nbackoff_ms = 20\nmax_backoff_ms = 40\ncooldown_ms = 0\n"
    );
    fleet_with(FAST, &config, None, &["--model-url", &stub.base_url()])
}

/// Drives `steps` turns against a misbehaving model: every turn falls back to the plan,
/// its gate lines say what the model did wrong, the session finishes and nothing
/// crashes.
fn model_fault(script: StubScript, steps: usize, expect: &[&str]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt.block_on(StubModel::start(script)).unwrap();
    let mut fleet = model_fleet(&stub);
    let plan = fleet.plan_file(steps);
    let turns_arg = steps.to_string();
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        &turns_arg,
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(120), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    assert_eq!(
        show["session"]["plan_only"], false,
        "the model passed its health check"
    );
    let t = turns(&show);
    assert_eq!(t.len(), steps);
    for turn in &t {
        assert_eq!(turn["source"], "plan", "{turn}");
        let gate: Vec<&str> = turn["gate"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g.as_str())
            .collect();
        let err = gate
            .iter()
            .find(|g| g.starts_with("model error"))
            .unwrap_or_else(|| panic!("turn {} records no model error: {gate:?}", turn["n"]));
        eprintln!("turn {}: {err}", turn["n"]);
        assert!(
            expect.iter().any(|e| err.contains(e)),
            "turn {}: {err:?} names none of {expect:?}",
            turn["n"]
        );
    }
    check_record(&fleet, &show);
    assert!(
        stub.request_count() >= steps,
        "the model was asked every turn"
    );
    assert_alive(&mut fleet);
}

#[test]
fn model_answering_500s_falls_back_to_the_plan_and_recovers() {
    // Every turn of the first session gets a 500.
    model_fault(
        StubScript::echo().then(StubReply::status(500)),
        4,
        &["HTTP 500"],
    );
    // Then a model that recovers: 500s for three requests, then good answers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt
        .block_on(StubModel::start(StubScript::replies(vec![
            StubReply::status(
                500
            );
            3
        ])))
        .unwrap();
    let fleet = model_fleet(&stub);
    let plan = fleet.plan_file(10);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "6",
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(120), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    let t = turns(&show);
    let sources: Vec<&str> = t.iter().map(|x| str_of(x, "source")).collect();
    assert!(sources[..3].iter().all(|s| *s == "plan"), "{sources:?}");
    assert!(
        sources[3..]
            .iter()
            .any(|s| *s == "model" || *s == "regenerated"),
        "the model's answers were never used after it recovered: {sources:?}"
    );
    check_record(&fleet, &show);
}

#[test]
fn model_timing_out_falls_back_to_the_plan() {
    model_fault(
        StubScript::echo().then(StubReply::Hang),
        4,
        &["did not answer within", "timed out", "timeout"],
    );
}

#[test]
fn model_sending_garbage_falls_back_to_the_plan() {
    let garbage = [
        StubReply::Malformed,
        StubReply::EmptyChoices,
        StubReply::EmptyContent,
        StubReply::huge(2 << 20, true),
    ];
    model_fault(
        StubScript::replies(garbage.iter().cloned().cycle().take(40)),
        6,
        &["malformed", "no text", "more than"],
    );
}

// ───────────────────────────── disk faults ─────────────────────────────

/// Sessions and turns as (id, status, [(n, prompt, inject)]), for comparing a database
/// before and after a fault.
type DbView = Vec<(String, String, Vec<(u32, String, String)>)>;

fn db_view(data: &[(SessionRecord, Vec<TurnRecord>)]) -> DbView {
    data.iter()
        .map(|(s, t)| {
            (
                s.id.clone(),
                s.status.as_str().to_string(),
                t.iter()
                    .map(|x| (x.n, x.prompt.clone(), x.inject_label()))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn read_only_database_refuses_to_start_clearly_and_stays_intact() {
    let scratch = Scratch::new();
    let blocked = scratch.path("not-a-dir");
    std::fs::write(&blocked, "a file where the data directory should be").unwrap();
    let (code, err) = coord_expect_exit(&scratch, &blocked.join("data"));
    eprintln!(
        "karl-coord on an uncreatable data dir: exit {code}: {}",
        err.trim()
    );
    assert_ne!(code, 0);
    assert!(
        err.contains(&blocked.display().to_string()) && err.contains("writable"),
        "the error must name the path and the fix: {err}"
    );

    // An existing database with a finished session, then the disk turns read-only.
    let mut fleet = fleet_with(FAST, TEST_COORD_CONFIG, None, &[]);
    let plan = fleet.plan_file(4);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    fleet.wait_status(&id, Duration::from_secs(60), |s| s == "done");
    let data_dir = fleet.coord.data_dir.clone();
    fleet.coord.proc.kill();
    let before = db_view(&read_back(&data_dir));
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].2.len(), 4);
    let Some(mount) = Mount::bind(&data_dir) else {
        no_mount_note("read_only_database_refuses_to_start_clearly_and_stays_intact");
        return;
    };
    mount.set_read_only(true);
    let (code, err) = coord_expect_exit(&fleet.scratch, &data_dir);
    eprintln!(
        "karl-coord on a read-only database: exit {code}: {}",
        err.trim()
    );
    assert_ne!(code, 0, "karl-coord started on a read-only database");
    assert!(
        err.contains(&data_dir.display().to_string())
            && (err.contains("Read-only") || err.contains("read-only")),
        "the error must name the path and say it is read-only: {err}"
    );
    assert!(
        err.contains("writable"),
        "the error must say what to fix: {err}"
    );
    mount.set_read_only(false);
    drop(mount);
    assert_eq!(
        db_view(&read_back(&data_dir)),
        before,
        "the database changed"
    );
}

/// A session runs with its data directory on `mount`; after a few prompts `fault`
/// breaks the disk. The session must stop with a reason that names the write failure,
/// the coordinator and the agent must survive, nothing may be typed after the failure
/// that is not recorded, and once the disk is repaired the database must reopen with
/// every turn readable and consistent with what the pane received.
fn disk_fails_mid_session(mount: &Mount, fault: impl FnOnce(), repair: impl FnOnce()) {
    let data_dir = mount.path.join("data");
    let mut fleet = fleet_with(FAST, TEST_COORD_CONFIG, Some(&data_dir), &[]);
    let plan = fleet.plan_file(40);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "40",
    ]);
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() >= 3).then_some(())
    })
    .expect("three prompts");
    fault();
    let show = fleet.wait_status(&id, Duration::from_secs(60), |s| {
        s == "failed" || s == "escalated" || s == "done"
    });
    assert_eq!(show["session"]["status"], "failed", "{show:#}");
    let reason = show["session"]["reason"].as_str().unwrap_or("");
    eprintln!(
        "disk fault after {} prompts: session {}: {reason}",
        fleet.received().len(),
        show["session"]["status"]
    );
    assert!(
        reason.contains("database write failed") && reason.contains("full or read-only"),
        "the reason must name the write failure and the fix: {reason}"
    );
    let typed_at_failure = fleet.received().len();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        fleet.received().len(),
        typed_at_failure,
        "typing went on after the database failed"
    );
    assert_alive(&mut fleet);
    fleet.coord.proc.kill();
    repair();
    let data = read_back(&data_dir);
    let (rec, t) = data
        .iter()
        .find(|(s, _)| s.id == id)
        .expect("the session is in the database");
    for (i, turn) in t.iter().enumerate() {
        assert_eq!(turn.n, i as u32 + 1, "turn numbers have a gap");
    }
    let recorded: HashSet<&str> = t.iter().map(|x| x.prompt.as_str()).collect();
    let received = fleet.received();
    for p in &received {
        assert!(
            recorded.contains(p.as_str()),
            "typed but not recorded: {p:?}"
        );
    }
    assert!(t.len() >= 3, "turns before the fault survive: {}", t.len());
    // The session record and its turns were committed together: they agree.
    assert_eq!(
        rec.turns as usize,
        t.len(),
        "session record and turns disagree"
    );
    // And karl-coord starts on the repaired database and serves the session.
    fleet.restart_coord();
    let again = fleet.show(&id);
    assert!(turns(&again).len() >= t.len());
}

#[test]
fn database_on_a_full_disk_mid_session_fails_the_session_cleanly() {
    let Some(tmp) = Mount::tmpfs("8m") else {
        no_mount_note("database_on_a_full_disk_mid_session_fails_the_session_cleanly");
        return;
    };
    let filler = tmp.path.join("filler");
    disk_fails_mid_session(
        &tmp,
        || {
            // Fill every free byte.
            let ok = Command::new("dd")
                .args([
                    "if=/dev/zero",
                    &format!("of={}", filler.display()),
                    "bs=64k",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok();
            assert!(ok, "dd did not run");
        },
        || {
            let _ = std::fs::remove_file(&filler);
        },
    );
}

/// The narrowest crash window, made exact: the turn is committed `pending` and the
/// coordinator dies before the agent is asked to type it. The database is put in that
/// state by hand (the session paused on an idle pane, then a pending turn written the way
/// the engine writes one); after the restart the turn must be marked unconfirmed, never
/// typed, and the session must go on with the next step.
///
/// Known failure: the restarted session keeps the pending turn's `inject_hash`, so the
/// untouched idle pane reads as "unchanged since our last prompt" and the session waits
/// until `unchanged_escalate_secs` (20 min by default) instead of moving on.
#[test]
fn coordinator_killed_between_recording_and_typing_moves_on() {
    let mut fleet = fleet_with(FAST, TEST_COORD_CONFIG, None, &[]);
    let plan = fleet.plan_file(10);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "6",
    ]);
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() >= 2).then_some(())
    })
    .expect("two prompts");
    let out = fleet.ctl(&["pause", &id]);
    assert_eq!(out.code, 0, "{out:?}");
    // Paused, with the pane settled idle after the last answer.
    std::thread::sleep(Duration::from_secs(2));
    let typed_before = fleet.received().len();
    let data_dir = fleet.coord.data_dir.clone();
    fleet.coord.proc.kill();
    let lost_prompt = {
        let store = Store::open(&data_dir).unwrap();
        let mut rec: SessionRecord = store.get_session(&id).unwrap().unwrap();
        assert_eq!(rec.turns as usize, typed_before, "{rec:?}");
        let n = rec.turns + 1;
        let prompt = rec.tasks.active().unwrap().title.clone();
        let turn = TurnRecord {
            n,
            prompt: prompt.clone(),
            source: TurnSource::Plan,
            pane_hash: rec.last_hash.clone(),
            outcome: TurnOutcome::Pending,
            inject: InjectStatus::Pending,
            unix_ms: karl_common::unix_ms(),
            state: karl_common::detect::PaneState::Idle,
            ..Default::default()
        };
        rec.status = Status::Running;
        rec.turns = n;
        rec.remember_prompt(&prompt);
        rec.inject_hash = rec.last_hash.clone();
        rec.note_injection(karl_common::unix_ms());
        rec.awaiting_outcome = true;
        rec.awaiting_busy = true;
        rec.tasks.note_turn(n);
        rec.tasks.advance(n);
        store.record_turn(&id, &rec, n, &turn, &[]).unwrap();
        store.flush_blocking().unwrap();
        prompt
    };
    fleet.restart_coord();
    let show = fleet.wait_status(&id, Duration::from_secs(60), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    let t = turns(&show);
    assert_eq!(t[typed_before]["inject"], "unconfirmed");
    assert!(
        !fleet.received().contains(&lost_prompt),
        "an unconfirmed turn was retyped"
    );
    assert_eq!(t.len(), 6);
    check_record(&fleet, &show);
}
