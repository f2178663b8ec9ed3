//! karl-agent: watches tmux panes on one Mac and types into them on the coordinator's
//! behalf. It dials the coordinator, keeps one bidirectional gRPC stream, and opens no port.
//!
//! Layout:
//! - [`run`] / [`Agent`]: the agent's wiring (tmux, pane host, link), shared by the
//!   `karl-agent` binary and the coordinator's in-process agent.
//! - [`config`]: the agent's configuration (TOML file, env, flags).
//! - [`link`]: the stream to the coordinator — hello, heartbeats, reconnect with backoff,
//!   command dispatch.
//! - [`panes`]: the pane host the link dispatches to (watch, capture, inject, send keys).
//! - [`tmux`]: the one door to tmux — socket, timeouts, `-F` parsing.
//! - [`control`]: tmux control-mode clients and their line parser (`%output`, `%exit`, …).
//! - [`activity`]: the watch table — per-pane activity, settle and safety timing (pure).
//! - [`snapshot`]: capture → cleaned text → `PaneSnapshot`.
//! - [`inject`]: the injection protocol and the send-keys allowlist.
//! - [`evidence`]: following the agent CLI's own transcript and session file per watched
//!   pane, sent as facts beside the snapshots.
//! - [`hooks`]: Claude Code hooks — `hooks install|status|uninstall`, the `hook`
//!   reporter the CLI runs, and the agent's socket that forwards hook events.
//! - [`procs`]: the processes running in a pane (`ps`), evidence that the agent CLI lives.
//! - [`check`]: `drive --verify`: a command run in a pane's directory, outside the pane.
//! - [`notify`]: macOS notifications for the coordinator's `macos` sink (`osascript`).
//! - [`error`]: the agent's error type.

pub mod activity;
pub mod check;
pub mod config;
pub mod control;
pub mod error;
pub mod evidence;
pub mod hooks;
pub mod inject;
pub mod link;
pub mod notify;
pub mod panes;
pub mod procs;
pub mod snapshot;
pub mod tmux;

use std::future::Future;
use std::sync::Arc;

use karl_common::pb;
use tokio::sync::mpsc;

use crate::config::{AgentConfig, LinkConfig};
use crate::panes::PaneHost;
use crate::tmux::Tmux;

/// Runs an agent until `shutdown` completes: [`Agent::start`], then [`Agent::run`].
pub async fn run(config: AgentConfig, shutdown: impl Future<Output = ()>) -> error::Result<()> {
    Agent::start(config).await?.run(shutdown).await;
    Ok(())
}

/// A started agent: tmux checked, the pane host up, the link not yet dialing. The
/// `karl-agent` binary and the coordinator's in-process agent both go through it, so
/// the two run the same wiring; the coordinator starts it before serving, so a
/// missing or old tmux is a startup error there too.
pub struct Agent {
    link: LinkConfig,
    host: Arc<PaneHost>,
    events: mpsc::Receiver<pb::AgentEvent>,
}

impl Agent {
    /// Checks that the configured tmux is usable and starts the pane host.
    pub async fn start(config: AgentConfig) -> error::Result<Agent> {
        let tmux = Tmux::new(config.tmux_socket).with_program(config.tmux_bin);
        let tmux_version = tmux.supported_version().await?;
        let (events_tx, events) = mpsc::channel(1024);
        let host = Arc::new(PaneHost::new(tmux, events_tx));
        host.set_notifier(config.notifier);
        if let Some(path) = config.hook_socket {
            host.set_hook_socket(path.clone());
            let h = host.clone();
            tokio::spawn(async move {
                if let Err(e) = hooks::socket::serve(path.clone(), h).await {
                    tracing::warn!(target: "agent.hooks", socket = %path.display(), error = %e, "no hook socket: Claude Code hooks step aside and prompts show as usual");
                }
            });
        }
        let link = config.link;
        tracing::info!(target: "agent", coord = %link.coord, machine = %link.machine, tmux = %tmux_version, "karl-agent starting");
        Ok(Agent { link, host, events })
    }

    /// Keeps the link to the coordinator until `shutdown` completes, then stops the
    /// pane host (its tmux control clients).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        link::run(self.link, self.host.clone(), self.events, shutdown).await;
        self.host.shutdown().await;
    }
}
