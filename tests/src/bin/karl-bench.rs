//! `karl-bench`: KARL's evaluation tools.
//!
//! ```text
//! karl-bench twin   [--timelines DIR] [--model-url URL] [--sessions N] [--screens N]
//!                   [--style raw|karl|both] [--json FILE] [--rescore FILE]
//! karl-bench record [--scripts DIR] [--out DIR] [--standin PATH]
//! ```
//!
//! - `twin` replays the recorded timelines (default `tests/fixtures/twin-timelines`)
//!   through the previous driver's raw prompting and through KARL's session machine,
//!   against the model at `--model-url` — or, without one, the test twin (SmolLM2-135M,
//!   fetched by `scripts/fetch-model.sh`) started on loopback — and prints the table of
//!   failure signatures and costs. `--json` also writes every proposal and call;
//!   `--rescore FILE` scores such a file again without asking any model.
//! - `record` plays the session scripts (default `tests/fixtures/twin-sessions`) through
//!   `karl-standin` in a private tmux server and writes one timeline per script.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use karl_common::gate::ModelSetting;
use karl_coord::model::{HttpModelClient, ModelConfig};
use karl_tests::tmux_server::TmuxServer;
use karl_tests::twin::TwinServer;
use karl_tests::twin_eval::drive::{Style, Twin};
use karl_tests::twin_eval::timeline::{
    fixtures_dir, load_dir, scripts_dir, SessionScript, Timeline,
};
use karl_tests::twin_eval::{evaluate, record::record, render, rescore, EvalOptions, EvalReport};

const USAGE: &str = "usage: karl-bench twin [--timelines DIR] [--model-url URL] [--sessions N] \
[--screens N] [--style raw|karl|both] [--json FILE] [--rescore FILE]\n       karl-bench record [--scripts DIR] \
[--out DIR] [--standin PATH]";

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "bench=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("twin") => twin(args.collect()),
        Some("record") => record_all(args.collect()),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => bail!("{USAGE}"),
    }
}

/// `--flag value` pairs; an unknown flag or a missing value is an error.
fn flags(args: Vec<String>, known: &[&str]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        if !known.contains(&flag.as_str()) {
            bail!("unknown argument {flag:?}\n{USAGE}");
        }
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        out.push((flag, value));
    }
    Ok(out)
}

fn twin(args: Vec<String>) -> Result<()> {
    let mut dir = fixtures_dir();
    let mut url: Option<String> = None;
    let mut json: Option<PathBuf> = None;
    let mut opts = EvalOptions::default();
    let mut saved: Option<PathBuf> = None;
    let known = [
        "--rescore",
        "--timelines",
        "--model-url",
        "--sessions",
        "--screens",
        "--style",
        "--json",
    ];
    for (flag, v) in flags(args, &known)? {
        match flag.as_str() {
            "--rescore" => saved = Some(PathBuf::from(v)),
            "--timelines" => dir = PathBuf::from(v),
            "--model-url" => url = Some(v),
            "--sessions" => opts.sessions = v.parse().context("--sessions takes a number")?,
            "--screens" => opts.screens = v.parse().context("--screens takes a number")?,
            "--style" => {
                opts.styles = match v.as_str() {
                    "raw" => vec![Style::Raw],
                    "karl" => vec![Style::Karl],
                    "both" => vec![Style::Raw, Style::Karl],
                    other => bail!("--style is raw, karl or both, not {other:?}"),
                }
            }
            _ => json = Some(PathBuf::from(v)),
        }
    }
    let timelines: Vec<Timeline> = load_dir(&dir, Timeline::check)
        .with_context(|| format!("loading timelines from {}", dir.display()))?;
    if timelines.is_empty() {
        bail!(
            "no timelines in {} (record them with `karl-bench record`)",
            dir.display()
        );
    }
    if let Some(path) = saved {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading the saved report {}", path.display()))?;
        let report: EvalReport = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a report written by karl-bench twin --json",
                path.display()
            )
        })?;
        let (gate, _) = ModelSetting::Default
            .load()
            .context("loading the gate's embedding model")?;
        print!("{}", render(&rescore(report, &timelines, &gate)));
        return Ok(());
    }
    // Without a model URL, the test twin on loopback; it stops when this returns.
    let log = tempfile::NamedTempFile::new()?;
    let local = match &url {
        Some(_) => None,
        None => Some(TwinServer::start(log.path()).map_err(|e| {
            anyhow::anyhow!(
                "{e}\n(start a model server and pass --model-url, or run scripts/fetch-model.sh)"
            )
        })?),
    };
    let (base, model) = match &local {
        Some(t) => (t.base_url().to_string(), t.model().to_string()),
        None => {
            let u = url.clone().unwrap_or_default();
            (u.clone(), u)
        }
    };
    let client = HttpModelClient::new(ModelConfig {
        urls: vec![base],
        timeout_ms: 120_000,
        ..ModelConfig::default()
    })
    .context("model settings")?;
    let (gate, note) = ModelSetting::Default
        .load()
        .context("loading the gate's embedding model")?;
    eprintln!("{note}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let report = runtime.block_on(evaluate(
        &timelines,
        &Twin::new(client),
        &model,
        Arc::new(gate),
        &opts,
    ));
    print!("{}", render(&report));
    if let Some(path) = json {
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn record_all(args: Vec<String>) -> Result<()> {
    let mut scripts = scripts_dir();
    let mut out = fixtures_dir();
    let mut standin = sibling("karl-standin")?;
    for (flag, v) in flags(args, &["--scripts", "--out", "--standin"])? {
        match flag.as_str() {
            "--scripts" => scripts = PathBuf::from(v),
            "--out" => out = PathBuf::from(v),
            _ => standin = PathBuf::from(v),
        }
    }
    if !standin.exists() {
        bail!(
            "no stand-in at {} (build it: cargo build -p karl-tests --bins)",
            standin.display()
        );
    }
    let scripts: Vec<SessionScript> = load_dir(&scripts, SessionScript::check)
        .with_context(|| format!("loading session scripts from {}", scripts.display()))?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let server = TmuxServer::start().context("starting a private tmux server")?;
    for script in &scripts {
        let timeline = record(script, &standin, &server)
            .with_context(|| format!("recording {}", script.meta.id))?;
        let path = out.join(format!("{}.json", script.meta.id));
        std::fs::write(&path, serde_json::to_string_pretty(&timeline)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!(
            "{}: {} screens → {}",
            script.meta.id,
            timeline.captures.len(),
            path.display()
        );
    }
    Ok(())
}

/// A binary built beside this one.
fn sibling(name: &str) -> Result<PathBuf> {
    let me = std::env::current_exe().context("locating karl-bench")?;
    Ok(me
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join(name))
}
