//! The JSON the dashboard reads and the actions it posts: thin handlers over the engine
//! and registry, with [`view`](super::view) building what is shown and [`ApiError`] the
//! one mapping from [`CoordError`] onto HTTP statuses.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use karl_common::target::PaneTarget;
use karl_common::unix_ms;
use serde::{Deserialize, Serialize};

use super::view::{self, FleetView, SessionPage, SessionRow};
use super::WebState;
use crate::engine::Command;
use crate::error::CoordError;
use crate::metrics;

/// An error as the dashboard shows it: a status and a sentence saying what to do.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

impl ApiError {
    pub fn unauthorized() -> Self {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: "no or wrong token: log in on the dashboard's page, or send Authorization: Bearer TOKEN".into(),
        }
    }

    pub fn forbidden(message: &str) -> Self {
        ApiError {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
        }
    }

    pub fn timeout() -> Self {
        ApiError {
            status: StatusCode::GATEWAY_TIMEOUT,
            message: format!(
                "the coordinator did not answer within {}s (is an agent slow to answer?)",
                super::REQUEST_TIMEOUT.as_secs()
            ),
        }
    }

    fn bad_request(message: String) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message,
        }
    }
}

impl From<CoordError> for ApiError {
    fn from(e: CoordError) -> Self {
        let status = match &e {
            CoordError::UnknownMachine { .. } | CoordError::UnknownSession(_) => {
                StatusCode::NOT_FOUND
            }
            CoordError::AgentTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            CoordError::AgentGone { .. } => StatusCode::SERVICE_UNAVAILABLE,
            CoordError::AgentFailed { .. }
            | CoordError::FailedPrecondition(_)
            | CoordError::DuplicateMachine { .. }
            | CoordError::Conflict(_) => StatusCode::CONFLICT,
            CoordError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
            CoordError::Store(_) | CoordError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            status,
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: &self.message,
            }),
        )
            .into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

pub async fn fleet(State(s): State<WebState>) -> ApiResult<FleetView> {
    let live = s.engine.list(false)?;
    Ok(Json(view::fleet(
        &s.registry.list(),
        |m| s.registry.panes(m),
        &live,
        unix_ms(),
    )))
}

#[derive(Serialize)]
pub struct SessionList {
    sessions: Vec<SessionRow>,
    now_ms: u64,
}

pub async fn sessions(State(s): State<WebState>) -> ApiResult<SessionList> {
    let mut rows: Vec<SessionRow> = s
        .engine
        .list(true)?
        .iter()
        .map(|r| view::row(r, s.engine.phase(r)))
        .collect();
    view::sort_rows(&mut rows);
    Ok(Json(SessionList {
        sessions: rows,
        now_ms: unix_ms(),
    }))
}

pub async fn session(State(s): State<WebState>, Path(id): Path<String>) -> ApiResult<SessionPage> {
    let (rec, turns) = s.engine.show(&id)?;
    let screen = s.engine.screen(&id);
    Ok(Json(view::page(
        &rec,
        s.engine.phase(&rec),
        &turns,
        screen.as_deref(),
        unix_ms(),
    )))
}

/// `pause`, `resume`, `stop`, `approve`, `deny`: as `karl-ctl` does them.
pub async fn act(
    State(s): State<WebState>,
    Path((id, action)): Path<(String, String)>,
) -> ApiResult<SessionRow> {
    let command = match action.as_str() {
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "stop" => Command::Stop,
        "approve" => Command::Decide(true),
        "deny" => Command::Decide(false),
        other => {
            return Err(ApiError::bad_request(format!(
                "no action {other:?}: use pause, resume, stop, approve, deny or send"
            )))
        }
    };
    tracing::info!(target: "coord.web", session = %id, action = %action, "operator action from the dashboard");
    let rec = s.engine.command(&id, command).await?;
    Ok(Json(view::row(&rec, s.engine.phase(&rec))))
}

#[derive(Debug, Deserialize)]
pub struct SendText {
    text: String,
}

#[derive(Serialize)]
pub struct Sent {
    /// `submitted`, `refused: blocked by the gate: …`, …
    result: String,
    typed: bool,
    gate: Vec<String>,
}

/// Types `text` into the session's pane, through the gate (never forced from here).
pub async fn send(
    State(s): State<WebState>,
    Path(id): Path<String>,
    Json(body): Json<SendText>,
) -> ApiResult<Sent> {
    let text = body.text.trim();
    if text.is_empty() {
        return Err(ApiError::bad_request(
            "nothing to send: type a prompt first".into(),
        ));
    }
    let rec = s.engine.record(&id)?;
    let target = PaneTarget::parse(&rec.pane_id)
        .or_else(|_| PaneTarget::parse(&rec.target))
        .map_err(|e| ApiError::from(CoordError::from(e)))?;
    tracing::info!(target: "coord.web", session = %id, "prompt sent from the dashboard");
    let (result, gate) = s
        .engine
        .manual_send(&rec.machine, &target, text, false)
        .await?;
    Ok(Json(Sent {
        result: crate::engine::inject_label(&result),
        typed: crate::engine::inject_status(&result).0.landed(),
        gate,
    }))
}

/// `/metrics`: Prometheus' text format, with the gauges read now.
pub async fn metrics(State(s): State<WebState>) -> Result<Response, ApiError> {
    let (sessions, store_bytes) = s.engine.census()?;
    let now = metrics::Snapshot {
        sessions,
        agents: s.registry.list().len() as u64,
        snapshots: s.registry.snapshots_seen(),
        store_bytes,
    };
    let body = s.engine.metrics().render(&now);
    Ok(([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response())
}
