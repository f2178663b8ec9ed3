//! The coordinator's error type and its single mapping onto gRPC status codes.

use thiserror::Error;

/// Everything that can go wrong inside the coordinator, phrased for the operator.
#[derive(Debug, Error)]
pub enum CoordError {
    #[error("no agent {machine:?} is connected (connected: {connected})")]
    UnknownMachine { machine: String, connected: String },
    #[error("agent {machine:?} did not answer within {secs}s (is it overloaded or cut off?)")]
    AgentTimeout { machine: String, secs: u64 },
    #[error("agent {machine:?} disconnected before answering")]
    AgentGone { machine: String },
    #[error("agent {machine:?}: {message}")]
    AgentFailed { machine: String, message: String },
    #[error("machine {machine:?} is already connected from another agent process (instance {instance}); stop that agent or pick another --machine name")]
    DuplicateMachine { machine: String, instance: String },
    #[error("{0}")]
    InvalidArgument(String),
    #[error("no session {0:?} (see `karl-ctl sessions --all`)")]
    UnknownSession(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Internal(String),
}

/// `Result` with [`CoordError`].
pub type Result<T, E = CoordError> = std::result::Result<T, E>;

impl From<karl_common::Error> for CoordError {
    fn from(e: karl_common::Error) -> Self {
        CoordError::InvalidArgument(e.to_string())
    }
}

impl From<CoordError> for tonic::Status {
    fn from(e: CoordError) -> Self {
        use tonic::Status;
        let msg = e.to_string();
        match e {
            CoordError::UnknownMachine { .. } | CoordError::UnknownSession(_) => {
                Status::not_found(msg)
            }
            CoordError::AgentTimeout { .. } => Status::deadline_exceeded(msg),
            CoordError::AgentGone { .. } => Status::unavailable(msg),
            CoordError::AgentFailed { .. } | CoordError::FailedPrecondition(_) => {
                Status::failed_precondition(msg)
            }
            CoordError::DuplicateMachine { .. } | CoordError::Conflict(_) => {
                Status::already_exists(msg)
            }
            CoordError::InvalidArgument(_) => Status::invalid_argument(msg),
            CoordError::Store(_) | CoordError::Internal(_) => Status::internal(msg),
        }
    }
}
