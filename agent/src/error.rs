//! The agent's error type. Each message says what went wrong and what the operator can do
//! about it; the link sends it to the coordinator as the command's error text.

use std::time::Duration;

use thiserror::Error;

/// Errors from talking to tmux and from commands the agent refuses.
#[derive(Debug, Error)]
pub enum AgentError {
    /// The tmux binary could not be started at all.
    #[error("cannot run {program}: {source} (install tmux 3.2 or newer and make sure it is on the agent's PATH)")]
    TmuxMissing {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// Spawning or talking to a tmux process failed for another reason.
    #[error("running tmux {args} failed: {source}")]
    TmuxIo {
        args: String,
        #[source]
        source: std::io::Error,
    },
    /// A tmux call did not finish in time.
    #[error("tmux {args} did not answer within {after:?}; the tmux server may be hung (check it with `tmux {socket}list-sessions`)")]
    TmuxTimeout {
        args: String,
        after: Duration,
        socket: String,
    },
    /// The tmux binary is older than KARL supports.
    #[error("{found} is too old: KARL needs tmux 3.2 or newer (install a newer tmux, or point --tmux-bin / KARL_TMUX_BIN at one)")]
    TmuxTooOld { found: String },
    /// No tmux server answers on the configured socket.
    #[error("no tmux server is running on {socket}: start tmux there, or point the agent at the right server with --tmux-socket / KARL_TMUX_SOCKET")]
    NoServer { socket: String },
    /// tmux ran and reported an error.
    #[error("tmux {args} failed: {stderr}")]
    Tmux { args: String, stderr: String },
    /// The target is not a valid pane target.
    #[error(transparent)]
    InvalidTarget(#[from] karl_common::Error),
    /// The target names no pane on this server.
    #[error(
        "no pane {target} on this tmux server (list the panes with `karl-ctl panes <machine>`)"
    )]
    PaneNotFound { target: String },
    /// tmux printed something the agent cannot read.
    #[error("unexpected tmux output for {what}: {line:?} (is this tmux 3.2 or newer?)")]
    Parse { what: &'static str, line: String },
    /// A key outside the send-keys allowlist.
    #[error("key {key:?} is not allowed: send-keys accepts only Enter, Escape, Up, Down, the digits 1-9, y, n and C-c")]
    KeyNotAllowed { key: String },
    /// A send-keys command with no keys.
    #[error("no keys given: name at least one of Enter, Escape, Up, Down, 1-9, y, n, C-c")]
    NoKeys,
    /// Keys or text would go to a pane in copy mode, where they drive the copy-mode cursor.
    #[error("pane {pane} is in copy mode; leave copy mode (press q in the pane) and try again")]
    PaneInMode { pane: String },
    /// The pane's program has exited (remain-on-exit keeps the dead pane).
    #[error(
        "pane {pane} is dead (its program exited); restart it with `tmux respawn-pane -t {pane}`"
    )]
    PaneDead { pane: String },
    /// The control-mode client for a session could not be attached.
    #[error("cannot attach a tmux control client to session {session}: {why}")]
    Attach { session: String, why: String },
    /// The pane host is shutting down.
    #[error("the agent is shutting down")]
    ShuttingDown,
}

/// `Result` with [`AgentError`].
pub type Result<T, E = AgentError> = std::result::Result<T, E>;
