//! Real small-model output through KARL's reply hygiene: replies SmolLM2-135M-Instruct
//! (Q4_1, the test twin) gave to KARL's own turn briefings and plan requests, each labelled
//! with what should come out — the instruction to type, or nothing usable (then the turn
//! regenerates and falls back to the plan step). `fixtures/twin/README.md` says how they
//! were recorded.
//!
//! `*-tune.jsonl` is what the cleanup rules were written against; `*-heldout.jsonl` was
//! labelled by someone who never saw the rules, and only its figure is reported.

use karl_common::context::{
    clean_reply_guarded, plan_from_reply, plan_from_reply_guarded, ChatMessage, EchoGuard,
    PlanSource, REPLY_MAX_CHARS,
};
use serde::Deserialize;

/// The held-out agreement (usable or not) measured when the labels were written (73.5 %),
/// less a margin; a regression below it fails.
const HELD_OUT_USABLE_FLOOR: f64 = 65.0;

#[derive(Debug, Deserialize)]
struct Row {
    kind: String,
    goal: String,
    #[serde(default)]
    messages: Vec<ChatMessage>,
    reply: String,
    /// Turns: the instruction to type ("" when nothing in the reply is usable). Plans: the
    /// steps to keep (empty when the reply is not a plan and the goal's steps take over).
    want: serde_json::Value,
}

fn rows(name: &str) -> Vec<Row> {
    let path = format!("{}/tests/fixtures/twin/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}: {l}")))
        .collect()
}

/// What the cleanup makes of a row, in the shape of its label.
fn cleaned(row: &Row) -> serde_json::Value {
    match row.kind.as_str() {
        "turn" => {
            let guard = EchoGuard::new(&row.messages, &[row.goal.as_str()]);
            serde_json::Value::from(clean_reply_guarded(&row.reply, REPLY_MAX_CHARS, &guard))
        }
        _ => {
            // Rows that carry their request judge against it, as the engine does.
            let plan = if row.messages.is_empty() {
                plan_from_reply(&row.reply, &row.goal)
            } else {
                plan_from_reply_guarded(&row.reply, &row.goal, &row.messages)
            };
            let steps = match plan.source {
                PlanSource::Model => plan.steps,
                PlanSource::Goal => Vec::new(),
            };
            serde_json::Value::from(steps)
        }
    }
}

/// (agreeing rows, all rows), printing each disagreement when `show` is set.
fn score(name: &str, show: bool) -> (usize, usize) {
    let rows = rows(name);
    let mut ok = 0;
    for (i, row) in rows.iter().enumerate() {
        let got = cleaned(row);
        if got == row.want {
            ok += 1;
        } else if show {
            eprintln!(
                "{name} row {i} ({}): want {}\n  got  {}\n  reply {:?}",
                row.kind,
                row.want,
                got,
                row.reply.chars().take(300).collect::<String>()
            );
        }
    }
    (ok, rows.len())
}

/// Eight tuning replies are known misses. Three turns: narration in the first person or
/// about "the one task the developer types next" that no rule tells from an instruction
/// (the gate and the bench see them). Five plans written with a screen in the request:
/// well-formed lists of nonsense or off-goal steps ("The first step is to make the target
/// tag tag", "Migrate orders to CLAUD", "[Install the app]") — a question of meaning no
/// line rule answers; the gate judges each step before it is typed.
#[test]
fn cleanup_rules_hold_on_the_replies_they_were_written_against() {
    let (ok, n) = score("smollm2-135m-tune.jsonl", true);
    assert!(n >= 74, "the tuning set shrank to {n}");
    assert!(
        ok + 8 >= n,
        "{} of {n} tuning replies cleaned differently",
        n - ok
    );
}

/// Figures only: whether the cleanup agrees with labels written without seeing its rules.
/// The misses are counted, not printed, so no rule gets fitted to them.
#[test]
fn cleanup_on_held_out_replies() {
    let rows = rows("smollm2-135m-heldout.jsonl");
    let (mut usable_agree, mut exact) = (0, 0);
    // Per kind: (rows, agreeing on usable or not, usable by the label, usable by the cleanup).
    let mut kinds: std::collections::BTreeMap<&str, [usize; 4]> = Default::default();
    for row in &rows {
        let got = cleaned(row);
        let usable = |v: &serde_json::Value| {
            !(v.as_str().is_some_and(str::is_empty) || v.as_array().is_some_and(Vec::is_empty))
        };
        let agree = usable(&got) == usable(&row.want);
        usable_agree += usize::from(agree);
        exact += usize::from(got == row.want);
        let k = kinds.entry(row.kind.as_str()).or_default();
        k[0] += 1;
        k[1] += usize::from(agree);
        k[2] += usize::from(usable(&row.want));
        k[3] += usize::from(usable(&got));
    }
    let n = rows.len();
    let pct = |k: usize| 100.0 * k as f64 / n.max(1) as f64;
    eprintln!(
        "held-out twin replies: {n}; usable-or-not agrees {usable_agree} ({:.1} %), exactly the labelled text {exact} ({:.1} %)",
        pct(usable_agree),
        pct(exact)
    );
    for (kind, [rows, agree, want, got]) in &kinds {
        eprintln!("  {kind}: {rows} rows, {agree} agree; usable by the labels {want}, by the cleanup {got}");
    }
    assert!(n >= 46, "the held-out set shrank to {n}");
    assert!(
        pct(usable_agree) >= HELD_OUT_USABLE_FLOOR,
        "held-out agreement fell"
    );
}
