//! Rule manifests: every embedded one compiles, overrides from a directory replace or add
//! manifests by id, bad manifests are refused with errors that name the file and the problem,
//! and `explain` accounts for every rule it evaluated.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use karl_common::detect::{AgentKind, DetectionInput, Detector, PaneState, RuleKind};
use karl_common::Error;

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "karl-detect-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn write(&self, name: &str, body: impl AsRef<[u8]>) {
        std::fs::write(self.0.join(name), body).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SHELL_PROMPT_SCREEN: &str = "karl@mac2 proj % ls\nREADME.md\nkarl@mac2 proj %\n";

fn shell_input(text: &str) -> DetectionInput<'_> {
    DetectionInput {
        text,
        current_command: "bash",
        ..DetectionInput::default()
    }
}

#[test]
fn every_embedded_manifest_compiles() {
    let det = Detector::try_embedded().unwrap();
    let ids: Vec<_> = det.manifests().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, ["claude", "codex", "aider", "gemini", "shell"]);
    for m in det.manifests() {
        assert!(m.version >= 1, "{}", m.id);
        assert!(m.rules > 0, "{}", m.id);
        assert!(
            !m.note.trim().is_empty(),
            "{}: note must name the CLI version",
            m.id
        );
        // Manifests written without captures say so, in the flag and in the note.
        let from_docs = matches!(m.agent, AgentKind::Aider | AgentKind::Gemini);
        assert_eq!(m.verified, !from_docs, "{}", m.id);
        if from_docs {
            assert!(m.note.contains("UNVERIFIED"), "{}", m.note);
        }
    }
    // `embedded()` and `try_embedded()` agree when everything compiles.
    assert_eq!(Detector::embedded().manifests(), det.manifests());
}

#[test]
fn override_dir_replaces_by_id_and_adds_new_ids() {
    let dir = TempDir::new();
    // A shell manifest that calls every non-empty screen `limited`: proves the override is used.
    dir.write(
        "shell.toml",
        r#"
id = "shell"
version = 99
agent = "shell"
note = "test override"
[[identify]]
id = "text"
weight = 1
region = "screen"
any = ['\S']
[[rules]]
id = "everything-limited"
state = "limited"
region = "screen"
any = ['\S']
"#,
    );
    dir.write(
        "mytool.toml",
        r#"
id = "mytool"
version = 1
agent = "unknown"
note = "a CLI KARL does not ship rules for"
[[identify]]
id = "banner"
weight = 9
region = "screen"
any = ['^MyTool v\d']
[[rules]]
id = "ready"
state = "idle"
region = "screen"
last = 1
any = ['^ready>$']
"#,
    );
    dir.write("notes.txt", "not a manifest, ignored");

    let det = Detector::from_dir(&dir.0).unwrap();
    let shell = det
        .manifests()
        .into_iter()
        .find(|m| m.id == "shell")
        .unwrap();
    assert_eq!(shell.version, 99);
    assert!(det.manifests().iter().any(|m| m.id == "mytool"));
    assert!(
        det.manifests().iter().any(|m| m.id == "claude"),
        "embedded ones stay"
    );

    let d = det.detect(&shell_input(SHELL_PROMPT_SCREEN));
    assert_eq!(d.state, PaneState::Limited);
    assert_eq!(d.rule.as_deref(), Some("shell/everything-limited"));

    let d = det.detect(&shell_input("MyTool v2.0\nready>\n"));
    assert_eq!((d.state, d.agent), (PaneState::Idle, AgentKind::Unknown));
    assert_eq!(d.rule.as_deref(), Some("mytool/ready"));
}

#[test]
fn missing_dir_is_an_io_error_naming_the_path() {
    let err = Detector::from_dir("/nonexistent/karl/rules").unwrap_err();
    assert!(matches!(err, Error::RulesIo { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/karl/rules"), "{err}");
}

#[test]
fn bad_manifests_in_dir_are_refused_with_file_and_reason() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("broken.toml", b"id = \"x\"\nversion = ", "broken.toml"),
        (
            "typo.toml",
            b"id = \"x\"\nversion = 1\nagent = \"shell\"\nnote = \"n\"\n[[rules]]\nid = \"r\"\nstate = \"idle\"\nregion = \"screen\"\nanyy = ['a']\n",
            "anyy",
        ),
        (
            "regex.toml",
            b"id = \"x\"\nversion = 1\nagent = \"shell\"\nnote = \"n\"\n[[rules]]\nid = \"r\"\nstate = \"idle\"\nregion = \"screen\"\nany = ['[unclosed']\n",
            "[unclosed",
        ),
        ("binary.toml", &[0xff, 0xfe, 0x00, 0x80], "UTF-8"),
    ];
    for (name, body, needle) in cases {
        let dir = TempDir::new();
        dir.write(name, body);
        let err = Detector::from_dir(&dir.0).unwrap_err();
        assert!(matches!(err, Error::Manifest { .. }), "{name}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(name) && msg.contains(needle), "{name}: {msg}");
    }
}

#[test]
fn oversized_and_duplicate_manifests_are_refused() {
    let dir = TempDir::new();
    dir.write(
        "big.toml",
        format!(
            "# {}\n",
            "x".repeat(karl_common::detect::MAX_MANIFEST_BYTES)
        ),
    );
    let err = Detector::from_dir(&dir.0).unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");

    let dir = TempDir::new();
    let m = "id = \"dup\"\nversion = 1\nagent = \"shell\"\nnote = \"n\"\n";
    dir.write("a.toml", m);
    dir.write("b.toml", m);
    let err = Detector::from_dir(&dir.0).unwrap_err();
    assert!(err.to_string().contains("dup"), "{err}");
}

#[test]
fn explain_lists_every_rule_and_marks_the_decider() {
    let det = Detector::embedded();
    let input = shell_input(SHELL_PROMPT_SCREEN);
    let trace = det.explain(&input);
    let d = det.detect(&input);
    assert_eq!(d.state, PaneState::Idle);

    // Identification rules of every manifest were evaluated.
    for id in [
        "claude/id:",
        "codex/id:",
        "aider/id:",
        "gemini/id:",
        "shell/id:",
    ] {
        assert!(
            trace
                .iter()
                .any(|t| t.kind == RuleKind::Identify && t.rule.starts_with(id)),
            "{id} missing"
        );
    }
    // Every state rule of the identified manifest was evaluated, not just up to the decider.
    let shell = det
        .manifests()
        .into_iter()
        .find(|m| m.id == "shell")
        .unwrap();
    let shell_rules = trace
        .iter()
        .filter(|t| t.rule.starts_with("shell/") && t.kind != RuleKind::Identify)
        .count();
    let shell_ids = trace
        .iter()
        .filter(|t| t.rule.starts_with("shell/id:"))
        .count();
    assert_eq!(shell_rules + shell_ids, shell.rules);

    let deciders: Vec<_> = trace
        .iter()
        .filter(|t| t.kind == RuleKind::State && t.decided)
        .collect();
    assert_eq!(deciders.len(), 1);
    assert_eq!(Some(deciders[0].rule.as_str()), d.rule.as_deref());
    assert_eq!(
        deciders[0].line.as_deref(),
        Some(d.evidence[0].line.as_str())
    );
    // A rule that matched below the decider is reported as matched but not deciding.
    assert!(trace
        .iter()
        .filter(|t| t.kind == RuleKind::State && !t.decided)
        .all(|t| t.priority <= deciders[0].priority || !t.matched));
}
