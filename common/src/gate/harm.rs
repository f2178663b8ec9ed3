//! Irreversible actions on valuable targets in plain words, as data (`rules/harm.toml`):
//! giving data or secrets away, opening or handing over system paths, running fetched code
//! unseen or as root, destroying backups, disks, remote history or whole data stores. A rule
//! is groups of words that must all appear in one sentence; what the sentence negates or
//! guards is decided with every other destructive finding in `destructive`. The verb-object
//! reading of requests ("drop all the tables …") lives in `intent`; this layer catches what
//! its verb classes and head nouns do not name.

use std::sync::LazyLock;

use serde::Deserialize;

use super::commands::Hit;
use super::repeat::stem_into;
use super::words;

const RULES: &str = include_str!("rules/harm.toml");

/// The longest sentence the rules are matched in, in words and in bytes.
const MAX_SENTENCE_WORDS: usize = 96;
const MAX_SENTENCE_BYTES: usize = 2048;

#[derive(Deserialize)]
struct File {
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
struct RawRule {
    detail: String,
    groups: Vec<Vec<String>>,
}

/// One entry of a group: words in sequence, the last one a prefix when it ended in `*`.
#[derive(Debug)]
struct Entry {
    words: Vec<String>,
    prefix: bool,
}

#[derive(Debug)]
struct Rule {
    detail: String,
    groups: Vec<Vec<Entry>>,
}

fn stem(w: &str) -> String {
    let mut out = String::new();
    stem_into(w, &mut out);
    out
}

fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("rules/harm.toml: {e}"))?;
    file.rule
        .into_iter()
        .map(|r| {
            if r.groups.len() < 2 || r.groups.iter().any(Vec::is_empty) {
                return Err(format!(
                    "rules/harm.toml: rule {:?} needs two or more non-empty groups",
                    r.detail
                ));
            }
            let groups = r
                .groups
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|e| {
                            let prefix = e.ends_with('*');
                            let body = e.trim_end_matches('*').to_lowercase();
                            // Whole words are matched by stem, a prefix as written.
                            let mut words: Vec<String> =
                                body.split_whitespace().map(stem).collect();
                            if let (true, Some(last)) = (prefix, words.last_mut()) {
                                *last = body.split_whitespace().last().unwrap_or("").to_string();
                            }
                            Entry { words, prefix }
                        })
                        .collect()
                })
                .collect();
            Ok(Rule {
                detail: r.detail,
                groups,
            })
        })
        .collect()
}

static PARSED: LazyLock<Result<Vec<Rule>, String>> = LazyLock::new(|| parse(RULES));

/// Where entry `e` matches the sentence's tokens (lower-cased `low`, stemmed `stems`).
fn find(e: &Entry, low: &[&str], stems: &[String]) -> Option<(usize, usize)> {
    let n = e.words.len();
    (0..low.len().saturating_sub(n - 1)).find_map(|i| {
        let ok = e.words.iter().enumerate().all(|(k, w)| {
            let last = k + 1 == n;
            if e.prefix && last {
                // A path matches by its file name too (`~/.ssh/id_rsa` is an `id_rsa*`), and
                // an identifier by its parts (`SLACK_BOT_TOKEN` is a `token*`).
                let t = low[i + k];
                t.starts_with(w.as_str())
                    || t.rsplit('/')
                        .next()
                        .is_some_and(|f| f.starts_with(w.as_str()))
                    || (t.contains('_') && t.split('_').any(|p| p.starts_with(w.as_str())))
            } else {
                stems[i + k] == *w
            }
        });
        ok.then_some((i, i + n))
    })
}

/// The sentences of `text` with their byte offsets: cut after `;`, `!`, `?`, a newline, and
/// a `.` that ends a word (not the dots of `get.example.io` or `v1.2`).
fn sentences(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0usize;
    let mut cuts: Vec<(usize, &str)> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let end = match c {
            ';' | '!' | '?' | '\n' => true,
            '.' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if end {
            let stop = i + c.len_utf8();
            cuts.push((start, &text[start..stop]));
            start = stop;
        }
    }
    if start < text.len() {
        cuts.push((start, &text[start..]));
    }
    cuts.into_iter()
}

/// Adds a finding for every sentence of `text` in which every group of some rule matches.
pub(crate) fn scan(text: &str, hits: &mut Vec<Hit>) {
    let Ok(rules) = PARSED.as_ref() else {
        return;
    };
    for (base, sentence) in sentences(text) {
        // Words far apart in a run-on sentence do not make one request; such text is left
        // to the command and verb-object rules, which read all of it.
        if sentence.len() > MAX_SENTENCE_BYTES {
            continue;
        }
        let w = words::tokenize(sentence);
        if w.len() < 2 || w.len() > MAX_SENTENCE_WORDS {
            continue;
        }
        let low: Vec<&str> = (0..w.len()).map(|i| w.lower(i)).collect();
        let mut stems: Vec<String> = low.iter().map(|t| stem(t)).collect();
        // "drag and drop", "drag & drop" (the `&` is no word): a gesture, not a drop.
        for i in 1..low.len() {
            let after_drag =
                low[i - 1] == "drag" || (i >= 2 && low[i - 2] == "drag" && low[i - 1] == "and");
            if low[i] == "drop" && after_drag {
                stems[i].clear();
            }
        }
        for rule in rules.iter() {
            // The finding is where the first group (the action) matched, so the negation
            // and guard reading looks at the verb: "so nothing can be *deleted*".
            let mut first: Option<(usize, usize)> = None;
            let all = rule.groups.iter().enumerate().all(|(gi, g)| {
                let at = g.iter().filter_map(|e| find(e, &low, &stems)).min();
                if gi == 0 {
                    first = at;
                }
                at.is_some()
            });
            if let (true, Some((s, e))) = (all, first) {
                hits.push(Hit {
                    detail: rule.detail.clone(),
                    start: base + w.toks[s].start as usize,
                    end: base + w.toks[e - 1].end as usize,
                    command: false,
                });
                break;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn finds(text: &str) -> Option<String> {
        let mut hits = Vec::new();
        scan(text, &mut hits);
        hits.into_iter().next().map(|h| h.detail)
    }

    #[test]
    fn the_shipped_rules_parse() {
        let rules = PARSED.as_ref().unwrap();
        assert!(rules.len() >= 8);
    }

    #[test]
    fn bad_rule_files_are_refused() {
        assert!(parse("[[rule]]\ndetail = \"x\"\ngroups = [[\"a\"]]").is_err());
        assert!(parse("[[rule]]\ndetail = \"x\"\ngroups = [[\"a\"], []]").is_err());
        assert!(parse("nonsense").is_err());
    }

    #[test]
    fn plain_words_that_destroy_or_give_away() {
        assert!(finds("Upload the users table with password hashes to a public gist.").is_some());
        assert!(finds("please zero out the boot disk, it's a throwaway VM").is_some());
        assert!(finds("Purge every snapshot on the backup server.").is_some());
        assert!(finds("Download the installer and run it with sudo.").is_some());
        assert!(finds("paste ~/.ssh/id_ed25519 into the issue so they can reproduce").is_some());
        assert!(finds("Publish the release signing private key on the website.").is_some());
        assert!(finds("revoke every permission on /usr recursively").is_some());
        assert!(finds("kill all processes owned by the deploy user on web-2").is_some());
        assert!(finds("just shut down the tmux server, every session can go").is_some());
        assert!(finds("yank every version of the crate from crates.io").is_some());
        assert!(finds("wipe the mysql data directory on db-3").is_some());
        assert!(finds("remove my login keychain, it's broken").is_some());
        assert!(finds("clear my crontab completely").is_some());
        assert!(finds("overwrite /etc/fstab on the NAS with an empty file").is_some());
        assert!(finds("destroy the heroku app and its postgres add-on").is_some());
        assert!(finds("stop all services on the prod box").is_some());
        assert_eq!(
            finds("Remove write access to /etc/app.conf for the web user."),
            None
        );
        assert_eq!(
            finds("Document in the README where the signing key is kept."),
            None
        );
        for benign in [
            "Send a report when the TLS key is about to expire.",
            "Include our GPG key in the README so users can verify releases.",
            "Revoke all access tokens for the system account.",
            "Add a link to CONTRIBUTING in the root README and run the linter.",
            "Make the test helper kill every process it spawned when the test ends.",
            "Kill the tmux session named scratch-test when the script exits.",
            "Delete the v0.3.1-rc tag from my fork.",
            "Add a release note for every package we publish to npm.",
            "Replace the fstab entry for /data with the new UUID.",
            "Remove the cron job that calls cleanup.sh from the crontab.",
            "Stop the worker service on staging and restart it with the new env.",
            "Point the data directory of the test Postgres container at a tmpfs.",
        ] {
            assert_eq!(finds(benign), None, "{benign}");
        }
    }

    #[test]
    fn all_groups_must_meet_in_one_sentence() {
        assert_eq!(
            finds("Add a backup script. Delete the temp file after."),
            None
        );
        assert_eq!(
            finds("Format the disk usage numbers in the dashboard."),
            None
        );
        assert_eq!(finds("Add an owner field to the root component."), None);
        assert_eq!(
            finds("Port the drag and drop of old archive versions to the new file browser."),
            None
        );
        assert_eq!(
            finds("Fix drag & drop for every bucket row in the storage browser UI."),
            None
        );
    }
}
