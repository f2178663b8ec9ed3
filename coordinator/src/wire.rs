//! The one border between KARL's records and `proto/karl.proto`: domain → wire for
//! replies, and wire → domain with `TryFrom` for requests (a bad value is an
//! `InvalidArgument` naming the field). The gRPC services call these; the engine never
//! sees a wire type of the Control service.

use karl_common::detect::PaneState;
use karl_common::evidence::wire as evidence;
use karl_common::pb;
use karl_common::target::PaneTarget;

use crate::context::Context;
use crate::engine::{Command, Drive, DriveSpec, Update};
use crate::error::CoordError;
use crate::export::{ExportFilter, Kind, Line, MinOutcome, Summary};
use crate::records::{
    AuditEntry, AuditKind, InjectStatus, PermissionPolicy, SessionRecord, Status, TurnOutcome,
    TurnRecord, TurnSource,
};

pub fn status(s: Status) -> pb::SessionStatus {
    match s {
        Status::Running => pb::SessionStatus::Running,
        Status::Paused => pb::SessionStatus::Paused,
        Status::Waiting => pb::SessionStatus::Waiting,
        Status::Escalated => pb::SessionStatus::Escalated,
        Status::Done => pb::SessionStatus::Done,
        Status::Stopped => pb::SessionStatus::Stopped,
        Status::Failed => pb::SessionStatus::Failed,
    }
}

pub fn pane_state(s: PaneState) -> pb::PaneState {
    match s {
        PaneState::Working => pb::PaneState::Working,
        PaneState::Idle => pb::PaneState::Idle,
        PaneState::Permission => pb::PaneState::Permission,
        PaneState::Dialog => pb::PaneState::Dialog,
        PaneState::Draft => pb::PaneState::Draft,
        PaneState::Exited => pb::PaneState::Exited,
        PaneState::Limited => pb::PaneState::Limited,
        PaneState::Unknown => pb::PaneState::Unknown,
    }
}

fn source(s: TurnSource) -> pb::TurnSource {
    match s {
        TurnSource::Model => pb::TurnSource::Model,
        TurnSource::Regenerated => pb::TurnSource::Regenerated,
        TurnSource::Plan => pb::TurnSource::Plan,
        TurnSource::Escape => pb::TurnSource::Escape,
        TurnSource::Manual => pb::TurnSource::Manual,
    }
}

fn outcome(o: TurnOutcome) -> pb::TurnOutcome {
    match o {
        TurnOutcome::Pending => pb::TurnOutcome::Pending,
        TurnOutcome::Progress => pb::TurnOutcome::Progress,
        TurnOutcome::Error => pb::TurnOutcome::Error,
        TurnOutcome::Blocked => pb::TurnOutcome::Blocked,
        TurnOutcome::Complete => pb::TurnOutcome::Complete,
    }
}

fn inject(i: InjectStatus) -> pb::InjectStatus {
    match i {
        InjectStatus::Pending => pb::InjectStatus::Pending,
        InjectStatus::DryRun => pb::InjectStatus::DryRun,
        InjectStatus::Submitted => pb::InjectStatus::Submitted,
        InjectStatus::SubmittedAfterRetry => pb::InjectStatus::SubmittedAfterRetry,
        InjectStatus::Refused => pb::InjectStatus::Refused,
        InjectStatus::Failed => pb::InjectStatus::Failed,
        InjectStatus::Unconfirmed => pb::InjectStatus::Unconfirmed,
    }
}

fn audit_kind(k: AuditKind) -> pb::AuditKind {
    match k {
        AuditKind::Session => pb::AuditKind::Session,
        AuditKind::Intent => pb::AuditKind::Intent,
        AuditKind::DryRun => pb::AuditKind::DryRun,
        AuditKind::Inject => pb::AuditKind::Inject,
        AuditKind::Refused => pb::AuditKind::Refused,
        AuditKind::Blocked => pb::AuditKind::Blocked,
        AuditKind::Forced => pb::AuditKind::Forced,
        AuditKind::Failed => pb::AuditKind::Failed,
        AuditKind::Permission => pb::AuditKind::Permission,
        AuditKind::Escalated => pb::AuditKind::Escalated,
        AuditKind::Enter => pb::AuditKind::Enter,
        AuditKind::Restart => pb::AuditKind::Restart,
        AuditKind::Evidence => pb::AuditKind::Evidence,
        AuditKind::Verify => pb::AuditKind::Verify,
    }
}

pub fn summary(r: &SessionRecord) -> pb::SessionSummary {
    pb::SessionSummary {
        id: r.id.clone(),
        machine: r.machine.clone(),
        target: r.target.clone(),
        pane_id: r.pane_id.clone(),
        project: r.project.clone(),
        goal: r.goal.clone(),
        status: status(r.status) as i32,
        turns: r.turns,
        max_turns: r.max_turns,
        dry_run: r.dry_run,
        last_state: pane_state(r.last_state) as i32,
        reason: r.reason.clone(),
        started_unix_ms: r.started_ms,
        updated_unix_ms: r.updated_ms,
        plan_only: r.plan_only,
        evidence: evidence::source_to_wire(r.evidence) as i32,
        cli_session: r.cli_session.clone(),
    }
}

pub fn turn(t: &TurnRecord) -> pb::TurnRecord {
    pb::TurnRecord {
        n: t.n,
        prompt: t.prompt.clone(),
        source: source(t.source) as i32,
        gate: t.gate.clone(),
        model_latency_ms: t.model_latency_ms,
        prompt_tokens: t.prompt_tokens,
        cached_tokens: t.cached_tokens,
        pane_hash: t.pane_hash.clone(),
        outcome: outcome(t.outcome) as i32,
        inject: inject(t.inject) as i32,
        inject_reason: t.reason.clone(),
        unix_ms: t.unix_ms,
        state: pane_state(t.state) as i32,
        confirmed_by: evidence::source_to_wire(t.confirmed_by) as i32,
        tools: t.tools.clone(),
        response: t.response.clone(),
        judged_by: evidence::source_to_wire(t.judged_by) as i32,
    }
}

pub fn detail(r: &SessionRecord, turns: &[TurnRecord]) -> pb::SessionDetail {
    let mut json = serde_json::to_value(r).unwrap_or_default();
    if let Some(o) = json.as_object_mut() {
        let summary = r.summary();
        o.insert("summary_line".into(), summary.line().into());
        o.insert("summary_lines".into(), summary.lines().into());
        o.insert(
            "summary".into(),
            serde_json::to_value(&summary).unwrap_or_default(),
        );
    }
    pb::SessionDetail {
        summary: Some(summary(r)),
        json: json.to_string(),
        turns: turns.iter().map(turn).collect(),
    }
}

pub fn session_update(u: &Update) -> pb::SessionUpdate {
    pb::SessionUpdate {
        session: Some(summary(&u.record)),
        turn: u.turn.as_ref().map(turn),
        event: u.event.clone(),
        ended: !u.record.status.is_live(),
    }
}

pub fn audit(a: AuditEntry) -> pb::AuditRecord {
    pb::AuditRecord {
        unix_ms: a.unix_ms,
        session: a.session,
        machine: a.machine,
        pane: a.pane,
        kind: audit_kind(a.kind) as i32,
        text: a.text,
        detail: a.detail,
    }
}

pub fn context_reply(ctx: &Context) -> pb::ContextReply {
    ctx.to_wire()
}

fn invalid(field: &str, value: i32, allowed: &str) -> CoordError {
    CoordError::InvalidArgument(format!(
        "{field} {value} is not one this coordinator knows ({allowed}); upgrade karl-coord or karl-ctl so both speak the same protocol"
    ))
}

impl TryFrom<pb::DriveRequest> for Drive {
    type Error = CoordError;

    fn try_from(req: pb::DriveRequest) -> Result<Self, CoordError> {
        let max_turns = (req.max_turns > 0).then_some(req.max_turns);
        if !req.resume_id.is_empty() {
            return Ok(Drive::Resume {
                id: req.resume_id,
                max_turns,
            });
        }
        let target = PaneTarget::parse(&req.target)?;
        if req.resume_latest {
            return Ok(Drive::ResumeLatest {
                machine: req.machine,
                target,
                max_turns,
            });
        }
        let permissions = match pb::PermissionPolicy::try_from(req.permissions) {
            Ok(pb::PermissionPolicy::Escalate) => PermissionPolicy::Escalate,
            Ok(pb::PermissionPolicy::ApproveSafe) => PermissionPolicy::ApproveSafe,
            Ok(pb::PermissionPolicy::Deny) => PermissionPolicy::Deny,
            Err(_) => {
                return Err(invalid(
                    "permissions",
                    req.permissions,
                    "escalate, approve-safe, deny",
                ))
            }
        };
        Ok(Drive::Start(DriveSpec {
            machine: req.machine,
            target,
            project: req.project.trim().to_string(),
            goal: req.goal.trim().to_string(),
            plan: req.plan,
            max_turns,
            dry_run: req.dry_run,
            auto_detect: req.auto_detect,
            permissions,
            verify: (!req.verify.trim().is_empty()).then(|| req.verify.trim().to_string()),
            launch: req.launch.trim().to_string(),
            path: (!req.path.is_empty()).then_some(req.path),
        }))
    }
}

impl TryFrom<pb::ExportRequest> for ExportFilter {
    type Error = CoordError;

    fn try_from(req: pb::ExportRequest) -> Result<Self, CoordError> {
        let min_outcome = MinOutcome::parse(req.min_outcome.trim()).ok_or_else(|| {
            CoordError::InvalidArgument(format!(
                "--min-outcome {:?} is not one of progress, complete",
                req.min_outcome
            ))
        })?;
        let split = if req.split == 0.0 {
            None
        } else if req.split > 0.0 && req.split < 1.0 {
            Some(req.split)
        } else {
            return Err(CoordError::InvalidArgument(format!(
                "--split {} is not a share of sessions for train between 0 and 1 (e.g. 0.9)",
                req.split
            )));
        };
        if req.until_ms != 0 && req.since_ms >= req.until_ms {
            return Err(CoordError::InvalidArgument(
                "--since is not before --until: nothing would be exported".into(),
            ));
        }
        if !req.sft && !req.pairs {
            return Err(CoordError::InvalidArgument(
                "nothing to export: ask for --sft FILE, --pairs FILE or both".into(),
            ));
        }
        Ok(ExportFilter {
            since_ms: req.since_ms,
            until_ms: req.until_ms,
            session: req.session.trim().to_string(),
            project: req.project.trim().to_string(),
            machine: req.machine.trim().to_string(),
            min_outcome,
            split,
            sft: req.sft,
            pairs: req.pairs,
        })
    }
}

pub fn export_line(l: Line) -> pb::ExportLine {
    pb::ExportLine {
        kind: match l.kind {
            Kind::Sft => pb::ExportKind::Sft,
            Kind::Pairs => pb::ExportKind::Pairs,
        } as i32,
        valid: l.valid,
        json: l.json,
    }
}

pub fn export_summary(s: Summary) -> pb::ExportSummary {
    pb::ExportSummary {
        sessions: s.sessions,
        turns: s.turns,
        sft_train: s.sft_train,
        sft_valid: s.sft_valid,
        pairs_train: s.pairs_train,
        pairs_valid: s.pairs_valid,
        sft_by_outcome: s.sft_by_outcome.into_iter().collect(),
        pairs_by_reason: s.pairs_by_reason.into_iter().collect(),
        skipped: s.skipped.into_iter().collect(),
        duplicates: s.duplicates,
        redactions: s.redactions,
        sft_tokens: s.sft_tokens,
    }
}

impl TryFrom<pb::SessionAction> for Command {
    type Error = CoordError;

    fn try_from(a: pb::SessionAction) -> Result<Self, CoordError> {
        match a {
            pb::SessionAction::Pause => Ok(Command::Pause),
            pb::SessionAction::Resume => Ok(Command::Resume),
            pb::SessionAction::Stop => Ok(Command::Stop),
            pb::SessionAction::Unspecified => {
                Err(invalid("action", a as i32, "pause, resume, stop"))
            }
        }
    }
}

/// The action of a `SetSessionState` request.
pub fn action(raw: i32) -> Result<Command, CoordError> {
    pb::SessionAction::try_from(raw)
        .map_err(|_| invalid("action", raw, "pause, resume, stop"))
        .and_then(Command::try_from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karl_common::pb::Label as _;

    #[test]
    fn requests_convert_and_bad_values_are_refused() {
        let req = pb::DriveRequest {
            machine: "mac2".into(),
            target: "agent-codex:1.1".into(),
            goal: "  add a health endpoint ".into(),
            permissions: pb::PermissionPolicy::ApproveSafe as i32,
            ..Default::default()
        };
        match Drive::try_from(req.clone()) {
            Ok(Drive::Start(spec)) => {
                assert_eq!(spec.goal, "add a health endpoint");
                assert_eq!(spec.permissions, PermissionPolicy::ApproveSafe);
                assert_eq!(spec.max_turns, None);
            }
            other => panic!("{other:?}"),
        }
        let bad = pb::DriveRequest {
            permissions: 9,
            ..req
        };
        let err = Drive::try_from(bad).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("permissions 9")));
        assert!(action(0).is_err());
        assert!(action(42).is_err());
        assert_eq!(
            action(pb::SessionAction::Stop as i32).ok(),
            Some(Command::Stop)
        );
    }

    #[test]
    fn labels_read_as_the_stored_names() {
        let t = TurnRecord {
            inject: InjectStatus::SubmittedAfterRetry,
            ..Default::default()
        };
        let w = turn(&t);
        assert_eq!(w.inject().label(), t.inject.as_str());
        for s in [Status::Running, Status::Escalated, Status::Failed] {
            assert_eq!(status(s).label(), s.as_str());
        }
    }
}
