//! What watching costs, on a private tmux server:
//!
//! - idle CPU: the pane host watching N idle panes (control-mode clients, settle and safety
//!   timers) against a loop that runs `tmux capture-pane` on the same panes every 500 ms, as
//!   polling drivers do; CPU is getrusage of this process and its reaped children (tmux
//!   clients and capture processes), measured over the same wall time;
//! - reaction: from the last output byte written into a pane to its settled snapshot
//!   arriving on the host's event channel, with settle_ms = 300;
//! - memory: this process's resident set while it watches the panes (plus, on Linux, the
//!   control clients' own).
//!
//! `cargo bench -p karl-agent --bench idle`. Environment: `KARL_BENCH_SECS` (per phase,
//! default 60), `KARL_BENCH_PANES` (default 50), `KARL_BENCH_REACTIONS` (default 20).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use karl_agent::panes::PaneHost;
use karl_common::pb;
use karl_tests::stats::{ms, Latencies};
use karl_tests::tmux_server::TmuxServer;
use nix::sys::resource::{getrusage, UsageWho};
use tokio::sync::mpsc;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) of this process and of its reaped children.
fn cpu() -> (f64, f64) {
    let secs = |who| {
        let u = getrusage(who).unwrap();
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    };
    (secs(UsageWho::RUSAGE_SELF), secs(UsageWho::RUSAGE_CHILDREN))
}

/// Peak resident set of this process in bytes: VmHWM on Linux (ru_maxrss there starts
/// from the parent's peak, e.g. cargo's, because it survives fork and exec), ru_maxrss
/// elsewhere (bytes on macOS).
fn peak_rss() -> u64 {
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
    match hwm {
        Some(kb) => kb * 1024,
        None => getrusage(UsageWho::RUSAGE_SELF).unwrap().max_rss() as u64,
    }
}

/// Current resident set of a process in bytes, from /proc (Linux only).
fn rss_of(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Proportional set size of a process in bytes (shared pages divided among their users),
/// from /proc (Linux only).
fn pss_of(pid: &str) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = rollup.lines().find(|l| l.starts_with("Pss:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU seconds a process has used so far, from /proc (Linux only).
fn proc_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Control-client processes of this server (Linux only): their pids.
fn control_client_pids(server: &TmuxServer) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            let ours = args.iter().any(|a| *a == server.socket().as_bytes())
                && args.iter().any(|a| *a == b"-C");
            ours.then_some(pid)
        })
        .collect()
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn watch(target: &str, settle_ms: u32) -> pb::Watch {
    pb::Watch {
        target: target.into(),
        settle_ms,
        ..Default::default()
    }
}

/// N idle panes: sessions of 5 windows, each showing 30 lines and then silent.
fn idle_panes(server: &TmuxServer, n: usize) -> Vec<String> {
    let cmd = "sh -c 'seq 1 30; exec sleep 1000000'";
    let mut panes = Vec::new();
    for i in 0..n {
        let session = format!("idle{}", i / 5);
        let pane = if i % 5 == 0 {
            server.new_session(&session, 120, 40, cmd).unwrap()
        } else {
            server.new_window(&session, cmd).unwrap()
        };
        panes.push(pane);
    }
    panes
}

async fn reaction(rounds: usize) -> Vec<Duration> {
    let server = TmuxServer::new();
    let pane = server
        .new_session("react", 120, 40, "sleep 1000000")
        .unwrap();
    let tty = server
        .run(&["display-message", "-p", "-t", &pane, "#{pane_tty}"])
        .unwrap()
        .trim()
        .to_string();
    let (tx, mut rx) = mpsc::channel(1024);
    let host = PaneHost::new(server.tmux(), tx);
    host.watch(watch(&pane, 300)).await.unwrap();
    let mut got = Vec::new();
    for round in 0..rounds {
        tokio::time::sleep(Duration::from_millis(100)).await;
        while rx.try_recv().is_ok() {}
        let needle = format!("reaction {round}");
        // A short burst, then silence: the clock starts at the last byte.
        for i in 0..3 {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(&tty).unwrap();
            let line = if i == 2 {
                format!("{needle}\r\n")
            } else {
                format!("noise {round}.{i}\r\n")
            };
            f.write_all(line.as_bytes()).unwrap();
            drop(f);
            if i < 2 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let last_byte = Instant::now();
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .expect("a settled snapshot within 5 s")
                .unwrap();
            if let Some(pb::agent_event::Kind::Snapshot(s)) = &ev.kind {
                if s.reason == pb::SnapshotReason::Settled as i32 && s.text.contains(&needle) {
                    got.push(last_byte.elapsed());
                    break;
                }
            }
        }
    }
    host.shutdown().await;
    got
}

fn main() {
    let secs = env_u64("KARL_BENCH_SECS", 60);
    let n = env_u64("KARL_BENCH_PANES", 50) as usize;
    let rounds = env_u64("KARL_BENCH_REACTIONS", 20) as usize;
    let phase = Duration::from_secs(secs);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let server = TmuxServer::new();
        let panes = idle_panes(&server, n);
        let tmux = server.tmux();
        let version = tmux.version().await.unwrap_or_default();
        let server_pid = tmux.server_pid().await.ok();
        println!("karl-agent idle benchmark: {n} idle panes, {secs} s per phase, {version}");

        // Phase 1: the pane host.
        let (tx, mut rx) = mpsc::channel(4096);
        let drain = tokio::spawn(async move {
            let mut events = 0u64;
            while rx.recv().await.is_some() {
                events += 1;
            }
            events
        });
        let host = PaneHost::new(tmux.clone(), tx);
        for p in &panes {
            host.watch(watch(p, 1500)).await.unwrap();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let captures_before = host.captures_taken();
        let (s0, c0) = cpu();
        let srv0 = server_pid.and_then(proc_cpu);
        tokio::time::sleep(phase).await;
        let rss_now = rss_of("self");
        let peak = peak_rss();
        let client_pids = control_client_pids(&server);
        let clients_rss: u64 = client_pids.iter().filter_map(|p| rss_of(p)).sum();
        let clients_pss: u64 = client_pids.iter().filter_map(|p| pss_of(p)).sum();
        let captures = host.captures_taken() - captures_before;
        let srv1 = server_pid.and_then(proc_cpu);
        host.shutdown().await; // reaps the control clients: their CPU joins the children's
        let (s1, c1) = cpu();
        drop(host);
        let events = drain.await.unwrap_or(0);
        let agent = (s1 - s0) + (c1 - c0);
        let agent_server = srv0.zip(srv1).map(|(a, b)| b - a);

        // Phase 2: polling capture-pane every 500 ms.
        let (s0, c0) = cpu();
        let srv0 = server_pid.and_then(proc_cpu);
        let start = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut polls = 0u64;
        while start.elapsed() < phase {
            tick.tick().await;
            for p in &panes {
                let _ = tmux.run(&["capture-pane", "-p", "-t", p]).await;
                polls += 1;
            }
        }
        let (s1, c1) = cpu();
        let srv1 = server_pid.and_then(proc_cpu);
        let polling = (s1 - s0) + (c1 - c0);
        let poll_server = srv0.zip(srv1).map(|(a, b)| b - a);

        println!(
            "agent (control mode, settle 1500 ms, safety 30 s): CPU {agent:.3} s  ({captures} captures; {events} events in all)"
        );
        println!("polling loop (capture-pane every 500 ms):          CPU {polling:.3} s  ({polls} captures)");
        if agent > 0.0 {
            println!("ratio: polling uses {:.0}x the agent's CPU (target >= 20x)", polling / agent);
        } else {
            println!("ratio: agent CPU below the clock's resolution (target >= 20x)");
        }
        if let (Some(a), Some(p)) = (agent_server, poll_server) {
            println!("tmux server CPU (not in the figures above): {a:.3} s while watched, {p:.3} s while polled");
        }
        match rss_now {
            Some(rss) => println!(
                "agent RSS watching {n} panes: {:.1} MB (peak so far {:.1} MB; target < 20 MB); \
                 {} tmux control clients: RSS {:.1} MB together, PSS {:.1} MB",
                mb(rss),
                mb(peak),
                client_pids.len(),
                mb(clients_rss),
                mb(clients_pss)
            ),
            None => println!("agent peak RSS watching {n} panes: {:.1} MB (target < 20 MB)", mb(peak)),
        }
        drop(server);

        let r: Latencies = reaction(rounds).await.into_iter().collect();
        if !r.is_empty() {
            println!(
                "reaction, last output byte -> settled snapshot (settle_ms 300, n={}): median {:.0} ms, p90 {:.0} ms, min {:.0} ms, max {:.0} ms (target: median within 50 ms of 300)",
                r.len(),
                ms(r.quantile(0.5)),
                ms(r.quantile(0.9)),
                ms(r.min()),
                ms(r.max())
            );
        }
    });
}
