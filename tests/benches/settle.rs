//! Settle-to-injection latency over real processes: karl-coord and karl-agent (release
//! builds) on loopback, the stand-in coding agent in a real tmux pane, and a model that
//! answers at once (the in-process stub model in its cooperative mode), with
//! settle_ms = 300.
//!
//! A control-mode client of the bench's own (`tmux -C attach -f ignore-size`) stamps
//! every `%output` of the pane as tmux delivers it. For each turn after the first, the
//! longest silence before the stand-in logs the prompt is the settle gap: it starts at
//! the pane's last output byte and ends when the pasted prompt appears in the pane.
//! Prints that latency (target: under settle_ms + 150 ms) and, for reference, last
//! output → prompt submitted (which adds the agent's 150 ms paste-to-Enter wait).
//!
//! Build the binaries first: `cargo build --release -p karl-coord -p karl-agent -p
//! karl-tests --bins`, then `cargo bench -p karl-tests --bench settle`
//! (env `KARL_BENCH_SETTLE_TURNS`, default 30).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use karl_tests::harness::{
    bin, ctl, free_port, karl_command, shell_quote, standin_events, tail, wait_agent, wait_for,
    Coord, Proc, Scratch,
};
use karl_tests::stats::{ms, Latencies};
use karl_tests::stub_model::{StubModel, StubScript};
use karl_tests::tmux_server::TmuxServer;

const SETTLE_MS: f64 = 300.0;

const CONFIG: &str = r#"
[engine]
settle_ms = 300
max_injections_per_minute = 600
max_stalled_turns = 50
safety_secs = 30

[model]
timeout_ms = 5000
retries = 0
"#;

/// The stand-in works a little under half a second per prompt, streaming its answer.
const SCRIPT: &str =
    r#"{"default": {"work_ms": 400, "stream": true, "reply": {"answer": "Done: {prompt}"}}}"#;

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

/// karl-coord or karl-agent with logging at `warn`, so log writing stays out of the figures.
fn spawn_quiet(scratch: &Scratch, binary: &str, args: &[&str]) -> Proc {
    let mut cmd = karl_command(binary, scratch.dir.path());
    cmd.env("KARL_LOG", "warn").args(args);
    Proc::spawn(binary, cmd, scratch.path(&format!("{binary}.log")))
}

fn main() {
    let turns: usize = std::env::var("KARL_BENCH_SETTLE_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt.block_on(StubModel::start(StubScript::echo())).unwrap();

    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    let standin_log = scratch.path("standin.log");
    let script = scratch.path("script.json");
    std::fs::write(&script, SCRIPT).unwrap();
    let cmdline = [
        bin("karl-standin").display().to_string(),
        "--log".into(),
        standin_log.display().to_string(),
        "--script".into(),
        script.display().to_string(),
    ]
    .iter()
    .map(|a| shell_quote(a))
    .collect::<Vec<_>>()
    .join(" ");
    let pane = tmux
        .new_session("work", 120, 40, &cmdline)
        .expect("tmux new-session");
    wait_for(Duration::from_secs(10), || {
        tmux.capture(&pane)
            .expect("tmux capture-pane")
            .contains('❯')
            .then_some(())
    })
    .expect("stand-in did not draw its input box");

    // The bench's own view of the pane's output.
    let outputs: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut watcher = Command::new(karl_agent::tmux::program_from_env())
        .args(["-L", tmux.socket(), "-f", "/dev/null", "-C"])
        .args(["attach-session", "-t", "work", "-f", "ignore-size"])
        .env_remove("TMUX")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tmux control client");
    let stdout = watcher.stdout.take().unwrap();
    let prefix = format!("%output {pane} ");
    let sink = outputs.clone();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = Vec::new();
        while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if line.starts_with(prefix.as_bytes()) {
                sink.lock().unwrap().push(now_ms());
            }
            line.clear();
        }
    });

    let config = scratch.path("karl-coord.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let data_dir = scratch.path("data");
    let model_url = stub.base_url();
    let proc = spawn_quiet(
        &scratch,
        "karl-coord",
        &[
            "--listen",
            &addr,
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--model-url",
            &model_url,
        ],
    );
    wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(&addr).ok()
    })
    .expect("karl-coord did not come up");
    let coord = Coord {
        proc,
        addr: addr.clone(),
        token: None,
        data_dir,
    };
    let _agent = spawn_quiet(
        &scratch,
        "karl-agent",
        &[
            "--coord",
            &coord.url(),
            "--machine",
            "mac2",
            "--tmux-socket",
            tmux.socket(),
        ],
    );
    wait_agent(&scratch, &coord, "mac2", Duration::from_secs(15)).expect("agent did not connect");

    let plan = scratch.path("plan.txt");
    let steps: String = (1..=turns + 10)
        .map(|i| format!("Implement part {i} of the tokenizer and its unit tests.\n"))
        .collect();
    std::fs::write(&plan, steps).unwrap();
    let total = (turns + 1).to_string();
    let out = ctl(
        &scratch,
        Some(&addr),
        None,
        &[
            "drive",
            "mac2",
            &pane,
            "--goal",
            "Write the tokenizer",
            "--plan",
            plan.to_str().unwrap(),
            "--turns",
            &total,
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "drive failed: {out:?}");
    let id = out.json()["id"].as_str().unwrap_or_default().to_string();
    let done = wait_for(Duration::from_secs(30 + 4 * turns as u64), || {
        (standin_events(&standin_log, "prompt").len() > turns).then_some(())
    });
    if done.is_none() {
        eprintln!(
            "only {} prompts arrived; coordinator log:\n{}",
            standin_events(&standin_log, "prompt").len(),
            tail(&coord.proc.log_text(), 30)
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let show = ctl(&scratch, Some(&addr), None, &["show", &id, "--json"]).json();
    let model_turns = show["turns"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter(|x| x["source"] == "model" || x["source"] == "regenerated")
                .count()
        })
        .unwrap_or(0);
    let _ = watcher.kill();
    let _ = watcher.wait();

    let prompts: Vec<f64> = standin_events(&standin_log, "prompt")
        .iter()
        .filter_map(|e| e["unix_ms"].as_u64().map(|t| t as f64))
        .collect();
    let outs = outputs.lock().unwrap().clone();
    let (appear, submit) = settle_gaps(&prompts, &outs);
    if appear.is_empty() {
        eprintln!("no turn could be measured");
        std::process::exit(1);
    }
    let (appear_ms, submit_ms) = (Latencies::from_ms(&appear), Latencies::from_ms(&submit));
    let pct = |l: &Latencies, q: f64| ms(l.quantile(q));
    let target = SETTLE_MS + 150.0;
    println!(
        "settle-to-injection: {} turns measured ({model_turns} written by the model), settle_ms {SETTLE_MS}, instant model",
        appear.len()
    );
    println!(
        "  last output → prompt appears in the pane: p50 {:.0} ms  p99 {:.0} ms  min {:.0}  max {:.0}  (target < {target:.0} ms)",
        pct(&appear_ms, 0.5),
        pct(&appear_ms, 0.99),
        ms(appear_ms.min()),
        ms(appear_ms.max())
    );
    println!(
        "  last output → prompt submitted (Enter): p50 {:.0} ms  p99 {:.0} ms  (includes the 150 ms paste-to-Enter wait)",
        pct(&submit_ms, 0.5),
        pct(&submit_ms, 0.99)
    );
    println!(
        "BENCH name=settle_to_prompt_p50 value={:.0} unit=ms target=<{target:.0} what=\"last output -> prompt in pane, settle_ms=300, instant model, p50\"",
        pct(&appear_ms, 0.5)
    );
    println!(
        "BENCH name=settle_to_prompt_p99 value={:.0} unit=ms target=<{target:.0} what=\"last output -> prompt in pane, settle_ms=300, instant model, p99\"",
        pct(&appear_ms, 0.99)
    );
    println!(
        "BENCH name=settle_to_submit_p50 value={:.0} unit=ms target=- what=\"last output -> prompt submitted (incl. 150 ms Enter wait), p50\"",
        pct(&submit_ms, 0.5)
    );
    drop(stub);
}

/// For each prompt after the first: the longest silence in the pane's output since the
/// previous prompt (the settle gap) → (gap length, last output → prompt logged).
fn settle_gaps(prompts: &[f64], outs: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut appear = Vec::new();
    let mut submit = Vec::new();
    for w in prompts.windows(2) {
        let (from, to) = (w[0], w[1] + 5.0);
        let inside: Vec<f64> = outs
            .iter()
            .copied()
            .filter(|t| *t > from && *t <= to)
            .collect();
        let gap = inside
            .windows(2)
            .map(|p| (p[1] - p[0], p[0]))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((len, last)) = gap {
            appear.push(len);
            submit.push(w[1] - last);
        }
    }
    (appear, submit)
}
