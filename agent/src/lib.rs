//! karl-agent: watches tmux panes on one Mac and types into them on the coordinator's
//! behalf. It dials the coordinator, keeps one bidirectional gRPC stream, and opens no port.
//!
//! Layout:
//! - [`config`]: the agent's configuration (TOML file, env, flags).
//! - [`link`]: the stream to the coordinator — hello, heartbeats, reconnect with backoff,
//!   command dispatch.
//! - [`panes`]: the pane host the link dispatches to (watch, capture, inject, send keys).
//! - [`tmux`]: the one door to tmux — socket, timeouts, `-F` parsing.
//! - [`control`]: tmux control-mode clients and their line parser (`%output`, `%exit`, …).
//! - [`activity`]: the watch table — per-pane activity, settle and safety timing (pure).
//! - [`snapshot`]: capture → cleaned text → `PaneSnapshot`.
//! - [`inject`]: the injection protocol and the send-keys allowlist.
//! - [`procs`]: the processes running in a pane (`ps`), evidence that the agent CLI lives.
//! - [`error`]: the agent's error type.
//! - [`test_server`]: a private, self-cleaning tmux server for tests and benchmarks.

pub mod activity;
pub mod config;
pub mod control;
pub mod error;
pub mod inject;
pub mod link;
pub mod panes;
pub mod procs;
pub mod snapshot;
pub mod test_server;
pub mod tmux;

/// Completes on Ctrl-C or SIGTERM: the shutdown future both binaries hand to their
/// servers and links.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
