//! The model's second opinion on a prompt the gate passed in doubt ([`Verdict::doubt`]):
//! the short classification request, the reading of its answer, and the per-text cache.
//! Pure: the caller sends the request (temperature 0, at most [`MAX_TOKENS`]) and treats a
//! failed or timed-out call as [`Opinion::destructive`], like an unreadable answer — in
//! doubt, nothing is typed.
//!
//! Not here: when a prompt is doubtful (the gate) and the call itself (the coordinator's
//! prompt search, `karl-ctl validate --model-url`).
//!
//! [`Verdict::doubt`]: super::Verdict::doubt

use std::collections::{HashMap, VecDeque};

use serde::Deserialize;

use super::{Reason, Rule, Verdict};
use crate::context::ChatMessage;

/// The most tokens the answer may take: `{"destructive": false}` is about ten.
pub const MAX_TOKENS: u32 = 24;

/// How many opinions the cache keeps (oldest forgotten first).
pub const CACHE_ENTRIES: usize = 1024;

/// The longest prompt text sent for an opinion, in characters.
const MAX_PROMPT_CHARS: usize = 2000;

const SYSTEM: &str = "You review one instruction that is about to be typed into an AI coding \
agent working in a developer's repository. Decide whether carrying it out would destroy or \
give away something that cannot be recovered: deleting files, data, databases, backups, disks \
or git history; force pushing or rewriting shared history; tearing down infrastructure; \
killing system processes; changing system permissions or ownership; running code fetched from \
the network unseen; publishing secrets or private data. An instruction that forbids, prevents, \
tests or documents such an action is not destructive, and neither is ordinary work that only \
uses words like delete, drop or kill in a harmless sense. Answer with JSON only: \
{\"destructive\": true} or {\"destructive\": false}.";

/// The classification request for `prompt`.
pub fn request(prompt: &str) -> Vec<ChatMessage> {
    let text: String = prompt.trim().chars().take(MAX_PROMPT_CHARS).collect();
    vec![
        ChatMessage::system(SYSTEM),
        ChatMessage::user(format!("Instruction:\n{text}")),
    ]
}

/// What the model said of a doubtful prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opinion {
    /// Not destructive: the prompt may be typed.
    Safe,
    /// Destructive, or no usable answer; the text says which.
    Destructive(String),
}

impl Opinion {
    /// The opinion when the call failed or timed out.
    pub fn destructive(why: impl Into<String>) -> Opinion {
        Opinion::Destructive(why.into())
    }

    /// Reads the model's answer: a JSON object with a boolean `destructive` (or a `verdict`
    /// of `block`/`allow`), possibly inside prose or a code fence. Anything else counts as
    /// destructive.
    pub fn parse(reply: &str) -> Opinion {
        #[derive(Deserialize)]
        struct Answer {
            destructive: Option<bool>,
            verdict: Option<String>,
        }
        let json = match (reply.find('{'), reply.rfind('}')) {
            (Some(a), Some(b)) if a < b => &reply[a..=b],
            _ => return Opinion::destructive("the model's answer held no JSON object"),
        };
        let Ok(answer) = serde_json::from_str::<Answer>(json) else {
            return Opinion::destructive("the model's answer was not the JSON asked for");
        };
        let verdict = answer.verdict.map(|v| v.trim().to_ascii_lowercase());
        match (answer.destructive, verdict.as_deref()) {
            (Some(false), _) | (None, Some("allow" | "safe" | "pass")) => Opinion::Safe,
            (Some(true), _) | (None, Some("block" | "destructive" | "deny")) => {
                Opinion::destructive("the model judges it destructive")
            }
            _ => Opinion::destructive("the model's answer said neither yes nor no"),
        }
    }

    /// The verdict once this opinion is in: `verdict` as it was when safe, a destructive
    /// block naming the doubt when not.
    pub fn apply(&self, verdict: &Verdict) -> Verdict {
        match self {
            Opinion::Safe => verdict.clone(),
            Opinion::Destructive(why) => {
                let doubt = verdict.doubt.as_deref().unwrap_or("a doubtful prompt");
                let mut reasons = verdict.reasons.clone();
                reasons.push(Reason {
                    rule: Rule::Destructive,
                    detail: format!("second opinion: {why} ({doubt})"),
                });
                Verdict::from_reasons(reasons)
            }
        }
    }
}

/// Opinions already given, by prompt text, so one doubtful text costs one call.
#[derive(Debug, Default)]
pub struct OpinionCache {
    map: HashMap<String, Opinion>,
    order: VecDeque<String>,
}

impl OpinionCache {
    pub fn get(&self, prompt: &str) -> Option<&Opinion> {
        self.map.get(prompt)
    }

    /// Keeps `opinion` for `prompt`. A failed call is not kept: the next doubt asks again.
    pub fn insert(&mut self, prompt: &str, opinion: Opinion) {
        if self.map.insert(prompt.to_string(), opinion).is_none() {
            self.order.push_back(prompt.to_string());
        }
        while self.order.len() > CACHE_ENTRIES {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Action, Gate, GateContext};

    #[test]
    fn answers_are_read_strictly() {
        for (reply, safe) in [
            ("{\"destructive\": false}", true),
            ("```json\n{\"destructive\": false}\n```", true),
            ("Sure. {\"verdict\": \"allow\"}", true),
            ("{\"destructive\": true}", false),
            ("{\"verdict\": \"BLOCK\"}", false),
            ("not destructive", false),
            ("{\"destructive\": \"no\"}", false),
            ("{}", false),
            ("} {", false),
            ("", false),
        ] {
            assert_eq!(Opinion::parse(reply) == Opinion::Safe, safe, "{reply:?}");
        }
    }

    #[test]
    fn the_request_is_short_and_carries_the_prompt() {
        let long = "x".repeat(5000);
        let m = request(&long);
        assert_eq!(m.len(), 2);
        assert!(m[0].content.contains("JSON only"));
        assert!(m[1].content.chars().count() < MAX_PROMPT_CHARS + 20);
        assert!(request("drop it")[1].content.ends_with("drop it"));
    }

    #[test]
    fn a_destructive_opinion_blocks_and_names_the_doubt() {
        let v = Gate::new().check(
            "Make sure the cleanup script never runs `rm -rf /`.",
            &GateContext::default(),
        );
        assert!(v.doubtful(), "{v:?}");
        assert_eq!(Opinion::Safe.apply(&v), v);
        let blocked = Opinion::destructive("the model judges it destructive").apply(&v);
        assert!(!blocked.pass);
        assert_eq!(blocked.action, Action::Block);
        assert!(blocked.reasons[0].detail.contains("rm -rf"), "{blocked:?}");
    }

    #[test]
    fn the_cache_forgets_the_oldest() {
        let mut c = OpinionCache::default();
        for i in 0..CACHE_ENTRIES + 10 {
            c.insert(&format!("p{i}"), Opinion::Safe);
        }
        c.insert("p20", Opinion::destructive("x"));
        assert_eq!(c.len(), CACHE_ENTRIES);
        assert!(c.get("p0").is_none());
        assert_eq!(c.get("p20"), Some(&Opinion::destructive("x")));
        assert_eq!(
            c.get(&format!("p{}", CACHE_ENTRIES + 9)),
            Some(&Opinion::Safe)
        );
    }
}
