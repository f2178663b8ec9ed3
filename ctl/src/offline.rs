//! karl-ctl's offline commands: they read files and never dial a coordinator.
//! `classify` runs the pane-state detector on a capture; `context` shows the messages the
//! model would get for a capture; [`second_opinion`] asks a model server about a prompt
//! `validate` passed in doubt.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use karl_common::detect::{classify_capture, CaptureMeta, DetectionInput, Detector};

use karl_common::context::{
    build_context, ContextConfig, ContextInput, Digest, PaneSignal, SessionBrief, TaskGraph,
    TokenEstimator,
};

use crate::output::outln;

fn read(path: &Path, what: &str) -> anyhow::Result<String> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))?;
    // Captures may hold invalid UTF-8 or binary noise: replaced, never fatal.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub fn classify(
    json: bool,
    file: &Path,
    ansi: Option<&Path>,
    meta: Option<&Path>,
    rules: Option<&Path>,
    explain: bool,
) -> anyhow::Result<ExitCode> {
    let text = read(file, "capture")?;
    let ansi = ansi.map(|p| read(p, "--ansi capture")).transpose()?;
    let meta: CaptureMeta = match meta {
        Some(p) => serde_json::from_str(&read(p, "--meta file")?).with_context(|| {
            format!(
                "--meta file {} is not a JSON object of pane metadata",
                p.display()
            )
        })?,
        None => CaptureMeta::default(),
    };
    let detector = match rules {
        Some(dir) => Detector::from_dir(dir)?,
        None => Detector::embedded(),
    };
    let d = classify_capture(&detector, &text, ansi.as_deref(), &meta);
    let traces = explain.then(|| detector.explain(&meta.input(&text, ansi.as_deref())));
    if json {
        let mut v = serde_json::to_value(&d)?;
        if let (Some(t), Some(o)) = (&traces, v.as_object_mut()) {
            o.insert("explain".into(), serde_json::to_value(t)?);
        }
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} ({}{}) confidence {:.2}",
        d.state,
        d.agent.as_str(),
        if d.error { ", error" } else { "" },
        d.confidence
    )?;
    if let Some(p) = &d.permission {
        outln!("  asks: {} {}", p.tool, p.action)?;
        for (i, o) in p.options.iter().enumerate() {
            outln!("    {}. {o}", i + 1)?;
        }
    }
    if let Some(r) = &d.limit_reset {
        outln!("  resets: {r}")?;
    }
    if let Some(dr) = &d.draft {
        outln!("  draft: {dr:?}")?;
    }
    for e in &d.evidence {
        outln!("  {} ← {:?}", e.rule, e.line.trim())?;
    }
    if let Some(traces) = traces {
        outln!("rules evaluated:")?;
        for t in traces {
            outln!(
                "  {} {:<40} {}{}",
                if t.decided {
                    "*"
                } else if t.matched {
                    "+"
                } else {
                    " "
                },
                t.rule,
                t.line
                    .as_deref()
                    .map(|l| format!("{:?}", l.trim()))
                    .unwrap_or_default(),
                t.skipped
                    .as_deref()
                    .map(|s| format!(" (skipped: {s})"))
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn context(
    json: bool,
    capture: &Path,
    project: Option<&str>,
    goal: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let screen = read(capture, "capture")?;
    let goal = goal
        .unwrap_or("continue the work shown in the pane")
        .to_string();
    let tasks = TaskGraph::from_steps([goal.clone()]);
    let brief = SessionBrief {
        project: project.unwrap_or("project").to_string(),
        goal,
        turn: 1,
        max_turns: 30,
        ..Default::default()
    };
    let d = Detector::embedded().detect(&DetectionInput {
        text: &screen,
        ..Default::default()
    });
    let signal = PaneSignal::from_flags(
        d.error,
        !d.error && d.state == karl_common::detect::PaneState::Idle,
    );
    let config = ContextConfig::default();
    let estimator = TokenEstimator::default();
    let ctx = build_context(&ContextInput {
        brief: &brief,
        tasks: &tasks,
        digest: &Digest::default(),
        recent_prompts: &[],
        screen: &screen,
        signal,
        rejections: &[],
        phase: None,
        config: &config,
        estimator: &estimator,
    });
    super::output::context(&ctx.to_wire(), json)?;
    Ok(ExitCode::SUCCESS)
}

/// `karl-ctl context --capture FILE --plan`: the plan request a session starting on this
/// screen sends the model (the messages, as text or JSON).
pub fn plan_request(
    json: bool,
    capture: &Path,
    project: Option<&str>,
    goal: Option<&str>,
    path: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let screen = read(capture, "capture")?;
    let goal = goal.unwrap_or("continue the work shown in the pane");
    let messages = karl_common::context::plan_messages(
        project.unwrap_or("project"),
        goal,
        path.unwrap_or(""),
        Some(&screen),
    );
    if json {
        outln!("{}", serde_json::json!({ "messages": messages }))?;
    } else {
        for m in &messages {
            outln!("── {:?} ──\n{}\n", m.role, m.content)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How long `validate --model-url` waits for the second opinion.
const OPINION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The second opinion of the model server at `base_url` (OpenAI-compatible, e.g.
/// `http://127.0.0.1:8100/v1`) on `prompt`, asking for `model` when given (else the server
/// picks). A failed call counts as destructive, as in the engine.
pub async fn second_opinion(
    base_url: &str,
    model: Option<&str>,
    prompt: &str,
) -> karl_common::gate::opinion::Opinion {
    use karl_common::gate::opinion::{self, Opinion};
    let url = format!("{}/chat/completions", base_url.trim_end_matches('/'));
    let mut body = serde_json::json!({
        "messages": opinion::request(prompt),
        "temperature": 0.0,
        "max_tokens": opinion::MAX_TOKENS,
        "stream": false,
    });
    if let Some(model) = model {
        body["model"] = model.into();
    }
    let call = async {
        let client = reqwest::Client::builder()
            .timeout(OPINION_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        let resp = client
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("{url} answered {status}"));
        }
        let reply: serde_json::Value = resp.json().await.map_err(|e| e.to_string())?;
        reply["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{url} sent no choices[0].message.content"))
    };
    match call.await {
        Ok(text) => Opinion::parse(&text),
        Err(e) => Opinion::destructive(format!("no second opinion ({e})")),
    }
}
