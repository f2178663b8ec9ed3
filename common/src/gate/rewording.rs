//! Whether a look-alike rewords an earlier prompt, learned: the repeat judges' signals for one
//! (candidate, earlier prompt) pair — the lexical measure's score and the rule that decided
//! it, what the novelty check finds new, the content words and names each prompt has that
//! the other lacks, how much of each the other covers by terms, letter trigrams and word
//! vectors, the sentences' cosine and lengths — combined by gradient-boosted trees
//! (`rules/rewording.json`) fitted to the tuning prompts (`scripts/train-rewording.sh`),
//! never to the held-out ones.
//!
//! The hand rules decide one signal at a time ("another value", "a new object in the same
//! slot"); a rewording often trips one of them while every other signal says "the same
//! request", and the trees weigh them together. Used only with the embedding model loaded
//! and for prompts no longer than [`fits`] allows; otherwise the rules alone decide. Pure:
//! text in, signals and a probability out.

use std::sync::OnceLock;

use serde::Deserialize;

use super::novelty::{self, Content, WordSense};
use super::repeat::{self, Lexical, Profile};
use crate::embed::{cosine, Embedder, Vector};

/// The signals, in the order the trees read them (the model file names them too).
pub const SIGNALS: [&str; 33] = [
    "score",
    "cosine",
    "trigram_jaccard",
    "trigram_cover",
    "term_cover_candidate",
    "term_cover_earlier",
    "ln_words_candidate",
    "ln_words_earlier",
    "score_if_nothing_new",
    "why_overlap",
    "why_different_action",
    "why_new_object",
    "why_sibling_identifier",
    "why_another_method",
    "why_another_file",
    "why_another_member",
    "why_another_name",
    "why_another_value",
    "why_noun_modifier",
    "why_different_behaviour",
    "why_different_object",
    "why_other",
    "new_nothing",
    "new_substitution",
    "new_addition",
    "new_narrowing",
    "new_undoing",
    "new_words_candidate",
    "new_words_earlier",
    "vector_cover_candidate",
    "vector_cover_earlier",
    "new_names_candidate",
    "new_names_earlier",
];

/// The lexical measure's reasons, in the order of the `why_*` signals; any other is
/// `why_other`.
const REASONS: [&str; 12] = [
    "overlap",
    "a different action",
    "a new object",
    "a sibling identifier",
    "another HTTP method",
    "another file",
    "another member, flag or endpoint",
    "another name in the same place",
    "another value",
    "the same noun with another modifier",
    "a different behaviour",
    "a different object",
];

/// Pairs this far apart (lexical score and trigram Jaccard both below) are not compared by
/// the trees: no rewording in the tuning sets is.
const FAR_SCORE: f32 = 0.2;
const FAR_TRIGRAMS: f32 = 0.15;

/// The longest prompt the judge reads, in words: twice the longest of the tuning prompts
/// it was fitted to (21). Longer prompts are left to the rules, which read any length.
const MAX_WORDS: usize = 48;

/// True if the judge reads a prompt this long.
pub fn fits(text: &str) -> bool {
    text.split_whitespace().nth(MAX_WORDS).is_none()
}

/// The candidate, read once for all its comparisons: its sentence vector and letter
/// trigrams.
#[derive(Debug)]
pub struct Candidate {
    profile: Profile,
    content: Content,
    vector: Vector,
    trigrams: Vec<u32>,
    words: usize,
}

impl Candidate {
    pub fn new(text: &str, model: &Embedder, sense: &dyn WordSense) -> Candidate {
        Candidate {
            profile: repeat::profile(text),
            content: novelty::read(text, sense),
            vector: model.embed(text),
            trigrams: trigrams(text),
            words: text.split_whitespace().count(),
        }
    }
}

/// Hashes of the letter trigrams of the normalized prompt, sorted and deduplicated.
fn trigrams(text: &str) -> Vec<u32> {
    let norm: Vec<char> = repeat::normalize_prompt(text).chars().collect();
    let mut out: Vec<u32> = norm
        .windows(3)
        .map(|w| {
            // FNV-1a over the three code points.
            let mut h: u32 = 0x811c_9dc5;
            for c in w {
                h ^= u32::from(*c);
                h = h.wrapping_mul(0x0100_0193);
            }
            h
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// How many hashes two sorted sets share.
fn shared(a: &[u32], b: &[u32]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// The signals of the candidate against one earlier prompt, or `None` when the two are too
/// far apart to compare.
pub fn signals(
    c: &Candidate,
    earlier: &str,
    lexical: &Lexical,
    sense: &dyn WordSense,
    model: &Embedder,
) -> Option<[f32; SIGNALS.len()]> {
    let look = lexical.look(&c.profile, earlier);
    let (score, why) = (look.score, look.why);
    let e_trigrams = trigrams(earlier);
    let common = shared(&c.trigrams, &e_trigrams) as f32;
    let union = (c.trigrams.len() + e_trigrams.len()) as f32 - common;
    let jaccard = if union > 0.0 { common / union } else { 0.0 };
    if score < FAR_SCORE && jaccard < FAR_TRIGRAMS {
        return None;
    }
    let cover = common / c.trigrams.len().max(1) as f32;
    let e = novelty::read(earlier, sense);
    let new = match novelty::novelty_of(&c.content, &e, sense) {
        None => 0,
        Some(n) if n.contains("where the earlier") => 1,
        Some(n) if n.starts_with("adds") => 2,
        Some(n) if n.starts_with("narrows") => 3,
        Some(_) => 4,
    };
    let mut x = [0.0f32; SIGNALS.len()];
    x[0] = score;
    x[1] = cosine(&c.vector, &model.embed(earlier));
    x[2] = jaccard;
    x[3] = cover;
    x[4] = look.cover_candidate;
    x[5] = look.cover_earlier;
    x[6] = (c.words as f32).ln_1p();
    x[7] = (earlier.split_whitespace().count() as f32).ln_1p();
    x[8] = if new == 0 { score } else { 0.0 };
    let why_at = REASONS
        .iter()
        .position(|r| *r == why)
        .unwrap_or(REASONS.len());
    x[9 + why_at] = 1.0;
    x[22 + new] = 1.0;
    let apart = novelty::apart(&c.content, &e, sense);
    x[27] = apart.new_in_candidate as f32;
    x[28] = apart.new_in_earlier as f32;
    x[29] = apart.vector_cover_candidate;
    x[30] = apart.vector_cover_earlier;
    x[31] = apart.new_names_in_candidate as f32;
    x[32] = apart.new_names_in_earlier as f32;
    Some(x)
}

/// One regression tree, as arrays: node `i` splits on `feature[i]` at `threshold[i]` (left
/// when the signal is at or below it) or, with no children, is a leaf worth `value[i]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tree {
    feature: Vec<i32>,
    threshold: Vec<f32>,
    left: Vec<i32>,
    right: Vec<i32>,
    value: Vec<f32>,
}

impl Tree {
    fn check(&self, signals: usize) -> Result<(), String> {
        let n = self.feature.len();
        if n == 0
            || [
                self.threshold.len(),
                self.left.len(),
                self.right.len(),
                self.value.len(),
            ]
            .iter()
            .any(|l| *l != n)
        {
            return Err("a tree's arrays differ in length".into());
        }
        for i in 0..n {
            let (l, r) = (self.left[i], self.right[i]);
            if l < 0 && r < 0 {
                continue;
            }
            let ok = |c: i32| c > i as i32 && (c as usize) < n;
            if !ok(l) || !ok(r) || self.feature[i] < 0 || self.feature[i] as usize >= signals {
                return Err(format!("node {i} points outside its tree"));
            }
        }
        Ok(())
    }
}

/// The boosted trees: log-odds `base + rate · Σ tree(x)`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    signals: Vec<String>,
    base: f32,
    rate: f32,
    /// A pair at or above this probability is a rewording.
    pub threshold: f32,
    /// What the figures were when the model was fitted, for the reader.
    #[serde(default)]
    fitted_on: String,
    /// The trees as the file holds them; emptied into `nodes` at load.
    trees: Vec<Tree>,
    /// Every tree's nodes in one array, read by [`Model::probability`]: thousands of trees
    /// walked per verdict stay in a few cache lines each.
    #[serde(skip)]
    nodes: Vec<Node>,
    /// Where each tree starts in `nodes`.
    #[serde(skip)]
    roots: Vec<u32>,
}

/// One node of the flattened trees: a split on `feature` at `cut` (children at absolute
/// indexes), or a leaf (`feature == LEAF`) worth `cut`.
#[derive(Debug, Clone, Copy)]
struct Node {
    feature: u32,
    cut: f32,
    left: u32,
    right: u32,
}

const LEAF: u32 = u32::MAX;

impl Model {
    /// Parses and checks a model file.
    pub fn parse(text: &str) -> Result<Model, String> {
        let m: Model = serde_json::from_str(text).map_err(|e| format!("rewording model: {e}"))?;
        if m.signals != SIGNALS {
            return Err(format!(
                "rewording model: it reads the signals {:?}, the gate computes {:?}",
                m.signals, SIGNALS
            ));
        }
        if m.trees.is_empty() || !(0.0..=1.0).contains(&m.threshold) {
            return Err("rewording model: no trees, or a threshold outside 0..=1".into());
        }
        let mut m = m;
        // The parsed trees are read once, into `nodes`.
        for t in std::mem::take(&mut m.trees) {
            t.check(SIGNALS.len())
                .map_err(|e| format!("rewording model: {e}"))?;
            let at = m.nodes.len() as u32;
            m.roots.push(at);
            for i in 0..t.feature.len() {
                let leaf = t.left[i] < 0;
                m.nodes.push(Node {
                    feature: if leaf { LEAF } else { t.feature[i] as u32 },
                    cut: if leaf { t.value[i] } else { t.threshold[i] },
                    left: if leaf { 0 } else { at + t.left[i] as u32 },
                    right: if leaf { 0 } else { at + t.right[i] as u32 },
                });
            }
        }
        Ok(m)
    }

    /// The shipped model, parsed once; `None` (and the rules alone) if it is broken, which
    /// a test rules out.
    pub fn shipped() -> Option<&'static Model> {
        static MODEL: OnceLock<Option<Model>> = OnceLock::new();
        MODEL
            .get_or_init(|| Model::parse(include_str!("rules/rewording.json")).ok())
            .as_ref()
    }

    /// What the model was fitted to, and its cross-validated figures.
    pub fn fitted_on(&self) -> &str {
        &self.fitted_on
    }

    /// The probability that the pair is a rewording.
    pub fn probability(&self, x: &[f32; SIGNALS.len()]) -> f32 {
        let sum: f32 = self.roots.iter().map(|&r| self.leaf(r as usize, x)).sum();
        let raw = self.base + self.rate * sum;
        1.0 / (1.0 + (-raw).exp())
    }

    /// The value of the leaf `x` reaches from the root at `i`. Children always come after
    /// their parent (checked at load), so this ends.
    fn leaf(&self, mut i: usize, x: &[f32; SIGNALS.len()]) -> f32 {
        loop {
            let n = self.nodes[i];
            if n.feature == LEAF {
                return n.cut;
            }
            i = if x[n.feature as usize] <= n.cut {
                n.left
            } else {
                n.right
            } as usize;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_model_parses_and_reads_the_signals_in_order() {
        let m = Model::parse(include_str!("rules/rewording.json")).unwrap();
        assert!(Model::shipped().is_some());
        assert!(m.threshold > 0.0 && m.threshold < 1.0);
        assert!(!m.fitted_on.is_empty());
    }

    #[test]
    fn a_broken_model_is_refused_with_a_reason() {
        let tree = r#"{"feature":[0,-1,-1],"threshold":[0.5,0,0],"left":[1,-1,-1],"right":[2,-1,-1],"value":[0,-1,1]}"#;
        let names = serde_json::to_string(&SIGNALS[..]).unwrap();
        let ok =
            format!(r#"{{"signals":{names},"base":0,"rate":1,"threshold":0.5,"trees":[{tree}]}}"#);
        let m = Model::parse(&ok).unwrap();
        let mut x = [0.0; SIGNALS.len()];
        assert!(m.probability(&x) < 0.5);
        x[0] = 0.9;
        assert!(m.probability(&x) > 0.5);
        let cycle = ok.replace(r#""left":[1,-1,-1]"#, r#""left":[0,-1,-1]"#);
        assert!(Model::parse(&cycle)
            .unwrap_err()
            .contains("outside its tree"));
        let wrong = ok.replace("\"score\"", "\"scores\"");
        assert!(Model::parse(&wrong)
            .unwrap_err()
            .contains("reads the signals"));
        assert!(Model::parse("{").is_err());
    }

    #[test]
    fn trigram_sets_share_what_both_prompts_have() {
        let a = trigrams("Fix the bug.");
        let b = trigrams("fix the BUG");
        assert_eq!(shared(&a, &b), a.len());
        assert!(shared(&a, &trigrams("Add a flag")) < a.len());
    }
}
