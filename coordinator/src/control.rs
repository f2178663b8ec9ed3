//! The `Control` service karl-ctl talks to: a thin adapter from gRPC messages to the
//! [`Registry`] (agents, panes, captures, manual sends) and the session [`Engine`]
//! (drive, sessions, follow, pause/resume/stop, approve/deny, context).
//!
//! Requests become domain values through [`crate::wire`] (`TryFrom`), replies leave through
//! it too, and every error leaves through `From<CoordError> for Status` in
//! [`crate::error`].

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use karl_common::pb;
use karl_common::target::PaneTarget;
use tokio::sync::broadcast::error::RecvError;
use tonic::{Request, Response, Status};

use crate::engine::{Command, Drive, Engine};
use crate::export::Chunk;
use crate::notify::Notifier;
use crate::registry::{AgentReport, Registry, AGENT_CALL_TIMEOUT};
use crate::server::Closing;
use crate::wire;

pub struct ControlService {
    registry: Arc<Registry>,
    engine: Arc<Engine>,
    notifier: Arc<Notifier>,
    closing: Closing,
}

impl ControlService {
    pub fn new(
        registry: Arc<Registry>,
        engine: Arc<Engine>,
        notifier: Arc<Notifier>,
        closing: Closing,
    ) -> Self {
        ControlService {
            registry,
            engine,
            notifier,
            closing,
        }
    }
}

fn parse_target(target: &str) -> Result<PaneTarget, Status> {
    PaneTarget::parse(target).map_err(|e| Status::invalid_argument(e.to_string()))
}

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl pb::control_server::Control for ControlService {
    async fn list_agents(
        &self,
        _req: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsReply>, Status> {
        Ok(Response::new(pb::ListAgentsReply {
            agents: self.registry.list(),
        }))
    }

    async fn list_panes(
        &self,
        req: Request<pb::ListPanesRequest>,
    ) -> Result<Response<pb::ListPanesReply>, Status> {
        let machine = req.into_inner().machine;
        let result = self
            .registry
            .call(
                &machine,
                pb::agent_command::Kind::ListPanes(pb::ListPanes {}),
                AGENT_CALL_TIMEOUT,
            )
            .await?;
        let panes = match result.detail {
            Some(pb::command_result::Detail::Panes(list)) => list.panes,
            _ => Vec::new(),
        };
        Ok(Response::new(pb::ListPanesReply { panes }))
    }

    async fn capture_pane(
        &self,
        req: Request<pb::CapturePaneRequest>,
    ) -> Result<Response<pb::PaneSnapshot>, Status> {
        let req = req.into_inner();
        let target = parse_target(&req.target)?;
        let snap = self
            .registry
            .capture(
                &req.machine,
                pb::Capture {
                    target: target.to_string(),
                    ansi: req.ansi,
                    history_lines: req.history_lines,
                },
            )
            .await?;
        Ok(Response::new(snap))
    }

    type WatchPaneStream = Boxed<pb::PaneSnapshot>;

    async fn watch_pane(
        &self,
        req: Request<pb::WatchPaneRequest>,
    ) -> Result<Response<Self::WatchPaneStream>, Status> {
        let req = req.into_inner();
        let target = parse_target(&req.target)?;
        // Resolve to a %id first, so the stream can filter snapshots by pane id.
        let first = self
            .registry
            .capture(
                &req.machine,
                pb::Capture {
                    target: target.to_string(),
                    ansi: false,
                    history_lines: 0,
                },
            )
            .await?;
        let pane_id = first
            .pane
            .as_ref()
            .map(|p| p.pane_id.clone())
            .unwrap_or_default();
        let mut reports = self.registry.subscribe(&req.machine);
        self.registry
            .call(
                &req.machine,
                pb::agent_command::Kind::Watch(pb::Watch {
                    target: pane_id.clone(),
                    settle_ms: req.settle_ms,
                    safety_secs: 0,
                    ansi: false,
                }),
                AGENT_CALL_TIMEOUT,
            )
            .await?;
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let _ = tx.send(Ok(first)).await;
        tokio::spawn(async move {
            loop {
                let item = match reports.recv().await {
                    Ok(AgentReport::Snapshot(s)) => {
                        if s.pane.as_ref().is_some_and(|p| p.pane_id == pane_id) {
                            Ok((*s).clone())
                        } else {
                            continue;
                        }
                    }
                    Ok(AgentReport::PaneEvent(ev))
                        if ev.pane_id == pane_id && ev.kind == pb::PaneEventKind::Closed as i32 =>
                    {
                        Err(Status::not_found(format!("pane {pane_id} closed")))
                    }
                    Ok(_) => continue,
                    Err(RecvError::Lagged(n)) => {
                        tracing::debug!(target: "coord.control", skipped = n, "watch-pane reader lagged");
                        continue;
                    }
                    Err(RecvError::Closed) => break,
                };
                let end = item.is_err();
                if tx.send(item).await.is_err() || end {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(self.closing.end_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))))
    }

    async fn send_text(
        &self,
        req: Request<pb::SendTextRequest>,
    ) -> Result<Response<pb::SendTextReply>, Status> {
        let req = req.into_inner();
        let target = parse_target(&req.target)?;
        let (result, gate_reasons) = self
            .engine
            .manual_send(&req.machine, &target, &req.text, req.force)
            .await?;
        Ok(Response::new(pb::SendTextReply {
            result: Some(result),
            gate_reasons,
        }))
    }

    async fn drive(
        &self,
        req: Request<pb::DriveRequest>,
    ) -> Result<Response<pb::DriveReply>, Status> {
        let drive = Drive::try_from(req.into_inner())?;
        let session = self.engine.drive(drive).await?;
        Ok(Response::new(pb::DriveReply {
            session: Some(wire::summary(&session)),
        }))
    }

    async fn list_sessions(
        &self,
        req: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsReply>, Status> {
        let sessions = self.engine.list(req.into_inner().all)?;
        Ok(Response::new(pb::ListSessionsReply {
            sessions: sessions.iter().map(wire::summary).collect(),
        }))
    }

    async fn show_session(
        &self,
        req: Request<pb::SessionRef>,
    ) -> Result<Response<pb::SessionDetail>, Status> {
        let (rec, turns) = self.engine.show(&req.into_inner().id)?;
        Ok(Response::new(wire::detail(&rec, &turns)))
    }

    type FollowSessionStream = Boxed<pb::SessionUpdate>;

    async fn follow_session(
        &self,
        req: Request<pb::FollowRequest>,
    ) -> Result<Response<Self::FollowSessionStream>, Status> {
        let req = req.into_inner();
        let stream = self.engine.follow(&req.id, req.from_start)?;
        Ok(Response::new(Box::pin(self.closing.end_stream(stream))))
    }

    async fn set_session_state(
        &self,
        req: Request<pb::SetSessionStateRequest>,
    ) -> Result<Response<pb::SessionSummary>, Status> {
        let req = req.into_inner();
        let command = wire::action(req.action)?;
        let rec = self.engine.command(&req.id, command).await?;
        Ok(Response::new(wire::summary(&rec)))
    }

    async fn decide(
        &self,
        req: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::SessionSummary>, Status> {
        let req = req.into_inner();
        let rec = self
            .engine
            .command(&req.id, Command::Decide(req.approve))
            .await?;
        Ok(Response::new(wire::summary(&rec)))
    }

    async fn audit(
        &self,
        req: Request<pb::AuditRequest>,
    ) -> Result<Response<pb::AuditReply>, Status> {
        let req = req.into_inner();
        let entries = self.engine.audit_log(&req.session, req.limit)?;
        Ok(Response::new(pb::AuditReply {
            entries: entries.into_iter().map(wire::audit).collect(),
        }))
    }

    async fn notify_test(
        &self,
        req: Request<pb::NotifyTestRequest>,
    ) -> Result<Response<pb::NotifyTestReply>, Status> {
        let req = req.into_inner();
        let results = self.notifier.test(&req.sink, &req.machine).await?;
        Ok(Response::new(pb::NotifyTestReply { results }))
    }

    type ExportStream = Boxed<pb::ExportChunk>;

    async fn export(
        &self,
        req: Request<pb::ExportRequest>,
    ) -> Result<Response<Self::ExportStream>, Status> {
        let filter = crate::export::ExportFilter::try_from(req.into_inner())?;
        let chunks = tokio_stream::wrappers::ReceiverStream::new(self.engine.export(filter));
        let stream = futures::StreamExt::map(chunks, |c| match c {
            Chunk::Lines(lines) => Ok(pb::ExportChunk {
                lines: lines.into_iter().map(wire::export_line).collect(),
                summary: None,
            }),
            Chunk::Done(s) => Ok(pb::ExportChunk {
                lines: Vec::new(),
                summary: Some(wire::export_summary(s)),
            }),
            Chunk::Failed(e) => Err(Status::internal(format!("the export failed: {e}"))),
        });
        Ok(Response::new(Box::pin(self.closing.end_stream(stream))))
    }

    async fn session_context(
        &self,
        req: Request<pb::SessionRef>,
    ) -> Result<Response<pb::ContextReply>, Status> {
        let ctx = self.engine.context(&req.into_inner().id)?;
        Ok(Response::new(wire::context_reply(&ctx)))
    }
}
