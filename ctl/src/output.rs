//! karl-ctl's output: aligned text tables for people, JSON for scripts, all written
//! through [`outln!`] so that a closed stdout ends the output instead of panicking.

use std::io::{ErrorKind, Write as _};

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use karl_common::gate::opinion::Opinion;
use karl_common::gate::Verdict;
use karl_common::pb;
use karl_common::pb::Label as _;
use serde_json::json;

/// stdout's reader went away (`karl-ctl sessions | head`): the output ends there, and
/// [`crate::run`] turns this into a quiet exit 0.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub struct StdoutClosed;

/// Writes one line to the locked stdout, like `println!`, but returns the failure instead of
/// panicking: [`StdoutClosed`] on a broken pipe, otherwise the write error.
pub fn write_line(line: std::fmt::Arguments) -> anyhow::Result<()> {
    writeln!(std::io::stdout().lock(), "{line}").map_err(|e| match e.kind() {
        ErrorKind::BrokenPipe => StdoutClosed.into(),
        _ => anyhow::Error::new(e).context("cannot write to stdout"),
    })
}

/// `println!` for karl-ctl's stdout; see [`write_line`]. Use it with `?`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default())
}

/// One object per line, so that a stream of them (`watch-pane --json`, `logs -f --json`)
/// is line-delimited.
fn print_json_line(v: &serde_json::Value) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string(v).unwrap_or_default())
}

/// Prints `rows` under `header` (none when empty) as borderless columns sized to their
/// content, two spaces apart, never wrapped; the columns in `right` are right-aligned.
/// Nothing at all when there is neither header nor row.
fn print_table(
    header: &[&str],
    right: &[usize],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> anyhow::Result<()> {
    let text = render_table(header, right, rows);
    if text.is_empty() {
        return Ok(());
    }
    outln!("{text}")
}

fn render_table(
    header: &[&str],
    right: &[usize],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    if !header.is_empty() {
        t.set_header(header.to_vec());
    }
    for row in rows {
        t.add_row(row);
    }
    for (i, column) in t.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if right.contains(&i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.trim_fmt()
}

/// "3s ago", "2m ago" from a unix-ms timestamp.
pub fn ago(unix_ms: u64) -> String {
    if unix_ms == 0 {
        return "never".into();
    }
    let secs = karl_common::unix_ms().saturating_sub(unix_ms) / 1000;
    match secs {
        0..=119 => format!("{secs}s ago"),
        120..=7199 => format!("{}m ago", secs / 60),
        _ => format!("{}h ago", secs / 3600),
    }
}

pub fn agents(agents: &[pb::AgentStatus], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&to_json(agents));
    }
    if agents.is_empty() {
        return outln!("no agents connected");
    }
    print_table(
        &[
            "MACHINE",
            "VERSION",
            "CONNECTED",
            "HEARTBEAT",
            "PANES",
            "HOST",
        ],
        &[4],
        agents.iter().map(|a| {
            vec![
                a.machine.clone(),
                a.version.clone(),
                ago(a.connected_unix_ms),
                ago(a.last_heartbeat_unix_ms),
                a.pane_count.to_string(),
                a.hostname.clone(),
            ]
        }),
    )
}

fn pane_json(p: &pb::PaneInfo) -> serde_json::Value {
    json!({
        "target": format!("{}:{}.{}", p.session, p.window, p.pane),
        "pane_id": p.pane_id, "session": p.session, "window": p.window, "pane": p.pane,
        "current_command": p.current_command, "title": p.title, "width": p.width,
        "height": p.height, "cwd": p.current_path, "pid": p.pid, "in_mode": p.in_mode, "dead": p.dead,
    })
}

pub fn panes(panes: &[pb::PaneInfo], json: bool) -> anyhow::Result<()> {
    if json {
        let v: Vec<_> = panes.iter().map(pane_json).collect();
        return print_json(&json!(v));
    }
    if panes.is_empty() {
        return outln!("no panes (is a tmux server running for that agent's user and socket?)");
    }
    print_table(
        &["TARGET", "ID", "COMMAND", "SIZE", "TITLE", "CWD"],
        &[],
        panes.iter().map(|p| {
            vec![
                format!("{}:{}.{}", p.session, p.window, p.pane),
                p.pane_id.clone(),
                p.current_command.clone(),
                format!("{}x{}", p.width, p.height),
                p.title.chars().take(24).collect(),
                p.current_path.clone(),
            ]
        }),
    )
}

pub fn snapshot(s: &pb::PaneSnapshot, json: bool, ansi: bool) -> anyhow::Result<()> {
    if json {
        let reason = pb::SnapshotReason::try_from(s.reason)
            .map(|r| {
                r.as_str_name()
                    .trim_start_matches("SNAPSHOT_REASON_")
                    .to_lowercase()
            })
            .unwrap_or_default();
        let v = json!({
            "pane": s.pane.as_ref().map(pane_json),
            "text": s.text, "ansi": s.ansi, "cursor_x": s.cursor_x, "cursor_y": s.cursor_y,
            "stable_hash": s.stable_hash, "new_lines": s.new_lines, "novelty": s.novelty,
            "reason": reason, "captured_unix_ms": s.captured_unix_ms, "seq": s.seq,
        });
        return print_json_line(&v);
    }
    if ansi && !s.ansi.is_empty() {
        outln!("{}", s.ansi)
    } else {
        outln!("{}", s.text)
    }
}

/// Prints the send outcome; returns whether the text was submitted.
pub fn send_result(r: &pb::SendTextReply, json: bool) -> anyhow::Result<bool> {
    let res = r.result.clone().unwrap_or_default();
    let outcome = res.outcome();
    let ok = matches!(
        outcome,
        pb::InjectOutcome::Submitted | pb::InjectOutcome::SubmittedAfterRetry
    );
    let name = outcome
        .as_str_name()
        .trim_start_matches("INJECT_OUTCOME_")
        .to_lowercase();
    if json {
        print_json(&json!({
            "outcome": name, "reason": res.reason, "enter_retries": res.enter_retries,
            "pane_id": res.pane_id, "elapsed_ms": res.elapsed_ms, "gate_reasons": r.gate_reasons,
        }))?;
    } else if ok {
        outln!(
            "{name} to {} in {} ms ({} Enter retries)",
            res.pane_id,
            res.elapsed_ms,
            res.enter_retries
        )?;
    } else {
        eprintln!("not sent ({name}): {}", res.reason);
    }
    Ok(ok)
}

/// The gate's verdict, and the second opinion when one was asked for.
pub fn verdict(v: &Verdict, opinion: Option<&Opinion>, json: bool) -> anyhow::Result<()> {
    let said = opinion.map(|o| match o {
        Opinion::Safe => "not destructive".to_string(),
        Opinion::Destructive(why) => why.clone(),
    });
    if json {
        let mut value = serde_json::to_value(v).unwrap_or_default();
        if let (Some(said), Some(map)) = (said, value.as_object_mut()) {
            map.insert("second_opinion".into(), said.into());
        }
        return print_json(&value);
    }
    if v.pass {
        outln!("pass")?;
        if let Some(doubt) = &v.doubt {
            outln!("  in doubt: {doubt}")?;
            match said {
                Some(s) => outln!("  second opinion: {s}")?,
                None => outln!("  (no second opinion: pass --model-url to ask a model)")?,
            }
        }
    } else {
        outln!("block ({:?})", v.action)?;
        for r in &v.reasons {
            outln!("  {:?}: {}", r.rule, r.detail)?;
        }
    }
    Ok(())
}

/// A session's status as operators read it (`running`, `escalated`, …).
pub fn status(s: &pb::SessionSummary) -> String {
    s.status().label()
}

/// `submitted`, `refused: the pane is busy`, …
fn inject(t: &pb::TurnRecord) -> String {
    let status = t.inject().label();
    if t.inject_reason.is_empty() {
        status
    } else {
        format!("{status}: {}", t.inject_reason)
    }
}

/// Any wire type as JSON (serde derives on the generated types; enums by name).
fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}

pub fn session_started(s: &pb::SessionSummary, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json_line(&to_json(s));
    }
    outln!("{}", s.id)?;
    let mut notes = Vec::new();
    if s.dry_run {
        notes.push("dry run: nothing will be typed".to_string());
    }
    if s.plan_only {
        notes.push("plan-only".to_string());
    }
    if !s.reason.is_empty() {
        notes.push(s.reason.clone());
    }
    if !notes.is_empty() {
        eprintln!("  {}", notes.join("; "));
    }
    Ok(())
}

/// One line for a session (pause/resume/stop/approve/deny replies).
pub fn session_line(s: &pb::SessionSummary, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json_line(&to_json(s));
    }
    outln!("{} {} — {}", s.id, status(s), s.reason)
}

pub fn sessions(list: &[pb::SessionSummary], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&to_json(list));
    }
    if list.is_empty() {
        return outln!("no sessions");
    }
    print_table(
        &["ID", "STATUS", "TURNS", "PANE", "PROJECT", "REASON"],
        &[2],
        list.iter().map(|s| {
            vec![
                s.id.clone(),
                status(s),
                format!("{}/{}", s.turns, s.max_turns),
                s.last_state().label(),
                s.project.clone(),
                s.reason.clone(),
            ]
        }),
    )
}

pub fn turn(t: &pb::TurnRecord, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json_line(&to_json(t));
    }
    outln!(
        "turn {:>3} [{}] {} → {} ({}; {} ms model)\n  {}",
        t.n,
        t.state().label(),
        t.source().label(),
        inject(t),
        t.outcome().label(),
        t.model_latency_ms,
        t.prompt.replace('\n', "\n  ")
    )?;
    for g in &t.gate {
        outln!("    gate: {g}")?;
    }
    // Which evidence decided: the agent CLI's transcript, or the screen.
    if t.confirmed_by() != pb::EvidenceSource::Screen || t.judged_by() != pb::EvidenceSource::Screen
    {
        outln!(
            "    evidence: landed per {}, judged on {}",
            t.confirmed_by().label(),
            t.judged_by().label()
        )?;
    }
    for tool in &t.tools {
        outln!("    tool: {tool}")?;
    }
    if !t.response.is_empty() {
        outln!("    agent: {}", t.response.replace('\n', "\n           "))?;
    }
    Ok(())
}

pub fn update(u: &pb::SessionUpdate, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json_line(&to_json(u));
    }
    match &u.turn {
        Some(t)
            if t.outcome() == pb::TurnOutcome::Pending
                || t.inject() == pb::InjectStatus::DryRun =>
        {
            turn(t, false)
        }
        _ if u.ended => outln!("session ended — {}", u.event),
        _ => outln!("  · {}", u.event),
    }
}

pub fn show(d: &pb::SessionDetail, json: bool) -> anyhow::Result<()> {
    let rec: serde_json::Value = serde_json::from_str(&d.json).unwrap_or_default();
    if json {
        let v = json!({
            "session": to_json(&d.summary),
            "record": rec,
            "turns": to_json(&d.turns),
        });
        return print_json(&v);
    }
    let s = d.summary.clone().unwrap_or_default();
    outln!("session  {}", s.id)?;
    outln!("pane     {} {} ({})", s.machine, s.target, s.pane_id)?;
    outln!("project  {}", s.project)?;
    outln!("goal     {}", s.goal)?;
    outln!("status   {} — {}", status(&s), s.reason)?;
    outln!(
        "turns    {}/{}{}{}",
        s.turns,
        s.max_turns,
        if s.dry_run { " (dry run)" } else { "" },
        if s.plan_only { " (plan-only)" } else { "" }
    )?;
    match s.evidence() {
        pb::EvidenceSource::Screen => outln!("evidence screen (no agent transcript followed)")?,
        src => outln!(
            "evidence {} {} (CLI session {}); {} prompts confirmed, {} disagreements with the screen",
            src.label(),
            rec["transcript"].as_str().unwrap_or(""),
            s.cli_session,
            rec["confirmed"].as_u64().unwrap_or(0),
            rec["disagreements"].as_u64().unwrap_or(0)
        )?,
    }
    if let Some(cmd) = rec["verify"].as_str().filter(|c| !c.is_empty()) {
        outln!(
            "verify   `{cmd}` — {} run(s), {} failing in a row",
            rec["verify_runs"].as_u64().unwrap_or(0),
            rec["verify_failures"].as_u64().unwrap_or(0)
        )?;
    }
    if let Some(tasks) = rec["tasks"]["tasks"].as_array() {
        outln!("tasks")?;
        for t in tasks {
            outln!(
                "  [{}] {}",
                t["status"].as_str().unwrap_or("?"),
                t["title"].as_str().unwrap_or("")
            )?;
        }
    }
    if let Some(lines) = rec["summary_lines"].as_array() {
        for (i, line) in lines.iter().filter_map(|l| l.as_str()).enumerate() {
            outln!("{}{line}", if i == 0 { "summary  " } else { "         " })?;
        }
    } else if let Some(line) = rec["summary_line"].as_str() {
        // A coordinator from before the summary had lines.
        outln!("summary  {line}")?;
    }
    let last: Vec<_> = d.turns.iter().rev().take(5).collect();
    if !last.is_empty() {
        outln!("last turns")?;
        for t in last.into_iter().rev() {
            turn(t, false)?;
        }
    }
    Ok(())
}

pub fn context(r: &pb::ContextReply, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&to_json(r));
    }
    for m in &r.messages {
        outln!("── {} ──\n{}\n", m.role().label(), m.content)?;
    }
    outln!("≈ {} of {} tokens", r.estimated_tokens, r.budget)
}

pub fn audit(entries: &[pb::AuditRecord], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&to_json(entries));
    }
    print_table(
        &[],
        &[],
        entries.iter().map(|a| {
            vec![
                ago(a.unix_ms),
                a.kind().label(),
                format!("{}/{}", a.machine, a.pane),
                if a.session.is_empty() {
                    "-".to_string()
                } else {
                    a.session.clone()
                },
                format!("{:?}", a.text.chars().take(60).collect::<String>()),
                a.detail.clone(),
            ]
        }),
    )
}

/// `notify test`: one line per sink (and Mac), what it said.
pub fn notify_results(results: &[pb::NotifyResult], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&to_json(results));
    }
    print_table(
        &["SINK", "KIND", "TO", "RESULT", "MS"],
        &[4],
        results.iter().map(|r| {
            vec![
                r.sink.clone(),
                r.kind.clone(),
                r.target.clone(),
                if r.ok {
                    "sent".to_string()
                } else {
                    format!("FAILED: {}", r.error)
                },
                r.elapsed_ms.to_string(),
            ]
        }),
    )
}

/// What `karl-ctl export` wrote: files, examples per split and outcome, pairs per reason.
pub fn export_summary(
    s: &pb::ExportSummary,
    files: &[std::path::PathBuf],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let mut v = to_json(s);
        v["files"] = to_json(files);
        return print_json(&v);
    }
    let counts = |m: &std::collections::HashMap<String, u64>| {
        let mut v: Vec<(&String, &u64)> = m.iter().collect();
        v.sort();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    outln!("read {} sessions, {} turns", s.sessions, s.turns)?;
    outln!(
        "sft examples: train {}, valid {} (by outcome: {}; ~{} tokens)",
        s.sft_train,
        s.sft_valid,
        counts(&s.sft_by_outcome),
        s.sft_tokens
    )?;
    outln!(
        "preference pairs: train {}, valid {} (by reason: {})",
        s.pairs_train,
        s.pairs_valid,
        counts(&s.pairs_by_reason)
    )?;
    outln!("turns not learnt from: {}", counts(&s.skipped))?;
    outln!(
        "duplicates dropped {}, secrets redacted {}",
        s.duplicates,
        s.redactions
    )?;
    for f in files {
        outln!("wrote {}", f.display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_under_their_headers() {
        let rows = [["mac2", "7"], ["mac10-long", "12"]];
        let text = render_table(
            &["MACHINE", "PANES"],
            &[1],
            rows.iter()
                .map(|r| r.iter().map(|c| c.to_string()).collect()),
        );
        assert_eq!(
            text,
            "MACHINE     PANES\nmac2            7\nmac10-long     12"
        );
        let bare = render_table(&[], &[], [vec!["a".to_string(), "b".to_string()]]);
        assert_eq!(bare, "a  b");
        assert_eq!(render_table(&[], &[], Vec::<Vec<String>>::new()), "");
    }
}
