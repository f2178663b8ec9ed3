//! Reading a transcript as it grows: [`Reader`] turns the bytes written since the last
//! read into facts (parsed by `karl_common::evidence` for the CLI that wrote them) and
//! keeps what they add up to. Partial last lines wait for their newline; a file that
//! shrinks, is replaced, or is rewritten in place is read again from its start with
//! entries already read skipped. What is not here: finding the file (`locate`), waking
//! up and sending (`mod.rs`).

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use karl_common::evidence::{Cli, LineBuffer, Stamped, TurnState};
use tracing::{debug, info};

/// Bytes read from a transcript in one go.
const READ_CHUNK: usize = 1 << 20;

/// Bytes at the start of a transcript remembered to notice a file rewritten in place.
const PREFIX: usize = 512;
/// Entry ids remembered per transcript (a long session has tens of thousands of lines).
const KEEP_IDS: usize = 50_000;

/// A transcript being read: where, how far, and what it adds up to.
#[derive(Debug)]
pub struct Reader {
    cli: Cli,
    pub(super) path: PathBuf,
    offset: u64,
    /// Identity of the file read (inode), to notice a replaced file.
    file_id: Option<u64>,
    /// The file's first bytes as last read, to notice it rewritten in place.
    prefix: Vec<u8>,
    /// Ids of the entries read, oldest first: a rewritten file is read again from its
    /// start and only entries not seen before count.
    seen: std::collections::HashSet<String>,
    seen_order: VecDeque<String>,
    lines: LineBuffer,
    pub state: TurnState,
    /// Lines that were not JSON (logged, skipped).
    pub bad_lines: u64,
    /// Times the file was found rewritten, shrunk or replaced.
    pub rewrites: u64,
}

impl Reader {
    pub fn new(cli: Cli, path: PathBuf) -> Reader {
        Reader {
            cli,
            path,
            offset: 0,
            file_id: None,
            prefix: Vec::new(),
            seen: Default::default(),
            seen_order: VecDeque::new(),
            lines: LineBuffer::default(),
            state: TurnState::default(),
            bad_lines: 0,
            rewrites: 0,
        }
    }

    pub fn cli(&self) -> Cli {
        self.cli
    }

    /// Whether the file is no longer the one read so far: shrunk, replaced (another inode)
    /// or rewritten in place (its first bytes differ).
    fn rewritten(
        &self,
        file: &mut std::fs::File,
        meta: &std::fs::Metadata,
    ) -> std::io::Result<bool> {
        if self.offset == 0 {
            return Ok(false);
        }
        if meta.len() < self.offset || (self.file_id.is_some() && file_id(meta) != self.file_id) {
            return Ok(true);
        }
        let mut head = vec![0u8; self.prefix.len()];
        file.seek(SeekFrom::Start(0))?;
        file.read_exact(&mut head)?;
        Ok(head != self.prefix)
    }

    /// Reads what was written since the last call; returns its facts in the order the
    /// CLI wrote them (already applied to [`Reader::state`]). A missing file is no facts
    /// (not written yet); a shrunk, replaced or rewritten file is read again from its
    /// start, and entries read before are skipped.
    pub fn read_new(&mut self) -> std::io::Result<Vec<Stamped>> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if meta.len() == self.offset && file_id(&meta) == self.file_id {
            return Ok(Vec::new());
        }
        if self.rewritten(&mut file, &meta)? {
            self.rewrites += 1;
            info!(target: "agent.evidence", path = %self.path.display(), "transcript rewritten, shrunk or replaced; reading it again, skipping entries already read");
            self.offset = 0;
            self.prefix.clear();
            self.lines.reset();
        }
        self.file_id = file_id(&meta);
        file.seek(SeekFrom::Start(self.offset))?;
        let mut facts = Vec::new();
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            if self.offset < PREFIX as u64 {
                let take = (PREFIX - self.offset as usize).min(n);
                self.prefix.extend_from_slice(&buf[..take]);
            }
            self.offset += n as u64;
            for line in self.lines.push(&buf[..n]) {
                match self.cli.parse_entry(&line) {
                    Ok(entry) => {
                        if let Some(id) = entry.id {
                            if !self.seen.insert(id.clone()) {
                                continue;
                            }
                            self.seen_order.push_back(id);
                            if self.seen_order.len() > KEEP_IDS {
                                if let Some(old) = self.seen_order.pop_front() {
                                    self.seen.remove(&old);
                                }
                            }
                        }
                        facts.extend(entry.facts);
                    }
                    Err(e) => {
                        self.bad_lines += 1;
                        debug!(target: "agent.evidence", path = %self.path.display(), error = %e, "skipped a transcript line");
                    }
                }
            }
        }
        // Lines are not always in the order they happened (2.1.197 writes some in
        // batches): order by the time each states (stable: same-time facts keep theirs).
        if facts.iter().all(|f| f.written_ms != 0)
            && facts.windows(2).any(|w| w[0].written_ms > w[1].written_ms)
        {
            facts.sort_by_key(|f| f.written_ms);
        }
        for f in &facts {
            self.state.apply(f);
        }
        Ok(facts)
    }
}

#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    Some(meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;

    /// 2.1.197 sometimes rewrites its transcript in place with the lines in another
    /// order (seen in the compatibility tier): read again, nothing counts twice, and the
    /// facts come in the order they happened.
    #[test]
    fn a_transcript_rewritten_in_place_is_read_again_without_repeats() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let user = r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"Fix the build."},"timestamp":"2026-11-24T01:03:40.367Z"}"#;
        let mode = r#"{"type":"mode","mode":"normal"}"#;
        let answer = r#"{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"text","text":"Fixed."}]},"timestamp":"2026-11-24T01:03:40.693Z"}"#;
        let end = r#"{"type":"system","subtype":"turn_duration","uuid":"s1","timestamp":"2026-11-24T01:03:40.695Z"}"#;
        std::fs::write(&path, format!("{mode}\n{user}\n")).unwrap();
        let mut r = Reader::new(Cli::Claude, path.clone());
        assert_eq!(r.read_new().unwrap().len(), 1);
        assert!(r.state.in_flight);
        // Rewritten: same inode, longer, another order.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        write!(f, "{answer}\n{end}\n{mode}\n{user}\n").unwrap();
        drop(f);
        let facts = r.read_new().unwrap();
        assert_eq!(r.rewrites, 1);
        assert_eq!(facts.len(), 2, "only the new entries: {facts:?}");
        assert!(!r.state.in_flight, "the turn end was found");
        // A first read of a file in that order still ends with the turn closed.
        let mut fresh = Reader::new(Cli::Claude, path);
        fresh.read_new().unwrap();
        assert!(!fresh.state.in_flight);
        assert_eq!(fresh.state.response, ["Fixed."]);
    }

    #[test]
    fn the_reader_follows_growth_partial_lines_and_truncation() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let mut r = Reader::new(Cli::Claude, path.clone());
        assert!(
            r.read_new().unwrap().is_empty(),
            "a missing file is no facts"
        );
        let prompt = r#"{"type":"user","message":{"role":"user","content":"Fix the build."},"timestamp":"2026-11-24T00:43:16.972Z"}"#;
        let end =
            r#"{"type":"system","subtype":"turn_duration","timestamp":"2026-11-24T00:43:17.159Z"}"#;
        let mut f = std::fs::File::create(&path).unwrap();
        write!(f, "{prompt}\n{}", &end[..20]).unwrap();
        f.flush().unwrap();
        let facts = r.read_new().unwrap();
        assert_eq!(facts.len(), 1);
        assert!(r.state.in_flight);
        write!(f, "{}\nnot json\n", &end[20..]).unwrap();
        f.flush().unwrap();
        let facts = r.read_new().unwrap();
        assert_eq!(facts.len(), 1, "{facts:?}");
        assert!(!r.state.in_flight);
        assert_eq!(r.bad_lines, 1);
        assert!(r.read_new().unwrap().is_empty(), "nothing is read twice");
        // Truncated and rewritten: read again from the start.
        std::fs::write(&path, format!("{prompt}\n")).unwrap();
        let facts = r.read_new().unwrap();
        assert_eq!(facts.len(), 1);
        assert!(r.state.in_flight);
    }
}
