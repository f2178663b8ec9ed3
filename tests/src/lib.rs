//! KARL's end-to-end test support: helpers and test binaries.
//!
//! Layout:
//! - [`anthropic_stub`]: a scripted Anthropic-Messages-compatible server, so the real
//!   Claude Code CLI runs offline in the compatibility tests.
//! - [`browser`]: headless Chromium over the DevTools protocol, for the dashboard's tests.
//! - [`compat`]: what the two compatibility tiers share (pinned releases in the cache,
//!   the pane's private environment, waiting on panes and sessions).
//! - [`harness`]: real processes for end-to-end tests (private tmux servers, the
//!   coordinator and agents on loopback, karl-ctl runs, polling with deadlines).
//! - [`http_stub`]: the accept loop, response and event-stream helpers the stub servers
//!   share.
//! - [`nats`]: a real `nats-server` on loopback, and a subscriber speaking NATS's text
//!   protocol.
//! - [`receiver`]: a loopback HTTP receiver that records what notification sinks send.
//! - [`responses_stub`]: a scripted OpenAI-Responses-compatible server, so the real Codex
//!   CLI runs offline in the compatibility tests.
//! - [`standin`]: `karl-standin`, a stand-in coding agent whose screens follow Claude
//!   Code's, driven by a script file; plus its tmux test harness.
//! - [`stats`]: latency percentiles for the benchmarks (an HDR histogram).
//! - [`stub_model`]: `karl-stub-model`, a scripted OpenAI-compatible model server.
//! - [`tmux_server`]: the private, self-cleaning tmux server every real-tmux test and
//!   benchmark runs on (the agent's own tests included).
//! - [`twin_eval`]: the twin evaluation — recorded session timelines replayed through
//!   the previous driver's raw prompting and through KARL, against a real model
//!   (`karl-bench`).
//! - [`twin`]: the test twin, a real small model served on loopback by
//!   `tests/twin/server.mjs` (fetched by `scripts/fetch-model.sh`).

pub mod anthropic_stub;
pub mod browser;
pub mod compat;
pub mod harness;
pub mod http_stub;
pub mod nats;
pub mod receiver;
pub mod responses_stub;
pub mod standin;
pub mod stats;
pub mod stub_model;
pub mod tmux_server;
pub mod twin;
pub mod twin_eval;
