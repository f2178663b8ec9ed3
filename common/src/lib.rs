//! KARL's shared library: everything both programs need, and all of KARL's
//! text-to-decision logic as pure functions over plain data.
//!
//! Layout:
//! - [`pb`]: the generated wire types and gRPC stubs of `proto/karl.proto` (package `karl.v1`).
//! - [`target`]: pane targets as operators write them (`agent-codex:1.1`, `%12`), validated.
//! - `ansi`: the one terminal-escape reader (on `vte`): stripping, and the SGR state that
//!   tells dim "ghost" text from typed text.
//! - [`screen_html`]: a capture with its colours as HTML (the dashboard's screen view).
//! - [`pane_text`]: capture preprocessing — escape stripping, normalization, stable hash, diff, novelty.
//! - [`detect`]: the pane-state classifier and its TOML rule manifests.
//! - [`embed`]: sentence vectors from a static embedding model (loaded from a directory).
//! - [`gate`]: the validation gate every candidate prompt passes before it is typed.
//! - [`evidence`]: what an agent CLI writes about itself (Claude Code's transcript and
//!   session file) parsed into typed facts, and the turn state they add up to.
//! - [`context`]: the context stack — the bounded briefing the twin model reads each turn.
//! - [`auth`]: the shared-token check used on both gRPC services.
//! - [`config_file`]: reading TOML config files, with errors that name the file.
//! - [`tls`]: PEM files, the clients' `[tls]` settings and coordinator address, and
//!   TLS failures named in words that say what to fix.
//! - [`error`]: this crate's error type.
//!
//! Nothing here does IO except reading rule override directories and TLS PEM files on
//! request; tmux, gRPC servers, sled and HTTP live in the `karl-agent` and `karl-coord`
//! crates.

mod ansi;
pub mod auth;
pub mod config_file;
pub mod context;
pub mod detect;
pub mod embed;
pub mod error;
pub mod evidence;
pub mod gate;
pub mod pane_text;
pub mod screen_html;
pub mod target;
pub mod tls;

/// Generated protobuf and gRPC code, walled off from hand-written modules.
mod generated {
    #![allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
    tonic::include_proto!("karl.v1");
}

/// The wire types of `proto/karl.proto`.
pub mod pb {
    pub use crate::generated::*;

    /// An enum value's name as operators read it: `SessionStatus::Running` → `running`,
    /// `InjectStatus::DryRun` → `dry-run` (the proto name without its enum prefix).
    pub trait Label {
        fn label(&self) -> String;
    }

    fn strip(proto_name: &str, prefix: &str) -> String {
        proto_name
            .strip_prefix(prefix)
            .unwrap_or(proto_name)
            .to_ascii_lowercase()
            .replace('_', "-")
    }

    /// [`Label`] for each enum, and a `serialize_with` function per enum field (named in
    /// `build.rs`) that writes the label, or the number when this build does not know it.
    pub mod labels {
        use super::Label;

        macro_rules! labels {
            ($($name:ident: $ty:ident = $prefix:literal;)*) => {$(
                impl Label for super::$ty {
                    fn label(&self) -> String {
                        super::strip(self.as_str_name(), $prefix)
                    }
                }

                pub fn $name<S: serde::Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
                    match super::$ty::try_from(*v) {
                        Ok(e) => s.serialize_str(&e.label()),
                        Err(_) => s.serialize_i32(*v),
                    }
                }
            )*};
        }
        labels! {
            session_status: SessionStatus = "SESSION_STATUS_";
            pane_state: PaneState = "PANE_STATE_";
            turn_source: TurnSource = "TURN_SOURCE_";
            turn_outcome: TurnOutcome = "TURN_OUTCOME_";
            inject_status: InjectStatus = "INJECT_STATUS_";
            audit_kind: AuditKind = "AUDIT_KIND_";
            chat_role: ChatRole = "CHAT_ROLE_";
            snapshot_reason: SnapshotReason = "SNAPSHOT_REASON_";
            inject_outcome: InjectOutcome = "INJECT_OUTCOME_";
            pane_event_kind: PaneEventKind = "PANE_EVENT_KIND_";
            evidence_source: EvidenceSource = "EVIDENCE_SOURCE_";
            evidence_link: EvidenceLink = "EVIDENCE_LINK_";
            fact_kind: FactKind = "FACT_KIND_";
            turn_end_kind: TurnEndKind = "TURN_END_KIND_";
            cli_status_kind: CliStatusKind = "CLI_STATUS_KIND_";
        }
    }
}

pub use error::{Error, Result};

/// Wire protocol revision spoken by this build (sent in `Hello.protocol`).
pub const PROTOCOL_VERSION: u32 = 1;

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Sets up logging for a KARL binary: the `KARL_LOG` filter (e.g.
/// `info,coord.engine=debug`), else `default_filter`, written to stderr.
pub fn init_logging(default_filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("KARL_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colour only for a person at a terminal: launchd and systemd write stderr to log
    // files, where escape codes are noise. NO_COLOR (no-color.org) turns it off anyway.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // A second init (tests that call a binary's entry twice) is harmless: keep the first.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

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

/// An example config (`deploy/*.toml`) with its commented-out `[table]` and `key = value`
/// lines switched on. Each program's tests parse the result, so every key the examples
/// document is one the program reads.
pub fn uncomment_example(example: &str) -> String {
    example
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with('[')
                    || rest.split_once(" = ").is_some_and(|(k, _)| {
                        k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    }) =>
            {
                rest
            }
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `~/.config/karl/NAME`: where each program looks for its config file when none is
/// given (the same place on macOS and Linux, as CLI users expect).
pub fn default_config_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".config/karl").join(name))
}
