//! The prompt source chain for one turn: model → gate (→ regenerate with the gate's
//! reason, up to three answers) → the active task's plan step → a rotating escape prompt
//! for the session's phase, each checked by the gate.
//!
//! [`PromptSearch`] is a small state machine of its own: the session machine asks it for
//! the next model request, hands it each reply, and takes the [`Candidate`] it settles on.
//! The model call itself is an effect the shell carries out; nothing here does IO.

use karl_common::gate::{GateContext, Verdict};

use super::machine::Deps;
use crate::context::{clean_reply_guarded, EchoGuard, PaneSignal, Rejection, REPLY_MAX_CHARS};
use crate::model::ChatRequest;
use crate::records::{SessionRecord, TurnSource};

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
        Step::Ask(ChatRequest::new(ctx.messages))
    }

    /// The model answered: the gate judges the answer.
    pub fn on_reply(&mut self, rec: &mut SessionRecord, deps: &Deps, reply: ModelAnswer) -> Step {
        rec.record_latency(reply.latency_ms);
        let (raw, estimated) = self.asked.take().unwrap_or_default();
        if let Some(actual) = reply.prompt_tokens {
            deps.observe_tokens(raw, actual);
        }
        let text = clean_reply_guarded(&reply.text, REPLY_MAX_CHARS, &self.echo);
        let attempt = self.rejections.len();
        let verdict = deps.gate.check(&text, &gate_context(rec, deps).view());
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
                latency_ms: reply.latency_ms,
                prompt_tokens: reply.prompt_tokens.unwrap_or(estimated),
                cached_tokens: reply.cached_tokens.unwrap_or(0),
            });
        }
        rec.gated += 1;
        for r in &verdict.reasons {
            *rec.rejections.entry(r.rule).or_insert(0) += 1;
        }
        let why = verdict_lines(&verdict).join("; ");
        self.lines
            .push(format!("blocked: {why} — {:?}", truncate(&text, 120)));
        self.rejections.push(Rejection { reason: why, text });
        if self.rejections.len() < MODEL_ATTEMPTS {
            self.ask(rec, deps)
        } else {
            self.fallback(rec, deps)
        }
    }

    /// The model call failed: fall back at once.
    pub fn on_error(&mut self, rec: &mut SessionRecord, deps: &Deps, error: &str) -> Step {
        rec.model_errors += 1;
        self.lines.push(format!("model error: {error}"));
        self.fallback(rec, deps)
    }

    /// The active task's plan step, else a rotating escape prompt for the phase.
    fn fallback(&mut self, rec: &mut SessionRecord, deps: &Deps) -> Step {
        let peers = gate_context(rec, deps);
        if let Some(step) = rec.tasks.active().map(|t| t.title.clone()) {
            let v = deps.gate.check(&step, &peers.view());
            if v.pass {
                rec.fallbacks += u32::from(!rec.plan_only);
                self.lines.push("plan step".into());
                return Step::Chosen(Candidate {
                    prompt: step,
                    source: TurnSource::Plan,
                    gate: std::mem::take(&mut self.lines),
                    latency_ms: 0,
                    prompt_tokens: 0,
                    cached_tokens: 0,
                });
            }
            self.lines.push(format!(
                "plan step blocked: {}",
                verdict_lines(&v).join("; ")
            ));
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
