//! Writes the learned repeat judge's training data: for every candidate of the tuning
//! repeat files (`tests/fixtures/prompts/repeats-*.jsonl`, never the held-out ones) and each
//! of its last 15 earlier prompts, the signals the gate reads (`Gate::rewording_signals`)
//! and whether the candidate rewords that prompt. `scripts/train-rewording.sh` runs it and
//! fits the trees; it is ignored in the ordinary test run.

#![allow(clippy::unwrap_used)]

mod gate_score;

use std::io::Write;

use gate_score::{load, model_gate};

const DIR: &str = "tests/fixtures/prompts";

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
                writeln!(
                    out,
                    "{}\t{session}\t{}\t{}\t{}",
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
