//! The agent's configuration: `karl-agent.toml`, then env, then flags (clap applies
//! env and flags; the file fills what they leave unset; defaults fill the rest).

use std::path::Path;
use std::time::Duration;

use karl_common::tls::{ClientTlsFiles, CoordAddr};
use serde::Deserialize;

/// `karl-agent.toml` as written on disk. Every field is optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFile {
    /// Coordinator URL, e.g. `http://mac5.local:7400`, or `https://…` for TLS.
    pub coord: Option<String>,
    /// This Mac's fleet name, e.g. `mac2`.
    pub machine: Option<String>,
    pub token: Option<String>,
    /// tmux server: a socket name (`-L`) or, with a `/`, a socket path (`-S`).
    pub tmux_socket: Option<String>,
    /// The tmux program: a path, or a name looked up on PATH (default `tmux`).
    pub tmux_bin: Option<String>,
    /// Where to listen for Claude Code hook events (default `~/.karl/agent.sock`).
    pub hook_socket: Option<String>,
    /// The program that shows the coordinator's macOS notifications (default `osascript`).
    pub notifier: Option<String>,
    pub heartbeat_secs: Option<u64>,
    pub backoff_max_secs: Option<u64>,
    /// How to dial an `https://` coordinator: CA, client certificate, server name.
    #[serde(default)]
    pub tls: Option<ClientTlsFiles>,
}

/// Reads a config file; a missing file at the default location is no error.
pub fn read_file(path: &Path, required: bool) -> Result<AgentFile, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))
        }
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(AgentFile::default()),
        Err(e) => Err(format!("cannot read config file {}: {e}", path.display())),
    }
}

/// What a running agent needs: the link to the coordinator and the tmux server to drive.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub link: LinkConfig,
    /// tmux server: a socket name (`-L`) or, with a `/`, a socket path (`-S`); `None` is
    /// the user's default server.
    pub tmux_socket: Option<String>,
    /// The tmux program: a path, or a name looked up on PATH.
    pub tmux_bin: String,
    /// Where to listen for Claude Code hook events (`karl-agent hooks install`); `None`:
    /// no hook socket.
    pub hook_socket: Option<std::path::PathBuf>,
    /// The program that shows notifications (`osascript`, or a stand-in taking its argv).
    pub notifier: String,
}

/// What the link needs to dial and stay connected.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// The coordinator's address, with its TLS settings when it is `https://`.
    pub coord: CoordAddr,
    pub machine: String,
    pub token: Option<String>,
    pub heartbeat: Duration,
    pub backoff_max: Duration,
    /// Random per process: lets the coordinator tell our own reconnect from an impostor.
    pub instance_id: String,
}

impl LinkConfig {
    pub fn new(coord: CoordAddr, machine: impl Into<String>, token: Option<String>) -> Self {
        LinkConfig {
            coord,
            machine: machine.into(),
            token,
            heartbeat: Duration::from_secs(5),
            backoff_max: Duration::from_secs(30),
            instance_id: uuid::Uuid::new_v4().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn file_parses_and_rejects_typos() {
        let f: AgentFile =
            toml::from_str("coord = \"http://mac5:7400\"\nmachine = \"mac2\"").unwrap();
        assert_eq!(f.machine.as_deref(), Some("mac2"));
        assert!(toml::from_str::<AgentFile>("machin = \"mac2\"").is_err());
        let f: AgentFile = toml::from_str(
            "coord = \"https://mac5:7400\"\n[tls]\nca = \"/etc/karl/ca.pem\"\ndomain = \"mac5.local\"",
        )
        .unwrap();
        let tls = f.tls.unwrap();
        assert_eq!(tls.ca.unwrap().to_str(), Some("/etc/karl/ca.pem"));
        assert_eq!(tls.domain.as_deref(), Some("mac5.local"));
        assert!(toml::from_str::<AgentFile>("[tls]\nclient_ca = \"x\"").is_err());
    }

    #[test]
    fn deploy_example_parses() {
        let example = include_str!("../../deploy/karl-agent.toml");
        let f: AgentFile = toml::from_str(example).unwrap();
        assert_eq!(f.machine.as_deref(), Some("mac2"));
        assert!(f.tls.is_none());
        // Every commented-out key is a real one.
        let f: AgentFile = toml::from_str(&karl_common::uncomment_example(example)).unwrap();
        let tls = f.tls.unwrap();
        assert!(tls.ca.is_some() && tls.cert.is_some() && tls.key.is_some());
        assert_eq!(tls.domain.as_deref(), Some("mac5.local"));
    }
}
