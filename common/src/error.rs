//! The error type of `karl-common`.

use thiserror::Error;

/// Errors from parsing operator input and rule manifests.
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
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
