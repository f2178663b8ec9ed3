//! The embedding model as KARL loads it (`scripts/fetch-model.sh` puts it in place; CI runs
//! it): token ids equal to the reference tokenizer's on 477 texts (the tuning prompts and
//! some awkward ones), and the same sentence vectors.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use karl_common::embed::{cosine, dir_from_env, Embedder};
use serde::Deserialize;

/// The model directory: `KARL_GATE_MODEL`, else the default one. Missing is a failure that
/// says how to fetch it, not a skip.
fn model_dir() -> PathBuf {
    let dir = dir_from_env().unwrap();
    assert!(
        dir.join("model.safetensors").exists(),
        "no embedding model in {}: run scripts/fetch-model.sh",
        dir.display()
    );
    dir
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    head: Vec<f32>,
}

#[test]
fn tokens_and_vectors_match_the_reference() {
    let started = std::time::Instant::now();
    let model = Embedder::load(&model_dir()).unwrap();
    println!("loaded {model:?} in {:?}", started.elapsed());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/embed/wordllama-tokens.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    for line in text.lines() {
        let case: Case = serde_json::from_str(line).unwrap();
        assert_eq!(model.tokens(&case.text), case.ids, "{:?}", case.text);
        let v = model.embed(&case.text);
        for (a, b) in v.iter().zip(case.head.iter()) {
            assert!((a - b).abs() < 1e-3, "{:?}: {a} vs {b}", case.text);
        }
        n += 1;
    }
    assert!(n >= 470);
    let a = model.embed("Fix the failing login test.");
    assert!((cosine(&a, &a) - 1.0).abs() < 1e-4);
    assert_eq!(model.embed(""), vec![0.0; model.dim()]);
}

#[test]
fn a_missing_model_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = Embedder::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("model.safetensors"), "{e}");
    assert!(e.contains("fetch-model.sh"), "{e}");
    std::fs::write(dir.path().join("model.safetensors"), b"junk").unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), b"{}").unwrap();
    assert!(Embedder::load(dir.path()).is_err());
}
