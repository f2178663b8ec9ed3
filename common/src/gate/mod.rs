//! The validation gate: every candidate prompt passes here before it can reach a pane.
//! Pure: text and session context in, a verdict out; no IO, no clock. (The lexical measure
//! memoizes its profiles of earlier prompts; a verdict never depends on the memo.)
//!
//! Rules, in the order they are judged, and what a block asks of the caller:
//! - destructive (commands in any spelling, the same intent in words, irreversible acts on
//!   valuable targets in plain words; with the model, wordings near known destructive
//!   requests) → block; judged first because a fork bomb is all punctuation;
//! - too short (empty, invisible, punctuation or emoji only, lone filler) → regenerate, and
//!   nothing after it is judged;
//! - status spam (asks for a report, directs no work; with the model, any wording whose
//!   nearest examples are status requests) → regenerate with the constraint;
//! - exact repeat (equal after [`normalize_prompt`]) of the last 15 prompts → same;
//! - near repeat (same action on the same target, reworded; see [`Similarity`]), unless the
//!   candidate adds a new object or constraint (`novelty`); with the model, the repeat
//!   signals weighed together by trees learned from the tuning prompts (`rewording`) → same;
//! - cross-contamination (names another live session's project or path, not its own) → same;
//! - non-imperative (a report of finished work) → same.
//!
//! A prompt that passes may still carry a doubt ([`Verdict::doubt`]): a destructive finding
//! its wording neutralizes, or a part that leans toward the destructive examples. A caller
//! with a model asks it for a second opinion ([`opinion`]) before typing it.
//!
//! Layout: `lexicon` (the word lists and command table of `rules/*.toml`, and the one word
//! normaliser), `words` (prose tokens, verb forms), `shell` (a lenient shell lexer), `commands`
//! (the command judge, SQL and friends), `intent` (destructive requests in words), `harm`
//! (irreversible acts on valuable targets, `rules/harm.toml`), `destructive` (all three,
//! minus what the sentence negates, guards or only mentions), `status`, `repeat`, `novelty`
//! (what a look-alike adds), `rewording` (the learned repeat judge, `rules/rewording.json`),
//! `meaning` (what the embedding model adds: word senses and
//! nearest labelled examples, `rules/meaning.toml`), `contamination`, `mood`, [`opinion`]
//! (the second opinion's request, answer and cache); [`ModelSetting`]
//! loads the gate with or without its model; [`escape`] (rotating phase-specific escape prompts) and
//! [`limits`] (per-session loop limits) serve the caller's fallback path.

mod commands;
mod contamination;
mod destructive;
pub mod escape;
mod harm;
mod intent;
mod lexicon;
pub mod limits;
mod meaning;
mod mood;
mod novelty;
pub mod opinion;
mod repeat;
mod rewording;
mod shell;
mod spelling;
mod status;
mod words;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use crate::embed::{EmbedError, Embedder};
use meaning::Meaning;
use novelty::{Spelling, WordSense};

pub use escape::{escape_prompts, pick_escape, pick_escape_in, Phase};
pub use limits::{turns_without_progress, LimitBreach, LoopLimits};
pub use repeat::{normalize_prompt, Lexical, Similarity, Strongest, SAME_REQUEST};

/// How many earlier prompts the repeat rules look at.
pub const FENCE: usize = 15;

/// Another live session, for the cross-contamination rule.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OtherSession {
    pub project: String,
    pub path: String,
}

/// What the gate knows of the session a candidate is for.
#[derive(Debug, Clone, Default)]
pub struct GateContext<'a> {
    pub project: &'a str,
    pub goal: &'a str,
    pub path: &'a str,
    /// Earlier prompts, oldest first (the gate looks at the last 15).
    pub history: &'a [String],
    pub others: &'a [OtherSession],
}

/// What the caller should do with a blocked candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Passed: type it.
    Pass,
    /// Ask the model again.
    Regenerate,
    /// Ask again, telling the model the reason and the rejected text.
    RegenerateWithConstraint,
    /// Never type this, whatever the model says next.
    Block,
}

impl Action {
    fn severity(self) -> u8 {
        match self {
            Action::Pass => 0,
            Action::Regenerate => 1,
            Action::RegenerateWithConstraint => 2,
            Action::Block => 3,
        }
    }
}

/// Which rule blocked a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    Destructive,
    Status,
    TooShort,
    ExactRepeat,
    NearRepeat,
    CrossContamination,
    NonImperative,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Destructive => "destructive",
            Rule::Status => "status",
            Rule::TooShort => "too_short",
            Rule::ExactRepeat => "exact_repeat",
            Rule::NearRepeat => "near_repeat",
            Rule::CrossContamination => "cross_contamination",
            Rule::NonImperative => "non_imperative",
        }
    }

    /// What the caller does when this rule blocks.
    pub fn action(self) -> Action {
        match self {
            Rule::Destructive => Action::Block,
            Rule::TooShort => Action::Regenerate,
            _ => Action::RegenerateWithConstraint,
        }
    }

    /// What the model is told to do instead.
    fn guidance(self) -> &'static str {
        match self {
            Rule::Destructive => {
                "Never ask for anything that deletes data or history, force pushes, resets or \
                 cleans away work, or takes down processes or infrastructure."
            }
            Rule::Status => {
                "Do not ask for a status report; direct one concrete piece of work (a change, a \
                 test, a command to run)."
            }
            Rule::TooShort => "Write a complete, specific instruction.",
            Rule::ExactRepeat | Rule::NearRepeat => {
                "Do not repeat or reword an earlier instruction; move on to the next step or to \
                 a different target."
            }
            Rule::CrossContamination => {
                "Refer only to this session's project and paths, not to another session's."
            }
            Rule::NonImperative => {
                "Write an instruction in the imperative (\"Add …\", \"Fix …\"), not a report of \
                 finished work."
            }
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason a candidate was blocked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub rule: Rule,
    pub detail: String,
}

/// The gate's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub pass: bool,
    pub reasons: Vec<Reason>,
    pub action: Action,
    /// Why the destructive layers are unsure of a prompt they did not block: a dangerous
    /// finding its own wording neutralizes ("never run rm -rf /"), or a part that reads
    /// close to, but not as, a destructive request. A caller with a model asks it for a
    /// second opinion ([`opinion`]) before typing such a prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doubt: Option<String>,
}

impl Verdict {
    fn from_reasons(reasons: Vec<Reason>) -> Verdict {
        let action = reasons
            .iter()
            .map(|r| r.rule.action())
            .max_by_key(|a| a.severity())
            .unwrap_or(Action::Pass);
        Verdict {
            pass: reasons.is_empty(),
            reasons,
            action,
            doubt: None,
        }
    }

    /// True if the prompt passed, but only with a doubt a second opinion should settle.
    pub fn doubtful(&self) -> bool {
        self.pass && self.doubt.is_some()
    }

    /// True if any reason is `rule`.
    pub fn has(&self, rule: Rule) -> bool {
        self.reasons.iter().any(|r| r.rule == rule)
    }

    /// The message that goes back to the model with a regeneration request: why the
    /// rejected text was refused and what to write instead. Empty for a pass.
    pub fn constraint_message(&self, rejected: &str) -> String {
        constraint_message(self, rejected)
    }
}

/// How much of a rejected prompt is quoted back to the model.
const QUOTE_CHARS: usize = 300;

/// See [`Verdict::constraint_message`].
pub fn constraint_message(verdict: &Verdict, rejected: &str) -> String {
    if verdict.pass {
        return String::new();
    }
    let quoted: String = rejected
        .trim()
        .chars()
        .take(QUOTE_CHARS)
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    let ellipsis = if rejected.trim().chars().count() > QUOTE_CHARS {
        "…"
    } else {
        ""
    };
    let mut msg = format!("Your previous suggestion was rejected: \"{quoted}{ellipsis}\"\n");
    for r in verdict.reasons.iter() {
        msg.push_str(&format!("Reason ({}): {}\n", r.rule, r.detail));
    }
    let mut seen: Vec<&str> = Vec::new();
    for r in verdict.reasons.iter() {
        let g = r.rule.guidance();
        if !seen.contains(&g) {
            seen.push(g);
            msg.push_str(g);
            msg.push('\n');
        }
    }
    msg.push_str("Reply with one different next instruction only.");
    msg
}

/// Shell or code in a prompt: code punctuation, a flag or a path.
fn looks_like_code(text: &str) -> bool {
    text.contains(['`', '$', '|', '&', '=', ';', '<', '>', '{', '('])
        || text
            .split_whitespace()
            .any(|t| (t.starts_with('-') && t.len() > 1) || t.contains('/'))
}

/// Where the gate's embedding model comes from (`[gate] model`, `--gate-model`,
/// `KARL_GATE_MODEL`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ModelSetting {
    /// The directory `scripts/fetch-model.sh` fills, if it is there; words only if not.
    #[default]
    Default,
    /// Words only, on purpose.
    Off,
    /// This directory; a missing or broken model is an error.
    Dir(PathBuf),
}

impl ModelSetting {
    /// `off` or `none` (any case) turn the model off; an empty value means the default;
    /// anything else is a directory.
    pub fn parse(s: &str) -> ModelSetting {
        match s.trim() {
            "" => ModelSetting::Default,
            v if v.eq_ignore_ascii_case("off") || v.eq_ignore_ascii_case("none") => {
                ModelSetting::Off
            }
            v => ModelSetting::Dir(PathBuf::from(v)),
        }
    }

    /// Loads the gate this setting asks for, and one line saying what it judges with (for
    /// the log at start). Only a model that was asked for by name and cannot be read is an
    /// error; without one the gate judges by words and the line says so.
    pub fn load(&self) -> Result<(Gate, String), EmbedError> {
        let dir = match self {
            ModelSetting::Off => {
                return Ok((
                    Gate::new(),
                    "gate: words only (the embedding model is off)".to_string(),
                ))
            }
            ModelSetting::Dir(d) => d.clone(),
            ModelSetting::Default => match crate::embed::default_dir() {
                Some(d) if d.join("model.safetensors").exists() => d,
                other => {
                    let place = other
                        .map(|d| d.display().to_string())
                        .unwrap_or_else(|| "the cache directory (no $HOME)".to_string());
                    return Ok((
                        Gate::new(),
                        format!(
                            "gate: words only — no embedding model in {place}; run \
                             scripts/fetch-model.sh or set [gate] model"
                        ),
                    ));
                }
            },
        };
        let started = std::time::Instant::now();
        let model = Embedder::load(&dir)?;
        let mut note = format!(
            "gate: by meaning with {} ({} in {} ms)",
            model.name(),
            dir.display(),
            started.elapsed().as_millis()
        );
        if let Some(m) = rewording::Model::shipped() {
            note.push_str("; repeats also by a learned judge (");
            note.push_str(m.fitted_on());
            note.push(')');
        }
        Ok((Gate::with_model(Arc::new(model)), note))
    }
}

/// The gate with its similarity measure and, when one is loaded, its embedding model.
pub struct Gate {
    similarity: Box<dyn Similarity>,
    sense: Box<dyn WordSense>,
    meaning: Option<Meaning>,
    /// The learned judge of look-alikes, with the model only.
    rewording: Option<Rewording>,
}

/// The learned repeat judge and the lexical measure whose signals it reads.
struct Rewording {
    model: &'static rewording::Model,
    lexical: Lexical,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").finish_non_exhaustive()
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl Gate {
    /// The gate with the lexical similarity measure.
    pub fn new() -> Self {
        Gate::with_similarity(Box::new(Lexical::new()))
    }

    /// The gate with another similarity measure for near repeats (a semantic model, or
    /// [`Strongest`] of several).
    pub fn with_similarity(similarity: Box<dyn Similarity>) -> Self {
        Gate {
            similarity,
            sense: Box::new(Spelling),
            meaning: None,
            rewording: None,
        }
    }

    /// The gate judging by meaning with `model` (see [`crate::embed`]).
    pub fn with_model(model: Arc<Embedder>) -> Self {
        let meaning = Meaning::new(model);
        Gate {
            similarity: Box::new(Lexical::new()),
            sense: Box::new(meaning.clone()),
            meaning: Some(meaning),
            rewording: rewording::Model::shipped().map(|model| Rewording {
                model,
                lexical: Lexical::new(),
            }),
        }
    }

    /// The embedding model's name, or `None` for the lexical gate.
    pub fn model_name(&self) -> Option<&str> {
        self.meaning.as_ref().map(|m| m.model().name())
    }

    /// Judges one candidate against every rule; the action is that of the most severe
    /// reason.
    pub fn check(&self, candidate: &str, ctx: &GateContext<'_>) -> Verdict {
        let short = status::too_short(candidate);
        if short == Some("empty") {
            return Verdict::from_reasons(vec![Reason {
                rule: Rule::TooShort,
                detail: "empty".to_string(),
            }]);
        }
        let mut reasons = Vec::new();
        let w = words::tokenize(candidate);
        // Before the length check: a fork bomb is all punctuation.
        let judged = destructive::judge(candidate, &w);
        let (by_meaning, leaning) = match judged.block {
            Some(_) => (None, None),
            None => self.harm_by_meaning(candidate, &w),
        };
        let doubt = judged
            .guarded
            .map(|d| format!("{d}, which the wording forbids, guards or only mentions"))
            .or(leaning);
        if let Some(detail) = judged.block.or(by_meaning) {
            reasons.push(Reason {
                rule: Rule::Destructive,
                detail,
            });
        }
        if let Some(why) = short {
            reasons.push(Reason {
                rule: Rule::TooShort,
                detail: why.to_string(),
            });
            return Verdict::from_reasons(reasons);
        }
        if let Some(detail) =
            status::status_only(&w).or_else(|| self.status_by_meaning(candidate, &w))
        {
            reasons.push(Reason {
                rule: Rule::Status,
                detail,
            });
        }
        reasons.extend(self.repeats(candidate, ctx.history));
        if let Some(detail) = contamination::check(candidate, ctx.project, ctx.path, ctx.others) {
            reasons.push(Reason {
                rule: Rule::CrossContamination,
                detail,
            });
        }
        if let Some(detail) = mood::past_report(candidate, &w) {
            reasons.push(Reason {
                rule: Rule::NonImperative,
                detail,
            });
        }
        let mut verdict = Verdict::from_reasons(reasons);
        if !verdict.has(Rule::Destructive) {
            verdict.doubt = doubt;
        }
        verdict
    }

    /// A prompt with a part that reads, by its nearest examples, as a destructive request,
    /// and nothing that forbids, guards or documents it: the block's reason. Second, a doubt:
    /// such a part in a prompt that does forbid, guard or document something (the model
    /// cannot tell what those words bind to), or a part that leans toward the destructive
    /// examples without reaching the block.
    fn harm_by_meaning(
        &self,
        candidate: &str,
        w: &words::Words,
    ) -> (Option<String>, Option<String>) {
        let Some(meaning) = self.meaning.as_ref() else {
            return (None, None);
        };
        let Some((lean, part, example)) = meaning::parts(candidate)
            // "Add a docker-compose.yml that …" builds something; the rules judge what.
            .filter(|part| {
                let first = part.split_whitespace().next().unwrap_or("");
                !repeat::builds(&first.to_ascii_lowercase())
            })
            .map(|part| {
                let (lean, example) = meaning.lean(part, meaning::Class::Harm);
                (lean, part, example)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
        else {
            return (None, None);
        };
        let part: String = part.trim().chars().take(80).collect();
        let reads = format!("reads like a destructive request (\"{part}\", like \"{example}\")");
        if lean < meaning::HARM_DOUBT {
            (None, None)
        } else if lean < meaning::HARM_LEAN {
            (None, Some(format!("{reads}, though not closely")))
        } else if destructive::has_guard_words(candidate, w) {
            (
                None,
                Some(format!("{reads}, beside words that forbid or guard")),
            )
        } else {
            (Some(reads), None)
        }
    }

    /// A prompt that directs no work and reads, by its nearest examples, as a status request.
    fn status_by_meaning(&self, candidate: &str, w: &words::Words) -> Option<String> {
        let meaning = self.meaning.as_ref()?;
        // Commands and code read as "no work" to the prose rules; they are not questions.
        if looks_like_code(candidate) || !status::directs_no_work(candidate, w) {
            return None;
        }
        let (lean, example) = meaning.lean(candidate, meaning::Class::Status);
        (lean >= meaning::STATUS_LEAN)
            .then(|| format!("asks for a report (reads like \"{example}\"; directs no work)"))
    }

    /// Exact repeats, else the closest near repeat, among the last [`FENCE`] prompts.
    fn repeats(&self, candidate: &str, history: &[String]) -> Option<Reason> {
        let recent = &history[history.len().saturating_sub(FENCE)..];
        if recent.is_empty() {
            return None;
        }
        let norm = normalize_prompt(candidate);
        let back = |i: usize| recent.len() - i;
        if let Some(i) = recent.iter().rposition(|h| repeat::normalizes_to(h, &norm)) {
            return Some(Reason {
                rule: Rule::ExactRepeat,
                detail: format!("same as the prompt {} turns back", back(i)),
            });
        }
        // The learned judge reads prompts as long as those it was fitted to, and leaves
        // longer ones to the rules.
        let learned = self
            .rewording
            .as_ref()
            .zip(self.meaning.as_ref())
            .filter(|_| rewording::fits(candidate));
        if let Some((rw, meaning)) = learned {
            if let Some(r) = self.rewords(rw, meaning.model(), candidate, recent) {
                return Some(r);
            }
        }
        let earlier: Vec<&str> = recent.iter().map(String::as_str).collect();
        let scores = self.similarity.scores(candidate, &earlier);
        let mut alike: Vec<(usize, f32)> = scores
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, s)| s.is_finite() && *s >= SAME_REQUEST)
            .filter(|(i, _)| learned.is_none() || !rewording::fits(&recent[*i]))
            .collect();
        alike.sort_by(|a, b| b.1.total_cmp(&a.1));
        // The closest look-alike that the candidate adds nothing to.
        let (i, best) = alike.into_iter().find(|&(i, _)| {
            novelty::novelty(candidate, &recent[i], self.sense.as_ref()).is_none()
        })?;
        let quoted: String = recent[i].chars().take(120).collect();
        Some(Reason {
            rule: Rule::NearRepeat,
            detail: format!(
                "rewords the prompt {} turns back (similarity {best:.2}): \"{quoted}\"",
                back(i)
            ),
        })
    }

    /// The learned judge: the earlier prompt the candidate most likely rewords, if any
    /// reaches the model's threshold.
    fn rewords(
        &self,
        rw: &Rewording,
        model: &Embedder,
        candidate: &str,
        recent: &[String],
    ) -> Option<Reason> {
        let c = rewording::Candidate::new(candidate, model, self.sense.as_ref());
        let (i, p, score) = recent
            .iter()
            .enumerate()
            .filter(|(_, e)| rewording::fits(e))
            .filter_map(|(i, e)| {
                let x = self.pair_signals(&c, candidate, e, &rw.lexical, model)?;
                Some((i, rw.model.probability(&x), x[0]))
            })
            .filter(|(_, p, _)| *p >= rw.model.threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        let quoted: String = recent[i].chars().take(120).collect();
        Some(Reason {
            rule: Rule::NearRepeat,
            detail: format!(
                "rewords the prompt {} turns back (rewording {p:.2}, similarity {score:.2}): \"{quoted}\"",
                recent.len() - i
            ),
        })
    }

    /// The signals the learned repeat judge reads for `candidate` against `earlier`, for
    /// training it (`scripts/train-rewording.sh`); `None` without the embedding model or
    /// when the two are too far apart to compare.
    pub fn rewording_signals(&self, candidate: &str, earlier: &str) -> Option<Vec<f32>> {
        let meaning = self.meaning.as_ref()?;
        let c = rewording::Candidate::new(candidate, meaning.model(), self.sense.as_ref());
        self.pair_signals(&c, candidate, earlier, &Lexical::new(), meaning.model())
            .map(|x| x.to_vec())
    }

    /// The learned judge's signals for one pair, the candidate first given the earlier
    /// prompt's spelling of the names they share ([`spelling::align`]); `c` is the
    /// candidate as written, read once for all its pairs.
    fn pair_signals(
        &self,
        c: &rewording::Candidate,
        candidate: &str,
        earlier: &str,
        lexical: &Lexical,
        model: &Embedder,
    ) -> Option<[f32; rewording::SIGNALS.len()]> {
        let sense = self.sense.as_ref();
        match spelling::align(candidate, earlier) {
            Some(aligned) => {
                let c = rewording::Candidate::new(&aligned, model, sense);
                rewording::signals(&c, earlier, lexical, sense, model)
            }
            None => rewording::signals(c, earlier, lexical, sense, model),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ctx(history: &[String]) -> GateContext<'_> {
        GateContext {
            history,
            ..GateContext::default()
        }
    }

    #[test]
    fn ordinary_work_passes() {
        let v = Gate::new().check(
            "Add input validation to the signup form: email must contain an @.",
            &GateContext::default(),
        );
        assert!(v.pass, "{v:?}");
        assert_eq!(v.action, Action::Pass);
    }

    #[test]
    fn actions_follow_the_most_severe_rule() {
        let g = Gate::new();
        let none = GateContext::default();
        assert_eq!(g.check("", &none).action, Action::Regenerate);
        assert_eq!(
            g.check("status update please", &none).action,
            Action::RegenerateWithConstraint
        );
        assert_eq!(g.check("git push --force", &none).action, Action::Block);
        assert_eq!(
            g.check("Fixed the bug.", &none).action,
            Action::RegenerateWithConstraint
        );
        let h = vec!["Run cargo test and fix the failures.".to_string()];
        let v = g.check("run cargo test and fix the failures!", &ctx(&h));
        assert!(v.has(Rule::ExactRepeat));
        assert_eq!(v.action, Action::RegenerateWithConstraint);
        let v = g.check("Status report, then git push -f", &none);
        assert!(v.has(Rule::Destructive));
        assert_eq!(v.action, Action::Block);
    }

    #[test]
    fn only_the_last_fifteen_prompts_fence() {
        let g = Gate::new();
        let mut h: Vec<String> = vec!["Add a --verbose flag to the CLI.".to_string()];
        for i in 0..15 {
            h.push(format!(
                "Write test number {i} for the parser module of crate {i}."
            ));
        }
        assert!(g.check("Add a --verbose flag to the CLI.", &ctx(&h)).pass);
        assert!(
            !g.check("Add a --verbose flag to the CLI.", &ctx(&h[..15]))
                .pass
        );
    }

    #[test]
    fn contamination_needs_the_others() {
        let g = Gate::new();
        let others = vec![OtherSession {
            project: "meshd".into(),
            path: "/Users/ana/code/meshd".into(),
        }];
        let c = GateContext {
            project: "karl",
            path: "/Users/ana/code/karl",
            others: &others,
            ..GateContext::default()
        };
        let v = g.check("Add a /health route to meshd's router.", &c);
        assert!(v.has(Rule::CrossContamination), "{v:?}");
    }

    #[test]
    fn constraint_message_quotes_reason_and_text() {
        let g = Gate::new();
        let v = g.check("what's the status?", &GateContext::default());
        let m = v.constraint_message("what's the status?");
        assert!(m.contains("\"what's the status?\""));
        assert!(m.contains("Reason (status)"));
        assert!(m.contains("concrete piece of work"));
        let long = "x".repeat(1000);
        let v = Verdict::from_reasons(vec![Reason {
            rule: Rule::TooShort,
            detail: "t".into(),
        }]);
        assert!(v.constraint_message(&long).contains('…'));
        assert_eq!(
            g.check("Add a test for parse().", &GateContext::default())
                .constraint_message("x"),
            ""
        );
    }

    #[test]
    fn a_custom_similarity_replaces_the_lexical_one() {
        struct Never;
        impl Similarity for Never {
            fn score(&self, _: &str, _: &str) -> f32 {
                0.0
            }
        }
        let h = vec!["Fix the clippy warnings in src/runner.rs.".to_string()];
        let lexical = Gate::new().check("Clean up the clippy warnings in runner.rs.", &ctx(&h));
        assert!(lexical.has(Rule::NearRepeat));
        let never = Gate::with_similarity(Box::new(Never))
            .check("Clean up the clippy warnings in runner.rs.", &ctx(&h));
        assert!(never.pass);
    }
}
