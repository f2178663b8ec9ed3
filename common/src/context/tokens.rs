//! Token estimates for the context budget: a character-class heuristic, calibrated per
//! model from the `usage.prompt_tokens` the server reports.
//!
//! The heuristic counts in quarter tokens, and the count of a concatenation is the sum of
//! the counts of its pieces. The budget arithmetic in [`super`] relies on that: it trims
//! blocks line by line without re-scanning the whole prompt, and the estimate of the
//! rendered messages is exactly the sum it tracked. Estimating slightly high is the safe
//! side (the window has room for the reply); calibration pulls the estimate to what the
//! model's tokenizer really counts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Quarter tokens a chat template adds per message (role markers, separators).
pub(crate) const MESSAGE_OVERHEAD_Q: u64 = 16;
/// Quarter tokens the template adds to prime the assistant's reply.
pub(crate) const REPLY_PRIMING_Q: u64 = 12;

/// Lowest and highest calibration factor accepted: a reply outside this range is a
/// server quirk (or a bug), not a tokenizer, and must not wreck the budget.
const MIN_FACTOR: f64 = 0.5;
const MAX_FACTOR: f64 = 3.0;
/// Weight of a new observation once a few samples are in.
const EMA_ALPHA: f64 = 0.3;
/// Prompts shorter than this say little about the tokenizer (template overhead dominates).
const MIN_SAMPLE_TOKENS: u32 = 32;

/// Quarter tokens of `text`: ASCII letters, digits and spaces a quarter each (about four
/// characters a token in prose and identifiers), other ASCII (punctuation, newlines —
/// code and terminal output tokenize poorly) a half, other characters up to U+2FFF (box
/// drawing, accents, symbols) a whole token, CJK and emoji two.
pub fn quarters(text: &str) -> u64 {
    text.chars().map(char_quarters).sum()
}

pub(crate) fn char_quarters(c: char) -> u64 {
    if c.is_ascii_alphanumeric() || c == ' ' {
        1
    } else if c.is_ascii() {
        2
    } else if (c as u32) < 0x3000 {
        4
    } else {
        8
    }
}

/// How far the heuristic is off for one model: estimates are multiplied by this factor.
/// An exponential moving average of `actual / estimated`, bounded to 0.5..=3.0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    factor: f64,
    samples: u32,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            factor: 1.0,
            samples: 0,
        }
    }
}

impl Calibration {
    /// The factor in use (a stored value that is not finite or out of range reads as
    /// its nearest bound, or 1.0 when it is not a number).
    pub fn factor(&self) -> f64 {
        if self.factor.is_finite() {
            self.factor.clamp(MIN_FACTOR, MAX_FACTOR)
        } else {
            1.0
        }
    }

    /// Observations taken so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Folds in one reply: `estimated` is the *uncalibrated* estimate of the request
    /// ([`super::Context::raw_tokens`]), `actual` the server's `usage.prompt_tokens`.
    /// The first samples weigh more (1, 1/2, 1/3) so a fresh model converges in a few
    /// turns; after that each sample moves the factor by 30%. Returns the new factor.
    pub fn observe(&mut self, estimated: u32, actual: u32) -> f64 {
        if estimated < MIN_SAMPLE_TOKENS || actual == 0 {
            return self.factor();
        }
        let ratio = (f64::from(actual) / f64::from(estimated)).clamp(MIN_FACTOR, MAX_FACTOR);
        let alpha = EMA_ALPHA.max(1.0 / f64::from(self.samples.saturating_add(1)));
        self.factor = (self.factor() * (1.0 - alpha) + ratio * alpha).clamp(MIN_FACTOR, MAX_FACTOR);
        self.samples = self.samples.saturating_add(1);
        self.factor
    }
}

/// Calibrations by model key (the engine uses the endpoint URL, or the model name the
/// server reports), stored with the coordinator's state so restarts keep them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibrations {
    by_model: BTreeMap<String, Calibration>,
}

impl Calibrations {
    /// The calibration for `model` (the default, factor 1.0, when none was observed).
    pub fn get(&self, model: &str) -> Calibration {
        self.by_model.get(model).copied().unwrap_or_default()
    }

    /// Folds one reply into `model`'s calibration; returns the new factor.
    pub fn observe(&mut self, model: &str, estimated: u32, actual: u32) -> f64 {
        self.by_model
            .entry(model.to_string())
            .or_default()
            .observe(estimated, actual)
    }

    /// An estimator for `model`.
    pub fn estimator(&self, model: &str) -> TokenEstimator {
        TokenEstimator::new(self.get(model))
    }
}

/// Estimates token counts with one model's calibration.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenEstimator {
    calibration: Calibration,
}

impl TokenEstimator {
    pub fn new(calibration: Calibration) -> Self {
        TokenEstimator { calibration }
    }

    pub fn calibration(&self) -> Calibration {
        self.calibration
    }

    /// Calibrated tokens of `text`.
    pub fn estimate(&self, text: &str) -> u32 {
        self.tokens(quarters(text))
    }

    /// Calibrated tokens of a quarter count (rounded up).
    pub fn tokens(&self, quarters: u64) -> u32 {
        let t = (quarters as f64 * self.calibration.factor() / 4.0).ceil();
        if t >= f64::from(u32::MAX) {
            u32::MAX
        } else {
            t as u32
        }
    }

    /// Calibrated tokens of a chat request as a whole: message contents plus the
    /// template overhead. [`super::build_context`] keeps this at or under its budget.
    pub fn estimate_messages<'a>(&self, contents: impl IntoIterator<Item = &'a str>) -> u32 {
        self.tokens(messages_quarters(contents))
    }
}

/// Uncalibrated quarter count of a chat request.
pub(crate) fn messages_quarters<'a>(contents: impl IntoIterator<Item = &'a str>) -> u64 {
    REPLY_PRIMING_Q
        + contents
            .into_iter()
            .map(|c| MESSAGE_OVERHEAD_Q + quarters(c))
            .sum::<u64>()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn quarters_add_up_over_concatenation() {
        let a = "fn main() { println!(\"héllo\"); }";
        let b = "── 日本語 🚀 plain words";
        assert_eq!(quarters(&format!("{a}{b}")), quarters(a) + quarters(b));
    }

    #[test]
    fn prose_is_about_four_chars_a_token() {
        let text = "Add a unit test for the parser and run the whole suite again";
        let t = TokenEstimator::default().estimate(text);
        assert_eq!(t as usize, text.len().div_ceil(4));
    }

    #[test]
    fn calibration_converges_and_stays_bounded() {
        let mut c = Calibration::default();
        for _ in 0..20 {
            c.observe(1000, 1300);
        }
        assert!((c.factor() - 1.3).abs() < 0.01, "{}", c.factor());
        // A wild reply cannot push the factor outside its bounds.
        for _ in 0..50 {
            c.observe(100, 100_000);
        }
        assert!((c.factor() - MAX_FACTOR).abs() < 1e-6, "{}", c.factor());
        for _ in 0..50 {
            c.observe(100_000, 1);
        }
        assert!((c.factor() - MIN_FACTOR).abs() < 1e-6, "{}", c.factor());
    }

    #[test]
    fn first_sample_is_taken_whole_and_tiny_samples_are_ignored() {
        let mut c = Calibration::default();
        c.observe(10, 40);
        assert_eq!(c.samples(), 0);
        c.observe(1000, 800);
        assert!((c.factor() - 0.8).abs() < 1e-9);
        assert_eq!(c.samples(), 1);
    }

    #[test]
    fn corrupt_stored_factor_reads_as_sane() {
        let c: Calibration = serde_json::from_str(r#"{"factor":1e300,"samples":3}"#).unwrap();
        assert_eq!(c.factor(), MAX_FACTOR);
        let est = TokenEstimator::new(c);
        assert_eq!(est.estimate("abcd"), 3);
    }

    #[test]
    fn calibrated_estimate_tracks_observed_usage() {
        let mut cals = Calibrations::default();
        let text = "x".repeat(4000);
        let raw = TokenEstimator::default().estimate(&text);
        for _ in 0..10 {
            cals.observe("m", raw, raw * 2);
        }
        let est = cals.estimator("m").estimate(&text);
        assert!(est.abs_diff(raw * 2) <= raw / 50, "{est} vs {}", raw * 2);
        assert_eq!(cals.estimator("other").estimate(&text), raw);
    }
}
