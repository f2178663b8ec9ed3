//! The error type of `karl-common`.

use thiserror::Error;

/// Errors from parsing operator input, rule manifests and TLS settings.
#[derive(Debug, Error)]
pub enum Error {
    /// A pane target that is neither `session:window.pane` nor `%id`.
    #[error("invalid pane target {target:?}: {why} (write it as session:window.pane, e.g. agent-codex:1.1, or as a pane id, e.g. %12)")]
    InvalidTarget { target: String, why: &'static str },
    /// A detection rule manifest that does not parse or validate.
    #[error("rule manifest {name}: {why}")]
    Manifest { name: String, why: String },
    /// Reading a rule override directory failed.
    #[error("reading rules from {path}: {source}")]
    RulesIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A TLS PEM file that cannot be read or holds nothing usable.
    #[error("{what} {path}: {why}")]
    TlsFile {
        what: &'static str,
        path: String,
        why: String,
    },
    /// TLS settings that do not fit together.
    #[error("{0}")]
    TlsConfig(String),
    /// A coordinator address a client cannot dial.
    #[error("invalid coordinator address {addr:?}: {why} (write it as HOST:PORT or http://HOST:PORT, or https://HOST:PORT for TLS)")]
    CoordAddress { addr: String, why: String },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
