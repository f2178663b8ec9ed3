//! The dashboard: karl-coord's own HTTP address (`--http`), serving the fleet, sessions
//! and session pages, their live feed, the operator's actions and `/metrics`.
//!
//! Layout:
//! - [`auth`]: the shared token as a layer — a bearer header, or a cookie set once by the
//!   login form; actions also need a header browsers only send from the page's own script.
//! - [`api`]: the JSON the pages read and the actions they post (thin: engine → [`view`]).
//! - [`view`]: what each page shows, built from records (pure).
//! - [`live`]: server-sent events telling open pages what changed.
//! - [`tls`]: HTTPS and mTLS from the coordinator's `[tls]` settings (its accept loop).
//! - `assets/`: the pages' HTML, script and style, embedded in the binary (no CDN, no
//!   fonts, no build step).
//!
//! Not here: anything a session decides (the engine), the gRPC services ([`crate::server`]).

pub mod api;
pub mod auth;
pub mod live;
pub mod tls;
pub mod view;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;

use crate::engine::Engine;
use crate::registry::Registry;
use crate::server::Closing;

/// How long a dashboard request may take (the live feed is exempt: it is a stream).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// What the handlers share.
#[derive(Clone)]
pub struct WebState {
    pub engine: Arc<Engine>,
    pub registry: Arc<Registry>,
    /// The coordinator's token; `None` (loopback only) lets every request in.
    pub token: Option<Arc<str>>,
    /// Live feeds end when the coordinator stops.
    pub closing: Closing,
    pub tls: WebTls,
}

/// How the dashboard is reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebTls {
    /// Served over HTTPS: the login cookie is `Secure`.
    pub https: bool,
    /// mTLS: every connection presented a certificate the client CA signed, which is its
    /// login (no token asked).
    pub client_certs: bool,
}

const INDEX: &str = include_str!("assets/index.html");
const LOGIN: &str = include_str!("assets/login.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// The dashboard's routes over `state`.
pub fn router(state: WebState) -> Router {
    let private = Router::new()
        .route("/", get(index))
        .route("/api/fleet", get(api::fleet))
        .route("/api/sessions", get(api::sessions))
        .route("/api/sessions/{id}", get(api::session))
        .route("/api/sessions/{id}/send", post(api::send))
        .route("/api/sessions/{id}/{action}", post(api::act))
        .route("/api/events", get(live::events))
        .route("/metrics", get(api::metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ));
    Router::new()
        .merge(private)
        .route("/login", post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/assets/app.js", get(script))
        .route("/assets/app.css", get(style))
        .with_state(state)
}

async fn index() -> Html<&'static str> {
    Html(INDEX)
}

/// The login page, with `message` (escaped) above the form.
pub fn login_page(message: &str) -> Html<String> {
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    Html(LOGIN.replace("{{message}}", &escaped))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// Serves the dashboard on `listener` until `shutdown` completes, over TLS with `tls`;
/// live feeds end then, so nothing holds the graceful shutdown up.
pub async fn serve(
    listener: TcpListener,
    state: WebState,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state).layer(axum::middleware::from_fn(time_limit));
    match tls {
        Some(acceptor) => {
            tls::serve(listener, acceptor, app, shutdown).await;
            Ok(())
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
}

/// Bounds every request but the live feed to [`REQUEST_TIMEOUT`] (time to the response
/// head; a stream's body is not limited).
async fn time_limit(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => api::ApiError::timeout().into_response(),
    }
}
