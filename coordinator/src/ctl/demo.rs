//! `karl-ctl demo`: KARL end to end on one machine with no Mac and no model.
//!
//! It starts a private tmux server running `karl-standin` (the stand-in coding agent
//! built with the workspace), a coordinator in this process with an in-process agent
//! watching that server, and drives the pane for a few turns with whatever model
//! endpoint is configured (`KARL_MODEL_URL`), falling back to plan-only. Everything it
//! starts is torn down at the end (`--keep` leaves the tmux server up to attach to).

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::Context as _;
use karl_common::pb;
use tokio_stream::StreamExt;

use crate::config::{CoordConfig, EngineFile};

const PLAN: [&str; 4] = [
    "Read src/main.rs and list the HTTP routes the server exposes.",
    "Add a GET /health route that returns 200 with the body ok.",
    "Write a unit test for the /health route and run cargo test.",
    "Update README.md with a section on the /health endpoint.",
];

/// The private tmux server; killed on drop unless kept.
struct DemoTmux {
    socket: String,
    keep: bool,
}

impl DemoTmux {
    fn tmux(&self) -> Command {
        let mut c = Command::new(karl_agent::tmux::program_from_env());
        c.args(["-L", &self.socket, "-f", "/dev/null"])
            .env_remove("TMUX");
        c
    }
}

impl Drop for DemoTmux {
    fn drop(&mut self) {
        if !self.keep {
            let _ = self.tmux().arg("kill-server").output();
        }
    }
}

fn standin_path() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find karl-ctl's own path")?;
    let p = exe.with_file_name("karl-standin");
    if p.exists() {
        Ok(p)
    } else {
        anyhow::bail!(
            "the demo needs karl-standin next to karl-ctl ({}): build the workspace first with `cargo build --workspace --bins`",
            p.display()
        )
    }
}

pub async fn run(turns: u32, keep: bool, json: bool) -> anyhow::Result<ExitCode> {
    let standin = standin_path()?;
    let version = Command::new(karl_agent::tmux::program_from_env())
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .context(
            "the demo needs tmux on PATH (macOS: brew install tmux; Debian: apt-get install tmux)",
        )?;
    let dir = std::env::temp_dir().join(format!("karl-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("standin.log");
    let tmux = DemoTmux {
        socket: format!("karl-demo-{}", std::process::id()),
        keep,
    };
    let out = tmux
        .tmux()
        .args([
            "new-session",
            "-d",
            "-s",
            "demo",
            "-x",
            "120",
            "-y",
            "40",
            "-c",
        ])
        .arg(&dir)
        .arg(&standin)
        .arg("--log")
        .arg(&log)
        .output()
        .context("cannot start tmux")?;
    if !out.status.success() {
        anyhow::bail!(
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    eprintln!(
        "karl demo: {} · stand-in agent in tmux -L {} (attach: tmux -L {} attach -t demo)",
        String::from_utf8_lossy(&version.stdout).trim(),
        tmux.socket,
        tmux.socket
    );

    let mut cfg = CoordConfig::local(dir.join("data"));
    cfg.local_agent = true;
    cfg.local_machine = "demo".into();
    cfg.tmux_socket = Some(tmux.socket.clone());
    cfg.engine = EngineFile {
        settle_ms: Some(500),
        max_injections_per_minute: Some(30),
        ..Default::default()
    };
    if let Ok(urls) = std::env::var("KARL_MODEL_URL") {
        cfg.model.urls = urls
            .split(',')
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
    } else {
        cfg.model.urls = vec![crate::model::DEFAULT_MODEL_URL.to_string()];
    }
    cfg.model.timeout_ms = 15_000;
    cfg.model.connect_timeout_ms = 500;
    cfg.model.retries = 0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::app::run(cfg, listener, async move {
        let _ = stop_rx.await;
    }));

    let result = drive(&addr.to_string(), turns, json).await;
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
    let typed = std::fs::read_to_string(&log)
        .map(|t| {
            t.lines()
                .filter(|l| l.contains("\"event\":\"prompt\""))
                .count()
        })
        .unwrap_or(0);
    eprintln!(
        "karl demo: the stand-in agent received {typed} prompt(s); its log: {}",
        log.display()
    );
    result
}

async fn drive(addr: &str, turns: u32, json: bool) -> anyhow::Result<ExitCode> {
    let coord = karl_common::tls::CoordAddr::parse(addr)?;
    let mut c = super::client::connect(&coord, None).await?;
    let mut connected = false;
    for _ in 0..100 {
        let agents = c
            .list_agents(pb::ListAgentsRequest {})
            .await
            .map_err(super::client::explain)?;
        if agents.get_ref().agents.iter().any(|a| a.machine == "demo") {
            connected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !connected {
        anyhow::bail!("the in-process agent did not connect within 10s");
    }
    // Let the stand-in draw its first screen.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let reply = c
        .drive(pb::DriveRequest {
            machine: "demo".into(),
            target: "demo:0.0".into(),
            project: "demo-server".into(),
            goal: "Add a /health endpoint to the demo server, with a test and docs".into(),
            plan: PLAN.iter().map(|s| s.to_string()).collect(),
            max_turns: turns,
            ..Default::default()
        })
        .await
        .map_err(super::client::explain)?
        .into_inner();
    let s = reply.session.unwrap_or_default();
    eprintln!(
        "karl demo: session {}{}",
        s.id,
        if s.reason.is_empty() {
            String::new()
        } else {
            format!(" — {}", s.reason)
        }
    );
    let mut stream = c
        .follow_session(pb::FollowRequest {
            id: s.id.clone(),
            from_start: true,
        })
        .await
        .map_err(super::client::explain)?
        .into_inner();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30 + 20 * u64::from(turns));
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        let Ok(Some(item)) = next else { break };
        let u = item.map_err(super::client::explain)?;
        super::output::update(&u, json);
        if u.ended {
            break;
        }
    }
    let d = c
        .show_session(pb::SessionRef { id: s.id.clone() })
        .await
        .map_err(super::client::explain)?
        .into_inner();
    let summary = d.summary.unwrap_or_default();
    let rec: serde_json::Value = serde_json::from_str(&d.json).unwrap_or_default();
    let status = super::output::status(&summary);
    eprintln!(
        "karl demo: {}",
        rec["summary_line"].as_str().unwrap_or(&status)
    );
    Ok(if summary.status() == pb::SessionStatus::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
