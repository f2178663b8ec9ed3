//! `karl-ctl export` over a large store: throughput and peak memory of the scan.
//!
//! Builds a store of `KARL_BENCH_EXPORT_TURNS` turns (default 100,000; sessions of 50
//! turns, each turn with a ~4 KB briefing, one in five with a refused candidate, one in
//! ten ended in an error), closes it, reopens it cold and exports SFT examples and pairs
//! into a byte counter — what the Export stream does, without the network. Peak RSS is
//! measured in a process that never held the writes (a child builds the store). Ends
//! with `BENCH name=… value=…` lines for `scripts/bench.sh`.
//!
//! The export's own state is bounded (a session's waiting failures, 8 bytes per line
//! for duplicates); sled's page cache is not: it keeps what the scan read, so the peak
//! grows with the store (about 4 KB per turn here) — the figure this bench watches.
//!
//! `cargo bench -p karl-coord --bench export`

use std::time::Instant;

use karl_coord::context::ChatMessage;
use karl_coord::export::{run, ExportFilter};
use karl_coord::records::{
    InjectStatus, RefusedCandidate, SessionRecord, TurnOutcome, TurnRecord, TurnSource,
};
use karl_coord::store::Store;

const TURNS_PER_SESSION: u32 = 50;
/// Set in the child that builds the store: where to build it.
const BUILD_ENV: &str = "KARL_BENCH_EXPORT_BUILD";

fn kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn briefing(session: u32, n: u32) -> Vec<ChatMessage> {
    let screen: String = (0..40)
        .map(|i| {
            format!("  src/module_{session}_{n}_{i}.rs | 12 ++++++---- compiled ok in 0.{i}s\n")
        })
        .collect();
    vec![
        ChatMessage::system("You are the developer driving a coding agent in a terminal. ".repeat(20)),
        ChatMessage::user(format!(
            "## Session\nProject: bench-{session}\nTurn: {n} of {TURNS_PER_SESSION}\n\n## Terminal\n{screen}\n## Your turn\nWrite the one instruction."
        )),
    ]
}

fn turn(session: u32, n: u32) -> TurnRecord {
    let refused = if n.is_multiple_of(5) {
        vec![RefusedCandidate {
            text: format!("What's the status of step {n}?"),
            rules: vec!["status".into()],
            reason: "status: asks for a report".into(),
            asked: 0,
        }]
    } else {
        Vec::new()
    };
    let asked: Vec<Vec<ChatMessage>> = (0..=refused.len()).map(|_| briefing(session, n)).collect();
    TurnRecord {
        n,
        prompt: format!("Implement step {n} of session {session}: handle the next token kind."),
        source: if refused.is_empty() {
            TurnSource::Model
        } else {
            TurnSource::Regenerated
        },
        outcome: if n % 10 == 3 {
            TurnOutcome::Error
        } else {
            TurnOutcome::Progress
        },
        inject: InjectStatus::Submitted,
        unix_ms: 1_700_000_000_000 + u64::from(session) * 100_000 + u64::from(n),
        asked,
        refused,
        task: format!("task {}", n / 10),
        ..Default::default()
    }
}

fn main() {
    let turns: u32 = std::env::var("KARL_BENCH_EXPORT_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no temp dir: {e}");
            std::process::exit(1);
        }
    };
    let open = || match Store::open(dir.path()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let sessions = turns.div_ceil(TURNS_PER_SESSION);
    // The store is built by a child process, so the export's memory is measured in a
    // process that never held the writes.
    if let Ok(exe) = std::env::current_exe() {
        if std::env::var_os(BUILD_ENV).is_none() {
            let status = std::process::Command::new(exe)
                .env(BUILD_ENV, dir.path())
                .env("KARL_BENCH_EXPORT_TURNS", turns.to_string())
                .status();
            if !status.is_ok_and(|s| s.success()) {
                eprintln!("building the store failed");
                std::process::exit(1);
            }
        }
    }
    if let Some(path) = std::env::var_os(BUILD_ENV) {
        let store = match Store::open(std::path::Path::new(&path)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        let t0 = Instant::now();
        for s in 0..sessions {
            let rec = SessionRecord {
                id: format!("mac2_1_{s}"),
                project: format!("bench-{s}"),
                machine: "mac2".into(),
                ..Default::default()
            };
            for n in 1..=TURNS_PER_SESSION.min(turns - s * TURNS_PER_SESSION) {
                if let Err(e) = store.record_turn(&rec.id, &rec, n, &turn(s, n), &[]) {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
        }
        if let Err(e) = store.flush_blocking() {
            eprintln!("{e}");
            std::process::exit(1);
        }
        eprintln!(
            "built {turns} turns in {sessions} sessions in {:.1} s, {} MB on disk",
            t0.elapsed().as_secs_f64(),
            store.size_on_disk() / 1_000_000
        );
        return;
    }
    let store = open();
    let disk_mb = store.size_on_disk() as f64 / 1e6;
    let rss_before = kb("VmRSS:");
    let filter = ExportFilter {
        sft: true,
        pairs: true,
        split: Some(0.9),
        ..Default::default()
    };
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut lines = 0u64;
    let summary = match run(&store, &filter, |l| {
        bytes += l.json.len() as u64 + 1;
        lines += 1;
        true
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let peak = kb("VmHWM:");
    eprintln!(
        "exported {} turns: {} SFT ({} valid), {} pairs, {lines} lines, {:.0} MB in {secs:.1} s",
        summary.turns,
        summary.sft_train + summary.sft_valid,
        summary.sft_valid,
        summary.pairs_train + summary.pairs_valid,
        bytes as f64 / 1e6
    );
    eprintln!(
        "RSS before the export {} MB, peak during it {} MB; store {disk_mb:.0} MB on disk",
        rss_before / 1024,
        peak / 1024
    );
    println!(
        "BENCH name=export_turns_per_sec value={:.0} unit=turns/s target=- what=\"export of a {turns}-turn store (SFT + pairs)\"",
        f64::from(turns) / secs
    );
    println!(
        "BENCH name=export_peak_rss value={} unit=MB target=- what=\"peak RSS exporting a {turns}-turn store ({disk_mb:.0} MB on disk)\"",
        peak / 1024
    );
}
