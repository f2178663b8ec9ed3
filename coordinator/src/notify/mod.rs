//! Notifications: the moments a human is needed — a session escalated, a permission
//! waiting under the `escalate` policy, a usage limit, a session done or failed, an agent
//! lost for more than a minute — sent where the human is: a JSON webhook, Slack, Discord,
//! ntfy, a command, or a macOS notification on the Mac where the pane lives (through its
//! agent, `osascript`).
//!
//! - [`notice`]: what a record change or an absent agent means (pure).
//! - [`policy`]: de-duplication, the per-sink rate limit, retry delays (pure).
//! - [`sinks`]: the `[notify]` configuration and each sink's payload (pure).
//! - [`Notifier`] (here): the IO — it listens to the engine's notices and the registry's
//!   fleet changes, and gives each sink a queue and a task of its own, so a sink that is
//!   slow or down is retried with backoff while sessions carry on untouched: the engine only
//!   ever puts a notice on a broadcast channel, which never waits.

pub mod notice;
pub mod policy;
pub mod sinks;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karl_common::pb;
use tokio::io::AsyncWriteExt;
use tokio::sync::{broadcast, mpsc, watch};

pub use notice::{Notice, NoticeKind};
pub use sinks::{NotifyConfig, NotifyFile, Sink, SinkKind, Target};

use crate::engine::Engine;
use crate::error::{CoordError, Result};
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::server::error_chain;
use policy::{Dedupe, RateLimit};

/// An HTTP sink's request, and a command sink's run, must end within this.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Notices waiting per sink; more are dropped (and counted) while a sink is down.
const QUEUE: usize = 64;

/// Why a send failed, and whether trying again could help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub message: String,
    /// A 4xx answer, a missing Mac: retrying would fail the same way.
    pub permanent: bool,
}

impl SendError {
    fn transient(message: String) -> Self {
        SendError {
            message,
            permanent: false,
        }
    }
    fn permanent(message: String) -> Self {
        SendError {
            message,
            permanent: true,
        }
    }
}

/// Sends notices to the configured sinks.
pub struct Notifier {
    sinks: Vec<SinkSlot>,
    sender: Arc<Sender>,
}

struct SinkSlot {
    sink: Arc<Sink>,
    queue: mpsc::Sender<Notice>,
    limit: Mutex<RateLimit>,
}

/// What a send needs: an HTTP client, the agents (for macOS), the counters.
struct Sender {
    http: reqwest::Client,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Notifier {
    /// Starts a task per sink and the task that turns session and fleet changes into
    /// notices; all of them end when `stop` turns true.
    pub fn start(
        cfg: NotifyConfig,
        engine: &Arc<Engine>,
        registry: Arc<Registry>,
        stop: watch::Receiver<bool>,
    ) -> Result<Arc<Notifier>> {
        let http = reqwest::Client::builder()
            .timeout(SEND_TIMEOUT)
            .user_agent(concat!("karl-coord/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CoordError::Internal(format!("notification HTTP client: {e}")))?;
        let sender = Arc::new(Sender {
            http,
            registry: registry.clone(),
            metrics: engine.metrics().clone(),
        });
        let mut sinks = Vec::new();
        for sink in cfg.sinks.iter().cloned().map(Arc::new) {
            let (queue, rx) = mpsc::channel(QUEUE);
            tokio::spawn(drain(sink.clone(), rx, sender.clone(), stop.clone()));
            tracing::info!(target: "coord.notify", sink = %sink.name, kind = sink.target.kind().as_str(), to = %sink.target.describe(), "notification sink ready");
            sinks.push(SinkSlot {
                limit: Mutex::new(RateLimit::new(sink.per_minute)),
                sink,
                queue,
            });
        }
        let notifier = Arc::new(Notifier { sinks, sender });
        if !notifier.sinks.is_empty() {
            // Subscribed here, not in the task, so nothing said after `start` is missed.
            let feeds = Feeds {
                notices: engine.notices(),
                fleet: registry.fleet_changes(),
            };
            tokio::spawn(watch_changes(
                notifier.clone(),
                cfg,
                feeds,
                engine.clone(),
                registry,
                stop,
            ));
        }
        Ok(notifier)
    }

    /// Hands `n` to every sink that wants it and has room in its rate limit; never waits.
    pub fn post(&self, n: &Notice) {
        for slot in &self.sinks {
            let name = &slot.sink.name;
            if !slot.sink.wants(n.kind) {
                continue;
            }
            if !lock(&slot.limit).allow(n.unix_ms) {
                tracing::warn!(target: "coord.notify", sink = %name, kind = n.kind.as_str(), session = %n.session, "notification dropped: the sink's per_minute limit is reached");
                self.sender.metrics.notified(name, "rate_limited");
                continue;
            }
            if slot.queue.try_send(n.clone()).is_err() {
                tracing::warn!(target: "coord.notify", sink = %name, kind = n.kind.as_str(), "notification dropped: the sink is behind (down?) and its queue is full");
                self.sender.metrics.notified(name, "dropped");
            }
        }
    }

    /// `karl-ctl notify test [SINK]`: a test notice to `sink` (or every sink) now, once,
    /// with no retry, filter or limit. A macOS sink without a machine of its own shows it
    /// on `machine`, or on every connected agent's Mac.
    pub async fn test(&self, sink: &str, machine: &str) -> Result<Vec<pb::NotifyResult>> {
        let chosen: Vec<&Sink> = self
            .sinks
            .iter()
            .map(|s| s.sink.as_ref())
            .filter(|s| sink.is_empty() || s.name == sink)
            .collect();
        if chosen.is_empty() {
            let names: Vec<&str> = self.sinks.iter().map(|s| s.sink.name.as_str()).collect();
            return Err(CoordError::InvalidArgument(if names.is_empty() {
                "no notification sinks are configured: add [[notify.sink]] tables to karl-coord.toml (see deploy/karl-coord.toml)".into()
            } else {
                format!(
                    "no notification sink is named {sink:?}; the sinks are: {}",
                    names.join(", ")
                )
            }));
        }
        let now = karl_common::unix_ms();
        // Sinks side by side, so one that times out does not hold up the others' answers.
        let each = chosen.into_iter().map(|s| self.test_one(s, machine, now));
        Ok(futures::future::join_all(each)
            .await
            .into_iter()
            .flatten()
            .collect())
    }

    async fn test_one(&self, s: &Sink, machine: &str, now: u64) -> Vec<pb::NotifyResult> {
        let result =
            |target: String, r: std::result::Result<(), SendError>, elapsed_ms| pb::NotifyResult {
                sink: s.name.clone(),
                kind: s.target.kind().as_str().into(),
                ok: r.is_ok(),
                error: r.err().map(|e| e.message).unwrap_or_default(),
                elapsed_ms,
                target,
            };
        let machines: Vec<String> = match &s.target {
            // A sink with a Mac of its own shows it there, whatever was asked.
            Target::Macos { machine: Some(m) } => vec![m.clone()],
            Target::Macos { .. } if machine.is_empty() => self
                .sender
                .registry
                .list()
                .into_iter()
                .map(|a| a.machine)
                .collect(),
            _ => vec![machine.to_string()],
        };
        if machines.is_empty() {
            let none = SendError::permanent(
                "no agent is connected to show it on: start karl-agent on a Mac, or give --machine"
                    .into(),
            );
            return vec![result(s.target.describe(), Err(none), 0)];
        }
        let mut results = Vec::new();
        for m in machines {
            let started = Instant::now();
            let r = self.sender.send(s, &Notice::test(&m, now)).await;
            self.sender
                .metrics
                .notified(&s.name, if r.is_ok() { "sent" } else { "failed" });
            let target = match &s.target {
                Target::Macos { .. } => m,
                t => t.describe(),
            };
            results.push(result(target, r, started.elapsed().as_millis() as u64));
        }
        results
    }
}

struct Feeds {
    notices: broadcast::Receiver<Notice>,
    fleet: broadcast::Receiver<String>,
}

/// Turns the engine's notices and the fleet's comings and goings into posts.
async fn watch_changes(
    notifier: Arc<Notifier>,
    cfg: NotifyConfig,
    feeds: Feeds,
    engine: Arc<Engine>,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<bool>,
) {
    let Feeds {
        mut notices,
        mut fleet,
    } = feeds;
    let mut dedupe = Dedupe::new(cfg.dedupe.as_millis() as u64);
    let mut lost = notice::LostWatch::default();
    let lost_after = cfg.agent_lost_after.as_millis() as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut ticks: u32 = 0;
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut post = |n: Notice| {
        if dedupe.fresh(&n) {
            tracing::info!(target: "coord.notify", kind = n.kind.as_str(), session = %n.session, machine = %n.machine, "{}: {}", n.title, n.text);
            notifier.post(&n);
        } else {
            tracing::debug!(target: "coord.notify", kind = n.kind.as_str(), session = %n.session, "notification already sent within dedupe_secs");
            notifier.sender.metrics.notified("", "deduplicated");
        }
    };
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            n = notices.recv() => match n {
                Ok(n) => post(n),
                Err(broadcast::error::RecvError::Lagged(k)) => {
                    tracing::warn!(target: "coord.notify", missed = k, "notifications fell behind the sessions; some were not sent");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            m = fleet.recv() => match m {
                Ok(machine) if registry.is_connected(&machine) => lost.connected(&machine),
                Ok(machine) => lost.disconnected(&machine, karl_common::unix_ms()),
                // Missed comings and goings: the next tick looks at the fleet itself.
                Err(broadcast::error::RecvError::Lagged(_)) => ticks = 0,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = tick.tick() => {
                let now = karl_common::unix_ms();
                // Every few seconds, the fleet as it is: a Mac whose sessions wait on it but
                // that never came back after a coordinator restart, or a change the feed
                // lagged past.
                if ticks.is_multiple_of(RESYNC_TICKS) {
                    resync(&mut lost, &engine, &registry, now);
                }
                ticks = ticks.wrapping_add(1);
                for (machine, away) in lost.due(now, lost_after) {
                    let sessions: Vec<String> = engine
                        .list(false)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|r| r.machine == machine && r.status.is_live())
                        .map(|r| r.id)
                        .collect();
                    post(notice::agent_lost(&machine, away, &sessions, now));
                }
            }
        }
    }
}

/// Ticks between looks at the whole fleet (500 ms each).
const RESYNC_TICKS: u32 = 10;

/// Brings `lost` in line with the registry: agents back are forgotten, and the Mac of a
/// live session with no agent connected counts as gone from `now` (if not already).
fn resync(lost: &mut notice::LostWatch, engine: &Engine, registry: &Registry, now: u64) {
    for m in lost.machines() {
        if registry.is_connected(&m) {
            lost.connected(&m);
        }
    }
    for rec in engine.list(false).unwrap_or_default() {
        if rec.status.is_live() && !registry.is_connected(&rec.machine) {
            lost.disconnected(&rec.machine, now);
        }
    }
}

/// One sink's task: sends its queue in order, retrying each failure with backoff.
async fn drain(
    sink: Arc<Sink>,
    mut queue: mpsc::Receiver<Notice>,
    sender: Arc<Sender>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let n = tokio::select! {
            _ = stop.wait_for(|s| *s) => {
                if !queue.is_empty() {
                    tracing::warn!(target: "coord.notify", sink = %sink.name, unsent = queue.len(), "stopping with notifications not yet sent");
                }
                return;
            }
            n = queue.recv() => match n { Some(n) => n, None => return },
        };
        let mut attempt = 0;
        loop {
            match sender.send(&sink, &n).await {
                Ok(()) => {
                    tracing::debug!(target: "coord.notify", sink = %sink.name, kind = n.kind.as_str(), attempt, "notification sent");
                    sender.metrics.notified(&sink.name, "sent");
                    break;
                }
                Err(e) if e.permanent || attempt >= sink.retries => {
                    tracing::error!(target: "coord.notify", sink = %sink.name, kind = n.kind.as_str(), session = %n.session, tries = attempt + 1, error = %e, "notification not sent; check the sink with `karl-ctl notify test {}`", sink.name);
                    sender.metrics.notified(&sink.name, "failed");
                    break;
                }
                Err(e) => {
                    attempt += 1;
                    let pause = policy::retry_delay(attempt);
                    tracing::warn!(target: "coord.notify", sink = %sink.name, kind = n.kind.as_str(), error = %e, retry_in_secs = pause.as_secs(), "notification failed; trying again");
                    sender.metrics.notified(&sink.name, "retried");
                    tokio::select! {
                        _ = stop.wait_for(|s| *s) => {
                            tracing::warn!(target: "coord.notify", sink = %sink.name, kind = n.kind.as_str(), session = %n.session, "stopping before this notification could be sent");
                            return;
                        }
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
            }
        }
    }
}

impl Sender {
    /// One attempt at sending `n` to `sink`.
    async fn send(&self, sink: &Sink, n: &Notice) -> std::result::Result<(), SendError> {
        if let Some(post) = sinks::http_request(&sink.target, n) {
            return self.post(post).await;
        }
        match &sink.target {
            Target::Command { argv } => run_command(argv, n).await,
            Target::Macos { machine } => {
                let on = match machine {
                    Some(m) => m.clone(),
                    None if n.kind == NoticeKind::AgentLost => {
                        return Err(SendError::permanent(format!(
                            "{} is the Mac that is lost; set `machine` on the macos sink to hear of it elsewhere",
                            n.machine
                        )))
                    }
                    None if n.machine.is_empty() => {
                        return Err(SendError::permanent(
                            "no Mac to show it on: set `machine` on the macos sink".into(),
                        ))
                    }
                    None => n.machine.clone(),
                };
                let show = pb::Notify {
                    title: n.title.clone(),
                    subtitle: n.place(),
                    body: n.text.clone(),
                };
                self.registry
                    .call(&on, pb::agent_command::Kind::Notify(show), SEND_TIMEOUT)
                    .await
                    .map(|_| ())
                    .map_err(|e| match e {
                        // The Mac said no (no osascript): it will say no again.
                        CoordError::AgentFailed { .. } => SendError::permanent(e.to_string()),
                        e => SendError::transient(e.to_string()),
                    })
            }
            _ => Err(SendError::permanent(format!(
                "sink {} has no way to send",
                sink.name
            ))),
        }
    }

    async fn post(&self, post: sinks::HttpPost) -> std::result::Result<(), SendError> {
        let mut req = self
            .http
            .post(&post.url)
            .header(reqwest::header::CONTENT_TYPE, post.content_type)
            .body(post.body);
        for (k, v) in &post.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let host = reqwest::Url::parse(&post.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        let resp = req
            .send()
            .await
            // Without the URL: a webhook's path is its secret, and this text is logged.
            .map_err(|e| {
                SendError::transient(format!(
                    "POST to {host} failed: {}",
                    error_chain(&e.without_url())
                ))
            })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let body: String = resp
            .text()
            .await
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        let message = format!("{host} answered {status}: {}", body.trim());
        if status.as_u16() == 429 || status.is_server_error() {
            Err(SendError::transient(message))
        } else {
            Err(SendError::permanent(message))
        }
    }
}

/// Runs a command sink: no shell, the notice as JSON on stdin, its fields in the env.
async fn run_command(argv: &[String], n: &Notice) -> std::result::Result<(), SendError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(SendError::permanent("empty command".into()));
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .envs(sinks::command_env(n))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SendError::permanent(format!("cannot run {program}: {e}")))?;
    let json = serde_json::to_vec(n).unwrap_or_default();
    let run = async {
        if let Some(mut stdin) = child.stdin.take() {
            // A command that ignores its stdin may close it early; that is its business.
            let _ = stdin.write_all(&json).await;
        }
        child.wait_with_output().await
    };
    match tokio::time::timeout(SEND_TIMEOUT, run).await {
        Err(_) => Err(SendError::transient(format!(
            "{program} did not finish within {} s",
            SEND_TIMEOUT.as_secs()
        ))),
        Ok(Err(e)) => Err(SendError::transient(format!("{program}: {e}"))),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(SendError::transient(format!(
            "{program} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .chars()
                .take(200)
                .collect::<String>()
        ))),
    }
}
