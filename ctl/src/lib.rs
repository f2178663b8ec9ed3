//! karl-ctl: the operator's command line. Flag parsing, config merging, one function
//! per command, and human or `--json` output. Offline commands (`classify`, `context
//! --capture`, `validate`) read files and never dial the coordinator.
//!
//! Layout: [`client`] dials the coordinator; `output` prints replies; `offline` holds
//! the file-only commands; `demo` runs KARL end to end on this machine by starting
//! `karl-coord` beside it. karl-ctl links neither the coordinator nor the agent: it
//! speaks gRPC and reads files. This is the binary's edge, so errors are `anyhow` with
//! one plain sentence each.

pub mod client;
mod demo;
mod export;
mod offline;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use karl_common::pb;
use karl_common::target::PaneTarget;
use karl_common::tls::{ClientTlsFiles, CoordAddr};
use serde::Deserialize;
use tokio_stream::StreamExt;

use client::explain;
use karl_common::config_file::{read_toml, DEFAULT_LISTEN};

/// `karl-ctl.toml`: where the coordinator is, the token, and how to dial it over TLS.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtlFile {
    pub coord: Option<String>,
    pub token: Option<String>,
    #[serde(default)]
    pub tls: Option<ClientTlsFiles>,
}

#[derive(Debug, Parser)]
#[command(
    name = "karl-ctl",
    version,
    about = "Drive AI coding-agent sessions in tmux panes across a fleet of Macs."
)]
pub struct Cli {
    /// Coordinator address (host:port or http://host:port; https://host:port for TLS).
    #[arg(long, env = "KARL_COORD", global = true)]
    pub coord: Option<String>,
    /// Shared token of the coordinator.
    #[arg(long, env = "KARL_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// TLS: PEM of the CA that signed the coordinator's certificate (default: the system's CAs).
    #[arg(long, env = "KARL_TLS_CA", global = true)]
    pub tls_ca: Option<PathBuf>,
    /// TLS: client certificate (PEM), for a coordinator that requires one (mTLS).
    #[arg(long, env = "KARL_TLS_CERT", global = true)]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the private key of --tls-cert (PEM).
    #[arg(long, env = "KARL_TLS_KEY", global = true)]
    pub tls_key: Option<PathBuf>,
    /// TLS: the name to check the coordinator's certificate against (default: the host dialed).
    #[arg(long, env = "KARL_TLS_DOMAIN", global = true)]
    pub tls_domain: Option<String>,
    /// Config file (TOML with `coord`, `token` and `[tls]`); default ~/.config/karl/karl-ctl.toml if present.
    #[arg(long, env = "KARL_CTL_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum NotifyAction {
    /// Send a test notice now, once, without retries, and report what each sink said.
    Test {
        /// The sink's `name` in karl-coord.toml's [[notify.sink]] (default: every sink).
        sink: Option<String>,
        /// For macOS sinks without a `machine`: the Mac to show it on (default: every
        /// connected agent's).
        #[arg(long)]
        machine: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connected agents: machine, version, connected since, last heartbeat, pane count.
    Agents,
    /// The tmux panes an agent sees.
    Panes { machine: String },
    /// What a pane shows now.
    Capture {
        machine: String,
        pane: String,
        /// Include colours and attributes (capture-pane -e).
        #[arg(long)]
        ansi: bool,
        /// Scrollback lines to include above the screen.
        #[arg(long, default_value_t = 0)]
        history: u32,
    },
    /// Print a pane's settled snapshots as they come (Ctrl-C to stop).
    WatchPane {
        machine: String,
        pane: String,
        /// Silence that counts as settled, in ms (default: the agent's, 1500).
        #[arg(long, default_value_t = 0)]
        settle_ms: u32,
    },
    /// Type TEXT into a pane (through the gate; --force skips it and is audited).
    #[command(alias = "inject")]
    Send {
        machine: String,
        pane: String,
        text: String,
        #[arg(long)]
        force: bool,
    },
    /// Drive a pane: the coordinator writes and types each next prompt until the goal is
    /// done, the turn budget runs out, or a human is needed. Prints the session id.
    Drive {
        machine: String,
        pane: String,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        goal: Option<String>,
        /// Plan file: one step per line; blank lines and # comments ignored.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// End the session after N prompts were typed (or, in dry run, recorded).
        #[arg(long)]
        turns: Option<u32>,
        /// Record what would be typed; type nothing.
        #[arg(long)]
        dry_run: bool,
        /// Let the model infer project and goal from the pane.
        #[arg(long)]
        auto_detect: bool,
        /// Resume a session (the newest on this pane when no ID is given).
        #[arg(long, num_args = 0..=1, default_missing_value = "")]
        resume: Option<String>,
        /// What to do when the agent asks permission for a tool action.
        #[arg(long, value_enum, default_value_t = Policy::Escalate)]
        permissions: Policy,
        /// Project path shown to the model (default: the pane's cwd).
        #[arg(long)]
        path: Option<String>,
        /// A shell command (e.g. `cargo test`) that must exit 0 in the pane's directory
        /// before the session is done; karl-agent runs it outside the pane. A failure
        /// becomes the next turn's task.
        #[arg(long)]
        verify: Option<String>,
        /// Start the agent CLI first: type this command line (e.g. `claude`) at the
        /// pane's shell prompt. For Claude Code KARL adds `--settings FILE` with its
        /// permission hook, so nothing global changes. Also used to restart it.
        #[arg(long)]
        launch: Option<String>,
        /// Stay and print each turn until the session ends.
        #[arg(long)]
        follow: bool,
    },
    /// Sessions: live ones, or all with --all.
    Sessions {
        #[arg(long)]
        all: bool,
    },
    /// One session: brief, task graph, digest, last turns, counters.
    Show { id: String },
    /// A session's turns; -f follows live.
    Logs {
        id: String,
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Pause a session (it keeps watching, types nothing).
    Pause { id: String },
    /// Resume a paused or escalated session.
    Resume { id: String },
    /// Stop a session for good and release its pane.
    Stop { id: String },
    /// Approve the pending permission prompt of a session.
    Approve { id: String },
    /// Deny the pending permission prompt of a session.
    Deny { id: String },
    /// The exact messages the model would get: for a live session, or offline for a
    /// capture file.
    Context {
        /// Session id (omit with --capture).
        id: Option<String>,
        /// Pane capture file (offline).
        #[arg(long)]
        capture: Option<PathBuf>,
        #[arg(long)]
        project: Option<String>,
        #[arg(long)]
        goal: Option<String>,
        /// Offline: the plan request a session starting on this capture sends instead
        /// of a turn's briefing.
        #[arg(long, requires = "capture")]
        plan: bool,
        /// The project's path, for --plan.
        #[arg(long, requires = "plan")]
        path: Option<String>,
    },
    /// Notifications: `notify test [SINK]` sends a test notice to one sink (or all).
    Notify {
        #[command(subcommand)]
        action: NotifyAction,
    },
    /// The store as training data for the next twin: SFT examples and preference pairs
    /// (JSONL), from the turns that worked and the candidates the gate refused.
    Export(export::ExportArgs),
    /// The audit log: every injection, refusal, forced send and permission decision.
    Audit {
        /// Only this session's entries.
        #[arg(long)]
        session: Option<String>,
        /// Newest N entries.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Classify a pane capture, offline: state, agent, error, evidence.
    Classify {
        /// capture-pane -p text.
        file: PathBuf,
        /// capture-pane -p -e text (colours; tells dim placeholder text from a draft).
        #[arg(long)]
        ansi: Option<PathBuf>,
        /// JSON pane metadata: pane_current_command, pane_title, cursor_x, cursor_y, width, height.
        #[arg(long)]
        meta: Option<PathBuf>,
        /// Directory of rule manifests overriding the embedded ones.
        #[arg(long)]
        rules: Option<PathBuf>,
        /// Print every rule evaluated and its evidence.
        #[arg(long)]
        explain: bool,
    },
    /// Run KARL end to end on this machine: a coordinator with an in-process agent, a
    /// private tmux server with a stand-in coding agent, and a short driven session.
    Demo {
        /// Prompts to drive.
        #[arg(long, default_value_t = 4)]
        turns: u32,
        /// Keep the demo's tmux server running afterwards (to attach and look).
        #[arg(long)]
        keep: bool,
        /// Keep the coordinator and its dashboard up after the session, until Ctrl-C.
        #[arg(long)]
        hold: bool,
        /// The twin's OpenAI-compatible base URL (e.g. scripts/twin-server.sh). When
        /// nothing answers there, a built-in scripted twin plays the model.
        #[arg(
            long,
            env = "KARL_MODEL_URL",
            default_value = "http://127.0.0.1:8100/v1"
        )]
        model_url: String,
    },
    /// Check a prompt against the gate, offline. Exit 0 pass, 1 block, 2 bad usage.
    Validate {
        prompt: String,
        /// JSON array of earlier prompts, oldest first.
        #[arg(long)]
        history: Option<PathBuf>,
        #[arg(long)]
        project: Option<String>,
        /// JSON array of other live sessions: strings (project names) or {"project","path"} objects.
        #[arg(long)]
        other_projects: Option<PathBuf>,
        /// The gate's embedding model: a directory (scripts/fetch-model.sh), or "off" for
        /// words only. Default: the directory fetch-model.sh fills, if it is there.
        #[arg(long, env = "KARL_GATE_MODEL")]
        gate_model: Option<String>,
        /// A model server (OpenAI-compatible base URL) to ask for a second opinion when the
        /// gate passes the prompt in doubt; a failed call blocks. Without it, a prompt in
        /// doubt passes, with the doubt shown.
        #[arg(long)]
        model_url: Option<String>,
        /// The model name sent with the second-opinion request, for servers that serve
        /// several (the coordinator's `model.name`). Default: none, the server's own.
        #[arg(long, requires = "model_url")]
        model: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Policy {
    Escalate,
    ApproveSafe,
    Deny,
}

impl Policy {
    fn to_pb(self) -> pb::PermissionPolicy {
        match self {
            Policy::Escalate => pb::PermissionPolicy::Escalate,
            Policy::ApproveSafe => pb::PermissionPolicy::ApproveSafe,
            Policy::Deny => pb::PermissionPolicy::Deny,
        }
    }
}

/// Runs karl-ctl; the binary only parses and prints the error.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match command(cli).await {
        // The reader stopped reading (`karl-ctl sessions | head`): not a failure, so exit 0.
        Err(e) if e.is::<output::StdoutClosed>() => Ok(ExitCode::SUCCESS),
        done => done,
    }
}

async fn command(cli: Cli) -> anyhow::Result<ExitCode> {
    // Offline commands first: they must work with no coordinator anywhere.
    if let Command::Validate {
        prompt,
        history,
        project,
        other_projects,
        gate_model,
        model_url,
        model,
    } = &cli.command
    {
        let checked = validate(
            prompt,
            history.as_deref(),
            project.as_deref(),
            other_projects.as_deref(),
            &gate_model
                .as_deref()
                .map(karl_common::gate::ModelSetting::parse)
                .unwrap_or_default(),
            model_url.as_deref().map(|url| (url, model.as_deref())),
        )
        .await;
        let (verdict, opinion) = match checked {
            Ok(checked) => checked,
            // Unreadable input files are bad usage (exit 2), like a missing argument.
            Err(e) => {
                eprintln!("karl-ctl: {e:#}");
                return Ok(ExitCode::from(2));
            }
        };
        let code = if verdict.pass {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        };
        // The verdict is the exit code even when nobody reads the printed one.
        match output::verdict(&verdict, opinion.as_ref(), cli.json) {
            Err(e) if !e.is::<output::StdoutClosed>() => return Err(e),
            _ => return Ok(code),
        }
    }
    match &cli.command {
        Command::Classify {
            file,
            ansi,
            meta,
            rules,
            explain,
        } => {
            return offline::classify(
                cli.json,
                file,
                ansi.as_deref(),
                meta.as_deref(),
                rules.as_deref(),
                *explain,
            )
        }
        Command::Context {
            id: None,
            capture: Some(capture),
            project,
            goal,
            plan: true,
            path,
        } => {
            return offline::plan_request(
                cli.json,
                capture,
                project.as_deref(),
                goal.as_deref(),
                path.as_deref(),
            )
        }
        Command::Context {
            id: None,
            capture: Some(capture),
            project,
            goal,
            ..
        } => return offline::context(cli.json, capture, project.as_deref(), goal.as_deref()),
        Command::Demo {
            turns,
            keep,
            hold,
            model_url,
        } => return demo::run(*turns, *keep, *hold, model_url, cli.json).await,
        _ => {}
    }
    let (coord, token) = resolve_coord(&cli)?;
    let mut c = client::connect(&coord, token.as_deref()).await?;
    let json = cli.json;
    match cli.command {
        Command::Agents => {
            let reply = c
                .list_agents(pb::ListAgentsRequest {})
                .await
                .map_err(explain)?
                .into_inner();
            output::agents(&reply.agents, json)?;
        }
        Command::Panes { machine } => {
            let reply = c
                .list_panes(pb::ListPanesRequest { machine })
                .await
                .map_err(explain)?
                .into_inner();
            output::panes(&reply.panes, json)?;
        }
        Command::Capture {
            machine,
            pane,
            ansi,
            history,
        } => {
            let target = check_target(&pane)?;
            let snap = c
                .capture_pane(pb::CapturePaneRequest {
                    machine,
                    target,
                    ansi,
                    history_lines: history,
                })
                .await
                .map_err(explain)?
                .into_inner();
            output::snapshot(&snap, json, ansi)?;
        }
        Command::WatchPane {
            machine,
            pane,
            settle_ms,
        } => {
            let target = check_target(&pane)?;
            let mut stream = c
                .watch_pane(pb::WatchPaneRequest {
                    machine,
                    target,
                    settle_ms,
                })
                .await
                .map_err(explain)?
                .into_inner();
            while let Some(item) = stream.next().await {
                let snap = item.map_err(explain)?;
                output::snapshot(&snap, json, false)?;
            }
        }
        Command::Send {
            machine,
            pane,
            text,
            force,
        } => {
            let target = check_target(&pane)?;
            let reply = c
                .send_text(pb::SendTextRequest {
                    machine,
                    target,
                    text,
                    force,
                })
                .await
                .map_err(explain)?
                .into_inner();
            if !output::send_result(&reply, json)? {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Drive {
            machine,
            pane,
            project,
            goal,
            plan,
            turns,
            dry_run,
            auto_detect,
            resume,
            permissions,
            path,
            verify,
            launch,
            follow,
        } => {
            let target = check_target(&pane)?;
            let plan = match plan {
                Some(p) => {
                    let text = std::fs::read_to_string(&p)
                        .with_context(|| format!("cannot read plan file {}", p.display()))?;
                    let steps = karl_common::context::parse_plan_file(&text);
                    if steps.is_empty() {
                        anyhow::bail!(
                            "plan file {} has no steps (one per line; # starts a comment)",
                            p.display()
                        );
                    }
                    steps
                }
                None => Vec::new(),
            };
            let reply = c
                .drive(pb::DriveRequest {
                    machine,
                    target,
                    project: project.unwrap_or_default(),
                    goal: goal.unwrap_or_default(),
                    plan,
                    max_turns: turns.unwrap_or(0),
                    dry_run,
                    auto_detect,
                    permissions: permissions.to_pb() as i32,
                    resume_latest: resume.as_deref() == Some(""),
                    resume_id: resume.unwrap_or_default(),
                    path: path.unwrap_or_default(),
                    verify: verify.unwrap_or_default(),
                    launch: launch.unwrap_or_default(),
                })
                .await
                .map_err(explain)?
                .into_inner();
            let s = reply.session.unwrap_or_default();
            output::session_started(&s, json)?;
            if follow {
                return follow_session(&mut c, &s.id, false, json).await;
            }
        }
        Command::Sessions { all } => {
            let r = c
                .list_sessions(pb::ListSessionsRequest { all })
                .await
                .map_err(explain)?
                .into_inner();
            output::sessions(&r.sessions, json)?;
        }
        Command::Show { id } => {
            let d = c
                .show_session(pb::SessionRef { id })
                .await
                .map_err(explain)?
                .into_inner();
            output::show(&d, json)?;
        }
        Command::Logs { id, follow } => {
            if follow {
                return follow_session(&mut c, &id, true, json).await;
            }
            let d = c
                .show_session(pb::SessionRef { id })
                .await
                .map_err(explain)?
                .into_inner();
            for t in &d.turns {
                output::turn(t, json)?;
            }
        }
        Command::Pause { id } => set_state(&mut c, id, pb::SessionAction::Pause, json).await?,
        Command::Resume { id } => set_state(&mut c, id, pb::SessionAction::Resume, json).await?,
        Command::Stop { id } => set_state(&mut c, id, pb::SessionAction::Stop, json).await?,
        Command::Approve { id } => decide(&mut c, id, true, json).await?,
        Command::Deny { id } => decide(&mut c, id, false, json).await?,
        Command::Notify {
            action: NotifyAction::Test { sink, machine },
        } => {
            let r = c
                .notify_test(pb::NotifyTestRequest {
                    sink: sink.unwrap_or_default(),
                    machine: machine.unwrap_or_default(),
                })
                .await
                .map_err(explain)?
                .into_inner();
            output::notify_results(&r.results, json)?;
            if r.results.iter().any(|r| !r.ok) {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Export(args) => {
            let (summary, files) = export::run(&mut c, args).await?;
            output::export_summary(&summary, &files, json)?;
        }
        Command::Audit { session, limit } => {
            let r = c
                .audit(pb::AuditRequest {
                    session: session.unwrap_or_default(),
                    limit,
                })
                .await
                .map_err(explain)?
                .into_inner();
            output::audit(&r.entries, json)?;
        }
        Command::Context { id, .. } => {
            let Some(id) = id else {
                anyhow::bail!("give a session id, or --capture FILE for an offline context");
            };
            let r = c
                .session_context(pb::SessionRef { id })
                .await
                .map_err(explain)?
                .into_inner();
            output::context(&r, json)?;
        }
        // Handled above, before dialing.
        Command::Validate { .. } | Command::Classify { .. } | Command::Demo { .. } => {}
    }
    Ok(ExitCode::SUCCESS)
}

async fn set_state(
    c: &mut client::Client,
    id: String,
    action: pb::SessionAction,
    json: bool,
) -> anyhow::Result<()> {
    let s = c
        .set_session_state(pb::SetSessionStateRequest {
            id,
            action: action as i32,
        })
        .await
        .map_err(explain)?
        .into_inner();
    output::session_line(&s, json)?;
    Ok(())
}

async fn decide(
    c: &mut client::Client,
    id: String,
    approve: bool,
    json: bool,
) -> anyhow::Result<()> {
    let s = c
        .decide(pb::DecideRequest { id, approve })
        .await
        .map_err(explain)?
        .into_inner();
    output::session_line(&s, json)?;
    Ok(())
}

/// Streams a session's turns until it ends; exit 0 when it ended done, 1 otherwise.
async fn follow_session(
    c: &mut client::Client,
    id: &str,
    from_start: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut stream = c
        .follow_session(pb::FollowRequest {
            id: id.to_string(),
            from_start,
        })
        .await
        .map_err(explain)?
        .into_inner();
    let mut last: Option<pb::SessionSummary> = None;
    while let Some(item) = stream.next().await {
        let u = item.map_err(explain)?;
        output::update(&u, json)?;
        if u.session.is_some() {
            last = u.session.clone();
        }
        if u.ended {
            break;
        }
    }
    Ok(match last {
        Some(s) if s.status() == pb::SessionStatus::Done => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

fn check_target(pane: &str) -> anyhow::Result<String> {
    Ok(PaneTarget::parse(pane)?.to_string())
}

/// Flags and env (clap) win over the config file, which wins over the defaults.
fn resolve_coord(cli: &Cli) -> anyhow::Result<(CoordAddr, Option<String>)> {
    let file: CtlFile = match &cli.config {
        Some(p) => read_toml(p, true)?.unwrap_or_default(),
        None => match karl_common::default_config_path("karl-ctl.toml") {
            Some(p) => read_toml(&p, false)?.unwrap_or_default(),
            None => CtlFile::default(),
        },
    };
    let coord = cli
        .coord
        .clone()
        .or(file.coord)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let token = cli.token.clone().or(file.token).filter(|t| !t.is_empty());
    let tls = ClientTlsFiles {
        ca: cli.tls_ca.clone(),
        cert: cli.tls_cert.clone(),
        key: cli.tls_key.clone(),
        domain: cli.tls_domain.clone(),
    }
    .or(file.tls.unwrap_or_default());
    Ok((CoordAddr::new(&coord, &tls)?, token))
}

/// A `--other-projects` entry: a bare project name or a project with its path.
#[derive(Deserialize)]
#[serde(untagged)]
enum OtherEntry {
    Name(String),
    Full(karl_common::gate::OtherSession),
}

fn read_json<T: for<'de> Deserialize<'de>>(
    path: &std::path::Path,
    what: &str,
) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} file {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{what} file {} is not the expected JSON", path.display()))
}

/// The gate's verdict on `prompt`, and the second opinion when one was asked for.
async fn validate(
    prompt: &str,
    history: Option<&std::path::Path>,
    project: Option<&str>,
    others: Option<&std::path::Path>,
    gate_model: &karl_common::gate::ModelSetting,
    opinion_from: Option<(&str, Option<&str>)>,
) -> anyhow::Result<(
    karl_common::gate::Verdict,
    Option<karl_common::gate::opinion::Opinion>,
)> {
    let history: Vec<String> = match history {
        Some(p) => read_json(p, "--history (a JSON array of strings)")?,
        None => Vec::new(),
    };
    let others: Vec<karl_common::gate::OtherSession> = match others {
        Some(p) => read_json::<Vec<OtherEntry>>(p, "--other-projects")?
            .into_iter()
            .map(|e| match e {
                OtherEntry::Name(project) => karl_common::gate::OtherSession {
                    project,
                    path: String::new(),
                },
                OtherEntry::Full(o) => o,
            })
            .collect(),
        None => Vec::new(),
    };
    let (gate, note) = gate_model.load().map_err(|e| {
        anyhow::anyhow!("the gate's embedding model: {e} (or pass --gate-model off)")
    })?;
    if gate.model_name().is_none() {
        eprintln!("karl-ctl: {note}");
    }
    let ctx = karl_common::gate::GateContext {
        project: project.unwrap_or(""),
        history: &history,
        others: &others,
        ..Default::default()
    };
    let mut verdict = gate.check(prompt, &ctx);
    let mut opinion = None;
    if let (true, Some((url, model))) = (verdict.doubtful(), opinion_from) {
        let o = offline::second_opinion(url, model, prompt).await;
        verdict = o.apply(&verdict);
        opinion = Some(o);
    }
    Ok((verdict, opinion))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn deploy_example_parses() {
        let example = include_str!("../../deploy/karl-ctl.toml");
        let f: CtlFile = toml::from_str(example).unwrap();
        assert!(f.coord.is_some() && f.tls.is_none());
        // Every commented-out key is a real one.
        let f: CtlFile = toml::from_str(&karl_common::uncomment_example(example)).unwrap();
        let tls = f.tls.unwrap();
        assert!(tls.ca.is_some() && tls.cert.is_some() && tls.key.is_some());
        assert!(toml::from_str::<CtlFile>("[tls]\nclient_ca = \"x\"").is_err());
    }
}
