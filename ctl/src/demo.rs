//! `karl-ctl demo`: KARL end to end on one machine with no Mac and no model.
//!
//! It starts `karl-coord` (the one next to karl-ctl) as a child process with an
//! in-process agent on a private tmux server whose one pane runs `karl-standin` (the
//! stand-in coding agent built with the workspace) — `karl-coord --local-pane`, so tmux
//! is only ever driven through the agent — then, as any operator would over gRPC, drives
//! that pane for a few turns. The twin is the model at `--model-url` (`KARL_MODEL_URL`) when
//! one answers there, else a built-in script of realistic candidates — good prompts with
//! status spam, a repeat and a destructive command among them — so the gate's refusals and
//! the plan fallback show. The coordinator is stopped at the end and takes its tmux server
//! with it (`--keep` leaves the server up to attach to).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use karl_common::pb;
use tokio_stream::StreamExt;

const PLAN: [&str; 4] = [
    "Read src/main.rs and list the HTTP routes the server exposes.",
    "Add a GET /health route that returns 200 with the body ok.",
    "Write a unit test for the /health route and run cargo test.",
    "Update README.md with a section on the /health endpoint.",
];

/// What the built-in scripted twin answers, in order, when no model does: candidates for
/// [`PLAN`] as a small model writes them. A turn gets up to three answers before its plan
/// step takes over, so four turns show a pass, a status refusal, a turn whose repeat,
/// destructive command and status question are all refused (the plan step is typed), and a
/// pass that the gate lets through in doubt (a `curl` example reads close to a fetched
/// script), once the model's second opinion says it is not destructive. After the script the
/// twin is unreachable and the plan drives.
const SCRIPTED_TWIN: [&str; 8] = [
    "Read src/main.rs and list every HTTP route the server registers, with its handler.",
    "What's the status? Are you done yet?",
    "Add a GET /health route in src/main.rs that returns 200 with the body ok.",
    "Read src/main.rs and list every HTTP route the server registers, with its handler.",
    "Reset the branch with git reset --hard origin/main and force-push it so the history is clean.",
    "Give me a quick summary of where things stand.",
    "Add a section on the /health endpoint to README.md, with a curl example.",
    "{\"destructive\": false}",
];

/// Whether something accepts connections at `url`'s host and port (within half a second).
async fn answers(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let addr = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else if url.starts_with("https://") {
        format!("{authority}:443")
    } else {
        format!("{authority}:80")
    };
    matches!(
        tokio::time::timeout(
            Duration::from_millis(500),
            tokio::net::TcpStream::connect(addr.as_str())
        )
        .await,
        Ok(Ok(_))
    )
}

/// A sibling binary of karl-ctl's, built with the workspace.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find karl-ctl's own path")?;
    let p = exe.with_file_name(name);
    if p.exists() {
        Ok(p)
    } else {
        anyhow::bail!(
            "the demo needs {name} next to karl-ctl ({}): build the workspace first with `cargo build --workspace --bins`",
            p.display()
        )
    }
}

/// The coordinator child; stopped (SIGTERM, then SIGKILL) on drop.
struct Coordinator(Child);

impl Drop for Coordinator {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port for the coordinator to listen on.
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind loopback")?;
    Ok(l.local_addr()?.port())
}

/// `karl-coord.toml` for the demo: fast settling, no model retries.
fn coord_config(dir: &Path, port: u16, http_port: u16, socket: &str) -> String {
    let tmux = std::env::var("KARL_TMUX_BIN").unwrap_or_else(|_| "tmux".into());
    let toml_str = |s: &str| toml::Value::String(s.to_string()).to_string();
    format!(
        "listen = {}\nhttp = {}\ndata_dir = {}\nlocal_agent = true\nlocal_machine = \"demo\"\ntmux_socket = {}\ntmux_bin = {}\n\n\
         [model]\ntimeout_ms = 15000\nconnect_timeout_ms = 500\nretries = 0\n\n\
         [engine]\nsettle_ms = 500\nmax_injections_per_minute = 30\n",
        toml_str(&format!("127.0.0.1:{port}")),
        toml_str(&format!("127.0.0.1:{http_port}")),
        toml_str(&dir.join("data").display().to_string()),
        toml_str(socket),
        toml_str(&tmux),
    )
}

/// A new directory under `base` for this run's logs and data. One left by an earlier run
/// with the same process id is never reused: its stand-in log would be counted again and its
/// sled data would resume that run's session.
fn fresh_dir(base: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    let pid = std::process::id();
    for n in 0..1000u32 {
        let name = match n {
            0 => format!("karl-demo-{pid}"),
            n => format!("karl-demo-{pid}-{n}"),
        };
        let dir = base.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create {}", dir.display()));
            }
        }
    }
    anyhow::bail!(
        "cannot find a new karl-demo-{pid}-N directory in {}: remove old karl-demo-* directories there",
        base.display()
    )
}

pub async fn run(
    turns: u32,
    keep: bool,
    hold: bool,
    model_url: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let standin = sibling("karl-standin")?;
    let coord_bin = sibling("karl-coord")?;
    let dir = fresh_dir(&std::env::temp_dir())?;
    let log = dir.join("standin.log");
    let socket = format!("karl-demo-{}", std::process::id());
    let port = free_port()?;
    let http_port = free_port()?;
    let config = dir.join("karl-coord.toml");
    std::fs::write(&config, coord_config(&dir, port, http_port, &socket))
        .with_context(|| format!("cannot write {}", config.display()))?;
    let coord_log = dir.join("karl-coord.log");
    let coord_err = std::fs::File::create(&coord_log)
        .with_context(|| format!("cannot create {}", coord_log.display()))?;
    let mut cmd = Command::new(&coord_bin);
    cmd.arg("--config")
        .arg(&config)
        .arg("--local-pane")
        // The stand-in writes Claude Code's session file and transcript there, which the
        // agent follows (where it can read the stand-in's environment: Linux).
        .arg(format!(
            "CLAUDE_CONFIG_DIR={} {} --log {}",
            shell_quote(&dir.join("claude").display().to_string()),
            shell_quote(&standin.display().to_string()),
            shell_quote(&log.display().to_string())
        ))
        .current_dir(&dir)
        .env_remove("TMUX")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(coord_err);
    if keep {
        cmd.arg("--keep-local-pane");
    }
    if answers(model_url).await {
        eprintln!("karl demo: the twin is the model at {model_url}");
        cmd.arg("--model-url").arg(model_url);
    } else {
        let script = dir.join("scripted-twin.json");
        std::fs::write(&script, serde_json::to_string_pretty(&SCRIPTED_TWIN)?)
            .with_context(|| format!("cannot write {}", script.display()))?;
        eprintln!(
            "karl demo: no model answers at {model_url}, so the twin is a built-in script: good prompts with status spam, a repeat and a destructive command among them — watch the gate refuse those and the plan step take over (a real model: --model-url URL, or scripts/twin-server.sh)"
        );
        cmd.arg("--scripted-twin").arg(&script);
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", coord_bin.display()))?;
    let mut coordinator = Coordinator(child);
    wait_listening(&mut coordinator.0, port, &coord_log).await?;
    eprintln!(
        "karl demo: karl-coord on 127.0.0.1:{port}, stand-in agent in tmux -L {socket} (attach: tmux -L {socket} attach -t karl); logs in {}",
        dir.display()
    );
    eprintln!(
        "karl demo: dashboard at http://127.0.0.1:{http_port}/ (the session appears there live; metrics at /metrics)"
    );
    let result = drive(&format!("127.0.0.1:{port}"), turns, json, &dir).await;
    if hold {
        eprintln!(
            "karl demo: the dashboard stays up at http://127.0.0.1:{http_port}/ — Ctrl-C to end"
        );
        karl_common::shutdown_signal().await;
    }
    drop(coordinator);
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

/// The flywheel's first step: the session just driven, exported as training data.
async fn training_data(c: &mut super::client::Client, dir: &Path) -> anyhow::Result<()> {
    let out = dir.join("training");
    let args = super::export::ExportArgs {
        sft: Some(out.join("sft.jsonl")),
        pairs: Some(out.join("pairs.jsonl")),
        min_outcome: "progress".into(),
        ..Default::default()
    };
    let (s, _) = super::export::run(c, args).await?;
    let reasons: Vec<String> = {
        let mut v: Vec<_> = s.pairs_by_reason.iter().collect();
        v.sort();
        v.into_iter().map(|(k, n)| format!("{k} {n}")).collect()
    };
    eprintln!(
        "karl demo: training data in {}: {} SFT example(s) from the twin's prompts that worked, {} preference pair(s) against what the gate refused ({}) — `karl-ctl export` does this for a fleet's store",
        out.display(),
        s.sft_train + s.sft_valid,
        s.pairs_train + s.pairs_valid,
        if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") }
    );
    Ok(())
}

/// Waits until the coordinator accepts connections; an early exit is an error with its
/// last words.
async fn wait_listening(child: &mut Child, port: u16, log: &Path) -> anyhow::Result<()> {
    for _ in 0..200 {
        if let Ok(Some(status)) = child.try_wait() {
            let words = std::fs::read_to_string(log).unwrap_or_default();
            let last: Vec<&str> = words.lines().filter(|l| !l.trim().is_empty()).collect();
            anyhow::bail!(
                "karl-coord exited at start ({status}): {}",
                last.iter()
                    .rev()
                    .take(3)
                    .rev()
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!(
        "karl-coord did not start listening within 10s (its log: {})",
        log.display()
    )
}

/// `'…'` for sh, which tmux runs the pane's command with.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

async fn drive(addr: &str, turns: u32, json: bool, dir: &Path) -> anyhow::Result<ExitCode> {
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
        anyhow::bail!("karl-coord's local agent did not connect within 10s");
    }
    // Let the stand-in draw its first screen.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let reply = c
        .drive(pb::DriveRequest {
            machine: "demo".into(),
            target: "karl:0.0".into(),
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
        super::output::update(&u, json)?;
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
    eprintln!(
        "karl demo: evidence: {}",
        match summary.evidence() {
            pb::EvidenceSource::Screen =>
                "the screen (the stand-in's transcript was not followed)".to_string(),
            src => format!(
                "{} — {} prompt(s) confirmed from the stand-in's own transcript",
                pb::Label::label(&src),
                rec["confirmed"].as_u64().unwrap_or(0)
            ),
        }
    );
    // The session is what the demo shows; its export is a bonus that must not fail it.
    if let Err(e) = training_data(&mut c, dir).await {
        eprintln!("karl demo: could not export the session as training data: {e:#}");
    }
    Ok(if summary.status() == pb::SessionStatus::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_directory_left_by_an_earlier_run_is_never_reused() {
        let base = tempfile::tempdir().unwrap();
        let first = fresh_dir(base.path()).unwrap();
        std::fs::write(first.join("standin.log"), "old run\n").unwrap();
        let second = fresh_dir(base.path()).unwrap();
        assert_ne!(first, second);
        assert!(std::fs::read_dir(&second).unwrap().next().is_none());
    }
}
