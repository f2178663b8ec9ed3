//! Secret redaction for text bound for the model: API keys, tokens, passwords and
//! private keys that show in a pane (an `env` dump, a `.env` file the agent printed, a
//! failing `curl -H "Authorization: Bearer …"`) are replaced before the text leaves
//! the coordinator.
//!
//! The rules favour recall: a redacted non-secret costs the model a few characters of
//! context, a leaked secret cannot be taken back. Known key formats are matched by
//! shape; anything else only when it sits after a key-ish name (`password=`,
//! `"api_key": "…"`, `Authorization: Bearer …`) or inside a URL's userinfo.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

struct Rule {
    re: Regex,
    /// Builds the replacement, or `None` to keep the match (a shape that turned out not
    /// to be a secret, e.g. a counter after `tokens:`).
    replace: fn(&Captures<'_>) -> Option<String>,
}

fn rule(pattern: &str, replace: fn(&Captures<'_>) -> Option<String>) -> Rule {
    match Regex::new(pattern) {
        Ok(re) => Rule { re, replace },
        // The patterns are constants covered by the tests below; a typo must fail them.
        Err(e) => panic!("bad redaction pattern {pattern:?}: {e}"),
    }
}

/// Keeps the text before the secret (`prefix` group), redacts the rest.
fn keep_prefix(c: &Captures<'_>) -> Option<String> {
    let prefix = c.name("prefix").map_or("", |m| m.as_str());
    Some(format!("{prefix}{REDACTED}"))
}

/// Redacts a token-shaped match only when it mixes letters and digits, as generated keys
/// do; `sk-learn-the-basics-of-it` is prose.
fn mixed_token(c: &Captures<'_>) -> Option<String> {
    let secret = c.name("secret").map_or("", |m| m.as_str());
    if has_letter_and_digit(secret) {
        keep_prefix(c)
    } else {
        None
    }
}

fn has_letter_and_digit(s: &str) -> bool {
    s.chars().any(|c| c.is_ascii_alphabetic()) && s.chars().any(|c| c.is_ascii_digit())
}

/// A value after a key-ish name: redacted unless it is plainly a number (token counters,
/// `max_tokens: 200`) or a placeholder.
fn key_value(c: &Captures<'_>) -> Option<String> {
    let value = c.name("value").map_or("", |m| m.as_str());
    let bare = value.trim_matches(|ch| ch == '"' || ch == '\'');
    let numeric = !bare.is_empty()
        && bare
            .chars()
            .all(|ch| ch.is_ascii_digit() || ch == ',' || ch == '.' || ch == '_');
    let placeholder = bare.is_empty()
        || bare == REDACTED
        || bare.starts_with('$')
        || bare.starts_with("<")
        || bare.chars().all(|ch| ch == '*' || ch == 'x' || ch == 'X');
    if numeric || placeholder {
        return None;
    }
    let quote = if value.starts_with('"') {
        "\""
    } else if value.starts_with('\'') {
        "'"
    } else {
        ""
    };
    let prefix = c.name("prefix").map_or("", |m| m.as_str());
    Some(format!("{prefix}{quote}{REDACTED}{quote}"))
}

fn whole(_: &Captures<'_>) -> Option<String> {
    Some(REDACTED.to_string())
}

fn private_key(_: &Captures<'_>) -> Option<String> {
    Some(format!("{REDACTED} (private key)"))
}

/// A bare base64 line such as the body of a key block whose BEGIN line scrolled away:
/// long, no spaces, and mixing upper case, lower case and digits (hex digests and
/// words do not).
fn base64_line(c: &Captures<'_>) -> Option<String> {
    let s = c.name("secret").map_or("", |m| m.as_str());
    let upper = s.chars().any(|ch| ch.is_ascii_uppercase());
    let lower = s.chars().any(|ch| ch.is_ascii_lowercase());
    let digit = s.chars().any(|ch| ch.is_ascii_digit());
    if upper && lower && digit {
        keep_prefix(c)
    } else {
        None
    }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        // PEM private keys; an unterminated block (cut by the capture) is redacted to
        // the end of the text.
        rule(
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            private_key,
        ),
        // Authorization headers: Bearer / Basic / Token credentials.
        rule(
            r"(?i)(?P<prefix>(?-u:\b)(?:bearer|basic|token)\s+)(?P<secret>[A-Za-z0-9._~+/=-]{12,})",
            mixed_token,
        ),
        // URL userinfo: scheme://user:password@host
        rule(
            r"(?P<prefix>(?-u:\b)[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)(?P<secret>[^/\s@]+)@",
            |c| keep_prefix(c).map(|s| format!("{s}@")),
        ),
        // Provider key formats.
        rule(
            r"(?P<prefix>)(?-u:\b)(?P<secret>sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,})",
            mixed_token,
        ),
        rule(
            r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
            whole,
        ),
        rule(
            r"(?-u:\b)(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}(?-u:\b)",
            whole,
        ),
        rule(r"(?-u:\b)xox[abposre]-[A-Za-z0-9-]{10,}", whole),
        rule(r"(?-u:\b)AIza[0-9A-Za-z_-]{35}", whole),
        rule(
            r"(?-u:\b)(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
            whole,
        ),
        rule(
            r"(?P<prefix>)(?-u:\b)(?P<secret>(?:hf|npm|glpat|pypi)[_-][A-Za-z0-9_-]{20,})",
            mixed_token,
        ),
        // JSON web tokens.
        rule(
            r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            whole,
        ),
        // key = value, key: value, "key": "value", export KEY=value — for key-ish names.
        rule(
            r#"(?i)(?P<prefix>(?-u:\b)[A-Za-z0-9_.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|private[_-]?key|credentials?|client[_-]?secret|session[_-]?id)["']?\s*[:=]\s*)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;]+)"#,
            key_value,
        ),
        // Long base64 lines standing alone.
        rule(
            r"(?m)^(?P<prefix>[ \t]*)(?P<secret>[A-Za-z0-9+/]{40,}={0,2})[ \t]*$",
            base64_line,
        ),
    ]
});

/// `text` with every secret replaced by [`REDACTED`], and how many were replaced.
/// Borrows when nothing matched (the common case).
pub fn redact(text: &str) -> (Cow<'_, str>, usize) {
    let mut out = Cow::Borrowed(text);
    let mut count = 0usize;
    for rule in RULES.iter() {
        if !rule.re.is_match(&out) {
            continue;
        }
        let mut hits = 0usize;
        let replaced = rule
            .re
            .replace_all(&out, |c: &Captures<'_>| match (rule.replace)(c) {
                Some(r) => {
                    hits += 1;
                    r
                }
                None => c.get(0).map_or(String::new(), |m| m.as_str().to_string()),
            });
        if hits > 0 {
            count += hits;
            out = Cow::Owned(replaced.into_owned());
        }
    }
    (out, count)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn red(s: &str) -> String {
        redact(s).0.into_owned()
    }

    #[track_caller]
    fn hides(input: &str, secret: &str) {
        let out = red(input);
        assert!(!out.contains(secret), "{secret:?} survived in {out:?}");
        assert!(out.contains(REDACTED), "{out:?}");
    }

    #[test]
    fn provider_keys() {
        hides(
            "OPENAI=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv",
            "Ab3dEf6hIj9kLm2nOp5qRs8tUv",
        );
        hides(
            "key sk-ant-api03-x7Yz9Qw2Er4Ty6Ui8Op0As1Df3Gh5Jk",
            "x7Yz9Qw2Er4Ty6Ui8Op0As1Df3Gh5Jk",
        );
        hides(
            "remote: ghp_1234567890abcdefghijABCDEFGHIJklmnop",
            "ghp_1234567890abcdefghij",
        );
        hides(
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "11ABCDEFG0123456789",
        );
        hides(
            "aws_access_key_id AKIAIOSFODNN7EXAMPLE",
            "AKIAIOSFODNN7EXAMPLE",
        );
        hides(
            "SLACK xoxb-123456789012-1234567890123-AbCdEfGhIjKl",
            "xoxb-123456789012",
        );
        hides(
            "google AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "AIzaSyA1234567890",
        );
        hides(
            "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "4eC39HqLyjWDarjtT1zdp7dc",
        );
        hides("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOp");
    }

    #[test]
    fn bearer_and_jwt() {
        hides(
            r#"curl -H "Authorization: Bearer abc123def456ghi789jkl" http://x"#,
            "abc123def456ghi789jkl",
        );
        hides(
            "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "dozjgNryP4J3jVmNHl0w5N",
        );
        // The header name survives so the model still sees what happened.
        assert!(red("Authorization: Bearer abc123def456ghi789jkl")
            .starts_with("Authorization: Bearer "));
    }

    #[test]
    fn passwords_and_key_value_pairs() {
        hides("DB_PASSWORD=hunter2", "hunter2");
        hides("mysql -u root --password=s3cr3t!", "s3cr3t!");
        hides(r#"{"api_key": "a1b2c3d4e5"}"#, "a1b2c3d4e5");
        hides("export GITHUB_TOKEN='tok-value-99'", "tok-value-99");
        hides("client_secret: Zm9vYmFyYmF6", "Zm9vYmFyYmF6");
        hides("password: correct horse", "correct");
        assert_eq!(red("password=hunter2 then"), "password=[REDACTED] then");
        assert_eq!(red(r#""secret": "x1y2""#), r#""secret": "[REDACTED]""#);
    }

    #[test]
    fn url_credentials() {
        hides(
            "DATABASE_URL=postgres://app:pa55word@db:5432/app",
            "pa55word",
        );
        let out = red("git clone https://user:tok3n@github.com/o/r.git");
        assert_eq!(out, "git clone https://user:[REDACTED]@github.com/o/r.git");
    }

    #[test]
    fn private_key_blocks() {
        let pem = "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAC3NzaC1lZDI1NTE5AAAAIOq\n-----END OPENSSH PRIVATE KEY-----\nafter";
        let out = red(pem);
        assert_eq!(out, "before\n[REDACTED] (private key)\nafter");
        // Cut off by the capture: everything after BEGIN goes.
        let cut = "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nQ2xvdWQ";
        assert_eq!(red(cut), "x\n[REDACTED] (private key)");
        // Its body alone, BEGIN scrolled away.
        hides(
            "  MIIEpAIBAAKCAQEA75Xb0Ma9bYkXNZxW4uvOTUQb2kIZpFG3Sa1jW9H8fQ2x\n$ ",
            "MIIEpAIBAAKCAQEA75",
        );
    }

    #[test]
    fn ordinary_terminal_text_is_untouched() {
        for s in [
            "✻ Cogitating… (12s · ↓ 340 tokens · esc to interrupt)",
            "Token usage: total=2,345 input=2,000 output=345",
            "max_tokens: 200",
            "commit 3f5a9c1e2b7d4f6a8c0e1b3d5f7a9c1e2b4d6f8a",
            "error[E0425]: cannot find value `task` in this scope",
            "the risk-management-framework is in docs/",
            "sk-learn-the-basics-of-rust-today",
            "Use a bearer token from the environment",
            "password: $DB_PASSWORD",
            "set the token: <your token here>",
            "src/auth/token_store.rs | 42 ++++",
        ] {
            let (out, n) = redact(s);
            assert_eq!(n, 0, "{s:?} -> {out:?}");
            assert!(matches!(out, Cow::Borrowed(_)));
        }
    }

    #[test]
    fn counts_every_secret() {
        let (_, n) = redact("a=1 password=x1 ghp_1234567890abcdefghijABCDEFGHIJ token=t9t9t9");
        assert_eq!(n, 3);
    }
}
