//! [`ScriptedModel`]: a [`ModelClient`] that answers from a list, for engine tests that
//! drive a session without a network. It records every request it gets.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{ChatReply, ChatRequest, Health, ModelClient, ModelError, ModelFuture};

/// The endpoint name scripted replies carry.
pub const SCRIPTED_ENDPOINT: &str = "scripted";

/// A model that replies from a script, then reports itself unreachable.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<Result<String, ModelError>>>,
    requests: Mutex<Vec<ChatRequest>>,
    down: bool,
}

impl ScriptedModel {
    pub fn new(replies: impl IntoIterator<Item = Result<String, ModelError>>) -> Self {
        ScriptedModel {
            replies: Mutex::new(replies.into_iter().collect()),
            ..ScriptedModel::default()
        }
    }

    /// A script of successful replies.
    pub fn texts<S: Into<String>>(texts: impl IntoIterator<Item = S>) -> Self {
        Self::new(texts.into_iter().map(|t| Ok(t.into())))
    }

    /// A model that is down: health checks and calls fail as unreachable.
    pub fn down() -> Self {
        ScriptedModel {
            down: true,
            ..ScriptedModel::default()
        }
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Result<String, ModelError>) {
        self.replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(reply);
    }

    /// Requests received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replies not yet given.
    pub fn remaining(&self) -> usize {
        self.replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn unreachable(detail: &str) -> ModelError {
        ModelError::Unreachable {
            endpoint: SCRIPTED_ENDPOINT.into(),
            detail: detail.into(),
        }
    }

    fn next_reply(&self, request: &ChatRequest) -> Result<ChatReply, ModelError> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        if self.down {
            return Err(Self::unreachable("scripted model is down"));
        }
        let next = self
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        match next {
            Some(Ok(text)) => Ok(ChatReply {
                text,
                prompt_tokens: None,
                cached_tokens: None,
                completion_tokens: None,
                latency: Duration::ZERO,
                endpoint: SCRIPTED_ENDPOINT.into(),
                model: None,
                finish_reason: Some("stop".into()),
                attempts: 1,
            }),
            Some(Err(e)) => Err(e),
            None => Err(Self::unreachable("script exhausted")),
        }
    }
}

impl ModelClient for ScriptedModel {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ModelFuture<'a, ChatReply> {
        let reply = self.next_reply(request);
        Box::pin(async move { reply })
    }

    fn health(&self) -> ModelFuture<'_, Health> {
        let health = if self.down {
            Err(Self::unreachable("scripted model is down"))
        } else {
            Ok(Health {
                endpoint: SCRIPTED_ENDPOINT.into(),
                models: vec!["scripted".into()],
                latency: Duration::ZERO,
            })
        };
        Box::pin(async move { health })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::ChatMessage;

    #[tokio::test]
    async fn replies_in_order_then_unreachable() {
        let m = ScriptedModel::new([
            Ok("one".to_string()),
            Err(ModelError::Empty {
                endpoint: "x".into(),
            }),
        ]);
        m.push(Ok("two".into()));
        let req = ChatRequest::new(vec![ChatMessage::user("q")]);
        let client: &dyn ModelClient = &m;
        assert_eq!(client.complete(&req).await.unwrap().text, "one");
        assert_eq!(client.complete(&req).await.unwrap_err().kind(), "empty");
        assert_eq!(client.complete(&req).await.unwrap().text, "two");
        assert_eq!(
            client.complete(&req).await.unwrap_err().kind(),
            "unreachable"
        );
        assert_eq!(m.requests().len(), 4);
        assert!(client.health().await.is_ok());
        assert!(ScriptedModel::down().health().await.is_err());
    }
}
