//! karl-coord and karl-ctl: the coordinator that owns session state and decides what
//! to type, and the operator's command line.
//!
//! Layout:
//! - [`app`]: assembling a running coordinator (store, registry, engine, server, local agent).
//! - [`config`]: configuration files, env and flags, merged and validated (pure).
//! - [`error`]: [`CoordError`](error::CoordError) and its one mapping onto gRPC status codes.
//! - [`registry`]: connected agents, their command channels and report broadcasts.
//! - [`link`]: the `AgentLink` gRPC service (thin adapter over the registry).
//! - [`control`]: the `Control` gRPC service karl-ctl calls (thin adapter).
//! - [`server`]: serving both services with auth, timeouts and keepalive as tower layers.
//! - [`session`]: session and turn records and the per-snapshot decision (pure).
//! - [`store`]: durable state in sled — sessions, turns, audit log, pane locks.
//! - [`engine`]: driven sessions (one task each) and manual sends.
//! - [`context`]: the context stack — the bounded briefing the twin model gets each turn (pure).
//! - [`model`]: the OpenAI-compatible model client with retries and fallback endpoints.
//! - [`ctl`]: karl-ctl's commands, client and output formatting.

pub mod app;
pub mod config;
pub mod context;
pub mod control;
pub mod ctl;
pub mod engine;
pub mod error;
pub mod link;
pub mod model;
pub mod registry;
pub mod server;
pub mod session;
pub mod store;
