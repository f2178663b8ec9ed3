//! Scale: one karl-coord process (release build) driving 200 sessions over 20 simulated
//! agents that connect over real gRPC on loopback, each session turning every 5 s.
//!
//! A simulated agent is the real link (`karl_agent::link::run`: hello, heartbeats,
//! command dispatch) over a fake pane host implementing [`PaneOps`]: its panes show a
//! Claude Code screen from the fixtures, rewritten each turn so that its hash changes;
//! injections are accepted at once. Every 5 s (staggered across panes) each pane sends a
//! new settled snapshot. Decision latency is the time from that snapshot entering the
//! agent's event channel to the inject command for the pane reaching the simulated
//! agent: the stream up, classification, the turn's context, the model call (the
//! in-process stub model, answering at once), the gate, the sled commits, the command
//! down. Coordinator RSS is read from /proc/PID/status every second.
//!
//! Targets: decision latency p99 under 50 ms, coordinator RSS under 200 MB.
//!
//! Build the binaries first: `cargo build --release -p karl-coord -p karl-agent -p
//! karl-tests --bins`, then `cargo bench -p karl-tests --bench scale`. Environment:
//! `KARL_BENCH_SCALE_SECS` (measured run, default 60), `KARL_BENCH_AGENTS` (20),
//! `KARL_BENCH_PANES` (panes per agent, 10), `KARL_BENCH_TURN_SECS` (5),
//! `KARL_BENCH_MODEL` (`stub`, or `none` for plan-only sessions).
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karl_agent::config::LinkConfig;
use karl_agent::link::{OpError, PaneOps};
use karl_common::detect::{classify_capture, CaptureMeta, Detector, PaneState};
use karl_common::pane_text::stable_hash;
use karl_common::pb;
use karl_common::pb::Label as _;
use karl_common::tls::CoordAddr;
use karl_tests::harness::{free_port, karl_command, tail, wait_for, Proc, Scratch};
use karl_tests::stats::{ms, Latencies};
use karl_tests::stub_model::{StubModel, StubScript};
use tokio::sync::mpsc;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The base screen: Claude Code idle after an answer.
const FIXTURE: &str = "cc-basic-120x40__after-answer";

struct Screen {
    base: String,
    meta: CaptureMeta,
}

impl Screen {
    fn load() -> Screen {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/panes");
        let base = std::fs::read_to_string(dir.join(format!("{FIXTURE}.txt"))).unwrap();
        let meta = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{FIXTURE}.json"))).unwrap(),
        )
        .unwrap();
        Screen { base, meta }
    }

    /// The screen after turn `n` of `pane`, answering `prompt`.
    fn render(&self, pane: &str, n: u64, prompt: &str) -> (String, Vec<String>) {
        let asked: String = prompt
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(100)
            .collect();
        let answer = format!("● Done: turn {n} on {pane}. The health endpoint should be cheap,");
        let text = self
            .base
            .replacen("add a health endpoint to the API", &asked, 1)
            .replacen("● The health endpoint should be cheap,", &answer, 1);
        (text, vec![format!("❯ {asked}"), answer])
    }
}

/// One fake pane.
struct SimPane {
    info: pb::PaneInfo,
    turn: u64,
    prompt: String,
    /// When the last settled snapshot was sent, until an injection answers it.
    waiting_since: Option<Instant>,
}

/// A pane host with no tmux behind it.
struct SimHost {
    screen: Arc<Screen>,
    panes: Mutex<HashMap<String, SimPane>>,
    watched: Mutex<Vec<String>>,
    latencies: Arc<Mutex<Vec<f64>>>,
    measuring: Arc<std::sync::atomic::AtomicBool>,
    injections: std::sync::atomic::AtomicU64,
}

impl SimHost {
    fn snapshot(&self, p: &SimPane, reason: pb::SnapshotReason) -> pb::PaneSnapshot {
        let (text, new_lines) = self.screen.render(&p.info.pane_id, p.turn, &p.prompt);
        let now = karl_common::unix_ms();
        pb::PaneSnapshot {
            pane: Some(p.info.clone()),
            stable_hash: stable_hash(&text),
            text,
            ansi: String::new(),
            cursor_x: self.screen.meta.cursor_x.unwrap_or(2),
            cursor_y: self.screen.meta.cursor_y.unwrap_or(24),
            new_lines,
            novelty: 0.1,
            reason: reason as i32,
            captured_unix_ms: now,
            last_output_unix_ms: now.saturating_sub(300),
            seq: p.turn,
            request_id: 0,
            history_lines: 0,
        }
    }

    /// The pane's next settled snapshot (a new turn's screen).
    fn settle(&self, pane_id: &str) -> Option<pb::PaneSnapshot> {
        let mut panes = self.panes.lock().unwrap();
        let p = panes.get_mut(pane_id)?;
        p.turn += 1;
        p.waiting_since = Some(Instant::now());
        Some(self.snapshot(p, pb::SnapshotReason::Settled))
    }
}

impl PaneOps for SimHost {
    async fn tmux_version(&self) -> String {
        "tmux 3.3a (simulated)".into()
    }

    async fn list_panes(&self) -> Result<Vec<pb::PaneInfo>, OpError> {
        Ok(self
            .panes
            .lock()
            .unwrap()
            .values()
            .map(|p| p.info.clone())
            .collect())
    }

    fn watching(&self) -> Vec<String> {
        self.watched.lock().unwrap().clone()
    }

    async fn watch(&self, w: pb::Watch) -> Result<(), OpError> {
        self.watched.lock().unwrap().push(w.target);
        Ok(())
    }

    async fn unwatch(&self, target: String) -> Result<(), OpError> {
        self.watched.lock().unwrap().retain(|t| *t != target);
        Ok(())
    }

    async fn capture(&self, c: pb::Capture) -> Result<pb::PaneSnapshot, OpError> {
        let panes = self.panes.lock().unwrap();
        let p = panes
            .get(&c.target)
            .ok_or_else(|| format!("no pane {}", c.target))?;
        Ok(self.snapshot(p, pb::SnapshotReason::Requested))
    }

    async fn inject(&self, i: pb::Inject) -> pb::InjectResult {
        let now = Instant::now();
        let mut panes = self.panes.lock().unwrap();
        let Some(p) = panes.get_mut(&i.target) else {
            return pb::InjectResult {
                outcome: pb::InjectOutcome::Failed as i32,
                reason: format!("no pane {}", i.target),
                ..Default::default()
            };
        };
        if let Some(sent) = p.waiting_since.take() {
            if self.measuring.load(std::sync::atomic::Ordering::Relaxed) {
                self.latencies
                    .lock()
                    .unwrap()
                    .push(now.duration_since(sent).as_secs_f64() * 1e3);
            }
        }
        p.prompt = i.text;
        self.injections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        pb::InjectResult {
            outcome: pb::InjectOutcome::Submitted as i32,
            pane_id: p.info.pane_id.clone(),
            ..Default::default()
        }
    }

    async fn send_keys(&self, _s: pb::SendKeys) -> Result<(), OpError> {
        Ok(())
    }
}

fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The run's shape, from the environment.
struct Params {
    secs: u64,
    agents: usize,
    per_agent: usize,
    turn_ms: u64,
    with_model: bool,
}

fn main() {
    let params = Params {
        secs: env_u64("KARL_BENCH_SCALE_SECS", 60),
        agents: env_u64("KARL_BENCH_AGENTS", 20) as usize,
        per_agent: env_u64("KARL_BENCH_PANES", 10) as usize,
        turn_ms: env_u64("KARL_BENCH_TURN_SECS", 5) * 1000,
        with_model: std::env::var("KARL_BENCH_MODEL").map_or(true, |m| m != "none"),
    };

    let screen = Arc::new(Screen::load());
    {
        let (text, _) = screen.render("%0", 1, "Implement part 1 of the tokenizer.");
        let d = classify_capture(&Detector::embedded(), &text, None, &screen.meta);
        assert_eq!(
            d.state,
            PaneState::Idle,
            "the simulated screen must read as idle: {d:?}"
        );
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(screen, params));
}

async fn run(screen: Arc<Screen>, params: Params) {
    let Params {
        secs,
        agents,
        per_agent,
        turn_ms,
        with_model,
    } = params;
    let sessions = agents * per_agent;
    let stub = StubModel::start(StubScript::echo()).await.unwrap();
    let scratch = Scratch::new();
    let config = scratch.path("karl-coord.toml");
    std::fs::write(
        &config,
        "[engine]\nsettle_ms = 300\nmax_injections_per_minute = 1000\nmax_stalled_turns = 1000\nsafety_secs = 3600\nmax_turns = 100000\n\n[model]\ntimeout_ms = 5000\nretries = 0\n",
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let model_url = if with_model {
        stub.base_url()
    } else {
        "http://127.0.0.1:9/v1".to_string()
    };
    let mut cmd = karl_command("karl-coord", scratch.dir.path());
    cmd.env("KARL_LOG", "warn")
        .arg("--listen")
        .arg(&addr)
        .arg("--data-dir")
        .arg(scratch.path("data"))
        .arg("--config")
        .arg(&config)
        .arg("--model-url")
        .arg(&model_url);
    let mut coord = Proc::spawn("karl-coord", cmd, scratch.path("coord.log"));
    let up = wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(&addr).ok()
    });
    assert!(
        up.is_some(),
        "karl-coord did not come up: {}",
        coord.log_text()
    );
    let pid = coord.pid();
    let coord_addr = CoordAddr::parse(&format!("http://{addr}")).unwrap();

    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let measuring = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut hosts = Vec::new();
    for a in 0..agents {
        let machine = format!("sim{a:02}");
        let panes = (0..per_agent)
            .map(|j| {
                let id = format!("%{}", a * per_agent + j);
                let info = pb::PaneInfo {
                    pane_id: id.clone(),
                    session: format!("work{j}"),
                    window: 0,
                    pane: 0,
                    current_command: screen.meta.pane_current_command.clone().unwrap_or_default(),
                    title: screen.meta.pane_title.clone().unwrap_or_default(),
                    width: screen.meta.width.unwrap_or(120),
                    height: screen.meta.height.unwrap_or(40),
                    current_path: format!("/home/dev/proj{a}-{j}"),
                    pid: 1000 + j as u32,
                    in_mode: false,
                    dead: false,
                    processes: Vec::new(),
                };
                (
                    id,
                    SimPane {
                        info,
                        turn: 0,
                        prompt: "add a health endpoint to the API".into(),
                        waiting_since: None,
                    },
                )
            })
            .collect();
        let host = Arc::new(SimHost {
            screen: screen.clone(),
            panes: Mutex::new(panes),
            watched: Mutex::new(Vec::new()),
            latencies: latencies.clone(),
            measuring: measuring.clone(),
            injections: Default::default(),
        });
        let (events_tx, events_rx) = mpsc::channel(1024);
        let mut stop = stop_rx.clone();
        let h = host.clone();
        let link = LinkConfig::new(coord_addr.clone(), machine.clone(), None);
        tokio::spawn(async move {
            karl_agent::link::run(link, h, events_rx, async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
        });
        hosts.push((machine, host, events_tx));
    }

    // Every agent connected, then one session per pane.
    let mut client = karl_ctl::client::connect(&coord_addr, None).await.unwrap();
    let connected = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let n = client
                .list_agents(pb::ListAgentsRequest {})
                .await
                .map(|r| r.into_inner().agents.len())
                .unwrap_or(0);
            if n == agents {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(connected.is_ok(), "not every simulated agent connected");
    let plan: Vec<String> = (1..=200)
        .map(|i| format!("Implement part {i} of the tokenizer and its unit tests."))
        .collect();
    let started = Instant::now();
    let mut ids: Vec<String> = Vec::new();
    for (machine, host, _) in &hosts {
        let panes: Vec<String> = host.panes.lock().unwrap().keys().cloned().collect();
        for pane in panes {
            let r = client
                .drive(pb::DriveRequest {
                    machine: machine.clone(),
                    target: pane.clone(),
                    project: format!("proj-{machine}-{}", pane.trim_start_matches('%')),
                    goal: "Write the tokenizer".into(),
                    plan: plan.clone(),
                    max_turns: 100_000,
                    ..Default::default()
                })
                .await;
            match r {
                Ok(r) => ids.extend(r.into_inner().session.map(|s| s.id)),
                Err(e) => panic!("drive {machine} {pane}: {}", e.message()),
            }
        }
    }
    let drive_secs = started.elapsed().as_secs_f64();

    // Each pane settles every turn_ms, staggered evenly over the period.
    let total = sessions as u64;
    let mut k = 0u64;
    for (_, host, events) in &hosts {
        let ids: Vec<String> = host.panes.lock().unwrap().keys().cloned().collect();
        for pane in ids {
            let offset = Duration::from_millis(turn_ms * k / total.max(1));
            k += 1;
            let host = host.clone();
            let events = events.clone();
            let mut stop = stop_rx.clone();
            tokio::spawn(async move {
                let start = tokio::time::Instant::now() + offset;
                let mut tick = tokio::time::interval_at(start, Duration::from_millis(turn_ms));
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                    let Some(s) = host.settle(&pane) else { return };
                    let ev = pb::AgentEvent {
                        kind: Some(pb::agent_event::Kind::Snapshot(s)),
                    };
                    if events.send(ev).await.is_err() {
                        return;
                    }
                }
            });
        }
    }

    // Warm up one period, then measure.
    tokio::time::sleep(Duration::from_millis(turn_ms)).await;
    measuring.store(true, std::sync::atomic::Ordering::Relaxed);
    let inj_before: u64 = hosts
        .iter()
        .map(|(_, h, _)| h.injections.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let mut peak_rss = 0u64;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        peak_rss = peak_rss.max(rss_kib(pid, "VmRSS:").unwrap_or(0));
    }
    measuring.store(false, std::sync::atomic::Ordering::Relaxed);
    let injections: u64 = hosts
        .iter()
        .map(|(_, h, _)| h.injections.load(std::sync::atomic::Ordering::Relaxed))
        .sum::<u64>()
        - inj_before;
    let end_rss = rss_kib(pid, "VmRSS:").unwrap_or(0);
    let hwm = rss_kib(pid, "VmHWM:").unwrap_or(0);
    let mut statuses: HashMap<String, usize> = HashMap::new();
    if let Ok(r) = client
        .list_sessions(pb::ListSessionsRequest { all: true })
        .await
    {
        for s in r.into_inner().sessions {
            *statuses.entry(s.status().label()).or_default() += 1;
        }
    }
    // Where one session's prompts came from (model, regenerated, plan, escape).
    let mut sources: HashMap<String, usize> = HashMap::new();
    if let Some(id) = ids.first() {
        if let Ok(d) = client.show_session(pb::SessionRef { id: id.clone() }).await {
            for t in d.into_inner().turns {
                *sources.entry(t.source().label()).or_default() += 1;
            }
        }
    }
    let _ = stop_tx.send(true);
    let lat = Latencies::from_ms(&latencies.lock().unwrap());
    let alive = coord.is_running();
    coord.kill();
    drop(stub);

    let expected = secs as f64 * sessions as f64 * 1000.0 / turn_ms as f64;
    println!(
        "scale: {sessions} sessions over {agents} simulated agents (real gRPC on loopback), a settled snapshot per pane every {} s, {} model; {secs} s measured",
        turn_ms / 1000,
        if with_model { "instant stub" } else { "no" }
    );
    println!(
        "  sessions started in {drive_secs:.1} s; at the end: {}",
        statuses
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  one session's prompts by source: {}",
        sources
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  injections during the run: {injections} (expected about {expected:.0}); karl-coord {}",
        if alive { "alive" } else { "DIED" }
    );
    if lat.is_empty() {
        println!(
            "  no decision was measured; coordinator log:\n{}",
            tail(&coord.log_text(), 30)
        );
        std::process::exit(1);
    }
    let (p50, p99) = (ms(lat.quantile(0.5)), ms(lat.quantile(0.99)));
    println!(
        "  decision latency (snapshot sent → inject received): p50 {p50:.1} ms  p90 {:.1} ms  p99 {p99:.1} ms  max {:.1} ms  over {} decisions (target p99 < 50 ms)",
        ms(lat.quantile(0.9)),
        ms(lat.max()),
        lat.len()
    );
    println!(
        "  karl-coord RSS: peak sampled {:.1} MB, at the end {:.1} MB, VmHWM {:.1} MB (target < 200 MB)",
        peak_rss as f64 / 1024.0,
        end_rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    println!(
        "BENCH name=scale_decision_p50 value={p50:.1} unit=ms target=- what=\"decision latency p50, {sessions} sessions / {agents} agents\""
    );
    println!(
        "BENCH name=scale_decision_p99 value={p99:.1} unit=ms target=<50 what=\"decision latency p99, {sessions} sessions / {agents} agents\""
    );
    println!(
        "BENCH name=scale_coord_rss value={:.1} unit=MB target=<200 what=\"karl-coord peak RSS, {sessions} sessions\"",
        hwm.max(peak_rss) as f64 / 1024.0
    );
}
