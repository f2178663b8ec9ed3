//! `karl-ctl send`: one prompt typed into a pane outside any session, through the gate
//! unless forced, and audited either way. Typed into a pane a session drives, it marks
//! that session's last turn as overridden by the operator.

use karl_common::gate::GateContext;
use karl_common::pb;
use karl_common::target::PaneTarget;
use karl_common::unix_ms;

use super::{inject_label, inject_status, lock, prompt, Command, Engine};
use crate::error::Result;
use crate::records::{AuditEntry, AuditKind};

impl Engine {
    /// `karl-ctl send`: one prompt typed into a pane outside any session, through the
    /// gate unless forced (a forced send is written to the audit log as such). Returns
    /// the agent's result and the gate's reasons.
    pub async fn manual_send(
        &self,
        machine: &str,
        target: &PaneTarget,
        text: &str,
        force: bool,
    ) -> Result<(pb::InjectResult, Vec<String>)> {
        // A pane driven by a session is judged against that session's fence.
        let target_s = target.to_string();
        let driving = lock(&self.handles).values().find_map(|h| {
            let v = h.view.borrow();
            let r = &v.record;
            (r.status.is_live()
                && r.machine == machine
                && (r.pane_id == target_s || r.target == target_s))
                .then(|| r.clone())
        });
        let rec = driving.unwrap_or_default();
        let others = (self.shared.deps.peers)(&rec.id);
        let verdict = self.shared.deps.gate.check(
            text,
            &GateContext {
                project: &rec.project,
                path: &rec.path,
                history: &rec.history,
                others: &others,
                ..Default::default()
            },
        );
        let reasons = prompt::verdict_lines(&verdict);
        let audit = |kind: AuditKind, detail: String| AuditEntry {
            unix_ms: unix_ms(),
            session: String::new(),
            machine: machine.to_string(),
            pane: target_s.clone(),
            kind,
            text: text.to_string(),
            detail,
        };
        let store = &self.shared.store;
        if !verdict.pass && !force {
            store
                .append_audit(&audit(AuditKind::Blocked, reasons.join("; ")))
                .await?;
            let refused = pb::InjectResult {
                outcome: pb::InjectOutcome::Refused as i32,
                reason: format!(
                    "blocked by the gate: {} (use --force to override; it is audited)",
                    reasons.join("; ")
                ),
                ..Default::default()
            };
            return Ok((refused, reasons));
        }
        if force {
            let why = format!("gate overridden: {}", reasons.join("; "));
            store.append_audit(&audit(AuditKind::Forced, why)).await?;
        }
        let inject = pb::Inject {
            target: target_s.clone(),
            text: text.to_string(),
            force,
            ..Default::default()
        };
        // Before typing: a turn the session commits while this send is under way is not
        // the one it overrides.
        let at_ms = unix_ms();
        let result = match self.shared.registry.inject(machine, inject).await {
            Ok(i) => i,
            Err(e) => {
                store
                    .append_audit(&audit(AuditKind::Failed, e.to_string()))
                    .await?;
                return Err(e);
            }
        };
        store
            .append_audit(&audit(AuditKind::Inject, inject_label(&result)))
            .await?;
        // The operator took the wheel: the session's last turn is no example to learn from.
        if !rec.id.is_empty() && inject_status(&result).0.landed() {
            if let Err(e) = self.command(&rec.id, Command::Override { at_ms }).await {
                tracing::debug!(target: "coord.engine", session = %rec.id, error = %e, "could not mark the last turn overridden");
            }
        }
        Ok((result, reasons))
    }
}
