//! Sentence meaning from a static embedding model: a table of token vectors and the
//! tokenizer that picks the rows. A text's embedding is the mean of its tokens' vectors,
//! scaled to unit length, so two texts compare by a dot product — microseconds, no network,
//! no GPU. The model is a directory holding `model.safetensors` (one 2-D F16 or F32 tensor:
//! one row per token) and `tokenizer.json` (BPE, SentencePiece style); `scripts/fetch-model.sh`
//! unpacks one (WordLlama's `l2_supercat_256`) from its registry package.
//!
//! Reading the directory is the one piece of IO here ([`Embedder::load`]); everything after
//! it is pure. What the gate does with the vectors lives in `gate`, not here.

mod bpe;
mod safetensors;

use std::path::{Path, PathBuf};

pub use bpe::Bpe;

/// Why a model directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("cannot read {path}: {source} (point [gate] model at a directory made by scripts/fetch-model.sh)")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("model.safetensors: {0}")]
    Weights(String),
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
}

/// The directory `scripts/fetch-model.sh` fills by default:
/// `$XDG_CACHE_HOME/karl/models/wordllama-l2-supercat-256` (`~/.cache` without it).
pub fn default_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("karl/models").join(DEFAULT_MODEL))
}

/// `KARL_GATE_MODEL` if set, else [`default_dir`]: where tests and benchmarks find the
/// model (the programs take the same variable through their `--gate-model` flag).
pub fn dir_from_env() -> Option<PathBuf> {
    std::env::var_os("KARL_GATE_MODEL")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(default_dir)
}

/// The model KARL is tested with.
pub const DEFAULT_MODEL: &str = "wordllama-l2-supercat-256";

/// A loaded static embedding model.
pub struct Embedder {
    bpe: Bpe,
    /// Row-major `[rows, dim]`.
    table: Vec<f32>,
    /// Each row's length: how much a token weighs in a mean (function words are short).
    norms: Vec<f32>,
    /// The lone word-boundary token, left out of single words.
    mark: Option<u32>,
    dim: usize,
    name: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("name", &self.name)
            .field("rows", &self.rows())
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

/// A unit-length sentence vector (all zeros for text with no tokens).
pub type Vector = Vec<f32>;

impl Embedder {
    /// Loads `dir/model.safetensors` and `dir/tokenizer.json`.
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| EmbedError::Read { path, source })
        };
        let weights = read("model.safetensors")?;
        let tokenizer = read("tokenizer.json")?;
        let tokenizer = String::from_utf8(tokenizer)
            .map_err(|_| EmbedError::Tokenizer("not UTF-8".to_string()))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Embedder::from_parts(&weights, &tokenizer, name)
    }

    /// Builds the model from the two files' contents.
    pub fn from_parts(
        weights: &[u8],
        tokenizer: &str,
        name: String,
    ) -> Result<Embedder, EmbedError> {
        let (table, rows, dim) = safetensors::single_matrix(weights)?;
        let bpe = Bpe::from_json(tokenizer)?;
        if bpe.max_id() as usize >= rows {
            return Err(EmbedError::Weights(format!(
                "{rows} rows, but the tokenizer has id {}: weights and tokenizer do not belong together",
                bpe.max_id()
            )));
        }
        let norms = table
            .chunks_exact(dim)
            .map(|r| r.iter().map(|x| x * x).sum::<f32>().sqrt())
            .collect();
        let mark = bpe.id_of("\u{2581}");
        Ok(Embedder {
            bpe,
            table,
            norms,
            mark,
            dim,
            name,
        })
    }

    /// The directory name the model was loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    fn rows(&self) -> usize {
        self.table.len() / self.dim.max(1)
    }

    /// Bytes the table holds (what loading the model adds, give or take the vocabulary).
    pub fn table_bytes(&self) -> usize {
        self.table.len() * std::mem::size_of::<f32>()
    }

    /// The token ids of `text`.
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        self.bpe.encode(text)
    }

    /// The mean of `text`'s token vectors, at unit length.
    pub fn embed(&self, text: &str) -> Vector {
        let mut v = vec![0.0f32; self.dim];
        let ids = self.bpe.encode(text);
        for &id in ids.iter() {
            let row = id as usize * self.dim;
            if let Some(r) = self.table.get(row..row + self.dim) {
                for (a, b) in v.iter_mut().zip(r) {
                    *a += b;
                }
            }
        }
        normalize(&mut v);
        v
    }
}

impl Embedder {
    /// A single word's vector (the mean of its tokens, at unit length) and its weight (its
    /// heaviest token's length: about 2 for "the" and "with", 10 to 20 for "parser" or
    /// "migration").
    pub fn word(&self, word: &str) -> (Vector, f32) {
        let mut ids = self.bpe.encode(word);
        if ids.len() > 1 {
            ids.retain(|&id| Some(id) != self.mark);
        }
        let mut v = vec![0.0f32; self.dim];
        let mut weight = 0.0f32;
        for &id in ids.iter() {
            let row = id as usize * self.dim;
            if let Some(r) = self.table.get(row..row + self.dim) {
                v.iter_mut().zip(r).for_each(|(a, b)| *a += b);
                weight = weight.max(self.norms.get(id as usize).copied().unwrap_or(0.0));
            }
        }
        normalize(&mut v);
        (v, weight)
    }
}

fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 && n.is_finite() {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// The cosine of two unit vectors (0 when either is empty or they differ in length).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    // Eight running sums, so that the compiler can keep them in vector registers (one
    // running sum is a chain of dependent additions).
    let mut lanes = [0.0f32; 8];
    let (xs, ys) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = xs
        .remainder()
        .iter()
        .zip(ys.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in xs.zip(ys) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}
