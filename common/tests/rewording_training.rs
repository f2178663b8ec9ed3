//! Writes the learned repeat judge's training data: for every candidate of the tuning
//! repeat files (`tests/fixtures/prompts/repeats-*.jsonl`, never the held-out ones) and each
//! of its last 15 earlier prompts, the signals the gate reads (`Gate::rewording_signals`)
//! and whether the candidate rewords that prompt, marked `fit` or, for the files in
//! [`CHECK_ONLY`], `check`. `scripts/train-rewording.sh` runs it and fits the trees to the
//! `fit` lines; it is ignored in the ordinary test run.

#![allow(clippy::unwrap_used)]

mod gate_score;

use std::io::Write;

use gate_score::{load, model_gate};

const DIR: &str = "tests/fixtures/prompts";

/// Tuning files the judge is checked on, not fitted to. `repeats-tune-7.jsonl` was written
/// to stress three styles (questions with the object as subject, long prompts restated,
/// terse fresh prompts that change a value); fitted to, it cost the other tuning files 3 to
/// 7 points of reworded repeats in cross-validation for 1 to 2 points of fresh prompts.
/// `repeats-tune-10.jsonl` (spelled-out numbers and units, terse fresh prompts) likewise:
/// fitted to, the other files lost 0.5 points of reworded repeats in cross-validation at
/// the threshold chosen there, and its own fresh prompts stayed near 20 % wrongly blocked.
const CHECK_ONLY: &[&str] = &["repeats-tune-7.jsonl", "repeats-tune-10.jsonl"];

/// The history index a label's reason names (`history[3]`).
fn named_index(reason: &str) -> Option<usize> {
    let at = reason.find("history[")? + "history[".len();
    reason[at..].split(']').next()?.parse().ok()
}

#[test]
#[ignore = "writes training data; run by scripts/train-rewording.sh"]
fn write_rewording_training_data() {
    let out = std::env::var("KARL_REWORDING_OUT").expect("set KARL_REWORDING_OUT to a file");
    let mut out = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let gate = model_gate();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(DIR);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("repeats-") && n.ends_with(".jsonl"))
        .collect();
    files.sort();
    let (mut pairs, mut far_positives) = (0usize, 0usize);
    for f in &files {
        for item in load(DIR, f) {
            if item.category == "exact_repeat" {
                continue;
            }
            let named = named_index(&item.reason);
            // The session: its first prompt, which every candidate of it shares.
            let session = karl_common::gate::normalize_prompt(&item.history[0]);
            let start = item.history.len().saturating_sub(15);
            for (i, earlier) in item.history.iter().enumerate().skip(start) {
                let label = item.category == "near_repeat" && named == Some(i);
                let Some(x) = gate.rewording_signals(&item.prompt, earlier) else {
                    far_positives += usize::from(label);
                    continue;
                };
                let x: Vec<String> = x.iter().map(f32::to_string).collect();
                let split = if CHECK_ONLY.contains(&f.as_str()) {
                    "check"
                } else {
                    "fit"
                };
                writeln!(
                    out,
                    "{}\t{session}\t{split}\t{}\t{}\t{}",
                    item.id,
                    item.category,
                    u8::from(label),
                    x.join("\t")
                )
                .unwrap();
                pairs += 1;
            }
        }
    }
    println!(
        "{pairs} pairs from {} files; {far_positives} rewordings too far apart to compare",
        files.len()
    );
}
