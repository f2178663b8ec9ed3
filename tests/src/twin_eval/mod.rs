//! The twin evaluation: does KARL's scaffolding make a real small model drive better
//! than the previous driver's raw prompting? Recorded session timelines are replayed
//! through both styles against the same model server and scored on the seed's failure
//! signatures. `karl-bench twin` runs it; `karl-bench record` makes the timelines.
//!
//! Layout:
//! - [`timeline`]: the session-script and timeline file formats.
//! - [`record`]: playing a script through the stand-in in real tmux (the IO edge).
//! - [`drive`]: the two styles — raw prompting, and KARL's session machine in dry run.
//! - [`score`]: the failure signatures and the cost of the calls (pure).
//! - this file: grouping sessions that ran side by side, running both styles over
//!   them, and the report.

pub mod drive;
pub mod record;
pub mod score;
pub mod timeline;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use karl_common::gate::{Gate, GateContext, Rule};
use serde::{Deserialize, Serialize};

use drive::{drive_karl, drive_raw, SessionRun, Style, Twin};
use score::{score, Cost, Judged, Signatures, StyleScore};
use timeline::Timeline;

/// The previous driver's rates from the seed (`karl-v6-architecture.txt`: a 4B model
/// on live sessions).
pub const SEED_V5: [(&str, f64); 3] = [
    ("status spam", 28.0),
    ("repeats", 13.0),
    ("cross-contamination", 9.0),
];

/// How much of the recorded data to replay.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// At most this many sessions (a concurrent pair counts as two; pairs stay whole).
    pub sessions: usize,
    /// At most this many screens per session.
    pub screens: usize,
    pub styles: Vec<Style>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            sessions: usize::MAX,
            screens: usize::MAX,
            styles: vec![Style::Raw, Style::Karl],
        }
    }
}

/// Everything one evaluation measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalReport {
    pub model: String,
    pub sessions: Vec<String>,
    /// Sessions recorded side by side on one machine.
    pub concurrent: Vec<Vec<String>>,
    pub screens: usize,
    pub scores: BTreeMap<Style, StyleScore>,
    pub runs: Vec<SessionRun>,
    pub wall_secs: f64,
}

/// Sessions that ran at the same time on one machine go together; the rest alone.
pub fn groups(timelines: &[Timeline]) -> Vec<Vec<&Timeline>> {
    let mut out: Vec<Vec<&Timeline>> = Vec::new();
    for t in timelines {
        if out.iter().flatten().any(|g| g.meta.id == t.meta.id) {
            continue;
        }
        let partner = t.meta.concurrent_with.as_deref().and_then(|p| {
            timelines
                .iter()
                .find(|o| o.meta.id == p && o.meta.machine == t.meta.machine)
        });
        match partner {
            Some(p) if p.meta.id != t.meta.id => out.push(vec![t, p]),
            _ => out.push(vec![t]),
        }
    }
    out
}

/// The gate's status and destructive judges, as the scores use them.
pub fn gate_judge(gate: &Gate) -> impl Fn(&str) -> Judged + '_ {
    move |p: &str| {
        let v = gate.check(p, &GateContext::default());
        Judged {
            status: v.reasons.iter().any(|r| r.rule == Rule::Status),
            destructive: v.reasons.iter().any(|r| r.rule == Rule::Destructive),
        }
    }
}

/// Replays `timelines` in every style of `opts` against `twin`.
pub async fn evaluate(
    timelines: &[Timeline],
    twin: &Twin,
    model: &str,
    gate: Arc<Gate>,
    opts: &EvalOptions,
) -> EvalReport {
    let started = std::time::Instant::now();
    let mut chosen: Vec<Vec<&Timeline>> = Vec::new();
    let mut n = 0;
    for g in groups(timelines) {
        if n + g.len() > opts.sessions {
            continue;
        }
        n += g.len();
        chosen.push(g);
    }
    let mut runs: Vec<SessionRun> = Vec::new();
    for group in &chosen {
        let ids: Vec<&str> = group.iter().map(|t| t.meta.id.as_str()).collect();
        for style in &opts.styles {
            tracing::info!(target: "bench.twin", sessions = ?ids, style = ?style, "replaying");
            let r = match style {
                Style::Raw => drive_raw(group, twin, opts.screens).await,
                Style::Karl => drive_karl(group, twin, gate.clone(), opts.screens).await,
            };
            runs.extend(r);
        }
    }
    let used: Vec<Timeline> = chosen.iter().flatten().map(|t| (*t).clone()).collect();
    let scores = scores(&opts.styles, &runs, &used, &gate);
    EvalReport {
        model: model.to_string(),
        sessions: used.iter().map(|t| t.meta.id.clone()).collect(),
        concurrent: chosen
            .iter()
            .filter(|g| g.len() > 1)
            .map(|g| g.iter().map(|t| t.meta.id.clone()).collect())
            .collect(),
        screens: used
            .iter()
            .map(|t| t.captures.len().min(opts.screens))
            .sum(),
        scores,
        runs,
        wall_secs: started.elapsed().as_secs_f64(),
    }
}

/// Every style's scores over `runs`.
pub fn scores(
    styles: &[Style],
    runs: &[SessionRun],
    timelines: &[Timeline],
    gate: &Gate,
) -> BTreeMap<Style, StyleScore> {
    let judge = gate_judge(gate);
    styles
        .iter()
        .map(|s| (*s, score(*s, runs, timelines, &judge)))
        .collect()
}

/// A saved report scored again (after a change to the scoring, or to read it anew):
/// the runs stay, the scores are recomputed against `timelines`.
pub fn rescore(mut report: EvalReport, timelines: &[Timeline], gate: &Gate) -> EvalReport {
    let used: Vec<Timeline> = timelines
        .iter()
        .filter(|t| report.sessions.contains(&t.meta.id))
        .cloned()
        .collect();
    let styles: Vec<Style> = report.scores.keys().copied().collect();
    report.scores = scores(&styles, &report.runs, &used, gate);
    report
}

/// Picks one signature's count.
type Count = fn(&Signatures) -> usize;
/// Formats one figure of a style's calls.
type CostCell = fn(&Cost) -> String;

/// The report as a markdown table, the seed's V5 figures beside it.
pub fn render(report: &EvalReport) -> String {
    let mut out = String::new();
    let raw = report.scores.get(&Style::Raw);
    let karl = report.scores.get(&Style::Karl);
    let _ = writeln!(
        out,
        "model {} · {} sessions ({} concurrent pairs) · {} screens · {:.0} s\n",
        report.model,
        report.sessions.len(),
        report.concurrent.len(),
        report.screens,
        report.wall_secs
    );
    let _ = writeln!(
        out,
        "| per prompt | seed V5 (4B, live) | previous driver (raw 80 lines) | previous driver, on the screens KARL drove | KARL: model's first answer | KARL: typed (after gate) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let cell = |s: Option<&Signatures>, f: &dyn Fn(&Signatures) -> usize| match s {
        Some(s) => format!("{:.1} % ({}/{})", s.pct(f(s)), f(s), s.prompts),
        None => "—".to_string(),
    };
    let first = karl.and_then(|k| k.first_answers.as_ref());
    let rows: [(&str, &str, Count); 6] = [
        ("status spam", "28 %", |s| s.status),
        ("exact repeat", "13 % (all repeats)", |s| s.exact_repeat),
        ("near repeat", "", |s| s.near_repeat),
        ("cross-contamination", "9 %", |s| s.contaminated),
        ("destructive", "—", |s| s.destructive),
        ("empty or unusable", "—", |s| s.unusable),
    ];
    for (name, seed, f) in rows {
        let _ = writeln!(
            out,
            "| {name} | {seed} | {} | {} | {} | {} |",
            cell(raw.map(|r| &r.typed), &f),
            cell(raw.and_then(|r| r.karl_screens.as_ref()), &f),
            cell(first, &f),
            cell(karl.map(|k| &k.typed), &f)
        );
    }
    // Cost rows: the same figure of each style's calls, in the two styles' columns.
    let cost_rows: [(&str, &str, CostCell); 4] = [
        ("model calls (errors)", "", |c| {
            format!("{} ({})", c.calls, c.errors)
        }),
        ("prompt tokens per call (mean)", "~900", |c| {
            format!("{:.0}", c.prompt_tokens_mean)
        }),
        ("model latency p50 / p95", "", |c| {
            format!(
                "{:.1} / {:.1} s",
                c.latency_p50_ms as f64 / 1000.0,
                c.latency_p95_ms as f64 / 1000.0
            )
        }),
        ("prompt tokens from the prefix cache", "", |c| {
            format!("{:.0} %", 100.0 * c.cached_share)
        }),
    ];
    for (name, seed, f) in cost_rows {
        let cell = |s: Option<&StyleScore>| s.map(|s| f(&s.cost)).unwrap_or_else(|| "—".into());
        let _ = writeln!(
            out,
            "| {name} | {seed} | {} | | | {} |",
            cell(raw),
            cell(karl)
        );
    }
    if let Some(k) = karl {
        let join = |m: &BTreeMap<String, u32>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let sources = k
            .sources
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "\nKARL: turns by source: {sources}; gate refusals: {} ({}); plans from the model: {}/{} sessions.",
            k.blocked.values().sum::<u32>(),
            if k.blocked.is_empty() { "none".to_string() } else { join(&k.blocked) },
            k.model_plans,
            k.sessions
        );
        for s in &k.stopped {
            let _ = writeln!(out, "KARL stopped early: {s}");
        }
    }
    out
}
