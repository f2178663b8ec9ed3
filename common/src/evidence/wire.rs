//! Facts to and from their `karl.v1` messages: the agent sends [`to_wire`], the
//! coordinator reads [`from_wire`]. An unknown or malformed fact from a newer agent is
//! `None` and skipped, never a failed stream.

use crate::pb;

use super::{CliStatus, Fact, Source, Stamped, TurnEnd};

pub fn source_to_wire(s: Source) -> pb::EvidenceSource {
    match s {
        Source::Screen => pb::EvidenceSource::Screen,
        Source::Transcript => pb::EvidenceSource::Transcript,
        Source::SessionFile => pb::EvidenceSource::SessionFile,
        Source::Hook => pb::EvidenceSource::Hook,
    }
}

pub fn source_from_wire(v: i32) -> Source {
    match pb::EvidenceSource::try_from(v) {
        Ok(pb::EvidenceSource::Transcript) => Source::Transcript,
        Ok(pb::EvidenceSource::SessionFile) => Source::SessionFile,
        Ok(pb::EvidenceSource::Hook) => Source::Hook,
        _ => Source::Screen,
    }
}

pub fn to_wire(s: &Stamped) -> pb::EvidenceFact {
    let mut f = pb::EvidenceFact {
        written_unix_ms: s.written_ms,
        ..Default::default()
    };
    let kind = match &s.fact {
        Fact::Prompt { text } => {
            f.text = text.clone();
            pb::FactKind::Prompt
        }
        Fact::AssistantText { text } => {
            f.text = text.clone();
            pb::FactKind::AssistantText
        }
        Fact::ToolCall { id, name, input } => {
            f.tool_id = id.clone();
            f.tool_name = name.clone();
            f.tool_input = input.clone();
            pb::FactKind::ToolCall
        }
        Fact::ToolResult { id, ok, output } => {
            f.tool_id = id.clone();
            f.ok = *ok;
            f.text = output.clone();
            pb::FactKind::ToolResult
        }
        Fact::TurnEnded { how } => {
            f.turn_end = match how {
                TurnEnd::Completed => pb::TurnEndKind::Completed,
                TurnEnd::Interrupted => pb::TurnEndKind::Interrupted,
                TurnEnd::ApiError => pb::TurnEndKind::ApiError,
            } as i32;
            pb::FactKind::TurnEnded
        }
        Fact::ApiError {
            status,
            message,
            limit,
            resets,
        } => {
            f.status = u32::from(*status);
            f.text = message.clone();
            f.limit = *limit;
            f.resets = resets.clone().unwrap_or_default();
            pb::FactKind::ApiError
        }
        Fact::Compacted => pb::FactKind::Compacted,
        Fact::Status { status } => {
            f.cli_status = match status {
                CliStatus::Busy => pb::CliStatusKind::Busy,
                CliStatus::Idle => pb::CliStatusKind::Idle,
                CliStatus::Waiting => pb::CliStatusKind::Waiting,
                CliStatus::Unknown => pb::CliStatusKind::Unknown,
            } as i32;
            pb::FactKind::Status
        }
    };
    f.kind = kind as i32;
    f
}

pub fn from_wire(f: &pb::EvidenceFact) -> Option<Stamped> {
    let fact = match pb::FactKind::try_from(f.kind).ok()? {
        pb::FactKind::Unspecified => return None,
        pb::FactKind::Prompt => Fact::Prompt {
            text: f.text.clone(),
        },
        pb::FactKind::AssistantText => Fact::AssistantText {
            text: f.text.clone(),
        },
        pb::FactKind::ToolCall => Fact::ToolCall {
            id: f.tool_id.clone(),
            name: f.tool_name.clone(),
            input: f.tool_input.clone(),
        },
        pb::FactKind::ToolResult => Fact::ToolResult {
            id: f.tool_id.clone(),
            ok: f.ok,
            output: f.text.clone(),
        },
        pb::FactKind::TurnEnded => Fact::TurnEnded {
            how: match pb::TurnEndKind::try_from(f.turn_end).ok()? {
                pb::TurnEndKind::Completed => TurnEnd::Completed,
                pb::TurnEndKind::Interrupted => TurnEnd::Interrupted,
                pb::TurnEndKind::ApiError => TurnEnd::ApiError,
            },
        },
        pb::FactKind::ApiError => Fact::ApiError {
            status: u16::try_from(f.status).unwrap_or(0),
            message: f.text.clone(),
            limit: f.limit,
            resets: (!f.resets.is_empty()).then(|| f.resets.clone()),
        },
        pb::FactKind::Compacted => Fact::Compacted,
        pb::FactKind::Status => Fact::Status {
            status: match pb::CliStatusKind::try_from(f.cli_status).ok()? {
                pb::CliStatusKind::Busy => CliStatus::Busy,
                pb::CliStatusKind::Idle => CliStatus::Idle,
                pb::CliStatusKind::Waiting => CliStatus::Waiting,
                pb::CliStatusKind::Unknown => CliStatus::Unknown,
            },
        },
    };
    Some(Stamped {
        fact,
        written_ms: f.written_unix_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_survives_the_wire() {
        let facts = [
            Fact::Prompt { text: "p".into() },
            Fact::AssistantText { text: "a".into() },
            Fact::ToolCall {
                id: "t1".into(),
                name: "Bash".into(),
                input: r#"{"command":"ls"}"#.into(),
            },
            Fact::ToolResult {
                id: "t1".into(),
                ok: false,
                output: "boom".into(),
            },
            Fact::TurnEnded {
                how: TurnEnd::Interrupted,
            },
            Fact::ApiError {
                status: 429,
                message: "limit".into(),
                limit: true,
                resets: Some("3pm".into()),
            },
            Fact::Compacted,
            Fact::Status {
                status: CliStatus::Waiting,
            },
        ];
        for fact in facts {
            let s = Stamped {
                fact,
                written_ms: 42,
            };
            assert_eq!(from_wire(&to_wire(&s)).as_ref(), Some(&s));
        }
        assert_eq!(from_wire(&pb::EvidenceFact::default()), None);
        assert_eq!(
            from_wire(&pb::EvidenceFact {
                kind: 99,
                ..Default::default()
            }),
            None
        );
    }
}
