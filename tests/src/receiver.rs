//! A loopback HTTP receiver for notification sinks: it keeps every request (path, headers,
//! body) and answers each path with the statuses it was told, in order (the last one
//! repeats; 200 by default), so a sink can be made to fail a few times first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use http_body_util::BodyExt;
use hyper::{Request, StatusCode};

use crate::http_stub::{full, Served};

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Header names lower-cased.
    pub headers: HashMap<String, String>,
    pub body: String,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{} sent no JSON ({e}): {}", self.path, self.body))
    }
}

#[derive(Default)]
struct State {
    got: Mutex<Vec<Received>>,
    /// Path → statuses still to give (the last one stays).
    answers: Mutex<HashMap<String, Vec<u16>>>,
}

pub struct Receiver {
    server: Served,
    state: Arc<State>,
}

impl Receiver {
    pub fn start() -> std::io::Result<Receiver> {
        let state = Arc::new(State::default());
        let server = Served::start("receiver", {
            let state = Arc::clone(&state);
            move |req: Request<hyper::body::Incoming>| {
                let state = Arc::clone(&state);
                async move {
                    let path = req.uri().path().to_string();
                    let headers = req
                        .headers()
                        .iter()
                        .map(|(k, v)| {
                            (
                                k.as_str().to_string(),
                                v.to_str().unwrap_or_default().to_string(),
                            )
                        })
                        .collect();
                    let body = req
                        .into_body()
                        .collect()
                        .await
                        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                        .unwrap_or_default();
                    let status = {
                        let mut answers =
                            state.answers.lock().unwrap_or_else(PoisonError::into_inner);
                        match answers.get_mut(&path) {
                            Some(list) if list.len() > 1 => list.remove(0),
                            Some(list) => list.first().copied().unwrap_or(200),
                            None => 200,
                        }
                    };
                    state
                        .got
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Received {
                            path,
                            headers,
                            body,
                            at: std::time::Instant::now(),
                        });
                    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                    Ok(full(status, "text/plain", "ok"))
                }
            }
        })?;
        Ok(Receiver { server, state })
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr())
    }

    /// Answer `path` with these statuses in order, the last one from then on.
    pub fn answer(&self, path: &str, statuses: &[u16]) {
        self.state
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_string(), statuses.to_vec());
    }

    /// Requests to `path` so far, in order.
    pub fn at(&self, path: &str) -> Vec<Received> {
        self.state
            .got
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}
