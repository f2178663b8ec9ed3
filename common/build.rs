//! Compiles `proto/karl.proto` with the pure-Rust `protox` compiler, so a fresh
//! machine needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = "../proto";
    let proto = "../proto/karl.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], [proto_dir])?;
    // Every wire type serializes (karl-ctl's `--json`); enum fields as their operator
    // names (`running`, `dry-run`) rather than numbers.
    let mut build = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .type_attribute(".karl.v1", "#[derive(serde::Serialize)]");
    for (field, with) in [
        ("SessionSummary.status", "session_status"),
        ("SessionSummary.last_state", "pane_state"),
        ("TurnRecord.source", "turn_source"),
        ("TurnRecord.outcome", "turn_outcome"),
        ("TurnRecord.inject", "inject_status"),
        ("TurnRecord.state", "pane_state"),
        ("AuditRecord.kind", "audit_kind"),
        ("ChatMessage.role", "chat_role"),
        ("PaneSnapshot.reason", "snapshot_reason"),
        ("InjectResult.outcome", "inject_outcome"),
        ("PaneEvent.kind", "pane_event_kind"),
        ("PaneEvidence.source", "evidence_source"),
        ("PaneEvidence.link", "evidence_link"),
        ("EvidenceFact.kind", "fact_kind"),
        ("EvidenceFact.turn_end", "turn_end_kind"),
        ("EvidenceFact.cli_status", "cli_status_kind"),
        ("TurnRecord.confirmed_by", "evidence_source"),
        ("TurnRecord.judged_by", "evidence_source"),
        ("SessionSummary.evidence", "evidence_source"),
    ] {
        build = build.field_attribute(
            format!(".karl.v1.{field}"),
            format!("#[serde(serialize_with = \"crate::pb::labels::{with}\")]"),
        );
    }
    build.compile_fds(fds)?;
    Ok(())
}
