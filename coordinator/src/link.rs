//! The `AgentLink` service: the one bidirectional stream each agent keeps open.
//!
//! A thin adapter: it waits for the agent's Hello, registers it in the [`Registry`],
//! forwards every later event there and drains the registry's command channel into
//! the response stream. Authentication is a tower layer in [`crate::server`], not here.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use karl_common::pb;
use karl_common::target::valid_machine_name;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::registry::Registry;
use crate::server::Closing;

/// How long a new stream may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

pub struct AgentLinkService {
    registry: Arc<Registry>,
    closing: Closing,
}

impl AgentLinkService {
    pub fn new(registry: Arc<Registry>, closing: Closing) -> Self {
        AgentLinkService { registry, closing }
    }
}

type CommandStream = Pin<Box<dyn Stream<Item = Result<pb::AgentCommand, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_link_server::AgentLink for AgentLinkService {
    type JoinStream = CommandStream;

    async fn join(
        &self,
        request: Request<Streaming<pb::AgentEvent>>,
    ) -> Result<Response<Self::JoinStream>, Status> {
        let peer = request
            .remote_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(HELLO_TIMEOUT, inbound.next())
            .await
            .map_err(|_| Status::deadline_exceeded("no hello within 10s"))?;
        let hello = match first {
            Some(Ok(pb::AgentEvent {
                kind: Some(pb::agent_event::Kind::Hello(h)),
            })) => h,
            Some(Ok(_)) => return Err(Status::invalid_argument("the first message must be Hello")),
            Some(Err(status)) => return Err(status),
            None => return Err(Status::cancelled("stream closed before hello")),
        };
        if !valid_machine_name(&hello.machine) {
            return Err(Status::invalid_argument(format!(
                "invalid machine name {:?}: use letters, digits, '-', '_' or '.'",
                hello.machine
            )));
        }
        if hello.instance_id.is_empty() {
            return Err(Status::invalid_argument("hello carries no instance id"));
        }
        let (cmd_tx, cmd_rx) = mpsc::channel::<pb::AgentCommand>(64);
        let machine = hello.machine.clone();
        let agent = match self.registry.register(hello, peer.clone(), cmd_tx) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(target: "coord.link", %machine, %peer, error = %e, "refusing agent");
                return Err(e.into());
            }
        };
        tracing::info!(target: "coord.link", %machine, %peer, instance = agent.instance_id(), "agent connected");

        let registry = self.registry.clone();
        let mut inbound = self.closing.end_stream(inbound);
        tokio::spawn(async move {
            while let Some(item) = inbound.next().await {
                match item {
                    Ok(event) => registry.on_event(&agent, event),
                    Err(status) => {
                        tracing::info!(target: "coord.link", machine = %agent.machine, error = %status.message(), "agent stream error");
                        break;
                    }
                }
            }
            registry.unregister(&agent.machine, agent.generation);
            tracing::info!(target: "coord.link", machine = %agent.machine, "agent disconnected");
        });

        let out = self.closing.end_stream(ReceiverStream::new(cmd_rx).map(Ok));
        Ok(Response::new(Box::pin(out)))
    }
}
