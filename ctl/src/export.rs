//! `karl-ctl export`: the coordinator's store as training data in JSONL files.
//!
//! The coordinator streams the lines ([`pb::ExportChunk`]); here they are written to
//! `FILE.partial` files renamed into place only when the export ends well, so a failed
//! or interrupted export never leaves a half file where a good one was. With `--split`
//! (or a directory), each kind goes to a train and a valid file:
//! - `--sft data/` → `data/train.jsonl`, `data/valid.jsonl` (the layout `mlx_lm.lora
//!   --data data/` reads);
//! - `--sft sft.jsonl` → `sft.train.jsonl`, `sft.valid.jsonl`.
//!
//! Also here: parsing `--since` / `--until` (pure).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use karl_common::pb;
use tokio_stream::StreamExt;

use crate::client::{explain, Client};

/// The flags of `karl-ctl export`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ExportArgs {
    /// SFT examples (ChatML `messages` JSONL): a file, or a directory for train.jsonl and valid.jsonl.
    #[arg(long, value_name = "FILE")]
    pub sft: Option<PathBuf>,
    /// Preference pairs (`prompt`, `chosen`, `rejected`, `reason` JSONL): a file or a directory.
    #[arg(long, value_name = "FILE")]
    pub pairs: Option<PathBuf>,
    /// Turns at or after: 2026-11-20, 2026-11-20T09:30 (UTC), unix ms, or an age (90m, 24h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Turns before (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// Only this session.
    #[arg(long)]
    pub session: Option<String>,
    /// Only sessions of this project.
    #[arg(long)]
    pub project: Option<String>,
    /// Only sessions on this machine.
    #[arg(long)]
    pub machine: Option<String>,
    /// The least outcome a typed prompt needs to be learnt from: progress or complete.
    #[arg(long, default_value = "progress", value_parser = ["progress", "complete"])]
    pub min_outcome: String,
    /// Share of sessions for train, the rest to valid (by session: none is in both), e.g. 0.9.
    #[arg(long)]
    pub split: Option<f64>,
}

/// Where one kind's lines go.
#[derive(Debug, Clone, PartialEq)]
struct Targets {
    train: PathBuf,
    valid: Option<PathBuf>,
}

fn targets(path: &Path, split: bool) -> Targets {
    let is_dir = path.is_dir() || path.as_os_str().to_string_lossy().ends_with('/');
    if is_dir {
        return Targets {
            train: path.join("train.jsonl"),
            valid: split.then(|| path.join("valid.jsonl")),
        };
    }
    if !split {
        return Targets {
            train: path.to_path_buf(),
            valid: None,
        };
    }
    let stem = path
        .file_stem()
        .map_or_else(|| "export".into(), |s| s.to_string_lossy().into_owned());
    let ext = path
        .extension()
        .map_or_else(|| "jsonl".into(), |s| s.to_string_lossy().into_owned());
    let sibling = |side: &str| path.with_file_name(format!("{stem}.{side}.{ext}"));
    Targets {
        train: sibling("train"),
        valid: Some(sibling("valid")),
    }
}

/// A JSONL file written beside its final name and renamed into place by [`Out::finish`].
struct Out {
    path: PathBuf,
    partial: PathBuf,
    w: BufWriter<File>,
}

impl Out {
    fn create(path: &Path) -> anyhow::Result<Out> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory {}", dir.display()))?;
        }
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let f = File::create(&partial)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        Ok(Out {
            path: path.to_path_buf(),
            partial,
            w: BufWriter::new(f),
        })
    }

    fn line(&mut self, json: &str) -> anyhow::Result<()> {
        self.w
            .write_all(json.as_bytes())
            .and_then(|()| self.w.write_all(b"\n"))
            .with_context(|| {
                format!(
                    "cannot write {} (is the disk full?)",
                    self.partial.display()
                )
            })
    }

    /// Everything written reaches the disk (before any file is moved into place).
    fn sync(&mut self) -> anyhow::Result<()> {
        self.w
            .flush()
            .and_then(|()| self.w.get_ref().sync_all())
            .with_context(|| {
                format!(
                    "cannot write {} (is the disk full?)",
                    self.partial.display()
                )
            })
    }

    fn finish(mut self) -> anyhow::Result<PathBuf> {
        self.sync()?;
        std::fs::rename(&self.partial, &self.path)
            .with_context(|| format!("cannot move the export into {}", self.path.display()))?;
        Ok(self.path.clone())
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        // Still here: the export did not finish. Leave no half file behind.
        if self.partial.exists() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// Train and valid files of one kind.
struct Files {
    train: Out,
    valid: Option<Out>,
}

impl Files {
    fn open(t: &Targets) -> anyhow::Result<Files> {
        Ok(Files {
            train: Out::create(&t.train)?,
            valid: t.valid.as_deref().map(Out::create).transpose()?,
        })
    }

    fn line(&mut self, l: &pb::ExportLine) -> anyhow::Result<()> {
        match (&mut self.valid, l.valid) {
            (Some(v), true) => v.line(&l.json),
            _ => self.train.line(&l.json),
        }
    }

    fn into_outs(self) -> impl Iterator<Item = Out> {
        std::iter::once(self.train).chain(self.valid)
    }
}

/// Runs the export; returns the summary and the files written.
pub async fn run(
    c: &mut Client,
    args: ExportArgs,
) -> anyhow::Result<(pb::ExportSummary, Vec<PathBuf>)> {
    let now = karl_common::unix_ms();
    let when = |flag: &str, v: &Option<String>| -> anyhow::Result<u64> {
        v.as_deref()
            .map_or(Ok(0), |s| parse_when(s, now))
            .with_context(|| format!("--{flag}"))
    };
    let req = pb::ExportRequest {
        since_ms: when("since", &args.since)?,
        until_ms: when("until", &args.until)?,
        session: args.session.unwrap_or_default(),
        project: args.project.unwrap_or_default(),
        machine: args.machine.unwrap_or_default(),
        min_outcome: args.min_outcome,
        sft: args.sft.is_some(),
        pairs: args.pairs.is_some(),
        split: args.split.unwrap_or(0.0),
    };
    if !req.sft && !req.pairs {
        anyhow::bail!("nothing to export: give --sft FILE, --pairs FILE or both");
    }
    if let Some(s) = args.split.filter(|s| !(*s > 0.0 && *s < 1.0)) {
        anyhow::bail!(
            "--split {s} is not a share of sessions for train between 0 and 1 (e.g. 0.9)"
        );
    }
    let split = args.split.is_some();
    let sft_targets = args.sft.as_deref().map(|p| targets(p, split));
    let pair_targets = args.pairs.as_deref().map(|p| targets(p, split));
    let mut all: Vec<PathBuf> = [&sft_targets, &pair_targets]
        .into_iter()
        .flatten()
        .flat_map(|t| std::iter::once(t.train.clone()).chain(t.valid.clone()))
        .map(|p| absolute(&p))
        .collect();
    all.sort();
    if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
        anyhow::bail!(
            "--sft and --pairs would both write {}: give them different files or directories",
            w[0].display()
        );
    }
    // Ask first: a refused request (bad filter, old coordinator) touches no file.
    let mut stream = c.export(req).await.map_err(explain)?.into_inner();
    let mut sft = sft_targets.as_ref().map(Files::open).transpose()?;
    let mut pairs = pair_targets.as_ref().map(Files::open).transpose()?;
    let mut summary = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(explain)?;
        for l in &chunk.lines {
            let files = match pb::ExportKind::try_from(l.kind) {
                Ok(pb::ExportKind::Sft) => sft.as_mut(),
                Ok(pb::ExportKind::Pairs) => pairs.as_mut(),
                _ => None,
            };
            if let Some(f) = files {
                f.line(l)?;
            }
        }
        if chunk.summary.is_some() {
            summary = chunk.summary;
        }
    }
    let Some(summary) = summary else {
        anyhow::bail!("the coordinator ended the export without finishing it (did it shut down?); nothing was written");
    };
    // Every file on disk first, then the renames: a failure before them leaves every old
    // file as it was.
    let mut files: Vec<Out> = [sft, pairs]
        .into_iter()
        .flatten()
        .flat_map(Files::into_outs)
        .collect();
    for f in &mut files {
        f.sync()?;
    }
    let written = files
        .into_iter()
        .map(Out::finish)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((summary, written))
}

/// `p` from the root, `.` and `..` resolved by name, so two spellings of one file compare
/// equal.
fn absolute(p: &Path) -> PathBuf {
    let full = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in full.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `--since` / `--until`: an age back from `now_ms` (`90m`, `24h`, `7d`), unix ms, or a
/// UTC date or date-time (`2026-11-20`, `2026-11-20T09:30`, `2026-11-20 09:30:15`).
pub fn parse_when(s: &str, now_ms: u64) -> anyhow::Result<u64> {
    let s = s.trim();
    let bad = || {
        anyhow::anyhow!(
            "{s:?} is not a time: write an age (90m, 24h, 7d), a date (2026-11-20), a UTC date-time (2026-11-20T09:30) or unix milliseconds"
        )
    };
    if let Some((n, unit)) = s
        .find(|c: char| !c.is_ascii_digit())
        .filter(|&i| i > 0 && i + 1 == s.len())
        .map(|i| s.split_at(i))
    {
        let n: u64 = n.parse().map_err(|_| bad())?;
        let ms = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            _ => return Err(bad()),
        };
        return Ok(now_ms.saturating_sub(n.saturating_mul(ms)));
    }
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) {
        return s.parse().map_err(|_| bad());
    }
    let (date, time) = s
        .split_once(['T', ' '])
        .map_or((s, ""), |(d, t)| (d, t.trim_end_matches('Z')));
    let num = |p: &str| p.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let [y, m, day] = d.as_slice() else {
        return Err(bad());
    };
    let (y, m, day) = (num(y)?, num(m)?, num(day)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=month_days).contains(&day) {
        return Err(bad());
    }
    let mut secs = days_from_civil(y, m, day) * 86_400;
    if !time.is_empty() {
        let t: Vec<&str> = time.split(':').collect();
        if t.len() < 2 || t.len() > 3 {
            return Err(bad());
        }
        let (h, min) = (num(t[0])?, num(t[1])?);
        let sec = t.get(2).map_or(Ok(0), |x| num(x))?;
        if !(0..24).contains(&h) || !(0..60).contains(&min) || !(0..61).contains(&sec) {
            return Err(bad());
        }
        secs += h * 3600 + min * 60 + sec;
    }
    u64::try_from(secs * 1000).map_err(|_| bad())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn times_parse_in_every_form_and_bad_ones_say_what_to_write() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_when("90m", now).unwrap(), now - 90 * 60_000);
        assert_eq!(parse_when("7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(parse_when("1700000000000", now).unwrap(), 1_700_000_000_000);
        // `date -u -d 2026-11-20 +%s` = 1795132800
        assert_eq!(parse_when("2026-11-20", now).unwrap(), 1_795_132_800_000);
        assert_eq!(
            parse_when("2026-11-20T09:30", now).unwrap(),
            1_795_132_800_000 + (9 * 3600 + 30 * 60) * 1000
        );
        assert_eq!(
            parse_when("2024-02-29 23:59:59Z", now).unwrap(),
            1_709_251_199_000
        );
        for bad in [
            "yesterday",
            "7x",
            "2026-13-01",
            "2026-02-29",
            "2026-04-31",
            "999999999999-01-01",
            "2026-11",
            "12:30",
            "",
            "-5d",
        ] {
            let e = parse_when(bad, now).unwrap_err().to_string();
            assert!(e.contains("is not a time"), "{bad}: {e}");
        }
    }

    #[test]
    fn split_files_sit_beside_the_file_or_inside_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = targets(dir.path(), true);
        assert_eq!(d.train, dir.path().join("train.jsonl"));
        assert_eq!(d.valid, Some(dir.path().join("valid.jsonl")));
        let f = targets(Path::new("out/sft.jsonl"), true);
        assert_eq!(f.train, Path::new("out/sft.train.jsonl"));
        assert_eq!(f.valid.as_deref(), Some(Path::new("out/sft.valid.jsonl")));
        assert_eq!(targets(Path::new("sft.jsonl"), false).valid, None);
        // Two spellings of one directory are one place.
        assert_eq!(
            absolute(Path::new("data/train.jsonl")),
            absolute(Path::new("./x/../data/train.jsonl"))
        );
        assert_eq!(
            targets(Path::new("new-dir/"), false).train,
            Path::new("new-dir/train.jsonl")
        );
    }

    #[test]
    fn an_unfinished_file_leaves_nothing_and_a_finished_one_replaces_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sft.jsonl");
        std::fs::write(&path, "old\n").unwrap();
        {
            let mut o = Out::create(&path).unwrap();
            o.line("{\"a\":1}").unwrap();
            // Dropped unfinished.
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut o = Out::create(&path).unwrap();
        o.line("{\"a\":1}").unwrap();
        o.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
    }
}
