//! [`TurnState`]: the facts folded into what the engine asks of them — is a turn in
//! flight, what prompt opened it, which tool call waits for its result, what the
//! assistant said and which tools it used since the last prompt.

use super::{CliStatus, Fact, Stamped, TurnEnd};

/// A tool call as the CLI wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The tool's JSON input.
    pub input: String,
}

impl ToolCall {
    /// The command a shell tool runs (`Bash`'s `command`), else the input as written.
    pub fn command(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.input)
            .ok()
            .and_then(|v| {
                ["command", "cmd"]
                    .iter()
                    .find_map(|k| v.get(k).and_then(|c| c.as_str()).map(str::to_string))
            })
            .unwrap_or_else(|| self.input.clone())
    }
}

/// One tool call of the current turn and how it went (`None`: no result yet).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolUse {
    pub call: ToolCall,
    pub ok: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnState {
    /// A prompt opened a turn the CLI has not closed.
    pub in_flight: bool,
    /// The prompt that opened the current (or last) turn.
    pub prompt: Option<String>,
    /// When that prompt was written (Unix ms).
    pub prompt_ms: u64,
    /// How the last turn ended.
    pub last_end: Option<TurnEnd>,
    /// When it ended (Unix ms).
    pub ended_ms: u64,
    /// The assistant's text since the prompt (last few blocks, newest last).
    pub response: Vec<String>,
    /// Tool calls since the prompt.
    pub tools: Vec<ToolUse>,
    /// The last API error message of this turn.
    pub api_error: Option<String>,
    /// The live session file's status, when one is read.
    pub status: Option<CliStatus>,
    /// Facts applied, for "has anything been read".
    pub facts: u64,
}

/// Assistant text blocks kept per turn.
const KEEP_TEXT: usize = 8;

impl TurnState {
    pub fn apply(&mut self, s: &Stamped) {
        self.facts += 1;
        match &s.fact {
            Fact::Prompt { text } => {
                self.in_flight = true;
                self.prompt = Some(text.clone());
                self.prompt_ms = s.written_ms;
                self.response.clear();
                self.tools.clear();
                self.api_error = None;
            }
            Fact::AssistantText { text } => {
                self.response.push(text.clone());
                if self.response.len() > KEEP_TEXT {
                    self.response.remove(0);
                }
            }
            Fact::ToolCall { id, name, input } => self.tools.push(ToolUse {
                call: ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                },
                ok: None,
            }),
            Fact::ToolResult { id, ok, .. } => {
                if let Some(t) = self.tools.iter_mut().rev().find(|t| &t.call.id == id) {
                    t.ok = Some(*ok);
                }
            }
            Fact::TurnEnded { how } => {
                // 2.1.197 writes turn_duration after an API error line that already ended
                // the turn: keep the first ending.
                if self.in_flight {
                    self.in_flight = false;
                    self.last_end = Some(*how);
                    self.ended_ms = s.written_ms;
                }
            }
            Fact::ApiError { message, .. } => self.api_error = Some(message.clone()),
            Fact::Compacted => {}
            Fact::Status { status } => self.status = Some(*status),
        }
    }

    /// The tool call still waiting for its result (the one a permission prompt asks about).
    pub fn pending_tool(&self) -> Option<&ToolCall> {
        if !self.in_flight {
            return None;
        }
        self.tools
            .iter()
            .rev()
            .find(|t| t.ok.is_none())
            .map(|t| &t.call)
    }

    /// What the evidence says about "is the agent working?": `Some(true)` busy,
    /// `Some(false)` done, `None` when nothing has been read. The transcript decides when
    /// it has been read; the session file's status otherwise.
    pub fn busy(&self) -> Option<bool> {
        if self.facts == 0 {
            return None;
        }
        if self.prompt.is_some() || self.last_end.is_some() {
            return Some(self.in_flight);
        }
        match self.status? {
            CliStatus::Busy | CliStatus::Waiting => Some(true),
            CliStatus::Idle => Some(false),
            CliStatus::Unknown => None,
        }
    }

    /// Facts that rebuild this state for a reader that starts now (the agent's first
    /// message after it attaches to a file others wrote before).
    pub fn replay(&self) -> Vec<Fact> {
        let mut out = Vec::new();
        if let Some(status) = self.status {
            out.push(Fact::Status { status });
        }
        if let Some(text) = &self.prompt {
            out.push(Fact::Prompt { text: text.clone() });
            for t in &self.tools {
                out.push(Fact::ToolCall {
                    id: t.call.id.clone(),
                    name: t.call.name.clone(),
                    input: t.call.input.clone(),
                });
                if let Some(ok) = t.ok {
                    out.push(Fact::ToolResult {
                        id: t.call.id.clone(),
                        ok,
                        output: String::new(),
                    });
                }
            }
            if !self.in_flight {
                out.push(Fact::TurnEnded {
                    how: self.last_end.unwrap_or(TurnEnd::Completed),
                });
            }
        }
        out
    }
}
