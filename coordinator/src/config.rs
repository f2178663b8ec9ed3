//! Coordinator and karl-ctl configuration: TOML file, then environment, then flags.
//!
//! Pure: the binaries read files and the environment, and hand the values here to merge
//! and validate. Flag and env precedence is clap's (flag wins over env); the file fills
//! whatever neither set; built-in defaults fill the rest.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

pub use karl_common::gate::ModelSetting;

use crate::context::ContextConfig;
use crate::engine::EngineConfig;
use crate::model::ModelConfig;

/// Default coordinator address.
pub use karl_common::config_file::{read_toml, FileError, DEFAULT_LISTEN};

/// `karl-coord.toml` as written on disk. Every field is optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordFile {
    pub listen: Option<String>,
    /// The dashboard's address (HTTP); unset serves none.
    pub http: Option<String>,
    pub token: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub rules_dir: Option<PathBuf>,
    pub local_agent: Option<bool>,
    /// Machine name of the in-process agent (`--local-agent`).
    pub local_machine: Option<String>,
    pub tmux_socket: Option<String>,
    /// The in-process agent's tmux program (default `tmux`).
    pub tmux_bin: Option<String>,
    #[serde(default)]
    pub model: Option<ModelConfig>,
    #[serde(default)]
    pub context: Option<ContextConfig>,
    #[serde(default)]
    pub engine: Option<EngineFile>,
    #[serde(default)]
    pub tls: Option<TlsFile>,
    #[serde(default)]
    pub gate: Option<GateFile>,
    /// `[notify]`: where escalations, ends, usage limits and lost agents are sent.
    #[serde(default)]
    pub notify: Option<crate::notify::NotifyFile>,
    /// `[events]`: turn and session events on NATS.
    #[serde(default)]
    pub events: Option<crate::events::EventsFile>,
}

/// `[gate]` table: the validation gate's embedding model.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateFile {
    /// A model directory (see `scripts/fetch-model.sh`), or `"off"` for words only. Unset:
    /// the default directory if it holds a model, words only (logged) if not.
    pub model: Option<String>,
    /// Ask the twin's model for a second opinion on a prompt the gate passed in doubt
    /// (default true; without a model there is nobody to ask and nothing changes).
    pub second_opinion: Option<bool>,
}

/// `[tls]` table (and `--tls-cert`, `--tls-key`, `--tls-client-ca`): serve both gRPC
/// services over TLS; with `client_ca`, every client must also show a certificate
/// signed by that CA (mTLS).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFile {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub client_ca: Option<PathBuf>,
}

/// The coordinator's TLS settings, complete: its certificate chain and key (PEM), and
/// the CA client certificates must chain to when mTLS is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// `[engine]` table: session defaults.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    pub max_turns: Option<u32>,
    pub settle_ms: Option<u32>,
    pub max_injections_per_minute: Option<u32>,
    pub max_stalled_turns: Option<u32>,
    pub unchanged_escalate_secs: Option<u64>,
    /// How long an idle-looking screen may disagree with a transcript that shows a turn
    /// in flight before a human is asked.
    pub disagree_escalate_secs: Option<u64>,
    pub restart_command: Option<String>,
    pub safety_secs: Option<u32>,
}

/// The coordinator's resolved configuration.
#[derive(Debug, Clone)]
pub struct CoordConfig {
    pub listen: SocketAddr,
    /// Where the dashboard and `/metrics` are served (`--http`); `None` serves none.
    pub http: Option<SocketAddr>,
    pub token: Option<String>,
    pub data_dir: PathBuf,
    pub rules_dir: Option<PathBuf>,
    pub local_agent: bool,
    pub local_machine: String,
    pub tmux_socket: Option<String>,
    /// The in-process agent's tmux program: a path or a name on PATH.
    pub tmux_bin: String,
    /// Model client settings; no URLs means no model (every session runs plan-only).
    pub model: ModelConfig,
    pub context: ContextConfig,
    pub engine: EngineFile,
    /// TLS on the listener; `None` serves plaintext.
    pub tls: Option<ServerTls>,
    /// A pane the local agent's tmux server is started with (`--local-pane`).
    pub local_pane: Option<LocalPane>,
    /// Where the gate's embedding model comes from.
    pub gate_model: ModelSetting,
    /// `[gate] second_opinion`.
    pub second_opinion: bool,
    /// Replies a scripted twin gives instead of a model server, in order (then it reports
    /// itself unreachable and sessions fall back to their plans): `--scripted-twin FILE`,
    /// which `karl-ctl demo` uses when no model answers.
    pub scripted_twin: Option<Vec<String>>,
    /// `[notify]`, checked.
    pub notify: crate::notify::NotifyConfig,
    /// Where turn and session events are published (`[events] nats_url`); `None`: nowhere.
    pub nats_url: Option<String>,
}

/// `--local-pane`: the local agent's tmux server is started with one session, `karl`,
/// whose pane runs `command`; the coordinator stops that server when it stops, unless
/// `keep`. For trying KARL on one machine (`karl-ctl demo` uses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPane {
    pub command: String,
    pub keep: bool,
}

impl CoordConfig {
    /// A configuration for one machine: loopback, no token, no model, `data_dir`.
    pub fn local(data_dir: PathBuf) -> Self {
        CoordConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            http: None,
            token: None,
            data_dir,
            rules_dir: None,
            local_agent: false,
            local_machine: "local".into(),
            tmux_socket: None,
            tmux_bin: karl_agent::tmux::program_from_env(),
            model: ModelConfig {
                urls: Vec::new(),
                ..ModelConfig::default()
            },
            context: ContextConfig::default(),
            engine: EngineFile::default(),
            tls: None,
            local_pane: None,
            gate_model: ModelSetting::Default,
            second_opinion: true,
            scripted_twin: None,
            notify: crate::notify::NotifyConfig::default(),
            nats_url: None,
        }
    }

    /// The engine's settings from the `[engine]` and `[context]` tables.
    pub fn engine_config(&self) -> EngineConfig {
        let mut e = EngineConfig::default();
        let f = &self.engine;
        if let Some(v) = f.max_turns {
            e.limits.default_max_turns = v.max(1);
        }
        if let Some(v) = f.settle_ms {
            e.limits.settle_ms = v;
        }
        if let Some(v) = f.max_injections_per_minute {
            e.limits.loops.max_injections_per_minute = v.max(1);
        }
        if let Some(v) = f.max_stalled_turns {
            e.limits.loops.max_turns_without_progress = v.max(1);
        }
        if let Some(v) = f.unchanged_escalate_secs {
            e.limits.unchanged_escalate_ms = v.saturating_mul(1000);
        }
        if let Some(v) = f.disagree_escalate_secs {
            e.limits.disagree_escalate_ms = v.max(1).saturating_mul(1000);
        }
        if let Some(v) = f.safety_secs {
            e.safety_secs = v;
        }
        e.restart_command = f.restart_command.clone().filter(|c| !c.trim().is_empty());
        e.context = self.context.clone();
        e.model_name = self.model.model.clone().unwrap_or_else(|| "default".into());
        e.second_opinion = self.second_opinion;
        e
    }
}

/// Errors that stop the coordinator from starting, phrased as what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("invalid listen address {0:?}: write it as IP:PORT, e.g. 127.0.0.1:7400")]
    Listen(String),
    #[error("refusing to listen on {0} without a token: set --token or KARL_TOKEN (or listen on 127.0.0.1)")]
    NoTokenOffLoopback(SocketAddr),
    #[error(
        "empty token: give a non-empty --token / KARL_TOKEN, or none at all for loopback-only use"
    )]
    EmptyToken,
    #[error("{0}")]
    Invalid(String),
}

/// The default data directory: `$KARL_HOME` is handled by the caller; this is the
/// fallback under the user's data dir.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("karl")
}

/// Parses a listen address and checks the token rule: no token → loopback only.
pub fn check_listen(listen: &str, token: Option<&str>) -> Result<SocketAddr, ConfigError> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|_| ConfigError::Listen(listen.to_string()))?;
    match token {
        Some("") => Err(ConfigError::EmptyToken),
        None if !addr.ip().is_loopback() => Err(ConfigError::NoTokenOffLoopback(addr)),
        _ => Ok(addr),
    }
}

/// Merges the TLS flags and env (`over`) onto the file's `[tls]` table and checks that
/// the pieces fit: a certificate needs its key and the other way round, and a client CA
/// needs TLS to be on. The in-process agent (`--local-agent`) dials in plaintext, so it
/// cannot share a TLS listener.
pub fn resolve_tls(
    over: TlsFile,
    file: Option<TlsFile>,
    local_agent: bool,
) -> Result<Option<ServerTls>, ConfigError> {
    let file = file.unwrap_or_default();
    let cert = over.cert.or(file.cert);
    let key = over.key.or(file.key);
    let client_ca = over.client_ca.or(file.client_ca);
    let tls = match (cert, key) {
        (Some(cert), Some(key)) => ServerTls {
            cert,
            key,
            client_ca,
        },
        (None, None) if client_ca.is_some() => return Err(ConfigError::Invalid(
            "[tls] client_ca / --tls-client-ca needs TLS on: set [tls] cert and key / --tls-cert and --tls-key too".into(),
        )),
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(ConfigError::Invalid(
            "[tls] cert / --tls-cert is set without its private key: set [tls] key / --tls-key (or KARL_TLS_KEY) too".into(),
        )),
        (None, Some(_)) => return Err(ConfigError::Invalid(
            "[tls] key / --tls-key is set without its certificate: set [tls] cert / --tls-cert (or KARL_TLS_CERT) too".into(),
        )),
    };
    if local_agent {
        return Err(ConfigError::Invalid(
            "--local-agent cannot dial a TLS listener: run karl-agent beside the coordinator with --coord https://HOST:PORT and --tls-ca instead".into(),
        ));
    }
    Ok(Some(tls))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn no_token_means_loopback_only() {
        assert!(check_listen("127.0.0.1:7400", None).is_ok());
        assert!(check_listen("[::1]:7400", None).is_ok());
        assert!(matches!(
            check_listen("0.0.0.0:7400", None),
            Err(ConfigError::NoTokenOffLoopback(_))
        ));
        assert!(check_listen("0.0.0.0:7400", Some("t")).is_ok());
        assert!(matches!(
            check_listen("0.0.0.0:7400", Some("")),
            Err(ConfigError::EmptyToken)
        ));
        assert!(matches!(
            check_listen("localhost", None),
            Err(ConfigError::Listen(_))
        ));
    }

    #[test]
    fn deploy_example_parses() {
        let example = include_str!("../../deploy/karl-coord.toml");
        let f: CoordFile = toml::from_str(example).unwrap();
        let m = f.model.unwrap();
        assert_eq!(m.urls.len(), 2);
        let engine = f.engine.unwrap();
        assert_eq!(engine.max_turns, Some(30));
        assert_eq!(engine.disagree_escalate_secs, Some(600));
        assert!(f.tls.is_none());
        assert!(f.notify.is_none());
        // Every commented-out key is a real one.
        let f: CoordFile = toml::from_str(&karl_common::uncomment_example(example)).unwrap();
        let tls = f.tls.unwrap();
        assert!(tls.cert.is_some() && tls.key.is_some() && tls.client_ca.is_some());
        assert!(f.model.unwrap().ca.is_some());
        let notify = f.notify.unwrap().resolve().unwrap();
        assert_eq!(notify.sinks.len(), 6);
        assert_eq!(notify.dedupe, std::time::Duration::from_secs(600));
        let gate = f.gate.unwrap().model.unwrap();
        assert!(matches!(ModelSetting::parse(&gate), ModelSetting::Dir(_)));
        assert_eq!(ModelSetting::parse(" OFF "), ModelSetting::Off);
        assert_eq!(ModelSetting::parse(""), ModelSetting::Default);
    }

    #[test]
    fn tls_pieces_must_fit() {
        let p = |s: &str| Some(PathBuf::from(s));
        let both = TlsFile {
            cert: p("c.pem"),
            key: p("k.pem"),
            client_ca: None,
        };
        assert_eq!(resolve_tls(TlsFile::default(), None, false).unwrap(), None);
        let tls = resolve_tls(TlsFile::default(), Some(both.clone()), false)
            .unwrap()
            .unwrap();
        assert_eq!(tls.cert, PathBuf::from("c.pem"));
        // Flags and env beat the file, field by field.
        let over = TlsFile {
            key: p("flag-k.pem"),
            client_ca: p("ca.pem"),
            ..TlsFile::default()
        };
        let tls = resolve_tls(over, Some(both.clone()), false)
            .unwrap()
            .unwrap();
        assert_eq!(
            tls,
            ServerTls {
                cert: PathBuf::from("c.pem"),
                key: PathBuf::from("flag-k.pem"),
                client_ca: p("ca.pem"),
            }
        );
        let only_cert = TlsFile {
            cert: p("c.pem"),
            ..TlsFile::default()
        };
        let err = resolve_tls(only_cert, None, false).unwrap_err().to_string();
        assert!(err.contains("--tls-key"), "{err}");
        let only_key = TlsFile {
            key: p("k.pem"),
            ..TlsFile::default()
        };
        let err = resolve_tls(TlsFile::default(), Some(only_key), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--tls-cert"), "{err}");
        let only_ca = TlsFile {
            client_ca: p("ca.pem"),
            ..TlsFile::default()
        };
        let err = resolve_tls(only_ca, None, false).unwrap_err().to_string();
        assert!(err.contains("needs TLS on"), "{err}");
        let err = resolve_tls(TlsFile::default(), Some(both), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--local-agent"), "{err}");
    }

    #[test]
    fn file_rejects_unknown_keys() {
        let err = toml::from_str::<CoordFile>("listne = \"x\"").unwrap_err();
        assert!(err.to_string().contains("unknown field"));
        let ok: CoordFile =
            toml::from_str("listen = \"127.0.0.1:1\"\n[engine]\nmax_turns = 5").unwrap();
        assert_eq!(ok.engine.unwrap().max_turns, Some(5));
        let err = toml::from_str::<CoordFile>("[tls]\ncert = \"c\"\nca = \"x\"").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}
