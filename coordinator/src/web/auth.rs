//! The dashboard's door: the coordinator's shared token, checked in constant time.
//!
//! A request gets in with `Authorization: Bearer TOKEN` (scrapers, scripts) or with the
//! `karl_token` cookie the login form sets once (browsers: HttpOnly, SameSite=Strict, a
//! year; Secure over HTTPS). Under mTLS the client certificate the handshake verified is
//! the login. Without a token configured — which config validation allows only on
//! loopback — everything gets in. A POST under `/api/` must also carry `X-Karl-Request: 1`, a header
//! only the page's own script sends: another site's form cannot act with the cookie.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use karl_common::auth::{check_bearer, check_token};
use serde::Deserialize;

use super::api::ApiError;
use super::WebState;

/// The cookie that keeps the token.
pub const COOKIE: &str = "karl_token";
/// The header an action must carry.
pub const ACTION_HEADER: &str = "x-karl-request";

/// The token the `karl_token` cookie carries, if sent and well-formed.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .and_then(|(_, v)| unhex(v))
}

/// The cookie's value for `token`: hex, so any token fits a cookie.
fn hex(token: &str) -> String {
    token.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

/// Whether `headers` carry `expected`, as a bearer header or the cookie.
pub fn authorized(headers: &HeaderMap, expected: &str) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    check_bearer(bearer, expected)
        || cookie_token(headers).is_some_and(|t| check_token(&t, expected))
}

/// The layer in front of every page, feed and action.
pub async fn require(State(state): State<WebState>, req: Request, next: Next) -> Response {
    let is_api = req.uri().path().starts_with("/api/");
    if let Some(token) = state.token.as_deref().filter(|_| !state.tls.client_certs) {
        if !authorized(req.headers(), token) {
            return if req.uri().path() == "/" {
                (StatusCode::UNAUTHORIZED, super::login_page("")).into_response()
            } else {
                ApiError::unauthorized().into_response()
            };
        }
    }
    if is_api && req.method() == Method::POST && !req.headers().contains_key(ACTION_HEADER) {
        return ApiError::forbidden(
            "actions need the X-Karl-Request header: use the dashboard's buttons, or send it from your script",
        )
        .into_response();
    }
    next.run(req).await
}

#[derive(Debug, Deserialize)]
pub struct Login {
    token: String,
}

/// The login form: a right token sets the cookie and goes to the dashboard.
pub async fn login(State(state): State<WebState>, Form(form): Form<Login>) -> Response {
    let Some(expected) = state.token.as_deref() else {
        return Redirect::to("/").into_response();
    };
    let given = form.token.trim();
    if !check_token(given, expected) {
        tracing::warn!(target: "coord.web", "dashboard login with a wrong token");
        return (
            StatusCode::UNAUTHORIZED,
            super::login_page("Wrong token: use the coordinator's (--token / KARL_TOKEN)."),
        )
            .into_response();
    }
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000{}",
        hex(given),
        secure(&state)
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// Forgets the cookie.
pub async fn logout(State(state): State<WebState>) -> Response {
    let cookie = format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        secure(&state)
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// Over HTTPS the cookie is never sent in the clear.
fn secure(state: &WebState) -> &'static str {
    if state.tls.https {
        "; Secure"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                *k,
                HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
            );
        }
        h
    }

    #[test]
    fn the_token_comes_as_a_bearer_header_or_the_cookie() {
        assert!(authorized(
            &headers(&[("authorization", "Bearer s3")]),
            "s3"
        ));
        let s3 = hex("s3");
        assert_eq!(s3, "7333");
        assert!(authorized(
            &headers(&[("cookie", format!("theme=dark; karl_token={s3}").as_str())]),
            "s3"
        ));
        assert!(authorized(
            &headers(&[
                ("cookie", "a=b"),
                ("cookie", format!("karl_token={s3}").as_str())
            ]),
            "s3"
        ));
        assert!(!authorized(
            &headers(&[("cookie", "karl_token=7334")]),
            "s3"
        ));
        assert!(!authorized(&headers(&[("cookie", "karl_token=s3")]), "s3"));
        assert!(!authorized(&headers(&[("cookie", "karl_token=733")]), "s3"));
        assert!(!authorized(
            &headers(&[("cookie", format!("xkarl_token={s3}").as_str())]),
            "s3"
        ));
        // Any token survives the round trip, `;` and spaces included.
        let odd = "a b;c=d\u{e9}";
        assert_eq!(unhex(&hex(odd)).as_deref(), Some(odd));
        assert!(!authorized(&headers(&[("authorization", "s3")]), "s3"));
        assert!(!authorized(&HeaderMap::new(), "s3"));
    }
}
