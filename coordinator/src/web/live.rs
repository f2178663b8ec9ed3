//! The live feed: server-sent events telling an open page what changed, so it re-reads
//! only that. Events: `session` (data: `{"id", "change", "text"}`), `fleet` (data: the
//! machine), `resync` (the page fell behind and should re-read everything) and a `tick`
//! every few seconds so ages and heartbeats stay current. Every event carries data
//! (browsers drop events whose data is empty). The feed ends when the coordinator stops.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde::Serialize;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::{BroadcastStream, IntervalStream};

use super::WebState;
use crate::engine::{Change, SessionEvent};

/// How often a `tick` goes out.
const TICK: Duration = Duration::from_secs(5);

#[derive(Serialize)]
struct SessionData<'a> {
    id: &'a str,
    change: &'static str,
    text: &'a str,
}

/// A session change as an event.
pub fn session_event(e: &SessionEvent) -> Event {
    let (change, text) = match &e.change {
        Change::Record => ("record", ""),
        Change::Screen => ("screen", ""),
        Change::Event(t) => ("event", t.as_str()),
    };
    let data = serde_json::to_string(&SessionData {
        id: &e.id,
        change,
        text,
    })
    .unwrap_or_default();
    Event::default().event("session").data(data)
}

fn lagged(_: BroadcastStreamRecvError) -> Event {
    Event::default().event("resync").data("{}")
}

pub async fn events(
    State(s): State<WebState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let sessions = BroadcastStream::new(s.engine.events()).map(|r| match r {
        Ok(e) => session_event(&e),
        Err(e) => lagged(e),
    });
    let fleet = BroadcastStream::new(s.registry.fleet_changes()).map(|r| match r {
        Ok(machine) => Event::default().event("fleet").data(machine),
        Err(e) => lagged(e),
    });
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let ticks = IntervalStream::new(interval).map(|_| Event::default().event("tick").data("{}"));
    let hello = futures::stream::once(async { Event::default().event("hello").data("{}") });
    let merged = hello.chain(futures::stream::select(
        futures::stream::select(sessions, fleet),
        ticks,
    ));
    let stream = s
        .closing
        .end_stream(merged.map(Ok::<_, Infallible>).boxed());
    Sse::new(stream).keep_alive(KeepAlive::default())
}
