//! Where notices go: the `[notify]` table of karl-coord.toml checked into sinks
//! ([`NotifyFile::resolve`]), and each sink's payload ([`http_request`], [`command_env`],
//! pure). Sending them is [`super::Notifier`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Deserialize;

use super::notice::{Notice, NoticeKind};

/// `[notify]` as written in karl-coord.toml. Every field is optional.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyFile {
    /// The same notice again within this many seconds is dropped (default 600).
    pub dedupe_secs: Option<u64>,
    /// An agent disconnected this long is reported lost (default 60).
    pub agent_lost_secs: Option<u64>,
    /// `[[notify.sink]]` tables.
    #[serde(default, rename = "sink")]
    pub sinks: Vec<SinkFile>,
}

/// One `[[notify.sink]]` table.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkFile {
    /// What `karl-ctl notify test NAME` calls it (default: its kind).
    pub name: Option<String>,
    pub kind: Option<SinkKind>,
    /// webhook, slack, discord: the URL to POST to; ntfy: the topic's URL.
    pub url: Option<String>,
    /// ntfy: an access token; webhook: sent as `Authorization: Bearer …`.
    pub token: Option<String>,
    /// webhook: extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// command: the program and its arguments (no shell); the notice is on its stdin.
    pub command: Option<Vec<String>>,
    /// macos: the Mac to show it on (default: the Mac where the pane lives).
    pub machine: Option<String>,
    /// The events it wants (default: all of them).
    pub events: Option<Vec<NoticeKind>>,
    /// At most this many sends a minute (default 10).
    pub per_minute: Option<u32>,
    /// Tries after a failed send, 1 s, 2 s, 4 s … apart (default 5).
    pub retries: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SinkKind {
    Webhook,
    Slack,
    Discord,
    Ntfy,
    Command,
    Macos,
}

impl SinkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Webhook => "webhook",
            SinkKind::Slack => "slack",
            SinkKind::Discord => "discord",
            SinkKind::Ntfy => "ntfy",
            SinkKind::Command => "command",
            SinkKind::Macos => "macos",
        }
    }
}

/// Notification settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyConfig {
    pub dedupe: Duration,
    pub agent_lost_after: Duration,
    pub sinks: Vec<Sink>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            dedupe: Duration::from_secs(600),
            agent_lost_after: Duration::from_secs(60),
            sinks: Vec::new(),
        }
    }
}

/// One sink, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Sink {
    pub name: String,
    pub target: Target,
    pub events: BTreeSet<NoticeKind>,
    pub per_minute: u32,
    pub retries: u32,
}

impl Sink {
    pub fn wants(&self, kind: NoticeKind) -> bool {
        match (&self.target, kind) {
            (_, NoticeKind::Test) => true,
            // The pane's Mac is the one that is lost: only a sink with a Mac of its own
            // can show that.
            (Target::Macos { machine: None }, NoticeKind::AgentLost) => false,
            _ => self.events.contains(&kind),
        }
    }
}

/// Where a sink sends, with what it needs to.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Webhook {
        url: String,
        headers: Vec<(String, String)>,
    },
    Slack {
        url: String,
    },
    Discord {
        url: String,
    },
    Ntfy {
        url: String,
        token: Option<String>,
    },
    Command {
        argv: Vec<String>,
    },
    Macos {
        machine: Option<String>,
    },
}

impl Target {
    pub fn kind(&self) -> SinkKind {
        match self {
            Target::Webhook { .. } => SinkKind::Webhook,
            Target::Slack { .. } => SinkKind::Slack,
            Target::Discord { .. } => SinkKind::Discord,
            Target::Ntfy { .. } => SinkKind::Ntfy,
            Target::Command { .. } => SinkKind::Command,
            Target::Macos { .. } => SinkKind::Macos,
        }
    }

    /// Where it goes, for logs and `notify test` (a URL's host only: paths hold secrets).
    pub fn describe(&self) -> String {
        match self {
            Target::Webhook { url, .. }
            | Target::Slack { url }
            | Target::Discord { url }
            | Target::Ntfy { url, .. } => reqwest::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default(),
            Target::Command { argv } => argv.first().cloned().unwrap_or_default(),
            Target::Macos { machine } => machine
                .clone()
                .unwrap_or_else(|| "the pane's Mac".to_string()),
        }
    }
}

impl NotifyFile {
    /// Checks every sink; the error names the sink and what to write instead.
    pub fn resolve(self) -> Result<NotifyConfig, String> {
        let mut cfg = NotifyConfig::default();
        if let Some(s) = self.dedupe_secs {
            cfg.dedupe = Duration::from_secs(s);
        }
        if let Some(s) = self.agent_lost_secs {
            cfg.agent_lost_after = Duration::from_secs(s.max(1));
        }
        let mut names = BTreeSet::new();
        for (i, file) in self.sinks.into_iter().enumerate() {
            let sink = file
                .resolve()
                .map_err(|e| format!("[[notify.sink]] number {}: {e}", i + 1))?;
            if !names.insert(sink.name.clone()) {
                return Err(format!(
                    "two notification sinks are named {:?}: give each a `name`",
                    sink.name
                ));
            }
            cfg.sinks.push(sink);
        }
        Ok(cfg)
    }
}

impl SinkFile {
    fn resolve(self) -> Result<Sink, String> {
        let kinds = "webhook, slack, discord, ntfy, command or macos";
        let kind = self
            .kind
            .ok_or_else(|| format!("no `kind`: write one of {kinds}"))?;
        let name = self.name.unwrap_or_else(|| kind.as_str().to_string());
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(format!(
                "name {name:?}: use a word without spaces (karl-ctl notify test NAME)"
            ));
        }
        let url = || -> Result<String, String> {
            let url = self
                .url
                .clone()
                .ok_or_else(|| format!("sink {name:?} ({}) needs a `url`", kind.as_str()))?;
            match reqwest::Url::parse(&url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(url),
                _ => Err(format!(
                    "sink {name:?}: url {url:?} is not an http:// or https:// URL"
                )),
            }
        };
        let unused = |field: &str, set: bool| {
            if set {
                Err(format!(
                    "sink {name:?} ({}) takes no `{field}`",
                    kind.as_str()
                ))
            } else {
                Ok(())
            }
        };
        unused(
            "headers",
            !self.headers.is_empty() && kind != SinkKind::Webhook,
        )?;
        unused(
            "token",
            self.token.is_some() && !matches!(kind, SinkKind::Webhook | SinkKind::Ntfy),
        )?;
        unused(
            "command",
            self.command.is_some() && kind != SinkKind::Command,
        )?;
        unused("machine", self.machine.is_some() && kind != SinkKind::Macos)?;
        unused(
            "url",
            self.url.is_some() && matches!(kind, SinkKind::Command | SinkKind::Macos),
        )?;
        let target = match kind {
            SinkKind::Webhook => {
                let mut headers = Vec::new();
                for (k, v) in &self.headers {
                    if http::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || http::HeaderValue::from_str(v).is_err()
                    {
                        return Err(format!(
                            "sink {name:?}: header {k:?} is not a valid HTTP header"
                        ));
                    }
                    headers.push((k.clone(), v.clone()));
                }
                if let Some(t) = &self.token {
                    headers.push(("Authorization".into(), format!("Bearer {t}")));
                }
                Target::Webhook {
                    url: url()?,
                    headers,
                }
            }
            SinkKind::Slack => Target::Slack { url: url()? },
            SinkKind::Discord => Target::Discord { url: url()? },
            SinkKind::Ntfy => Target::Ntfy {
                url: url()?,
                token: self.token.clone(),
            },
            SinkKind::Command => match self.command.clone() {
                Some(argv) if argv.first().is_some_and(|p| !p.is_empty()) => {
                    Target::Command { argv }
                }
                _ => {
                    return Err(format!(
                        "sink {name:?} (command) needs `command = [\"program\", \"arg\", …]`"
                    ))
                }
            },
            SinkKind::Macos => Target::Macos {
                machine: self.machine.clone().filter(|m| !m.is_empty()),
            },
        };
        let events: BTreeSet<NoticeKind> = match self.events {
            None => NoticeKind::FILTERABLE.into_iter().collect(),
            Some(list) if list.is_empty() => {
                return Err(format!(
                "sink {name:?}: `events = []` would send nothing; remove the sink or list events"
            ))
            }
            Some(list) => list.into_iter().collect(),
        };
        if events.contains(&NoticeKind::Test) {
            return Err(format!(
                "sink {name:?}: `test` is not an event to choose; `karl-ctl notify test` reaches every sink"
            ));
        }
        Ok(Sink {
            name,
            target,
            events,
            per_minute: self.per_minute.unwrap_or(10).max(1),
            retries: self.retries.unwrap_or(5),
        })
    }
}

/// An HTTP POST, described (the sender turns it into a request).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpPost {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub content_type: &'static str,
    pub body: String,
}

/// The request an HTTP sink sends for `n`; `None` for the command and macOS sinks.
pub fn http_request(target: &Target, n: &Notice) -> Option<HttpPost> {
    let json = |url: &str, headers: Vec<(String, String)>, body: serde_json::Value| HttpPost {
        url: url.to_string(),
        headers,
        content_type: "application/json",
        body: body.to_string(),
    };
    let place = n.place();
    // Discord refuses content over 2,000 characters and ntfy turns a body over 4 KB into an
    // attachment: a screen line is never worth losing the notice over.
    let text = cut(&n.text, MAX_TEXT_CHARS);
    match target {
        // The notice as it is: kind, session, machine, pane, title, text, unix_ms.
        Target::Webhook { url, headers } => Some(json(
            url,
            headers.clone(),
            serde_json::to_value(n).unwrap_or_default(),
        )),
        Target::Slack { url } => Some(json(
            url,
            Vec::new(),
            serde_json::json!({
                "text": format!(
                    "*{}*\n{}\n_{}_",
                    slack_escape(&n.title),
                    slack_escape(&text),
                    slack_escape(&place)
                ),
            }),
        )),
        Target::Discord { url } => Some(json(
            url,
            Vec::new(),
            serde_json::json!({
                "content": format!("**{}**\n{}\n*{}*", n.title, text, place),
                // A session's text is not allowed to ping anyone.
                "allowed_mentions": {"parse": []},
            }),
        )),
        Target::Ntfy { url, token } => {
            let mut headers = vec![
                ("Title".to_string(), header_safe(&n.title)),
                (
                    "Priority".to_string(),
                    if n.kind.urgent() { "high" } else { "default" }.to_string(),
                ),
                ("Tags".to_string(), n.kind.as_str().to_string()),
            ];
            if let Some(t) = token {
                headers.push(("Authorization".into(), format!("Bearer {t}")));
            }
            Some(HttpPost {
                url: url.clone(),
                headers,
                content_type: "text/plain; charset=utf-8",
                body: format!("{text}\n{place}"),
            })
        }
        Target::Command { .. } | Target::Macos { .. } => None,
    }
}

/// Longest notice text a chat message carries (with title and place it stays under
/// Discord's 2,000 characters and ntfy's 4 KB).
const MAX_TEXT_CHARS: usize = 1_200;

/// `s` cut to `max` characters, marked with `…` when cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Slack's message text: `&`, `<` and `>` escaped, so pane text cannot mention a channel
/// (`<!channel>`) or forge a link.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A header value from free text: printable ASCII only (ntfy reads UTF-8 titles only when
/// RFC 2047-encoded, so others become `?`), on one line.
fn header_safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '—' | '–' => '-',
            c if c.is_ascii_graphic() || c == ' ' => c,
            _ => '?',
        })
        .collect()
}

/// The environment a command sink runs with (beside the notice as JSON on stdin).
pub fn command_env(n: &Notice) -> Vec<(&'static str, String)> {
    vec![
        ("KARL_NOTICE_KIND", n.kind.as_str().to_string()),
        ("KARL_NOTICE_TITLE", n.title.clone()),
        ("KARL_NOTICE_TEXT", n.text.clone()),
        ("KARL_NOTICE_SESSION", n.session.clone()),
        ("KARL_NOTICE_MACHINE", n.machine.clone()),
        ("KARL_NOTICE_PANE", n.pane.clone()),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(toml_text: &str) -> Result<NotifyConfig, String> {
        toml::from_str::<NotifyFile>(toml_text)
            .map_err(|e| e.to_string())?
            .resolve()
    }

    fn notice(kind: NoticeKind) -> Notice {
        Notice {
            kind,
            session: "s-1".into(),
            machine: "mac2".into(),
            pane: "agent-codex:1.1".into(),
            title: "KARL: needs you — billing".into(),
            text: "stuck \"here\" <@everyone>".into(),
            unix_ms: 42,
        }
    }

    #[test]
    fn every_kind_of_sink_parses_with_defaults() {
        let cfg = parse(
            r#"
            dedupe_secs = 30
            [[sink]]
            kind = "webhook"
            url = "https://hooks.example.com/karl"
            token = "t0k"
            headers = { "X-Team" = "infra" }
            [[sink]]
            kind = "slack"
            url = "https://hooks.slack.com/services/T/B/X"
            events = ["escalated", "permission"]
            [[sink]]
            kind = "discord"
            url = "https://discord.com/api/webhooks/1/x"
            [[sink]]
            name = "phone"
            kind = "ntfy"
            url = "https://ntfy.sh/karl-fleet"
            per_minute = 3
            retries = 0
            [[sink]]
            kind = "command"
            command = ["/usr/local/bin/page-me", "--loud"]
            [[sink]]
            kind = "macos"
            machine = "mac1"
            "#,
        )
        .unwrap();
        assert_eq!(cfg.dedupe, Duration::from_secs(30));
        assert_eq!(cfg.agent_lost_after, Duration::from_secs(60));
        let names: Vec<&str> = cfg.sinks.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["webhook", "slack", "discord", "phone", "command", "macos"]
        );
        let webhook = &cfg.sinks[0];
        assert_eq!(webhook.events.len(), 6, "all events by default");
        assert_eq!((webhook.per_minute, webhook.retries), (10, 5));
        assert_eq!(
            webhook.target,
            Target::Webhook {
                url: "https://hooks.example.com/karl".into(),
                headers: vec![
                    ("X-Team".into(), "infra".into()),
                    ("Authorization".into(), "Bearer t0k".into())
                ],
            }
        );
        let slack = &cfg.sinks[1];
        assert!(slack.wants(NoticeKind::Permission) && !slack.wants(NoticeKind::Done));
        assert!(slack.wants(NoticeKind::Test), "a test reaches every sink");
        assert_eq!((cfg.sinks[3].per_minute, cfg.sinks[3].retries), (3, 0));
        assert_eq!(cfg.sinks[3].target.describe(), "ntfy.sh");
        assert_eq!(
            cfg.sinks[5].target,
            Target::Macos {
                machine: Some("mac1".into())
            }
        );
    }

    #[test]
    fn mistakes_are_refused_with_what_to_write() {
        let cases = [
            ("[[sink]]\nurl = \"https://x\"", "no `kind`"),
            ("[[sink]]\nkind = \"pager\"", "unknown variant"),
            ("[[sink]]\nkind = \"slack\"", "needs a `url`"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"hooks.slack.com/x\"", "not an http"),
            ("[[sink]]\nkind = \"ntfy\"\nurl = \"ftp://ntfy.sh/x\"", "not an http"),
            ("[[sink]]\nkind = \"command\"", "needs `command"),
            ("[[sink]]\nkind = \"command\"\ncommand = []", "needs `command"),
            ("[[sink]]\nkind = \"macos\"\nurl = \"https://x\"", "takes no `url`"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\nmachine = \"mac1\"", "takes no `machine`"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\nevents = [\"escalate\"]", "unknown variant"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\nevents = []", "would send nothing"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\nevents = [\"test\"]", "not an event to choose"),
            ("[[sink]]\nkind = \"webhook\"\nurl = \"https://x\"\nheaders = { \"Bad Name\" = \"v\" }", "not a valid HTTP header"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\n[[sink]]\nkind = \"slack\"\nurl = \"https://y\"", "two notification sinks are named \"slack\""),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\nname = \"my phone\"", "without spaces"),
            ("[[sink]]\nkind = \"slack\"\nurl = \"https://x\"\nchannel = \"#ops\"", "unknown field"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        // The position of the broken sink is named.
        let e = parse("[[sink]]\nkind = \"macos\"\n[[sink]]\nkind = \"slack\"").unwrap_err();
        assert!(e.starts_with("[[notify.sink]] number 2"), "{e}");
    }

    #[test]
    fn payloads_carry_the_notice_in_each_service_s_shape() {
        let n = notice(NoticeKind::Escalated);
        let post = |t: Target| http_request(&t, &n).unwrap();
        let body = |p: &HttpPost| serde_json::from_str::<serde_json::Value>(&p.body).unwrap();

        let w = post(Target::Webhook {
            url: "http://127.0.0.1:9/h".into(),
            headers: vec![("X-Team".into(), "infra".into())],
        });
        assert_eq!(w.content_type, "application/json");
        assert_eq!(w.headers, vec![("X-Team".to_string(), "infra".to_string())]);
        let v = body(&w);
        assert_eq!(v["kind"], "escalated");
        assert_eq!(v["session"], "s-1");
        assert_eq!(v["pane"], "agent-codex:1.1");
        assert_eq!(v["unix_ms"], 42);

        let s = body(&post(Target::Slack {
            url: "https://h/s".into(),
        }));
        assert_eq!(
            s["text"],
            "*KARL: needs you — billing*\nstuck \"here\" &lt;@everyone&gt;\n_mac2 agent-codex:1.1_"
        );
        let d = body(&post(Target::Discord {
            url: "https://h/d".into(),
        }));
        assert!(d["content"]
            .as_str()
            .unwrap()
            .starts_with("**KARL: needs you — billing**\n"));
        assert_eq!(d["allowed_mentions"]["parse"], serde_json::json!([]));

        let ntfy = post(Target::Ntfy {
            url: "https://ntfy.sh/karl".into(),
            token: Some("tk".into()),
        });
        assert_eq!(
            ntfy.body,
            "stuck \"here\" <@everyone>\nmac2 agent-codex:1.1"
        );
        assert!(ntfy
            .headers
            .contains(&("Title".into(), "KARL: needs you - billing".into())));
        assert!(ntfy.headers.contains(&("Priority".into(), "high".into())));
        assert!(ntfy
            .headers
            .contains(&("Authorization".into(), "Bearer tk".into())));
        let done = http_request(
            &Target::Ntfy {
                url: "https://n/t".into(),
                token: None,
            },
            &notice(NoticeKind::Done),
        )
        .unwrap();
        assert!(done
            .headers
            .contains(&("Priority".into(), "default".into())));

        assert!(http_request(&Target::Macos { machine: None }, &n).is_none());
        let env = command_env(&n);
        assert!(env.contains(&("KARL_NOTICE_KIND", "escalated".into())));
        assert!(env.contains(&("KARL_NOTICE_PANE", "agent-codex:1.1".into())));
    }

    #[test]
    fn a_long_screen_line_is_cut_to_fit_every_service() {
        let mut n = notice(NoticeKind::Escalated);
        n.text = "é".repeat(10_000);
        let d = http_request(
            &Target::Discord {
                url: "https://h/d".into(),
            },
            &n,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&d.body).unwrap();
        let content = v["content"].as_str().unwrap();
        assert!(
            content.chars().count() <= 2_000,
            "{}",
            content.chars().count()
        );
        assert!(content.contains('…'));
        let ntfy = http_request(
            &Target::Ntfy {
                url: "https://n/t".into(),
                token: None,
            },
            &n,
        )
        .unwrap();
        assert!(ntfy.body.len() <= 4_096, "{}", ntfy.body.len());
        // The webhook gets the notice whole.
        let w = http_request(
            &Target::Webhook {
                url: "https://h/w".into(),
                headers: vec![],
            },
            &n,
        )
        .unwrap();
        assert!(w.body.len() > 20_000);
    }

    #[test]
    fn a_macos_sink_on_the_pane_s_mac_cannot_hear_that_mac_is_lost() {
        let cfg = parse("[[sink]]\nkind = \"macos\"\n[[sink]]\nname = \"desk\"\nkind = \"macos\"\nmachine = \"mac1\"").unwrap();
        assert!(!cfg.sinks[0].wants(NoticeKind::AgentLost));
        assert!(cfg.sinks[0].wants(NoticeKind::Escalated));
        assert!(cfg.sinks[1].wants(NoticeKind::AgentLost));
    }
}
