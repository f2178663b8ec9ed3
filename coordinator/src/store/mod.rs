//! Durable state in sled: sessions, their turns, the audit log, and the
//! one-session-per-pane locks.
//!
//! Layout (one sled tree each, values are JSON so a record can gain fields without a
//! migration; a value of 512 bytes or more is stored LZ4-compressed behind a `0x01`
//! byte, which halves a turn with its briefings on disk and in sled's page cache):
//! - `meta`: `schema_version` → u32 big-endian.
//! - `sessions`: session id → session record.
//! - `turns`: session id ‖ 0x00 ‖ turn number (u32 BE) → turn record.
//! - `audit`: sequence (u64 BE, from sled's monotonic id generator) → audit entry.
//! - `locks`: `machine/%pane` → session id holding that pane.
//!
//! A turn is committed with its session record and its audit entry in one multi-tree
//! transaction and flushed before the coordinator acts on it, so a SIGKILL at any point
//! leaves either the whole turn or none of it. Writes land in sled's memory at once;
//! the waits for the disk (`flush_async`, on tokio's blocking pool) are `async`, so no
//! fsync ever blocks a runtime thread.
//!
//! Schema versions: v1 held pane states, turn sources, outcomes and injection results as
//! free strings (`"refused: the pane is busy"`, `""` for none); v2 holds enums; v3 may
//! hold compressed values (so a v2 karl-coord refuses it rather than misread it). Opening
//! an older store migrates it in place ([`migrate`]). Typed records live in [`crate::records`];
//! this module only knows keys and JSON.

mod migrate;

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::records::AuditEntry;
use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

/// The schema this build writes.
pub const SCHEMA_VERSION: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database at {path}: {} (check the directory exists, is writable and has free space; another karl-coord may hold it)", sled_message(.cause))]
    Open { path: String, cause: sled::Error },
    #[error("the database at {path} has schema v{found}, newer than this karl-coord understands (v{SCHEMA_VERSION}): upgrade karl-coord")]
    SchemaTooNew { path: String, found: u32 },
    #[error("database write failed: {} (is the disk full or read-only?)", sled_message(.0))]
    Sled(sled::Error),
    #[error("the write to disk did not finish ({0}); the coordinator is shutting down or failed")]
    FlushAborted(String),
    #[error("corrupt record in {tree}: {message}")]
    Corrupt { tree: &'static str, message: String },
    #[error(
        "pane {pane} is already driven by session {holder}; stop it first (karl-ctl stop {holder})"
    )]
    PaneLocked { pane: String, holder: String },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

// The cause is part of the message (sessions show errors with `{}`), so it is not also
// exposed as `source()`: a `{:#}` chain would print it twice.
impl From<sled::Error> for StoreError {
    fn from(e: sled::Error) -> Self {
        StoreError::Sled(e)
    }
}

/// sled's IO errors print as `Io(Os { code: 28, … })`; say it as a sentence.
fn sled_message(e: &sled::Error) -> String {
    match e {
        sled::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    sessions: sled::Tree,
    turns: sled::Tree,
    audit: sled::Tree,
    locks: sled::Tree,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

fn turn_key(session: &str, n: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(session.len() + 5);
    k.extend_from_slice(session.as_bytes());
    k.push(0);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

fn turn_prefix(session: &str) -> Vec<u8> {
    let mut k = session.as_bytes().to_vec();
    k.push(0);
    k
}

/// First byte of a compressed value: `0x01`, then the JSON's length (u32 little-endian)
/// and its LZ4 block. A JSON value starts with `{`, so the two never clash.
const LZ4_TAG: u8 = 0x01;
/// sled's page cache. Its default (1 GiB) is more than a coordinator sharing a Mac with
/// the model server should hold; live sessions touch only their newest turns. sled
/// evicts in batches, so a long scan (an export) can briefly hold more than this.
const CACHE_BYTES: u64 = 128 << 20;
/// Values shorter than this stay plain JSON: compressing them gains little.
const COMPRESS_FROM: usize = 512;
/// The largest JSON stored compressed (a larger one is stored plain), so a compressed
/// value claiming more is corruption, refused before anything is allocated.
const MAX_VALUE: usize = 64 << 20;
/// LZ4 expands at most about 255:1, so a claim beyond this many times the packed bytes
/// is corruption too (and cannot make a 5-byte value allocate 64 MiB).
const MAX_RATIO: usize = 255;

fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    // Plain structs of strings and numbers: serialization cannot fail.
    let json = serde_json::to_vec(v).unwrap_or_default();
    if json.len() < COMPRESS_FROM || json.len() > MAX_VALUE {
        return json;
    }
    let mut out = Vec::with_capacity(json.len() / 3);
    out.push(LZ4_TAG);
    out.extend_from_slice(&lz4_flex::block::compress_prepend_size(&json));
    if out.len() < json.len() {
        out
    } else {
        json
    }
}

fn from_json<T: DeserializeOwned>(tree: &'static str, bytes: &[u8]) -> Result<T> {
    let corrupt = |message: String| StoreError::Corrupt { tree, message };
    match bytes.split_first() {
        Some((&LZ4_TAG, packed)) => {
            let Some((len, block)) = packed.split_first_chunk::<4>() else {
                return Err(corrupt(format!(
                    "a compressed value is too short ({} bytes)",
                    bytes.len()
                )));
            };
            let claimed = u32::from_le_bytes(*len) as usize;
            if claimed > MAX_VALUE || claimed > block.len().saturating_mul(MAX_RATIO) {
                return Err(corrupt(format!(
                    "a compressed value of {} bytes claims {claimed} bytes of JSON",
                    bytes.len()
                )));
            }
            let json = lz4_flex::block::decompress_size_prepended(packed)
                .map_err(|e| corrupt(format!("a compressed value does not unpack: {e}")))?;
            serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))
        }
        _ => serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string())),
    }
}

fn abort<E>(e: TransactionError<E>) -> StoreError
where
    StoreError: From<E>,
{
    match e {
        TransactionError::Abort(e) => e.into(),
        TransactionError::Storage(e) => StoreError::Sled(e),
    }
}

impl From<std::convert::Infallible> for StoreError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl Store {
    /// Opens (or creates) the database under `dir`.
    pub fn open(dir: &Path) -> Result<Store> {
        let path = dir.join("karl.sled");
        let open_err = |cause| StoreError::Open {
            path: path.display().to_string(),
            cause,
        };
        std::fs::create_dir_all(dir).map_err(|e| open_err(sled::Error::Io(e)))?;
        let db = sled::Config::new()
            .path(&path)
            .mode(sled::Mode::HighThroughput)
            .cache_capacity(CACHE_BYTES)
            .open()
            .map_err(open_err)?;
        let meta = db.open_tree("meta").map_err(open_err)?;
        match meta.get("schema_version").map_err(open_err)? {
            Some(v) => {
                let found = v
                    .as_ref()
                    .try_into()
                    .map(u32::from_be_bytes)
                    .unwrap_or(u32::MAX);
                if found > SCHEMA_VERSION {
                    return Err(StoreError::SchemaTooNew {
                        path: path.display().to_string(),
                        found,
                    });
                }
                if found < SCHEMA_VERSION {
                    migrate::run(&db, found).map_err(|e| match e {
                        StoreError::Sled(cause) => open_err(cause),
                        other => other,
                    })?;
                    meta.insert("schema_version", &SCHEMA_VERSION.to_be_bytes())
                        .map_err(open_err)?;
                    db.flush().map_err(open_err)?;
                    tracing::info!(target: "coord.store", from = found, to = SCHEMA_VERSION, "migrated the store");
                }
            }
            None => {
                meta.insert("schema_version", &SCHEMA_VERSION.to_be_bytes())
                    .map_err(open_err)?;
                db.flush().map_err(open_err)?;
            }
        }
        Ok(Store {
            sessions: db.open_tree("sessions").map_err(open_err)?,
            turns: db.open_tree("turns").map_err(open_err)?,
            audit: db.open_tree("audit").map_err(open_err)?,
            locks: db.open_tree("locks").map_err(open_err)?,
            db,
        })
    }

    /// Flushes and fsyncs on the calling thread: for tools and benchmarks outside the
    /// runtime. Async code uses [`Store::flush_async`].
    pub fn flush_blocking(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    /// Waits until every write so far is on disk. The fsync runs on tokio's blocking pool,
    /// never on a runtime thread; the pool's handle on the database is gone by the time
    /// this returns, so a dropped store can be reopened at once.
    pub async fn flush_async(&self) -> Result<()> {
        let db = self.db.clone();
        match tokio::task::spawn_blocking(move || db.flush()).await {
            Ok(r) => r.map(drop).map_err(StoreError::from),
            Err(e) => Err(StoreError::FlushAborted(e.to_string())),
        }
    }

    /// Writes a session record and waits for the disk.
    pub async fn put_session<T: Serialize>(&self, id: &str, record: &T) -> Result<()> {
        self.update_session(id, record)?;
        self.flush_async().await
    }

    /// Writes a session record without waiting for the disk: it is made durable by the
    /// next flush (sled also flushes on its own every half second). For the frequent
    /// bookkeeping saves that a crash may lose without harm.
    pub fn update_session<T: Serialize>(&self, id: &str, record: &T) -> Result<()> {
        self.sessions.insert(id, to_json(record))?;
        Ok(())
    }

    pub fn get_session<T: DeserializeOwned>(&self, id: &str) -> Result<Option<T>> {
        self.sessions
            .get(id)?
            .map(|v| from_json("sessions", &v))
            .transpose()
    }

    /// Bytes sled uses on disk (0 when it cannot tell).
    pub fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }

    /// Every session record, in id order.
    pub fn sessions<T: DeserializeOwned>(&self) -> Result<Vec<T>> {
        self.sessions
            .iter()
            .values()
            .map(|v| from_json("sessions", &v?))
            .collect()
    }

    /// Writes a turn, the session record it updates and optional audit entries in one
    /// atomic transaction, made durable by the next flush. The engine commits a turn
    /// with this and [`Store::flush_async`] before it types, so a recorded turn is on
    /// disk before anything reaches the pane; updates of a turn already committed (its
    /// outcome) need no flush: a crash before one leaves the turn as it was committed,
    /// which a restart reconciles.
    pub fn record_turn<S: Serialize, T: Serialize>(
        &self,
        session_id: &str,
        session: &S,
        n: u32,
        turn: &T,
        audit: &[AuditEntry],
    ) -> Result<()> {
        let session_bytes = to_json(session);
        let turn_bytes = to_json(turn);
        let audit_rows: Vec<(u64, Vec<u8>)> = audit
            .iter()
            .map(|a| Ok((self.db.generate_id()?, to_json(a))))
            .collect::<Result<_>>()?;
        (&self.sessions, &self.turns, &self.audit)
            .transaction(|(s, t, a)| {
                s.insert(session_id.as_bytes(), session_bytes.as_slice())?;
                t.insert(turn_key(session_id, n), turn_bytes.as_slice())?;
                for (id, row) in &audit_rows {
                    a.insert(&id.to_be_bytes(), row.as_slice())?;
                }
                Ok::<_, ConflictableTransactionError<std::convert::Infallible>>(())
            })
            .map_err(abort)?;
        Ok(())
    }

    /// Turns of a session in order.
    pub fn turns<T: DeserializeOwned>(&self, session_id: &str) -> Result<Vec<T>> {
        self.turns
            .scan_prefix(turn_prefix(session_id))
            .values()
            .map(|v| from_json("turns", &v?))
            .collect()
    }

    /// Every session record, in id order, read one at a time (for a scan over a large
    /// store in bounded memory).
    pub fn sessions_iter<T: DeserializeOwned>(&self) -> impl Iterator<Item = Result<T>> {
        self.sessions
            .iter()
            .values()
            .map(|v| from_json("sessions", &v?))
    }

    /// A session's turns in order, read one at a time.
    pub fn turns_iter<T: DeserializeOwned>(
        &self,
        session_id: &str,
    ) -> impl Iterator<Item = Result<T>> {
        self.turns
            .scan_prefix(turn_prefix(session_id))
            .values()
            .map(|v| from_json("turns", &v?))
    }

    /// Appends an audit line and waits for the disk.
    pub async fn append_audit(&self, entry: &AuditEntry) -> Result<()> {
        let id = self.db.generate_id()?;
        self.audit.insert(id.to_be_bytes(), to_json(entry))?;
        self.flush_async().await
    }

    /// The newest `limit` audit lines, oldest first; `session` filters to one session.
    /// Reads backwards from the newest and stops at `limit`.
    pub fn audit_tail(&self, session: Option<&str>, limit: usize) -> Result<Vec<AuditEntry>> {
        let mut out = Vec::new();
        for v in self.audit.iter().values().rev() {
            if out.len() >= limit {
                break;
            }
            let e: AuditEntry = from_json("audit", &v?)?;
            if session.is_none_or(|s| s == e.session) {
                out.push(e);
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Takes the pane lock for `session_id`. `is_live(holder)` says whether an existing
    /// holder still counts; a dead holder's lock is taken over.
    pub async fn lock_pane(
        &self,
        pane_key: &str,
        session_id: &str,
        is_live: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let holder = self
            .locks
            .get(pane_key)?
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        if let Some(h) = &holder {
            if h != session_id && is_live(h) {
                return Err(StoreError::PaneLocked {
                    pane: pane_key.to_string(),
                    holder: h.clone(),
                });
            }
        }
        // Compare-and-swap so two drives racing for one pane can't both win.
        let old = holder.as_deref().map(str::as_bytes);
        match self
            .locks
            .compare_and_swap(pane_key, old, Some(session_id.as_bytes()))?
        {
            Ok(()) => self.flush_async().await,
            Err(cas) => Err(StoreError::PaneLocked {
                pane: pane_key.to_string(),
                holder: cas
                    .current
                    .map(|v| String::from_utf8_lossy(&v).into_owned())
                    .unwrap_or_default(),
            }),
        }
    }

    /// Releases the pane lock if `session_id` holds it.
    pub async fn unlock_pane(&self, pane_key: &str, session_id: &str) -> Result<()> {
        let _ = self.locks.compare_and_swap(
            pane_key,
            Some(session_id.as_bytes()),
            None as Option<&[u8]>,
        )?;
        self.flush_async().await
    }

    pub fn lock_holder(&self, pane_key: &str) -> Result<Option<String>> {
        Ok(self
            .locks
            .get(pane_key)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::records::{
        AuditKind, InjectStatus, SessionRecord, Status, TurnOutcome, TurnRecord, TurnSource,
    };
    use karl_common::detect::{AgentKind, PaneState};
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Rec {
        n: u32,
    }

    #[tokio::test]
    async fn turns_commit_atomically_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            for n in 1..=3 {
                let audit = AuditEntry {
                    unix_ms: n as u64,
                    session: "s1".into(),
                    machine: "m".into(),
                    pane: "%1".into(),
                    kind: AuditKind::Inject,
                    text: format!("p{n}"),
                    detail: String::new(),
                };
                store
                    .record_turn("s1", &Rec { n }, n, &Rec { n }, &[audit])
                    .unwrap();
                store.flush_async().await.unwrap();
            }
        }
        let store = Store::open(dir.path()).unwrap();
        let turns: Vec<Rec> = store.turns("s1").unwrap();
        assert_eq!(turns, vec![Rec { n: 1 }, Rec { n: 2 }, Rec { n: 3 }]);
        assert_eq!(store.get_session::<Rec>("s1").unwrap(), Some(Rec { n: 3 }));
        assert_eq!(store.audit_tail(Some("s1"), 10).unwrap().len(), 3);
        let last = store.audit_tail(Some("s1"), 2).unwrap();
        assert_eq!(
            last.iter().map(|a| a.text.as_str()).collect::<Vec<_>>(),
            ["p2", "p3"],
            "the newest entries, oldest first"
        );
        assert!(
            store.turns::<Rec>("s").unwrap().is_empty(),
            "prefix must not leak across ids"
        );
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Big {
        text: String,
    }

    #[tokio::test]
    async fn large_values_are_stored_compressed_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let big = Big {
            text: "## Terminal\n  src/lib.rs | 12 ++++---- compiled ok\n".repeat(200),
        };
        let json_len = serde_json::to_vec(&big).unwrap().len();
        {
            let store = Store::open(dir.path()).unwrap();
            store
                .record_turn("s1", &Rec { n: 1 }, 1, &big, &[])
                .unwrap();
            store.flush_async().await.unwrap();
        }
        let raw = {
            let db = sled::open(dir.path().join("karl.sled")).unwrap();
            let turns = db.open_tree("turns").unwrap();
            let v = turns.iter().values().next().unwrap().unwrap();
            let small = db.open_tree("sessions").unwrap();
            let s = small.iter().values().next().unwrap().unwrap();
            assert_eq!(s.first(), Some(&b'{'), "a small record stays plain JSON");
            v
        };
        assert_eq!(raw.first(), Some(&LZ4_TAG));
        assert!(
            raw.len() * 4 < json_len,
            "{} bytes stored for {json_len} of JSON",
            raw.len()
        );
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.turns::<Big>("s1").unwrap(), vec![big]);
    }

    #[test]
    fn plain_and_compressed_values_read_alike_and_damage_is_an_error() {
        let rec = Big {
            text: "x".repeat(2000),
        };
        let packed = to_json(&rec);
        assert_eq!(packed.first(), Some(&LZ4_TAG));
        let plain = serde_json::to_vec(&rec).unwrap();
        assert_eq!(from_json::<Big>("turns", &packed).unwrap(), rec);
        assert_eq!(from_json::<Big>("turns", &plain).unwrap(), rec);
        // A length claim past the limit is refused before anything is allocated.
        let mut huge = vec![LZ4_TAG];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&packed[5..]);
        let err = from_json::<Big>("turns", &huge).unwrap_err();
        assert!(err.to_string().contains("claims"), "{err}");
        // So is a claim no LZ4 block of that size could unpack to.
        let mut tiny = vec![LZ4_TAG];
        tiny.extend_from_slice(&(1u32 << 20).to_le_bytes());
        tiny.push(0);
        let err = from_json::<Big>("turns", &tiny).unwrap_err();
        assert!(err.to_string().contains("claims"), "{err}");
        let err = from_json::<Big>("turns", &[LZ4_TAG, 1]).unwrap_err();
        assert!(err.to_string().contains("too short"), "{err}");
        // Truncated, empty, or garbage: an error naming the tree, never a panic.
        for bad in [
            &packed[..packed.len() / 2],
            &[LZ4_TAG][..],
            &[][..],
            b"\x02junk",
        ] {
            let err = from_json::<Big>("turns", bad).unwrap_err();
            assert!(
                matches!(err, StoreError::Corrupt { tree: "turns", .. }),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn pane_lock_is_exclusive_while_holder_lives() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.lock_pane("m/%1", "a", |_| true).await.unwrap();
        store.lock_pane("m/%1", "a", |_| true).await.unwrap();
        let err = store.lock_pane("m/%1", "b", |_| true).await.unwrap_err();
        assert!(err.to_string().contains("karl-ctl stop a"), "{err}");
        store.lock_pane("m/%1", "b", |_| false).await.unwrap();
        assert_eq!(store.lock_holder("m/%1").unwrap().as_deref(), Some("b"));
        store.unlock_pane("m/%1", "a").await.unwrap();
        assert_eq!(store.lock_holder("m/%1").unwrap().as_deref(), Some("b"));
        store.unlock_pane("m/%1", "b").await.unwrap();
        assert_eq!(store.lock_holder("m/%1").unwrap(), None);
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path().join("karl.sled")).unwrap();
            db.open_tree("meta")
                .unwrap()
                .insert("schema_version", &99u32.to_be_bytes())
                .unwrap();
            db.flush().unwrap();
        }
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
            "{err}"
        );
    }

    /// A copy of `tests/fixtures/store-v1`, written by the schema-v1 karl-coord.
    fn v1_store() -> tempfile::TempDir {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/store-v1/karl.sled");
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("karl.sled");
        std::fs::create_dir_all(&dst).unwrap();
        for f in std::fs::read_dir(&src).unwrap() {
            let f = f.unwrap();
            if f.path().is_file() {
                std::fs::copy(f.path(), dst.join(f.file_name())).unwrap();
            }
        }
        dir
    }

    #[test]
    fn a_v1_store_migrates() {
        let dir = v1_store();
        let check = |store: &Store| {
            let sessions: Vec<SessionRecord> = store.sessions().unwrap();
            assert_eq!(sessions.len(), 2);
            let live = store
                .get_session::<SessionRecord>("mac2_3_1763900000000")
                .unwrap()
                .unwrap();
            assert_eq!(live.status, Status::Running);
            assert_eq!(live.last_state, PaneState::Working);
            assert_eq!(live.agent_kind, AgentKind::Claude);
            assert_eq!(live.driven_agent, Some(AgentKind::Claude));
            assert_eq!(live.last_source, Some(TurnSource::Model));
            assert_eq!(
                live.rejections.get(&karl_common::gate::Rule::NearRepeat),
                Some(&1)
            );
            let ended = store
                .get_session::<SessionRecord>("mac1_7_1763800000000")
                .unwrap()
                .unwrap();
            assert_eq!(ended.driven_agent, None);
            assert_eq!(ended.last_source, None);
            let turns: Vec<TurnRecord> = store.turns(&live.id).unwrap();
            let got: Vec<_> = turns
                .iter()
                .map(|t| (t.source, t.inject, t.reason.as_str(), t.outcome))
                .collect();
            assert_eq!(
                got,
                [
                    (
                        TurnSource::Model,
                        InjectStatus::Submitted,
                        "",
                        TurnOutcome::Progress
                    ),
                    (
                        TurnSource::Plan,
                        InjectStatus::Refused,
                        "the pane is busy",
                        TurnOutcome::Blocked
                    ),
                    (
                        TurnSource::Regenerated,
                        InjectStatus::Pending,
                        "",
                        TurnOutcome::Pending
                    ),
                ]
            );
            let ended_turns: Vec<TurnRecord> = store.turns(&ended.id).unwrap();
            assert_eq!(ended_turns[0].inject, InjectStatus::DryRun);
            assert_eq!(ended_turns[1].inject, InjectStatus::Unconfirmed);
            assert_eq!(ended_turns[1].reason, "coordinator restarted");
            let audit = store.audit_tail(None, 100).unwrap();
            assert_eq!(audit.len(), 3 + 11);
            assert!(audit.iter().any(|a| a.kind == AuditKind::Restart));
            assert_eq!(
                store.lock_holder(&live.pane_key()).unwrap().as_deref(),
                Some(live.id.as_str())
            );
        };
        let store = Store::open(dir.path()).unwrap();
        check(&store);
        drop(store);
        // Opened again: the version says v3 and nothing changes.
        let store = Store::open(dir.path()).unwrap();
        check(&store);
        let v = store
            .db
            .open_tree("meta")
            .unwrap()
            .get("schema_version")
            .unwrap();
        assert_eq!(v.as_deref(), Some(&SCHEMA_VERSION.to_be_bytes()[..]));
    }

    #[test]
    fn migration_steps_are_idempotent() {
        let mut turn = serde_json::json!({"inject": "failed: agent mac2 is not connected", "outcome": "", "reason": ""});
        let o = turn.as_object_mut().unwrap();
        migrate::turn_v2(o);
        let once = o.clone();
        migrate::turn_v2(o);
        assert_eq!(*o, once);
        assert_eq!(o["inject"], "failed");
        assert_eq!(o["reason"], "agent mac2 is not connected");
        assert_eq!(o["outcome"], "pending");
    }
}
