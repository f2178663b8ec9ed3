//! Gate verdict cost: a typical prompt judged against a 15-prompt history, one call timed at
//! a time. Prints the median and p99 in µs (target: median under 20 µs) for a warm gate —
//! the history's lexical profiles memoized, as in a running session where each turn adds one
//! prompt — and the same for a few other kinds of prompt (a destructive command, a near
//! repeat, a long prompt) so that a slow rule shows up; then the cold figure (a fresh gate
//! that profiles all 15 earlier prompts) and one megabyte of prose.
//!
//! With the embedding model (`KARL_GATE_MODEL`, else the directory `scripts/fetch-model.sh`
//! fills) the same prompts are timed again through the gate that judges by meaning (rows
//! `model:…`; target: median under 2 ms, p99 under 10 ms), after the model's load time and
//! the resident memory it adds (targets: under 1 s, under 100 MB).
//!
//! `cargo bench -p karl-common --bench gate`

use std::time::Instant;

use hdrhistogram::Histogram;
use karl_common::embed::{dir_from_env, Embedder};
use karl_common::gate::{Gate, GateContext};

const WARMUP: usize = 500;
const ROUNDS: usize = 5_000;

const HISTORY: [&str; 15] = [
    "Write XCTest cases for LogStore.append covering empty and multi-line strings.",
    "The tests crash with concurrent appends; try using DispatchQueue.sync around the file write.",
    "Add log rotation to LogStore: roll over to a new file at 5 MB.",
    "Keep at most 3 rotated files and delete the oldest when a new one is created.",
    "Expose a flush() method on LogStore and call it from applicationWillTerminate.",
    "Add a LogLevel enum with debug, info, warning and error cases.",
    "Filter out debug-level lines in release builds using #if DEBUG.",
    "Write a test that rotation happens exactly at the 5 MB boundary.",
    "Make the timestamp format ISO 8601 with milliseconds.",
    "Add a README section for the logging module with a usage example.",
    "Run swift test and fix the failing rotation test.",
    "Make LogStore conform to Sendable.",
    "Replace the print statements in NetworkClient.swift with LogStore calls.",
    "Add a redaction step that masks email addresses in log lines.",
    "Benchmark append() with 10,000 lines using XCTest's measure block.",
];

/// Call times in nanoseconds; percentiles within 0.1 %.
fn nanos() -> Histogram<u64> {
    Histogram::new(3).expect("a valid precision")
}

fn record(h: &mut Histogram<u64>, since: Instant) {
    let _ = h.record(since.elapsed().as_nanos() as u64);
}

/// Quantile `q` in µs.
fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn time(gate: &Gate, prompt: &str, ctx: &GateContext<'_>) -> (f64, f64, bool) {
    for _ in 0..WARMUP {
        std::hint::black_box(gate.check(std::hint::black_box(prompt), ctx));
    }
    let mut samples = nanos();
    let mut pass = false;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let v = gate.check(std::hint::black_box(prompt), ctx);
        record(&mut samples, t);
        pass = v.pass;
    }
    (us(&samples, 0.5), us(&samples, 0.99), pass)
}

/// Resident memory of this process, in kB (Linux; 0 elsewhere).
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Loads the model (its time and memory printed) and times the cases through its gate.
fn model(table: &dyn Fn(&Gate, &str)) {
    let Some(dir) = dir_from_env().filter(|d| d.join("model.safetensors").exists()) else {
        println!("model: none found (run scripts/fetch-model.sh); the model rows are left out");
        return;
    };
    let before = rss_kb();
    let t = Instant::now();
    let loaded = Embedder::load(&dir).map(|m| Gate::with_model(std::sync::Arc::new(m)));
    let load_ms = t.elapsed().as_secs_f64() * 1000.0;
    let gate = match loaded {
        Ok(g) => g,
        Err(e) => {
            println!("model: {e}");
            return;
        }
    };
    let added_mb = rss_kb().saturating_sub(before) as f64 / 1024.0;
    println!("model load: {load_ms:.0} ms, resident memory added: {added_mb:.1} MB (targets < 1000 ms, < 100 MB)");
    table(&gate, "model:");
}

fn main() {
    let gate = Gate::new();
    let history: Vec<String> = HISTORY.iter().map(|s| s.to_string()).collect();
    let ctx = GateContext {
        project: "logkit",
        path: "/Users/ana/code/logkit",
        history: &history,
        ..GateContext::default()
    };
    let long = "Refactor the rotation code in LogStore.swift so that the size check, the file \
                rename and the cleanup of old files each live in their own method, keep the \
                public API unchanged, and add a test for each of the three methods. "
        .repeat(4);
    let cases: [(&str, &str); 5] = [
        (
            "typical",
            "Use DispatchQueue.main.async for the NetworkClient completion handlers so they run on the main thread.",
        ),
        ("near repeat", "Swap the print calls in NetworkClient.swift for LogStore calls."),
        ("command", "cd build && sudo rm -rf ../* && git push --force origin main"),
        ("status", "Give me a quick status update on the logging work."),
        ("long (800 chars)", long.as_str()),
    ];
    println!("gate verdict, 15-prompt history, {ROUNDS} calls each");
    println!(
        "{:<18} {:>10} {:>10}  verdict",
        "prompt", "median µs", "p99 µs"
    );
    let table = |gate: &Gate, prefix: &str| {
        for (name, prompt) in cases.iter() {
            let (median, p99, pass) = time(gate, prompt, &ctx);
            let name = format!("{prefix}{name}");
            println!(
                "{name:<18} {median:>10.2} {p99:>10.2}  {}",
                if pass { "pass" } else { "blocked" }
            );
        }
    };
    table(&gate, "");
    model(&table);
    // Cold: a fresh gate per call, so no profile of the history is memoized (the first
    // check of a session; later turns add one new prompt to a memoized history).
    let mut samples = nanos();
    for _ in 0..ROUNDS / 5 {
        let fresh = Gate::new();
        let t = Instant::now();
        std::hint::black_box(fresh.check(std::hint::black_box(cases[0].1), &ctx));
        record(&mut samples, t);
    }
    let cold = us(&samples, 0.5);
    let (median, _, _) = time(&gate, cases[0].1, &ctx);
    println!(
        "{:<18} {cold:>10.2} {:>10.2}  (fresh gate: history not memoized)",
        "typical, cold",
        us(&samples, 0.99)
    );
    // A megabyte of prose: not a prompt anyone types, but the gate must stay linear.
    let mb = "Refactor the parser module so each grammar rule lives in its own function. "
        .repeat(14_000);
    let mut runs = nanos();
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(gate.check(&mb, &ctx));
        record(&mut runs, t);
    }
    println!(
        "1 MB of prose: {:.1} ms median of 5",
        us(&runs, 0.5) / 1000.0
    );
    println!("typical median: {median:.2} µs warm, {cold:.2} µs cold (target < 20 µs)");
}
