//! One session's turns → training examples (pure): SFT examples from the twin's prompts
//! that worked, preference pairs from what the gate refused and from prompts that failed.
//!
//! Fed a session's turns in order, one at a time; it keeps only the failed turns still
//! waiting for a later prompt on the same task (at most [`MAX_WAITING`]). Secrets are
//! redacted here with the redactor the briefing uses. Not here: reading the store,
//! filters on sessions, duplicates and the train/valid split ([`super`]).

use karl_common::context::redact;
use serde::Serialize;

use crate::context::ChatMessage;
use crate::records::{TurnOutcome, TurnRecord, TurnSource};

/// Failed turns kept per session while waiting for a later prompt that worked.
pub const MAX_WAITING: usize = 16;

/// How many turns later a prompt that worked may come and still pair with a failed one:
/// further on, "the same task" (or, without a plan, the same goal) says little.
pub const PAIR_WITHIN_TURNS: u32 = 5;

/// The least outcome a prompt needs to count as having worked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinOutcome {
    /// Progress or complete.
    #[default]
    Progress,
    /// Complete only.
    Complete,
}

impl MinOutcome {
    pub fn parse(s: &str) -> Option<MinOutcome> {
        match s {
            "" | "progress" => Some(MinOutcome::Progress),
            "complete" => Some(MinOutcome::Complete),
            _ => None,
        }
    }

    fn accepts(self, o: TurnOutcome) -> bool {
        match self {
            MinOutcome::Progress => matches!(o, TurnOutcome::Progress | TurnOutcome::Complete),
            MinOutcome::Complete => o == TurnOutcome::Complete,
        }
    }
}

/// One SFT example: the exact messages the twin received, then what was typed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SftExample {
    pub messages: Vec<ChatMessage>,
}

/// Why a pair's rejected side lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PairKind {
    /// The gate refused it in the same turn.
    Gate,
    /// It was typed and ended in an error or changed nothing; a later prompt on the same
    /// task made progress.
    Outcome,
}

/// One preference pair, in the conversational layout preference trainers read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    /// The exact messages the twin received when it wrote the rejected answer.
    pub prompt: Vec<ChatMessage>,
    pub chosen: Vec<ChatMessage>,
    pub rejected: Vec<ChatMessage>,
    /// The gate's words, or what the failed prompt led to.
    pub reason: String,
    /// Rule names (`status`, `destructive`, …) or `error` / `no_change`.
    pub rules: Vec<String>,
    pub kind: PairKind,
}

impl Pair {
    /// What the summary counts it under: its first rule.
    pub fn reason_key(&self) -> &str {
        self.rules.first().map_or("unknown", String::as_str)
    }
}

/// What one turn yields.
#[derive(Debug, Default, PartialEq)]
pub struct TurnYield {
    pub sft: Option<(SftExample, TurnOutcome)>,
    pub pairs: Vec<Pair>,
    /// Why the turn gave no SFT example (`None` when it gave one).
    pub skipped: Option<&'static str>,
    /// Secrets replaced.
    pub redactions: usize,
}

/// A typed model prompt that failed, waiting for a later one that worked.
#[derive(Debug, Clone)]
struct Failed {
    task: String,
    prompt: Vec<ChatMessage>,
    text: String,
    rule: &'static str,
    turn: u32,
}

/// The examples of one session, turn by turn.
#[derive(Debug, Default)]
pub struct SessionExamples {
    min: MinOutcome,
    waiting: Vec<Failed>,
    /// The previous turn, while it could still prove to have changed nothing.
    undecided: Option<Failed>,
}

impl SessionExamples {
    pub fn new(min: MinOutcome) -> Self {
        SessionExamples {
            min,
            ..Default::default()
        }
    }

    /// The next turn of the session (turns must come in order).
    pub fn turn(&mut self, t: &TurnRecord) -> TurnYield {
        let mut out = TurnYield::default();
        // A typed turn never judged, with a turn after it, changed nothing on the screen.
        if let Some(f) = self.undecided.take() {
            self.wait(f);
        }
        self.waiting
            .retain(|f| t.n.saturating_sub(f.turn) <= PAIR_WITHIN_TURNS);
        let typed = t.inject.landed();
        let from_model = matches!(t.source, TurnSource::Model | TurnSource::Regenerated);
        let overridden = !t.overridden.is_empty();
        let worked = typed && !overridden && self.min.accepts(t.outcome);
        let chosen = || vec![ChatMessage::assistant(t.prompt.clone())];

        // Gate pairs: what was typed and worked, against each refused candidate.
        if worked {
            for r in &t.refused {
                let Some(prompt) = t.asked.get(r.asked as usize) else {
                    continue;
                };
                out.pairs.push(Pair {
                    prompt: prompt.clone(),
                    chosen: chosen(),
                    rejected: vec![ChatMessage::assistant(r.text.clone())],
                    reason: r.reason.clone(),
                    rules: r.rules.clone(),
                    kind: PairKind::Gate,
                });
            }
            // Outcome pairs: earlier failed prompts on the same task, against this one.
            let (same, rest): (Vec<Failed>, Vec<Failed>) = std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(|f| f.task == t.task);
            self.waiting = rest;
            for f in same
                .into_iter()
                .filter(|f| f.text.trim() != t.prompt.trim())
            {
                out.pairs.push(Pair {
                    prompt: f.prompt,
                    chosen: chosen(),
                    rejected: vec![ChatMessage::assistant(f.text)],
                    reason: format!(
                        "turn {} {}; turn {} on the same task made progress",
                        f.turn,
                        if f.rule == "error" {
                            "ended in an error"
                        } else {
                            "changed nothing"
                        },
                        t.n
                    ),
                    rules: vec![f.rule.to_string()],
                    kind: PairKind::Outcome,
                });
            }
        }

        let last_request = t.asked.last();
        out.skipped = if !from_model {
            Some(match t.source {
                TurnSource::Plan => "plan fallback",
                TurnSource::Escape => "escape fallback",
                _ => "typed by the operator",
            })
        } else if last_request.is_none() {
            Some("recorded before export")
        } else if !typed {
            Some("not typed")
        } else if overridden {
            Some("overridden by the operator")
        } else if !self.min.accepts(t.outcome) {
            Some(match t.outcome {
                TurnOutcome::Pending => "not judged",
                TurnOutcome::Error => "ended in an error",
                TurnOutcome::Blocked => "blocked",
                TurnOutcome::Progress | TurnOutcome::Complete => "below --min-outcome",
            })
        } else {
            None
        };
        if let (None, Some(request)) = (out.skipped, last_request) {
            let mut messages = request.clone();
            messages.push(ChatMessage::assistant(t.prompt.clone()));
            out.sft = Some((SftExample { messages }, t.outcome));
        }

        // This turn may be the failure a later prompt makes up for.
        if let (true, true, false, Some(request)) = (typed, from_model, overridden, last_request) {
            let failed = |rule| Failed {
                task: t.task.clone(),
                prompt: request.clone(),
                text: t.prompt.clone(),
                rule,
                turn: t.n,
            };
            match t.outcome {
                TurnOutcome::Error => self.wait(failed("error")),
                TurnOutcome::Pending => self.undecided = Some(failed("no_change")),
                _ => {}
            }
        }
        out.redactions = redact_yield(&mut out);
        out
    }

    fn wait(&mut self, f: Failed) {
        self.waiting.push(f);
        let excess = self.waiting.len().saturating_sub(MAX_WAITING);
        self.waiting.drain(..excess);
    }
}

/// Redacts every text of a turn's examples in place; returns how many secrets went.
fn redact_yield(y: &mut TurnYield) -> usize {
    let mut n = 0;
    let mut clean = |messages: &mut Vec<ChatMessage>| {
        for m in messages {
            let (text, hits) = redact(&m.content);
            if hits > 0 {
                m.content = text.into_owned();
                n += hits;
            }
        }
    };
    if let Some((ex, _)) = y.sft.as_mut() {
        clean(&mut ex.messages);
    }
    for p in &mut y.pairs {
        clean(&mut p.prompt);
        clean(&mut p.chosen);
        clean(&mut p.rejected);
    }
    // The gate's words quote the candidate (and a second opinion's own text).
    for p in &mut y.pairs {
        let (reason, hits) = redact(&p.reason);
        if hits > 0 {
            p.reason = reason.into_owned();
            n += hits;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::records::{InjectStatus, RefusedCandidate};

    fn briefing(n: u32) -> Vec<ChatMessage> {
        vec![
            ChatMessage::system("You are the developer."),
            ChatMessage::user(format!("briefing {n}")),
        ]
    }

    fn turn(n: u32, prompt: &str, source: TurnSource, outcome: TurnOutcome) -> TurnRecord {
        TurnRecord {
            n,
            prompt: prompt.into(),
            source,
            outcome,
            inject: InjectStatus::Submitted,
            asked: if matches!(source, TurnSource::Model | TurnSource::Regenerated) {
                vec![briefing(n)]
            } else {
                Vec::new()
            },
            task: "Add the route".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_model_prompt_that_worked_is_an_example_with_the_exact_messages() {
        let mut s = SessionExamples::new(MinOutcome::Progress);
        let y = s.turn(&turn(
            1,
            "Add GET /health.",
            TurnSource::Model,
            TurnOutcome::Progress,
        ));
        let (ex, outcome) = y.sft.unwrap();
        assert_eq!(outcome, TurnOutcome::Progress);
        let mut want = briefing(1);
        want.push(ChatMessage::assistant("Add GET /health."));
        assert_eq!(ex.messages, want);
        assert!(y.pairs.is_empty());
    }

    #[test]
    fn fallbacks_overrides_untyped_and_failed_turns_are_no_examples() {
        let mut s = SessionExamples::new(MinOutcome::Progress);
        let cases = [
            (
                turn(1, "step", TurnSource::Plan, TurnOutcome::Progress),
                "plan fallback",
            ),
            (
                turn(2, "escape", TurnSource::Escape, TurnOutcome::Progress),
                "escape fallback",
            ),
            (
                TurnRecord {
                    overridden: "the operator typed into the pane".into(),
                    ..turn(3, "a", TurnSource::Model, TurnOutcome::Progress)
                },
                "overridden by the operator",
            ),
            (
                TurnRecord {
                    inject: InjectStatus::DryRun,
                    ..turn(4, "b", TurnSource::Model, TurnOutcome::Progress)
                },
                "not typed",
            ),
            (
                turn(5, "c", TurnSource::Model, TurnOutcome::Error),
                "ended in an error",
            ),
        ];
        for (t, why) in cases {
            let y = s.turn(&t);
            assert_eq!(y.sft, None, "turn {}", t.n);
            assert_eq!(y.skipped, Some(why), "turn {}", t.n);
        }
        let strict = SessionExamples::new(MinOutcome::Complete).turn(&turn(
            6,
            "d",
            TurnSource::Model,
            TurnOutcome::Progress,
        ));
        assert_eq!(strict.skipped, Some("below --min-outcome"));
    }

    #[test]
    fn refused_candidates_pair_with_what_was_typed_against_their_own_request() {
        let mut s = SessionExamples::new(MinOutcome::Progress);
        let t = TurnRecord {
            refused: vec![
                RefusedCandidate {
                    text: "What's the status?".into(),
                    rules: vec!["status".into()],
                    reason: "status: asks for a status report".into(),
                    asked: 0,
                },
                RefusedCandidate {
                    text: "git reset --hard".into(),
                    rules: vec!["destructive".into()],
                    reason: "destructive: git reset --hard".into(),
                    asked: 1,
                },
            ],
            asked: vec![briefing(10), briefing(11), briefing(12)],
            ..turn(
                1,
                "Add the route.",
                TurnSource::Regenerated,
                TurnOutcome::Progress,
            )
        };
        let y = s.turn(&t);
        assert_eq!(y.pairs.len(), 2);
        assert_eq!(y.pairs[0].prompt, briefing(10));
        assert_eq!(y.pairs[1].prompt, briefing(11));
        assert_eq!(
            y.pairs[1].rejected,
            vec![ChatMessage::assistant("git reset --hard")]
        );
        assert_eq!(
            y.pairs[0].chosen,
            vec![ChatMessage::assistant("Add the route.")]
        );
        assert_eq!(y.pairs[1].reason_key(), "destructive");
        // The SFT example is the request that produced the typed prompt: the last one.
        assert_eq!(y.sft.unwrap().0.messages[1].content, "briefing 12");
        // Nothing refused pairs with a turn that did not work.
        let failed = s.turn(&TurnRecord {
            n: 2,
            outcome: TurnOutcome::Error,
            ..t.clone()
        });
        assert!(failed.pairs.is_empty());
    }

    #[test]
    fn failed_prompts_pair_with_a_later_one_on_the_same_task() {
        let mut s = SessionExamples::new(MinOutcome::Progress);
        assert!(s
            .turn(&turn(
                1,
                "Run the tests.",
                TurnSource::Model,
                TurnOutcome::Error
            ))
            .pairs
            .is_empty());
        // Turn 2 is never judged; turn 3 shows it changed nothing.
        s.turn(&turn(
            2,
            "Look again.",
            TurnSource::Model,
            TurnOutcome::Pending,
        ));
        let other_task = TurnRecord {
            task: "Write docs".into(),
            ..turn(
                3,
                "Write the docs.",
                TurnSource::Model,
                TurnOutcome::Progress,
            )
        };
        assert!(s.turn(&other_task).pairs.is_empty());
        let y = s.turn(&turn(
            4,
            "Fix the failing test in src/health.rs.",
            TurnSource::Plan,
            TurnOutcome::Progress,
        ));
        let rejected: Vec<(&str, &str)> = y
            .pairs
            .iter()
            .map(|p| (p.rejected[0].content.as_str(), p.reason_key()))
            .collect();
        assert_eq!(
            rejected,
            [("Run the tests.", "error"), ("Look again.", "no_change")]
        );
        assert!(y.pairs.iter().all(|p| p.kind == PairKind::Outcome));
        assert_eq!(y.pairs[0].prompt, briefing(1));
        assert!(y.pairs[1].reason.contains("turn 2 changed nothing"));
        // Used once.
        let again = s.turn(&turn(5, "More.", TurnSource::Model, TurnOutcome::Progress));
        assert!(again.pairs.is_empty());
    }

    #[test]
    fn secrets_are_redacted_in_every_text() {
        let key = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
        let mut s = SessionExamples::new(MinOutcome::Progress);
        let t = TurnRecord {
            asked: vec![vec![ChatMessage::user(format!("export KEY={key}"))]],
            refused: vec![RefusedCandidate {
                text: format!("echo {key}"),
                rules: vec!["destructive".into()],
                reason: format!("destructive: reads a secret (\"echo {key}\")"),
                asked: 0,
            }],
            ..turn(
                1,
                "Run the tests.",
                TurnSource::Model,
                TurnOutcome::Progress,
            )
        };
        let y = s.turn(&t);
        let json = serde_json::to_string(&(y.sft.as_ref().unwrap().0.clone(), &y.pairs)).unwrap();
        assert!(!json.contains(key), "{json}");
        assert!(y.redactions >= 4, "{}", y.redactions);
    }

    #[test]
    fn a_failure_pairs_only_with_a_prompt_a_few_turns_later() {
        let mut s = SessionExamples::new(MinOutcome::Progress);
        s.turn(&turn(
            1,
            "Run the tests.",
            TurnSource::Model,
            TurnOutcome::Error,
        ));
        for n in 2..=7 {
            s.turn(&TurnRecord {
                inject: InjectStatus::Refused,
                ..turn(n, "x", TurnSource::Plan, TurnOutcome::Blocked)
            });
        }
        let late = s.turn(&turn(
            8,
            "Fix it.",
            TurnSource::Model,
            TurnOutcome::Progress,
        ));
        assert!(late.pairs.is_empty(), "{:?}", late.pairs);
        s.turn(&turn(
            9,
            "Run the tests.",
            TurnSource::Model,
            TurnOutcome::Error,
        ));
        let soon = s.turn(&turn(
            9 + PAIR_WITHIN_TURNS,
            "Fix it.",
            TurnSource::Model,
            TurnOutcome::Progress,
        ));
        assert_eq!(soon.pairs.len(), 1);
    }
}
