//! `karl-ctl export` over a large store: throughput and peak memory of the scan.
//!
//! Builds a store of `KARL_BENCH_EXPORT_TURNS` turns (default 100,000; sessions of 50
//! turns, each turn's briefing the phase's real system prompt and the last 60 lines of a
//! pane capture from `tests/fixtures/panes`, one in five with a refused candidate, one in
//! ten ended in an error), closes it, reopens it cold and exports SFT examples and pairs
//! into a byte counter — what the Export stream does, without the network. Peak RSS is
//! measured in a process that never held the writes (a child builds the store). Ends
//! with `BENCH name=… value=…` lines for `scripts/bench.sh`.
//!
//! The export's own state is bounded (a session's waiting failures, 8 bytes per line
//! for duplicates). The rest is sled's page cache: capped at 128 MiB, but sled evicts in
//! batches of 64 reads per shard (256 shards), so a long scan holds a few thousand pages
//! beyond the cap; stored values are LZ4-compressed, which keeps those pages small. The
//! peak therefore grows far slower than the store — run with 100,000 and 400,000 turns
//! to see it.
//!
//! `cargo bench -p karl-coord --bench export`

use std::time::Instant;

use karl_coord::context::{system_prompt, ChatMessage, Phase};
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

/// The pane captures under `tests/fixtures/panes`: each turn's briefing shows one, so the
/// stored records compress as real ones do (not as a repeated synthetic line would).
fn screens() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.retain(|p| p.extension().and_then(|e| e.to_str()) == Some("txt"));
    paths.sort();
    paths
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .map(|b| {
            let text = String::from_utf8_lossy(&b).into_owned();
            // The context keeps the screen's tail; about 60 lines.
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(60)..].join("\n")
        })
        .collect()
}

fn briefing(screens: &[String], session: u32, n: u32) -> Vec<ChatMessage> {
    let i = (session * TURNS_PER_SESSION + n) as usize;
    let screen = screens
        .get(i % screens.len().max(1))
        .map_or("", String::as_str);
    let phase = match n * 3 / TURNS_PER_SESSION {
        0 => Phase::Explore,
        1 => Phase::Build,
        _ => Phase::Close,
    };
    vec![
        ChatMessage::system(system_prompt(phase)),
        ChatMessage::user(format!(
            "## Session\nProject: bench-{session}\nTurn: {n} of {TURNS_PER_SESSION}\n\n## Terminal\n{screen}\n## Your turn\nWrite the one instruction."
        )),
    ]
}

fn turn(screens: &[String], session: u32, n: u32) -> TurnRecord {
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
    let asked: Vec<Vec<ChatMessage>> = (0..=refused.len())
        .map(|_| briefing(screens, session, n))
        .collect();
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
        let screens = screens();
        if screens.is_empty() {
            eprintln!("no pane captures under tests/fixtures/panes");
            std::process::exit(1);
        }
        let t0 = Instant::now();
        for s in 0..sessions {
            let rec = SessionRecord {
                id: format!("mac2_1_{s}"),
                project: format!("bench-{s}"),
                machine: "mac2".into(),
                ..Default::default()
            };
            for n in 1..=TURNS_PER_SESSION.min(turns - s * TURNS_PER_SESSION) {
                if let Err(e) = store.record_turn(&rec.id, &rec, n, &turn(&screens, s, n), &[]) {
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
