//! Classifier cost per capture: every fixture under `tests/fixtures/panes`, classified over and
//! over with its ANSI capture and metadata, one call timed at a time. Prints the median and
//! p99 per capture in µs (target: median under 50 µs on one core) and the process's resident
//! memory before and after the timed rounds (it must not grow with the number of rounds).
//!
//! `cargo bench -p karl-common --bench detect`

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;
use karl_common::detect::{classify_capture, CaptureMeta, Detector};

const WARMUP_ROUNDS: usize = 20;
const ROUNDS: usize = 200;

struct Capture {
    text: String,
    ansi: Option<String>,
    meta: CaptureMeta,
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let captures = load(&dir);
    if captures.is_empty() {
        eprintln!("no fixtures found in {}", dir.display());
        std::process::exit(1);
    }
    let det = Detector::embedded();

    let started = Instant::now();
    let det_build = Detector::embedded();
    let build_us = started.elapsed().as_secs_f64() * 1e6;
    drop(det_build);

    let mut sink = 0usize;
    for _ in 0..WARMUP_ROUNDS {
        for c in &captures {
            sink += classify_capture(&det, &c.text, c.ansi.as_deref(), &c.meta)
                .evidence
                .len();
        }
    }
    let rss_before = rss_kib();
    // Call times in nanoseconds; percentiles within 0.1 %.
    let mut samples = Histogram::<u64>::new(3).expect("a valid precision");
    for _ in 0..ROUNDS {
        for c in &captures {
            let t = Instant::now();
            let d = classify_capture(&det, &c.text, c.ansi.as_deref(), &c.meta);
            let _ = samples.record(t.elapsed().as_nanos() as u64);
            sink += d.evidence.len();
        }
    }
    let rss_after = rss_kib();
    let pct = |p: f64| samples.value_at_quantile(p) as f64 / 1e3;

    println!(
        "detect: {} captures × {ROUNDS} rounds ({} calls)",
        captures.len(),
        samples.len()
    );
    println!(
        "  per capture: median {:.1} µs   p90 {:.1} µs   p99 {:.1} µs   max {:.1} µs   mean {:.1} µs",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        samples.max() as f64 / 1e3,
        samples.mean() / 1e3
    );
    println!("  Detector::embedded() (compile all manifests): {build_us:.0} µs");
    match (rss_before, rss_after) {
        (Some(b), Some(a)) => println!(
            "  RSS before timed rounds {b} KiB, after {a} KiB (growth {} KiB)",
            a as i64 - b as i64
        ),
        _ => println!("  RSS: not available on this platform"),
    }
    println!(
        "  target median < 50 µs: {}",
        if pct(0.5) < 50.0 { "met" } else { "MISSED" }
    );
    // Keeps the optimizer from discarding the work.
    if sink == usize::MAX {
        println!("{sink}");
    }
}

fn load(dir: &Path) -> Vec<Capture> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .filter_map(|p| {
            let meta: CaptureMeta = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
            Some(Capture {
                text: std::fs::read_to_string(p.with_extension("txt")).ok()?,
                ansi: std::fs::read_to_string(p.with_extension("ansi")).ok(),
                meta,
            })
        })
        .collect()
}

/// Resident set size in KiB, from /proc (Linux only).
fn rss_kib() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4)
}
