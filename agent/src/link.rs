//! The agent's one stream to the coordinator.
//!
//! Dial out (the agent opens no port), say Hello with this process's instance id and
//! the panes it sees, then keep the stream: heartbeats, pane-list refreshes, watch
//! snapshots and pane events forwarded from the pane host, and one task per command
//! from the coordinator whose result goes back on the stream. On any disconnect,
//! reconnect forever with capped exponential backoff and full jitter; a rejected token
//! or a refused machine name waits the whole cap instead of hammering.
//!
//! What happens to panes is not here: the link calls a [`PaneOps`] implementation
//! (the tmux-backed [`crate::panes::PaneHost`] in production, a scripted one in tests).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use karl_common::auth::{bearer, AUTH_HEADER};
use karl_common::pb;
use karl_common::pb::agent_command::Kind;
use karl_common::tls::Diagnosis;
use rand::Rng;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request};

use crate::config::LinkConfig;

/// Boxed error the pane side reports; it travels to the coordinator as text.
pub type OpError = Box<dyn std::error::Error + Send + Sync>;

/// What the link needs from whatever owns the panes.
pub trait PaneOps: Send + Sync + 'static {
    fn tmux_version(&self) -> impl Future<Output = String> + Send;
    fn list_panes(&self) -> impl Future<Output = Result<Vec<pb::PaneInfo>, OpError>> + Send;
    fn watching(&self) -> Vec<String>;
    fn watch(&self, w: pb::Watch) -> impl Future<Output = Result<(), OpError>> + Send;
    fn unwatch(&self, target: String) -> impl Future<Output = Result<(), OpError>> + Send;
    fn capture(
        &self,
        c: pb::Capture,
    ) -> impl Future<Output = Result<pb::PaneSnapshot, OpError>> + Send;
    fn inject(&self, i: pb::Inject) -> impl Future<Output = pb::InjectResult> + Send;
    fn send_keys(&self, s: pb::SendKeys) -> impl Future<Output = Result<(), OpError>> + Send;
    /// The coordinator's decision for a waiting Claude Code hook.
    fn hook_answer(&self, _a: pb::HookAnswer) {}
    /// Runs a `--verify` command in a pane's directory.
    fn run_check(
        &self,
        _c: pb::RunCheck,
    ) -> impl Future<Output = Result<pb::CheckResult, OpError>> + Send {
        async { Err("this agent does not run verify commands".into()) }
    }
    /// Shows a notification on this Mac.
    fn notify(&self, _n: pb::Notify) -> impl Future<Output = Result<(), OpError>> + Send {
        async { Err("this agent does not show notifications".into()) }
    }
}

/// Reconnect delays: capped exponential backoff with full jitter, each delay uniform in
/// `[0, ceiling]`, so agents that lost the coordinator together do not return together.
///
/// backon's [`ExponentialBuilder`] gives the ceilings (base, doubling, capped at `max`).
/// Its own `with_jitter` (backon 1.6) adds up to one more ceiling on top, `[d, 2d)`, which
/// is neither full jitter nor within the cap, so the jitter is drawn here instead.
#[derive(Debug)]
pub struct Backoff {
    schedule: ExponentialBuilder,
    max: Duration,
    ceilings: ExponentialBackoff,
    ceiling: Duration,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        let schedule = ExponentialBuilder::new()
            .with_min_delay(base.min(max))
            .with_max_delay(max)
            .with_factor(2.0)
            .without_max_times();
        Backoff {
            schedule,
            max,
            ceilings: schedule.build(),
            ceiling: Duration::ZERO,
        }
    }

    /// The ceiling the last delay was drawn under.
    pub fn ceiling(&self) -> Duration {
        self.ceiling
    }

    pub fn next_delay(&mut self) -> Duration {
        self.ceiling = self.ceilings.next().unwrap_or(self.max).min(self.max);
        rand::thread_rng().gen_range(Duration::ZERO..=self.ceiling)
    }

    /// Jumps to the cap (used when retrying soon cannot help: bad token, name taken) and
    /// returns it: such a retry waits the whole cap, never a jittered share of it, so a
    /// misconfigured agent cannot hammer the coordinator.
    pub fn to_max(&mut self) -> Duration {
        self.ceilings = self.schedule.with_min_delay(self.max).build();
        self.ceiling = self.max;
        self.max
    }

    pub fn reset(&mut self) {
        self.ceilings = self.schedule.build();
    }
}

/// Runs the link until `shutdown` completes. `events` carries what the pane host
/// reports (snapshots, pane events); it is drained into whichever stream is live.
pub async fn run<P: PaneOps>(
    cfg: LinkConfig,
    panes: Arc<P>,
    mut events: mpsc::Receiver<pb::AgentEvent>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = Backoff::new(Duration::from_millis(200), cfg.backoff_max);
    loop {
        let outcome = tokio::select! {
            _ = &mut shutdown => return,
            o = session(&cfg, &panes, &mut events, &mut backoff) => o,
        };
        let delay = match outcome {
            Ended::Rejected(msg) => {
                tracing::error!(target: "agent.link", coord = %cfg.coord, "{msg}");
                backoff.to_max()
            }
            Ended::Lost(msg) => {
                let d = backoff.next_delay();
                tracing::warn!(target: "agent.link", coord = %cfg.coord, retry_in_ms = d.as_millis() as u64, "{msg}");
                d
            }
        };
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

enum Ended {
    /// The coordinator said no (token, name, TLS): retrying soon won't help.
    Rejected(String),
    /// Network trouble or the coordinator went away: retry with backoff.
    Lost(String),
}

async fn hello<P: PaneOps>(cfg: &LinkConfig, panes: &P) -> pb::AgentEvent {
    let pane_list = match panes.list_panes().await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(target: "agent.link", error = %e, "cannot list panes for hello");
            Vec::new()
        }
    };
    pb::AgentEvent {
        kind: Some(pb::agent_event::Kind::Hello(pb::Hello {
            machine: cfg.machine.clone(),
            instance_id: cfg.instance_id.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            tmux_version: panes.tmux_version().await,
            hostname: hostname::get()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            protocol: karl_common::PROTOCOL_VERSION,
            panes: pane_list,
            watching: panes.watching(),
        })),
    }
}

/// One connection: dial, hello, serve until it breaks.
async fn session<P: PaneOps>(
    cfg: &LinkConfig,
    panes: &Arc<P>,
    events: &mut mpsc::Receiver<pb::AgentEvent>,
    backoff: &mut Backoff,
) -> Ended {
    let endpoint = cfg
        .coord
        .endpoint()
        .connect_timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(20))
        .tcp_nodelay(true);
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => {
            return match cfg.coord.explain(&e) {
                Some(d) => diagnosed(d),
                None => Ended::Lost(format!("cannot reach the coordinator: {e}")),
            }
        }
    };
    let mut client = pb::agent_link_client::AgentLinkClient::new(channel)
        .max_decoding_message_size(16 * 1024 * 1024);

    let (out_tx, out_rx) = mpsc::channel::<pb::AgentEvent>(256);
    if out_tx.send(hello(cfg, &**panes).await).await.is_err() {
        return Ended::Lost("outbound queue closed".into());
    }
    let mut request = Request::new(ReceiverStream::new(out_rx));
    if let Some(token) = &cfg.token {
        match bearer(token).parse::<MetadataValue<_>>() {
            Ok(v) => {
                request.metadata_mut().insert(AUTH_HEADER, v);
            }
            Err(_) => {
                return Ended::Rejected(
                    "the token holds characters that cannot go in a header".into(),
                )
            }
        }
    }
    let mut inbound = match client.join(request).await {
        Ok(r) => r.into_inner(),
        Err(status) => {
            // Under TLS 1.3 the server judges a client certificate after the client's
            // side of the handshake is done, so a refusal shows up on the first call.
            if let Some(d) = cfg.coord.explain(&status) {
                return diagnosed(d);
            }
            return match status.code() {
                Code::Unauthenticated => Ended::Rejected(format!(
                    "the coordinator rejected our token ({}); fix --token / KARL_TOKEN",
                    status.message()
                )),
                Code::AlreadyExists | Code::InvalidArgument => Ended::Rejected(format!(
                    "the coordinator refused this agent: {}",
                    status.message()
                )),
                _ => Ended::Lost(format!("join failed: {}", status.message())),
            };
        }
    };
    backoff.reset();
    tracing::info!(target: "agent.link", coord = %cfg.coord, machine = %cfg.machine, "connected");

    let mut heartbeat = tokio::time::interval(cfg.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut beats: u64 = 0;
    loop {
        tokio::select! {
            msg = inbound.message() => match msg {
                Ok(Some(cmd)) => {
                    if let Some(Kind::Refused(r)) = &cmd.kind {
                        return Ended::Rejected(format!("the coordinator refused this agent: {}", r.reason));
                    }
                    let panes = panes.clone();
                    let out = out_tx.clone();
                    tokio::spawn(async move {
                        let request_id = cmd.request_id;
                        let result = dispatch(&*panes, cmd).await;
                        if request_id != 0 {
                            let _ = out.send(pb::AgentEvent { kind: Some(pb::agent_event::Kind::Result(result)) }).await;
                        }
                    });
                }
                Ok(None) => return Ended::Lost("the coordinator closed the stream".into()),
                Err(status) => return Ended::Lost(format!("stream broke: {}", status.message())),
            },
            Some(ev) = events.recv() => {
                if out_tx.send(ev).await.is_err() {
                    return Ended::Lost("outbound stream closed".into());
                }
            }
            _ = heartbeat.tick() => {
                beats += 1;
                let hb = pb::AgentEvent { kind: Some(pb::agent_event::Kind::Heartbeat(pb::Heartbeat {
                    unix_ms: karl_common::unix_ms(),
                    watched: panes.watching().len() as u32,
                }))};
                if out_tx.send(hb).await.is_err() {
                    return Ended::Lost("outbound stream closed".into());
                }
                // Refresh the pane list now and then so `karl-ctl agents` stays current.
                if beats.is_multiple_of(6) {
                    if let Ok(list) = panes.list_panes().await {
                        let _ = out_tx.send(pb::AgentEvent { kind: Some(pb::agent_event::Kind::PaneList(pb::PaneList { request_id: 0, panes: list })) }).await;
                    }
                }
            }
        }
    }
}

/// A TLS mismatch that rustls named (untrusted certificate, TLS on one side only) will
/// not fix itself on the next try: say what to change and back off to the cap. One
/// that is only likely (the connection closed at once) retries as any lost connection.
fn diagnosed(d: Diagnosis) -> Ended {
    if d.certain {
        Ended::Rejected(d.message)
    } else {
        Ended::Lost(d.message)
    }
}

/// Runs one command and shapes its result.
pub async fn dispatch<P: PaneOps>(panes: &P, cmd: pb::AgentCommand) -> pb::CommandResult {
    use pb::command_result::Detail;
    let request_id = cmd.request_id;
    let done = |r: Result<Option<Detail>, OpError>| match r {
        Ok(detail) => pb::CommandResult {
            request_id,
            ok: true,
            error: String::new(),
            detail,
        },
        Err(e) => pb::CommandResult {
            request_id,
            ok: false,
            error: e.to_string(),
            detail: None,
        },
    };
    match cmd.kind {
        Some(Kind::Watch(w)) => done(panes.watch(w).await.map(|_| None)),
        Some(Kind::Unwatch(u)) => done(panes.unwatch(u.target).await.map(|_| None)),
        Some(Kind::Capture(c)) => done(panes.capture(c).await.map(|s| Some(Detail::Snapshot(s)))),
        Some(Kind::Inject(i)) => {
            let r = panes.inject(i).await;
            done(Ok(Some(Detail::Inject(r))))
        }
        Some(Kind::SendKeys(s)) => done(panes.send_keys(s).await.map(|_| None)),
        Some(Kind::ListPanes(_)) => done(panes.list_panes().await.map(|p| {
            Some(Detail::Panes(pb::PaneList {
                request_id,
                panes: p,
            }))
        })),
        Some(Kind::RunCheck(c)) => done(panes.run_check(c).await.map(|r| Some(Detail::Check(r)))),
        Some(Kind::Notify(n)) => done(panes.notify(n).await.map(|_| None)),
        Some(Kind::HookAnswer(a)) => {
            panes.hook_answer(a);
            done(Ok(None))
        }
        Some(Kind::Refused(_)) | None => done(Err("unknown or empty command".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters() {
        let mut b = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
        let mut last_ceiling = Duration::ZERO;
        for _ in 0..20 {
            let d = b.next_delay();
            let ceiling = b.ceiling();
            assert!(ceiling >= last_ceiling);
            assert!(d <= ceiling, "{d:?} over {ceiling:?}");
            last_ceiling = ceiling;
        }
        assert_eq!(b.ceiling(), Duration::from_secs(30));
        // Full jitter, not equal jitter: draws under the cap also fall below half of it
        // (all 40 above it has odds of 2^-40).
        let low = (0..40)
            .filter(|_| b.next_delay() < Duration::from_secs(15))
            .count();
        assert!(low > 0, "no delay below half the cap in 40 draws");
        b.reset();
        b.next_delay();
        assert_eq!(b.ceiling(), Duration::from_millis(200));
        assert_eq!(b.to_max(), Duration::from_secs(30));
        b.next_delay();
        assert_eq!(b.ceiling(), Duration::from_secs(30));
    }
}
