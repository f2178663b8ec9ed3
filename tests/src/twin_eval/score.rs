//! Scoring driven sessions: the failure signatures of the seed's previous driver, counted
//! the same way for every style, and the cost of the model calls. Pure.
//!
//! - **status**: the gate's status judge (a progress question instead of an instruction);
//! - **destructive**: the gate's destructive judge;
//! - **exact repeat**: the same text (case, spacing and end punctuation aside) as an
//!   earlier prompt of the session;
//! - **near repeat**: not exact, but its word set overlaps an earlier prompt's by a
//!   Jaccard index of [`NEAR_REPEAT_JACCARD`] or more — deliberately not the gate's own
//!   measure, so KARL is not graded by the rule it filters with;
//! - **cross-contamination**: a name from another session's vocabulary that the
//!   session's own screens, goal and vocabulary never show;
//! - **unusable**: nothing, over [`UNUSABLE_CHARS`] characters, a markdown fence, or
//!   mostly lines copied from the screen it answered.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::drive::{first_answers, SessionRun, Style};
use super::timeline::Timeline;

/// Word-set overlap at which a prompt counts as a near repeat of an earlier one.
pub const NEAR_REPEAT_JACCARD: f64 = 0.6;
/// A prompt longer than this is no prompt a developer types.
pub const UNUSABLE_CHARS: usize = 600;

/// What a judge says of one prompt (the gate, in the bench).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Judged {
    pub status: bool,
    pub destructive: bool,
}

/// Counts of each failure signature over a set of prompts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Signatures {
    pub prompts: usize,
    pub status: usize,
    pub exact_repeat: usize,
    pub near_repeat: usize,
    pub contaminated: usize,
    pub destructive: usize,
    pub unusable: usize,
}

impl Signatures {
    fn add(&mut self, o: &Signatures) {
        self.prompts += o.prompts;
        self.status += o.status;
        self.exact_repeat += o.exact_repeat;
        self.near_repeat += o.near_repeat;
        self.contaminated += o.contaminated;
        self.destructive += o.destructive;
        self.unusable += o.unusable;
    }

    /// `n` as a percentage of the prompts.
    pub fn pct(&self, n: usize) -> f64 {
        if self.prompts == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.prompts as f64
        }
    }
}

/// What the model calls of a style cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub calls: usize,
    pub errors: usize,
    pub prompt_tokens_mean: f64,
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
    /// Share of prompt tokens the server's prefix cache held (0 when it never said).
    pub cached_share: f64,
}

/// One style's scores over every session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StyleScore {
    /// What would have reached the pane.
    pub typed: Signatures,
    /// KARL only: the model's first answer per screen, before the gate.
    pub first_answers: Option<Signatures>,
    /// The previous driver only: its prompts on the screens KARL drove (KARL stops when
    /// its plan is done and waits for a human when it escalates).
    pub karl_screens: Option<Signatures>,
    pub cost: Cost,
    /// Candidates the gate refused, by rule.
    pub blocked: BTreeMap<String, u32>,
    /// Turns by where their prompt came from (`model`, `regenerated`, `plan`, …).
    pub sources: BTreeMap<String, usize>,
    /// Sessions whose plan came from the model (the rest: from the goal).
    pub model_plans: usize,
    pub sessions: usize,
    /// Sessions that escalated or stopped before their last screen.
    pub stopped: Vec<String>,
}

/// Scores every run of `style`; `judge` says whether a prompt is a status question or
/// destructive.
pub fn score(
    style: Style,
    runs: &[SessionRun],
    timelines: &[Timeline],
    judge: &dyn Fn(&str) -> Judged,
) -> StyleScore {
    let mut out = StyleScore::default();
    let mut latencies: Vec<u64> = Vec::new();
    let (mut prompt_tokens, mut cached, mut counted) = (0u64, 0u64, 0u64);
    for run in runs.iter().filter(|r| r.style == style) {
        let Some(own) = timelines.iter().find(|t| t.meta.id == run.id) else {
            continue;
        };
        out.sessions += 1;
        let foreign = foreign_terms(own, timelines);
        let screens: Vec<&str> = run
            .proposals
            .iter()
            .map(|p| {
                own.captures
                    .get(p.capture)
                    .map(|c| c.text.as_str())
                    .unwrap_or("")
            })
            .collect();
        let texts: Vec<&str> = run.proposals.iter().map(|p| p.text.as_str()).collect();
        out.typed
            .add(&signatures(&texts, &screens, &foreign, judge));
        let karl_run = runs
            .iter()
            .find(|r| r.style == Style::Karl && r.id == run.id);
        if let (Style::Raw, Some(k)) = (style, karl_run) {
            let driven: HashSet<usize> = k.proposals.iter().map(|p| p.capture).collect();
            let keep: Vec<usize> = (0..run.proposals.len())
                .filter(|i| driven.contains(&run.proposals[*i].capture))
                .collect();
            let t: Vec<&str> = keep.iter().map(|i| texts[*i]).collect();
            let sc: Vec<&str> = keep.iter().map(|i| screens[*i]).collect();
            out.karl_screens
                .get_or_insert_with(Signatures::default)
                .add(&signatures(&t, &sc, &foreign, judge));
        }
        if style == Style::Karl {
            let firsts = first_answers(run);
            let first_refs: Vec<&str> = firsts.iter().map(|(_, a)| a.as_str()).collect();
            let first_screens: Vec<&str> = firsts
                .iter()
                .map(|(k, _)| own.captures.get(*k).map(|c| c.text.as_str()).unwrap_or(""))
                .collect();
            out.first_answers
                .get_or_insert_with(Signatures::default)
                .add(&signatures(&first_refs, &first_screens, &foreign, judge));
        }
        for p in &run.proposals {
            *out.sources.entry(p.source.clone()).or_insert(0) += 1;
        }
        for (rule, n) in &run.blocked {
            *out.blocked.entry(rule.clone()).or_insert(0) += n;
        }
        out.model_plans += usize::from(run.plan.as_deref() == Some("model"));
        if let Some(why) = &run.stopped {
            out.stopped.push(format!("{}: {why}", run.id));
        }
        for c in &run.calls {
            out.cost.calls += 1;
            if c.error.is_some() {
                out.cost.errors += 1;
                continue;
            }
            latencies.push(c.latency_ms);
            if c.prompt_tokens > 0 {
                prompt_tokens += u64::from(c.prompt_tokens);
                cached += u64::from(c.cached_tokens.min(c.prompt_tokens));
                counted += 1;
            }
        }
    }
    latencies.sort_unstable();
    out.cost.latency_p50_ms = percentile(&latencies, 0.50);
    out.cost.latency_p95_ms = percentile(&latencies, 0.95);
    if counted > 0 {
        out.cost.prompt_tokens_mean = prompt_tokens as f64 / counted as f64;
        out.cost.cached_share = cached as f64 / prompt_tokens.max(1) as f64;
    }
    out
}

/// The failure signatures of one session's prompts, in order; `screens[i]` is the
/// screen prompt `i` answered.
pub fn signatures(
    prompts: &[&str],
    screens: &[&str],
    foreign: &[String],
    judge: &dyn Fn(&str) -> Judged,
) -> Signatures {
    let mut s = Signatures::default();
    let mut earlier: Vec<(String, HashSet<String>)> = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        s.prompts += 1;
        let j = judge(p);
        s.status += usize::from(j.status);
        s.destructive += usize::from(j.destructive);
        let norm = normalize(p);
        let words = word_set(p);
        if !norm.is_empty() && earlier.iter().any(|(e, _)| *e == norm) {
            s.exact_repeat += 1;
        } else if !words.is_empty()
            && earlier
                .iter()
                .any(|(_, w)| jaccard(&words, w) >= NEAR_REPEAT_JACCARD)
        {
            s.near_repeat += 1;
        }
        let lower = p.to_lowercase();
        s.contaminated += usize::from(foreign.iter().any(|t| lower.contains(t.as_str())));
        s.unusable += usize::from(unusable(p, screens.get(i).copied().unwrap_or("")));
        earlier.push((norm, words));
    }
    s
}

/// Names of the other sessions (their project, last path part and vocabulary) that
/// nothing of `own` shows — lower case.
pub fn foreign_terms(own: &Timeline, all: &[Timeline]) -> Vec<String> {
    let mut own_text = format!(
        "{} {} {} {}",
        own.meta.project,
        own.meta.path,
        own.meta.goal,
        own.meta.vocabulary.join(" ")
    );
    for c in &own.captures {
        own_text.push('\n');
        own_text.push_str(&c.text);
        if let Some(p) = &c.next_prompt {
            own_text.push('\n');
            own_text.push_str(p);
        }
    }
    let own_text = own_text.to_lowercase();
    let mut terms: Vec<String> = Vec::new();
    for t in all.iter().filter(|t| t.meta.id != own.meta.id) {
        let last_dir = t.meta.path.rsplit('/').next().unwrap_or("").to_string();
        for term in std::iter::once(&t.meta.project)
            .chain(std::iter::once(&last_dir))
            .chain(t.meta.vocabulary.iter())
        {
            let term = term.trim().to_lowercase();
            if term.chars().count() >= 4 && !own_text.contains(&term) && !terms.contains(&term) {
                terms.push(term);
            }
        }
    }
    terms
}

/// Empty, too long, a markdown fence, or mostly the screen copied back.
pub fn unusable(prompt: &str, screen: &str) -> bool {
    let t = prompt.trim();
    if t.is_empty() || t.chars().count() > UNUSABLE_CHARS || t.contains("```") {
        return true;
    }
    let screen_lines: HashSet<&str> = screen
        .lines()
        .map(str::trim)
        .filter(|l| l.chars().count() >= 12)
        .collect();
    let lines: Vec<&str> = t.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let copied = lines
        .iter()
        .filter(|l| l.chars().count() >= 12 && screen_lines.iter().any(|s| s.contains(*l)))
        .count();
    copied * 2 > lines.len()
}

fn normalize(p: &str) -> String {
    p.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .trim_end_matches(['.', '!', '?', ' '])
        .to_string()
}

fn word_set(p: &str) -> HashSet<String> {
    p.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    let union = a.union(b).count();
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin_eval::timeline::{Capture, Recorded, SessionMeta};

    fn timeline(id: &str, project: &str, vocabulary: &[&str], screen: &str) -> Timeline {
        Timeline {
            meta: SessionMeta {
                id: id.into(),
                project: project.into(),
                path: format!("~/src/{project}"),
                machine: "mac1".into(),
                pane: "w:1.1".into(),
                goal: "ship it".into(),
                concurrent_with: None,
                vocabulary: vocabulary.iter().map(|v| v.to_string()).collect(),
            },
            recorded: Recorded::default(),
            captures: vec![Capture {
                text: screen.into(),
                ..Capture::default()
            }],
        }
    }

    fn judge(p: &str) -> Judged {
        Judged {
            status: p.contains("status"),
            destructive: p.contains("rm -rf"),
        }
    }

    #[test]
    fn repeats_are_exact_or_near_against_any_earlier_prompt() {
        let prompts = [
            "Run the pool tests.",
            "run the  pool tests",
            "add a reaper test for the pool",
            "add a reaper test for the pool now",
            "write docs",
            "Run the pool tests!",
        ];
        let s = signatures(&prompts, &[], &[], &judge);
        assert_eq!(s.prompts, 6);
        assert_eq!(s.exact_repeat, 2, "case, spacing and end punctuation aside");
        // {add,a,reaper,test,for,the,pool} vs the same plus "now": 7/8.
        assert_eq!(s.near_repeat, 1);
    }

    #[test]
    fn near_repeat_threshold_is_a_real_boundary() {
        // 3 shared of 5 words: 0.6, counted; 3 of 6: 0.5, not.
        let counted = signatures(
            &["alpha beta gamma delta", "alpha beta gamma epsilon"],
            &[],
            &[],
            &judge,
        );
        assert_eq!(counted.near_repeat, 1);
        let not = signatures(
            &["alpha beta gamma delta", "alpha beta gamma epsilon zeta"],
            &[],
            &[],
            &judge,
        );
        assert_eq!(not.near_repeat, 0);
    }

    #[test]
    fn another_projects_names_count_unless_the_session_shows_them() {
        let meshd = timeline(
            "a",
            "meshd",
            &["PtyPool", "src/pty/pool.rs"],
            "● Read src/pty/pool.rs",
        );
        let motion = timeline(
            "b",
            "MotionMix",
            &["RecordingService", "ExportQueue", "PtyPool"],
            "● RecordingService deadlocks in stop()",
        );
        let all = [meshd.clone(), motion.clone()];
        let foreign = foreign_terms(&meshd, &all);
        assert!(
            foreign.contains(&"recordingservice".to_string()),
            "{foreign:?}"
        );
        assert!(foreign.contains(&"motionmix".to_string()));
        assert!(
            !foreign.contains(&"ptypool".to_string()),
            "a name the session itself shows is not foreign"
        );
        let s = signatures(
            &[
                "fix the deadlock in RecordingService",
                "add PtyPool stats",
                "open the motionmix project",
            ],
            &[],
            &foreign,
            &judge,
        );
        assert_eq!(s.contaminated, 2);
    }

    #[test]
    fn unusable_is_empty_long_fenced_or_the_screen_copied_back() {
        let screen = "● Updated src/http/health.rs (+46)\n  error[E0277]: the trait bound is not satisfied\n";
        assert!(unusable("   ", screen));
        assert!(unusable(&"x".repeat(UNUSABLE_CHARS + 1), screen));
        assert!(unusable("```\ncargo test\n```", screen));
        assert!(unusable(
            "error[E0277]: the trait bound is not satisfied",
            screen
        ));
        assert!(unusable(
            "● Updated src/http/health.rs (+46)\nerror[E0277]: the trait bound is not satisfied\nfix it",
            screen
        ));
        assert!(!unusable(
            "fix the E0277 error in src/http/health.rs",
            screen
        ));
        assert!(!unusable(
            "error[E0277]: the trait bound is not satisfied\nadd #[axum::debug_handler] and show me the real error\nthen fix it",
            screen
        ));
    }

    #[test]
    fn status_and_destructive_come_from_the_judge() {
        let s = signatures(&["status?", "rm -rf target", "run it"], &[], &[], &judge);
        assert_eq!((s.status, s.destructive), (1, 1));
        assert!((s.pct(s.status) - 100.0 / 3.0).abs() < 1e-9);
    }
}
