//! Evidence: what following the agent CLIs' own transcripts costs and how fast a turn end
//! written there becomes a decision.
//!
//! One karl-coord and one karl-agent (release builds) drive 20 stand-ins in real tmux
//! panes on a private socket, every session turning as fast as its pane allows (the
//! stand-in answers after 400 ms; plan-only sessions with a 2,000-step plan, so none
//! ends inside the window).
//! Each stand-in writes Claude Code's live session file and transcript
//! (`CLAUDE_CONFIG_DIR`, as 2.1.330 lays them out), which karl-agent finds through the
//! pane's process tree and follows.
//!
//! Figures: transcript turn end → coordinator (from the time written in the line to the
//! coordinator handling the fact), turn end → decision (to the engine deciding on the
//! first screen that agrees), both p50/p99 over every turn of the measured window; and
//! karl-agent's CPU (user + system, % of one core, from /proc/PID/stat) while following
//! the 20 busy transcripts, against the same run with no transcripts written (baseline).
//!
//! Build first: `cargo build --release --workspace --bins`, then
//! `cargo bench -p karl-tests --bench evidence`. `KARL_BENCH_EVIDENCE_SECS` (measured
//! window per run, default 40), `KARL_BENCH_EVIDENCE_PANES` (20).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use karl_tests::harness::{
    bin, ctl, shell_quote, start_agent, wait_agent, wait_for, Coord, Scratch,
};
use karl_tests::stats::{ms, Latencies};
use karl_tests::tmux_server::TmuxServer;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// user + system CPU ticks of a process.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3; utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

struct RunResult {
    agent_cpu_pct: f64,
    turns: u64,
    seen: Latencies,
    decided: Latencies,
    followed: usize,
}

fn run(with_transcripts: bool, panes: usize, secs: u64) -> RunResult {
    let scratch = Scratch::new();
    let tmux = TmuxServer::new();
    let script = scratch.path("standin.json");
    std::fs::write(
        &script,
        r#"{"default": {"work_ms": 400, "reply": {"answer": "Done: {prompt}"}}}"#,
    )
    .unwrap();
    let standin = bin("karl-standin").display().to_string();
    let mut pane_ids = Vec::new();
    for i in 0..panes {
        let dir = scratch.path(&format!("proj{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let env = if with_transcripts {
            format!(
                "CLAUDE_CONFIG_DIR={} ",
                shell_quote(&scratch.path("claude").display().to_string())
            )
        } else {
            String::new()
        };
        let cmd = format!(
            "cd {} && {env}exec {} --script {}",
            shell_quote(&dir.display().to_string()),
            shell_quote(&standin),
            shell_quote(&script.display().to_string())
        );
        let id = if i == 0 {
            tmux.new_session("work", 120, 40, &cmd).unwrap()
        } else {
            tmux.new_window("work", &cmd).unwrap()
        };
        pane_ids.push(id);
    }
    let config = scratch.path("karl-coord.toml");
    std::fs::write(
        &config,
        "[engine]\nsettle_ms = 300\nmax_injections_per_minute = 1000\nmax_stalled_turns = 1000\nsafety_secs = 30\nmax_turns = 100000\n",
    )
    .unwrap();
    // No model (a closed port): plan-only sessions type their plan steps.
    let coord = Coord::start(
        &scratch,
        None,
        &[
            "--config",
            config.to_str().unwrap(),
            "--model-url",
            "http://127.0.0.1:9/v1",
        ],
    );
    let plan = scratch.path("plan.txt");
    let steps: Vec<String> = (1..=2000)
        .map(|i| format!("Implement step {i} of the parser: handle token kind number {i}."))
        .collect();
    std::fs::write(&plan, steps.join("\n") + "\n").unwrap();
    let mut agent = start_agent(&scratch, &coord.url(), "mac2", None, tmux.socket());
    wait_agent(&scratch, &coord, "mac2", Duration::from_secs(15)).expect("agent connected");
    std::thread::sleep(Duration::from_secs(1));
    let mut ids = Vec::new();
    for p in &pane_ids {
        let out = ctl(
            &scratch,
            Some(&coord.addr),
            None,
            &[
                "drive",
                "mac2",
                p,
                "--goal",
                "Build the parser",
                "--plan",
                plan.to_str().unwrap(),
                "--turns",
                "100000",
                "--json",
            ],
        );
        assert_eq!(out.code, 0, "{out:?}");
        ids.push(out.json()["id"].as_str().unwrap().to_string());
    }
    let show = |id: &str| ctl(&scratch, Some(&coord.addr), None, &["show", id, "--json"]).json();
    // Warm up: every session turning.
    wait_for(Duration::from_secs(60), || {
        ids.iter()
            .all(|id| show(id)["session"]["turns"].as_u64().unwrap_or(0) >= 2)
            .then_some(())
    })
    .expect("every session turns");
    let turns_now = || -> u64 {
        ids.iter()
            .map(|id| show(id)["session"]["turns"].as_u64().unwrap_or(0))
            .sum()
    };
    let before_turns = turns_now();
    let agent_pid = agent.pid();
    let t0 = Instant::now();
    let c0 = cpu_ticks(agent_pid);
    std::thread::sleep(Duration::from_secs(secs));
    let c1 = cpu_ticks(agent_pid);
    let wall = t0.elapsed().as_secs_f64();
    let turns = turns_now() - before_turns;
    let mut seen = Latencies::new();
    let mut decided = Latencies::new();
    let mut followed = 0;
    for (i, id) in ids.iter().enumerate() {
        let v = show(id);
        if i == 0 {
            eprintln!(
                "  first session: {} turns, {} — {}",
                v["session"]["turns"], v["session"]["status"], v["session"]["reason"]
            );
        }
        if v["session"]["evidence"] == "transcript" {
            followed += 1;
        }
        for (key, into) in [
            ("turn_end_seen_ms", &mut seen),
            ("turn_end_decided_ms", &mut decided),
        ] {
            for ms in v["record"][key].as_array().into_iter().flatten() {
                into.record_ms(ms.as_u64().unwrap_or(0) as f64);
            }
        }
    }
    agent.kill();
    RunResult {
        agent_cpu_pct: (c1 - c0) as f64 / clk_tck() / wall * 100.0,
        turns,
        seen,
        decided,
        followed,
    }
}

fn main() {
    let secs = env_u64("KARL_BENCH_EVIDENCE_SECS", 40);
    let panes = env_u64("KARL_BENCH_EVIDENCE_PANES", 20) as usize;
    let base = run(false, panes, secs);
    let ev = run(true, panes, secs);
    println!("evidence bench: {panes} panes, {secs} s measured per run");
    println!(
        "  baseline (screen only): {} turns, karl-agent CPU {:.1}% of one core",
        base.turns, base.agent_cpu_pct
    );
    println!(
        "  transcripts followed in {}/{panes} sessions: {} turns, karl-agent CPU {:.1}% of one core",
        ev.followed, ev.turns, ev.agent_cpu_pct
    );
    let line = |l: &Latencies| {
        format!(
            "p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms over {} turn ends",
            ms(l.quantile(0.5)),
            ms(l.quantile(0.99)),
            ms(l.max()),
            l.len()
        )
    };
    println!("  turn end written → coordinator: {}", line(&ev.seen));
    println!(
        "  turn end written → decision on the agreeing screen: {}",
        line(&ev.decided)
    );
    for (name, v) in [
        ("evidence_seen_p50", ms(ev.seen.quantile(0.5))),
        ("evidence_seen_p99", ms(ev.seen.quantile(0.99))),
        ("evidence_decided_p50", ms(ev.decided.quantile(0.5))),
        ("evidence_decided_p99", ms(ev.decided.quantile(0.99))),
        ("evidence_agent_cpu_pct", ev.agent_cpu_pct),
        ("evidence_agent_cpu_base_pct", base.agent_cpu_pct),
    ] {
        println!("BENCH name={name} value={v:.1}");
    }
    assert_eq!(ev.followed, panes, "every session followed its transcript");
}
