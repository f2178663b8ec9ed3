//! karl-coord: the coordinator that owns session state and decides what to type.
//!
//! Layout:
//! - [`app`]: assembling a running coordinator (store, registry, engine, server, local agent).
//! - [`config`]: configuration files, env and flags, merged and validated (pure).
//! - [`error`]: [`CoordError`](error::CoordError) and its one mapping onto gRPC status codes.
//! - [`registry`]: connected agents, their command channels and report broadcasts.
//! - [`link`]: the `AgentLink` gRPC service (thin adapter over the registry).
//! - [`control`]: the `Control` gRPC service karl-ctl calls (thin adapter).
//! - [`server`]: serving both services with auth, timeouts and keepalive as tower layers.
//! - [`records`]: session, turn and audit records, every state an enum (plain data).
//! - [`summary`]: a session in figures, frozen when it ends (pure).
//! - [`wire`]: records ↔ proto, the one border between the two.
//! - [`store`]: durable state in sled — sessions, turns, audit log, pane locks, migrations.
//! - [`engine`]: driven sessions — a sans-IO machine per session, the task that runs
//!   it, and the operator facade.
//! - [`context`]: the context stack (pure; lives in `karl_common::context`, shared with karl-ctl's
//!   offline `context` command).
//! - [`model`]: the OpenAI-compatible model client with retries and fallback endpoints.
//! - [`metrics`]: Prometheus counters and gauges (rendered, not served).
//! - [`export`]: the store as training data — SFT examples and preference pairs.
//! - [`notify`]: notifications — what a human should hear of, and the sinks that tell them.
//! - [`events`]: turn and session events on NATS, fire-and-forget.
//! - [`web`]: the dashboard and `/metrics` over HTTP (axum), its pages embedded.

pub mod app;
pub mod config;
pub use karl_common::context;
pub mod control;
pub mod engine;
pub mod error;
pub mod events;
pub mod export;
pub mod link;
pub mod metrics;
pub mod model;
pub mod notify;
pub mod records;
pub mod registry;
pub mod server;
pub mod store;
pub mod summary;
pub mod web;
pub mod wire;
