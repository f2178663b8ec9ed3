//! The prompt source chain for one turn: model → gate (→ regenerate with the gate's
//! reason, up to three answers) → the active task's plan step → a rotating escape prompt
//! for the session's phase, each checked by the gate.
//!
//! [`PromptSearch`] is a small state machine of its own: the session machine asks it for
//! the next model request, hands it each reply, and takes the [`Candidate`] it settles on.
//! The model call itself is an effect the shell carries out; nothing here does IO.
//!
//! A candidate the gate passes in doubt (see [`Verdict::doubt`]) is not typed until the
//! model has given a second opinion on it ([`karl_common::gate::opinion`]): one more
//! request, cached per text; a failed call counts as "destructive".

use karl_common::gate::opinion::{self, Opinion};
use karl_common::gate::{GateContext, Verdict};

use super::machine::Deps;
use crate::context::{clean_reply_guarded, EchoGuard, PaneSignal, Rejection, REPLY_MAX_CHARS};
use crate::model::{ChatMessage, ChatRequest};
#[cfg(doc)]
use crate::records::TurnRecord;
use crate::records::{RefusedCandidate, SessionRecord, TurnSource};

/// How many answers the model gets per turn before the plan step takes over.
pub const MODEL_ATTEMPTS: usize = 3;

/// A prompt chosen for a turn, with how it was arrived at.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub prompt: String,
    pub source: TurnSource,
    /// The gate's verdict on every candidate tried, in order.
    pub gate: Vec<String>,
    pub latency_ms: u64,
    pub prompt_tokens: u32,
    /// Of those, what the server's prefix cache held (0: not reported).
    pub cached_tokens: u32,
    /// The messages of each model request made for it (see [`TurnRecord::asked`]).
    pub asked: Vec<Vec<ChatMessage>>,
    /// The model's candidates the gate refused on the way.
    pub refused: Vec<RefusedCandidate>,
}

/// A model reply as the search needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelAnswer {
    pub text: String,
    pub latency_ms: u64,
    /// `usage.prompt_tokens`, when the server reported it.
    pub prompt_tokens: Option<u32>,
    /// Prompt tokens the server's prefix cache held, when it said.
    pub cached_tokens: Option<u32>,
}

/// What the search wants next.
#[derive(Debug)]
pub enum Step {
    /// Ask the model this.
    Ask(ChatRequest),
    /// The turn's prompt.
    Chosen(Candidate),
    /// Nothing passed the gate, not even an escape prompt.
    Exhausted,
}

/// One turn's search for a prompt the gate accepts.
#[derive(Debug, Clone)]
pub struct PromptSearch {
    screen: String,
    signal: PaneSignal,
    rejections: Vec<Rejection>,
    lines: Vec<String>,
    /// Token estimate of the request in flight (raw and calibrated).
    asked: Option<(u32, u32)>,
    /// The briefing of the request in flight: a reply that only copies it is no answer.
    echo: EchoGuard,
    /// A candidate waiting for the model's second opinion.
    doubted: Option<Box<Doubted>>,
    /// Every request made for a prompt, and the candidates refused: kept for export.
    requests: Vec<Vec<ChatMessage>>,
    refused: Vec<RefusedCandidate>,
    /// The candidate being settled was refused only because its second opinion could not
    /// be had: blocked, but no example of a bad answer.
    unjudged: bool,
}

/// A candidate the gate passed in doubt, and the answer it came in.
#[derive(Debug, Clone)]
struct Doubted {
    text: String,
    verdict: Verdict,
    answer: ModelAnswer,
}

impl PromptSearch {
    pub fn new(screen: &str, error: bool) -> Self {
        PromptSearch {
            screen: screen.to_string(),
            signal: if error {
                PaneSignal::Error
            } else {
                PaneSignal::infer(screen)
            },
            rejections: Vec::new(),
            lines: Vec::new(),
            asked: None,
            echo: EchoGuard::default(),
            doubted: None,
            requests: Vec::new(),
            refused: Vec::new(),
            unjudged: false,
        }
    }

    /// The first step: the model when the session has one, else the fallbacks.
    pub fn start(&mut self, rec: &mut SessionRecord, deps: &Deps) -> Step {
        if deps.has_model && !rec.plan_only {
            self.ask(rec, deps)
        } else {
            self.fallback(rec, deps)
        }
    }

    fn ask(&mut self, rec: &SessionRecord, deps: &Deps) -> Step {
        let ctx = deps.context(rec, &self.screen, self.signal, &self.rejections);
        self.asked = Some((ctx.raw_tokens, ctx.estimated_tokens));
        let mut allowed: Vec<&str> = vec![rec.goal.as_str()];
        allowed.extend(rec.tasks.tasks.iter().map(|t| t.title.as_str()));
        allowed.extend(rec.history.iter().map(String::as_str));
        self.echo = EchoGuard::new(&ctx.messages, &allowed);
        self.requests.push(ctx.messages.clone());
        Step::Ask(ChatRequest::new(ctx.messages))
    }

    /// The model answered: the gate judges the answer (or, when one was asked for, this
    /// is the second opinion on the candidate in doubt).
    pub fn on_reply(&mut self, rec: &mut SessionRecord, deps: &Deps, reply: ModelAnswer) -> Step {
        rec.record_latency(reply.latency_ms);
        if let Some(d) = self.doubted.take() {
            let opinion = Opinion::parse(&reply.text);
            deps.remember_opinion(&d.text, &opinion);
            return self.on_opinion(rec, deps, *d, opinion, Some(reply.latency_ms));
        }
        let (raw, estimated) = self.asked.take().unwrap_or_default();
        if let Some(actual) = reply.prompt_tokens {
            deps.observe_tokens(raw, actual);
        }
        let text = clean_reply_guarded(&reply.text, REPLY_MAX_CHARS, &self.echo);
        let verdict = deps.gate.check(&text, &gate_context(rec, deps).view());
        let answer = ModelAnswer {
            prompt_tokens: Some(reply.prompt_tokens.unwrap_or(estimated)),
            ..reply
        };
        if !(verdict.doubtful() && deps.cfg.second_opinion) {
            return self.settle(rec, deps, text, verdict, answer);
        }
        let doubt = verdict.doubt.clone().unwrap_or_default();
        let d = Doubted {
            text,
            verdict,
            answer,
        };
        if let Some(opinion) = deps.known_opinion(&d.text) {
            self.lines.push(format!("in doubt: {doubt}"));
            return self.on_opinion(rec, deps, d, opinion, None);
        }
        self.lines
            .push(format!("in doubt: {doubt}; asking for a second opinion"));
        let req = ChatRequest::new(opinion::request(&d.text))
            .with_temperature(0.0)
            .with_max_tokens(opinion::MAX_TOKENS);
        self.doubted = Some(Box::new(d));
        Step::Ask(req)
    }

    /// The second opinion on a candidate in doubt: it decides whether the candidate passes.
    /// `latency_ms` is the call's, `None` for an opinion the cache held (said in its line).
    fn on_opinion(
        &mut self,
        rec: &mut SessionRecord,
        deps: &Deps,
        d: Doubted,
        opinion: Opinion,
        latency_ms: Option<u64>,
    ) -> Step {
        let line = match &opinion {
            Opinion::Safe => "second opinion: not destructive".to_string(),
            Opinion::Destructive(why) => format!("second opinion: {why}"),
        };
        self.lines.push(match latency_ms {
            Some(_) => line,
            None => format!("{line} (cached)"),
        });
        let latency_ms = latency_ms.unwrap_or(0);
        let verdict = opinion.apply(&d.verdict);
        let answer = ModelAnswer {
            latency_ms: d.answer.latency_ms + latency_ms,
            ..d.answer
        };
        self.settle(rec, deps, d.text, verdict, answer)
    }

    /// A judged answer: chosen when it passed, else asked again or the fallbacks.
    fn settle(
        &mut self,
        rec: &mut SessionRecord,
        deps: &Deps,
        text: String,
        verdict: Verdict,
        answer: ModelAnswer,
    ) -> Step {
        let unjudged = std::mem::take(&mut self.unjudged);
        let attempt = self.rejections.len();
        if verdict.pass {
            self.lines.push(format!("pass (attempt {})", attempt + 1));
            return Step::Chosen(Candidate {
                prompt: text,
                source: if attempt == 0 {
                    TurnSource::Model
                } else {
                    TurnSource::Regenerated
                },
                gate: std::mem::take(&mut self.lines),
                latency_ms: answer.latency_ms,
                prompt_tokens: answer.prompt_tokens.unwrap_or(0),
                cached_tokens: answer.cached_tokens.unwrap_or(0),
                asked: std::mem::take(&mut self.requests),
                refused: std::mem::take(&mut self.refused),
            });
        }
        rec.gated += 1;
        for r in &verdict.reasons {
            *rec.rejections.entry(r.rule).or_insert(0) += 1;
        }
        let why = verdict_lines(&verdict).join("; ");
        self.lines
            .push(format!("blocked: {why} — {:?}", truncate(&text, 120)));
        if !unjudged {
            self.refused.push(RefusedCandidate {
                text: text.clone(),
                rules: verdict
                    .reasons
                    .iter()
                    .map(|r| r.rule.as_str().to_string())
                    .collect(),
                reason: why.clone(),
                asked: u32::try_from(self.requests.len().saturating_sub(1)).unwrap_or(u32::MAX),
            });
        }
        self.rejections.push(Rejection { reason: why, text });
        if self.rejections.len() < MODEL_ATTEMPTS {
            self.ask(rec, deps)
        } else {
            self.fallback(rec, deps)
        }
    }

    /// The model call failed: fall back at once. A failed second opinion counts as
    /// "destructive" (and is not cached: the next doubt asks again).
    pub fn on_error(&mut self, rec: &mut SessionRecord, deps: &Deps, error: &str) -> Step {
        rec.model_errors += 1;
        self.lines.push(format!("model error: {error}"));
        if let Some(d) = self.doubted.take() {
            let opinion = Opinion::destructive(format!("no second opinion ({error})"));
            self.unjudged = true;
            return self.on_opinion(rec, deps, *d, opinion, Some(0));
        }
        self.fallback(rec, deps)
    }

    /// The active task's plan step, else a rotating escape prompt for the phase.
    fn fallback(&mut self, rec: &mut SessionRecord, deps: &Deps) -> Step {
        let peers = gate_context(rec, deps);
        if let Some(step) = rec.tasks.active().map(|t| t.title.clone()) {
            let v = deps.gate.check(&step, &peers.view());
            // Nobody gives a plan step a second opinion: in doubt, it is not typed.
            let in_doubt = v.doubtful() && deps.has_model && deps.cfg.second_opinion;
            if in_doubt {
                self.lines.push(format!(
                    "plan step in doubt: {}",
                    v.doubt.as_deref().unwrap_or_default()
                ));
            } else if v.pass {
                rec.fallbacks += u32::from(!rec.plan_only);
                self.lines.push("plan step".into());
                return Step::Chosen(Candidate {
                    prompt: step,
                    source: TurnSource::Plan,
                    gate: std::mem::take(&mut self.lines),
                    latency_ms: 0,
                    prompt_tokens: 0,
                    cached_tokens: 0,
                    asked: std::mem::take(&mut self.requests),
                    refused: std::mem::take(&mut self.refused),
                });
            } else {
                self.lines.push(format!(
                    "plan step blocked: {}",
                    verdict_lines(&v).join("; ")
                ));
            }
        }
        let phase = deps
            .cfg
            .context
            .phases
            .phase_at(rec.turns + 1, rec.max_turns);
        rec.escape_rotation = rec.escape_rotation.wrapping_add(1);
        let Some(escape) = karl_common::gate::pick_escape_in(
            phase,
            rec.escape_rotation,
            &peers.view(),
            &deps.gate,
        ) else {
            return Step::Exhausted;
        };
        rec.fallbacks += 1;
        self.lines.push("escape prompt".into());
        Step::Chosen(Candidate {
            prompt: escape,
            source: TurnSource::Escape,
            gate: std::mem::take(&mut self.lines),
            latency_ms: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            asked: std::mem::take(&mut self.requests),
            refused: std::mem::take(&mut self.refused),
        })
    }
}

/// What the gate judges a session's candidates against (owned, so the record can change
/// while it is in use).
pub struct SessionFence {
    project: String,
    goal: String,
    path: String,
    history: Vec<String>,
    others: Vec<karl_common::gate::OtherSession>,
}

impl SessionFence {
    pub fn view(&self) -> GateContext<'_> {
        GateContext {
            project: &self.project,
            goal: &self.goal,
            path: &self.path,
            history: &self.history,
            others: &self.others,
        }
    }
}

fn gate_context(rec: &SessionRecord, deps: &Deps) -> SessionFence {
    SessionFence {
        project: rec.project.clone(),
        goal: rec.goal.clone(),
        path: rec.path.clone(),
        history: rec.history.clone(),
        others: (deps.peers)(&rec.id),
    }
}

/// `rule: detail` for each reason the gate gave.
pub fn verdict_lines(v: &Verdict) -> Vec<String> {
    v.reasons
        .iter()
        .map(|r| format!("{}: {}", r.rule.as_str(), r.detail))
        .collect()
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}
