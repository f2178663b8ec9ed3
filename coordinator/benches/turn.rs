//! Coordinator overhead per turn, excluding the model call and the agent's typing: what
//! the engine does between a settled snapshot arriving and the inject command leaving,
//! and after the agent's answer — classify the screen, judge the previous turn (kept in
//! memory; commit the outcome), build the context stack, gate the candidate,
//! commit the turn as `pending`, commit the agent's result, save the session record.
//! Every sled commit is flushed, as in the engine. Runs over every pane fixture in turn.
//!
//! Prints p50/p99 per stage and in total (target: total p99 under 2 ms), the same total
//! with a single sled commit (the minimum a turn needs), and the largest context
//! estimate over all fixtures against the budget (it must never exceed it; the bench
//! exits non-zero if it does). Ends with `BENCH name=… value=… unit=… target=…` lines
//! for `scripts/bench.sh`.
//!
//! `cargo bench -p karl-coord --bench turn` (env `KARL_BENCH_TURNS`, default 1500)

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use karl_common::detect::{classify_capture, CaptureMeta, Detector};
use karl_common::gate::{Gate, GateContext, OtherSession};
use karl_coord::context::{
    ContextConfig, Digest, Outcome, PaneSignal, TaskGraph, TokenEstimator, TurnNote,
};
use karl_coord::engine::session_context;
use karl_coord::records::{
    AuditEntry, AuditKind, InjectStatus, SessionRecord, Status, TurnOutcome, TurnRecord, TurnSource,
};
use karl_coord::store::Store;
use karl_tests::stats::{us, Latencies};

/// Turns per session before a fresh session starts (real sessions are 30–100 turns).
const TURNS_PER_SESSION: u32 = 50;

struct Capture {
    name: String,
    text: String,
    ansi: Option<String>,
    meta: CaptureMeta,
}

#[derive(Default)]
struct Stages {
    classify: Latencies,
    context: Latencies,
    gate: Latencies,
    store: Latencies,
    one_commit: Latencies,
    pure: Latencies,
    total: Latencies,
    total_one_commit: Latencies,
}

fn main() {
    let turns: usize = std::env::var("KARL_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let captures = load(&dir);
    if captures.is_empty() {
        eprintln!("no fixtures found in {}", dir.display());
        std::process::exit(1);
    }
    let detector = Detector::embedded();
    let gate = Gate::new();
    let config = ContextConfig::default();
    let estimator = TokenEstimator::default();
    let data = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no temp dir: {e}");
            std::process::exit(1);
        }
    };
    let store = match Store::open(data.path()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let others = vec![
        OtherSession {
            project: "billing-api".into(),
            path: "~/src/billing-api".into(),
        },
        OtherSession {
            project: "web-console".into(),
            path: "~/src/web-console".into(),
        },
    ];

    // The budget holds on every fixture, for every signal.
    let mut worst_estimate = 0u32;
    let mut budget = 0u32;
    let probe = session(0);
    for c in &captures {
        for signal in [PaneSignal::Success, PaneSignal::Neutral, PaneSignal::Error] {
            let ctx = session_context(&probe, &c.text, signal, &[], &config, &estimator);
            budget = ctx.budget;
            if ctx.estimated_tokens > ctx.budget {
                eprintln!(
                    "context over budget on {}: {} > {}",
                    c.name, ctx.estimated_tokens, ctx.budget
                );
                std::process::exit(1);
            }
            worst_estimate = worst_estimate.max(ctx.estimated_tokens);
        }
    }

    let mut st = Stages::default();
    let mut rec = session(0);
    let mut sessions = 0u32;
    let mut sink = 0usize;
    let mut last_turn: Option<TurnRecord> = None;
    for i in 0..turns {
        if rec.turns >= TURNS_PER_SESSION {
            sessions += 1;
            rec = session(sessions);
            last_turn = None;
        }
        let c = &captures[i % captures.len()];
        let n = rec.turns + 1;
        let candidate = format!(
            "Add input validation for field {i} in src/api/handler_{}.rs and cover it with a unit test.",
            i % 97
        );

        let t = Instant::now();
        let d = classify_capture(&detector, &c.text, c.ansi.as_deref(), &c.meta);
        let classify = t.elapsed();
        sink += d.evidence.len();

        // Judge the previous turn: the engine keeps its last turns in memory and commits
        // the outcome on the last one.
        let t = Instant::now();
        let mut store_time = Duration::ZERO;
        if let Some(last) = last_turn.as_mut() {
            last.outcome = TurnOutcome::Progress;
            record(&store, &rec, last.n, last, &[]);
        }
        store_time += t.elapsed();

        let t = Instant::now();
        let signal = if d.error {
            PaneSignal::Error
        } else {
            PaneSignal::infer(&c.text)
        };
        let ctx = session_context(&rec, &c.text, signal, &[], &config, &estimator);
        let context = t.elapsed();
        sink += ctx.messages.len();

        let t = Instant::now();
        let v = gate.check(
            &candidate,
            &GateContext {
                project: &rec.project,
                goal: &rec.goal,
                path: &rec.path,
                history: &rec.history,
                others: &others,
            },
        );
        let gate_time = t.elapsed();
        sink += v.reasons.len();

        // Fire: the turn is committed `pending` before the agent is asked to type it…
        rec.turns = n;
        rec.remember_prompt(&candidate);
        rec.tasks.note_turn(n);
        let mut turn = TurnRecord {
            n,
            prompt: candidate.clone(),
            source: TurnSource::Model,
            gate: vec!["pass (attempt 1)".into()],
            model_latency_ms: 420,
            prompt_tokens: ctx.estimated_tokens,
            pane_hash: format!("{:032x}", i),
            outcome: TurnOutcome::Pending,
            inject: InjectStatus::Pending,
            unix_ms: 1_700_000_000_000 + i as u64,
            state: d.state,
            ..Default::default()
        };
        let t = Instant::now();
        commit(
            &store,
            &rec,
            n,
            &turn,
            &[audit(&rec, AuditKind::Intent, &candidate)],
        );
        let one_commit = t.elapsed();
        // …and again with the agent's result, then the record is saved.
        let t = Instant::now();
        turn.inject = InjectStatus::Submitted;
        commit(
            &store,
            &rec,
            n,
            &turn,
            &[audit(&rec, AuditKind::Inject, &candidate)],
        );
        if let Err(e) = store.update_session(&rec.id, &rec) {
            eprintln!("sled: {e}");
            std::process::exit(1);
        }
        store_time += one_commit + t.elapsed();
        last_turn = Some(turn);

        let pure = classify + context + gate_time;
        st.classify.record(classify);
        st.context.record(context);
        st.gate.record(gate_time);
        st.store.record(store_time);
        st.one_commit.record(one_commit);
        st.pure.record(pure);
        st.total.record(pure + store_time);
        st.total_one_commit.record(pure + one_commit);
    }

    let line = |name: &str, v: &Latencies| {
        let (p50, p99) = (v.quantile(0.5), v.quantile(0.99));
        println!(
            "  {name:<34} p50 {:>8.1} µs   p99 {:>8.1} µs   max {:>8.1} µs",
            us(p50),
            us(p99),
            us(v.max())
        );
        (p50, p99)
    };
    println!(
        "coordinator overhead per turn: {turns} turns over {} fixture captures, sled at {} (flushed per commit)",
        captures.len(),
        data_dir_fs(data.path())
    );
    line("classify", &st.classify);
    line("context stack", &st.context);
    line("gate", &st.gate);
    line("sled: one turn commit", &st.one_commit);
    line("sled: all writes of a turn", &st.store);
    let (_, p99_pure) = line("classify + context + gate", &st.pure);
    let (_, p99_one) = line("total, one commit", &st.total_one_commit);
    let (p50, p99) = line("total, all writes of a turn", &st.total);
    println!(
        "  largest context estimate over every fixture and signal: {worst_estimate} of {budget} tokens"
    );
    println!(
        "  target p99 < 2 ms: {}",
        if p99 < Duration::from_millis(2) {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "BENCH name=turn_overhead_p50 value={:.3} unit=ms target=- what=\"per-turn coordinator overhead p50 (classify+context+gate+sled, all writes)\"",
        us(p50) / 1e3
    );
    println!(
        "BENCH name=turn_overhead_p99 value={:.3} unit=ms target=<2 what=\"per-turn coordinator overhead p99 (classify+context+gate+sled, all writes)\"",
        us(p99) / 1e3
    );
    println!(
        "BENCH name=turn_overhead_one_commit_p99 value={:.3} unit=ms target=<2 what=\"per-turn overhead p99 with a single sled commit\"",
        us(p99_one) / 1e3
    );
    println!(
        "BENCH name=turn_overhead_no_sled_p99 value={:.3} unit=ms target=- what=\"per-turn overhead p99 without sled (classify+context+gate)\"",
        us(p99_pure) / 1e3
    );
    println!(
        "BENCH name=context_budget value={worst_estimate} unit=tokens target=<={budget} what=\"largest context estimate over every fixture\""
    );
    if sink == usize::MAX {
        println!("{sink}");
    }
}

fn commit(store: &Store, rec: &SessionRecord, n: u32, turn: &TurnRecord, audit: &[AuditEntry]) {
    let done = store
        .record_turn(&rec.id, rec, n, turn, audit)
        .and_then(|()| store.flush_blocking());
    if let Err(e) = done {
        eprintln!("sled: {e}");
        std::process::exit(1);
    }
}

/// As the engine updates a committed turn (its result, its outcome): no flush of its own.
fn record(store: &Store, rec: &SessionRecord, n: u32, turn: &TurnRecord, audit: &[AuditEntry]) {
    if let Err(e) = store.record_turn(&rec.id, rec, n, turn, audit) {
        eprintln!("sled: {e}");
        std::process::exit(1);
    }
}

fn audit(rec: &SessionRecord, kind: AuditKind, text: &str) -> AuditEntry {
    AuditEntry {
        unix_ms: 1_700_000_000_000,
        session: rec.id.clone(),
        machine: rec.machine.clone(),
        pane: rec.pane_id.clone(),
        kind,
        text: text.into(),
        detail: format!("turn {}", rec.turns),
    }
}

/// A session in mid-flight: a plan of eight steps, a digest of earlier turns, a full
/// anti-repeat fence.
fn session(k: u32) -> SessionRecord {
    let mut tasks = TaskGraph::from_steps(
        (1..=8).map(|i| format!("plan step {i}: part {i} of the health endpoint work")),
    );
    tasks.advance(3);
    let mut digest = Digest::default();
    for b in 0..3u32 {
        let notes: Vec<TurnNote> = (1..=5)
            .map(|i| TurnNote {
                turn: b * 5 + i,
                prompt: format!(
                    "Implement part {i} of block {b} in src/health.rs and run the tests"
                ),
                outcome: if i % 3 == 0 {
                    Outcome::Error
                } else {
                    Outcome::Progress
                },
                response: String::new(),
            })
            .collect();
        digest.fold(&notes);
    }
    let mut rec = SessionRecord {
        id: format!("mac2_{k}_1700000000000"),
        machine: "mac2".into(),
        target: "agent-codex:1.1".into(),
        pane_id: format!("%{k}"),
        project: "meshd".into(),
        goal: "Add a /health endpoint that reports uptime and build info".into(),
        path: "~/src/meshd".into(),
        tasks,
        digest,
        status: Status::Running,
        max_turns: TURNS_PER_SESSION + 10,
        ..Default::default()
    };
    for i in 1..=15 {
        rec.remember_prompt(&format!(
            "Instruction {i}: change the health handler's module number {i}"
        ));
    }
    rec
}

fn load(dir: &Path) -> Vec<Capture> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .filter_map(|p| {
            let meta: CaptureMeta = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
            let bytes = std::fs::read(p.with_extension("txt")).ok()?;
            Some(Capture {
                name: p.file_stem()?.to_string_lossy().into_owned(),
                text: String::from_utf8_lossy(&bytes).into_owned(),
                ansi: std::fs::read(p.with_extension("ansi"))
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).into_owned()),
                meta,
            })
        })
        .collect()
}

/// The filesystem the database is on (from /proc/mounts), for the report.
fn data_dir_fs(dir: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let dir = dir.to_string_lossy();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && dir.starts_with(f[1]))
                .then(|| (f[1].len(), format!("{} ({})", f[1], f[2])))
        })
        .max()
        .map(|(_, s)| format!("{} on {s}", dir))
        .unwrap_or_else(|| dir.into_owned())
}
