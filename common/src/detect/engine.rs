//! Rule evaluation: identify the CLI, pick the highest-priority state rule that holds, set
//! the error flag, and read the permission, limit and draft details off the screen.
//!
//! One function, [`run`], does both `detect` (stops at the first deciding rule) and `explain`
//! (evaluates everything and records a [`RuleTrace`] per rule).

use std::borrow::Cow;

use super::manifest::{Clause, Extract, ExtractField, Manifest, Rule};
use super::screen::{is_blank, Screen, View};
use super::{
    Detection, DetectionInput, Detector, Evidence, PaneState, PermissionRequest, RuleKind,
    RuleTrace,
};
use crate::ansi;

/// Evidence lines are cut to this many characters.
const MAX_EVIDENCE_CHARS: usize = 200;
/// Extracted blocks (a multi-line command) are cut to this many characters.
const MAX_BLOCK_CHARS: usize = 4000;
/// Identification weight at which the agent is taken as certain.
const CERTAIN_WEIGHT: f32 = 6.0;

pub(crate) fn run(
    det: &Detector,
    input: &DetectionInput<'_>,
    mut trace: Option<&mut Vec<RuleTrace>>,
) -> Detection {
    let text = clean(input.text);
    let ansi_text = input.ansi;
    let title = clean(input.title);
    let command = clean(input.current_command);
    let cursor = input.cursor_x.zip(input.cursor_y);
    let screen = Screen::new(&text, ansi_text, &title, &command, cursor, input.height);
    let views: Vec<View<'_, '_>> = det
        .manifests
        .iter()
        .map(|m| View::new(&screen, &m.layout))
        .collect();
    let shell = det.shell.map(|i| &views[i]);

    // Who is in the pane: the manifest whose identification rules weigh most. Ties go to
    // the earlier manifest; the shell manifest comes last, so a recognised CLI wins a tie.
    let mut scores = vec![0u32; det.manifests.len()];
    let mut id_evidence: Vec<Vec<Evidence>> = vec![Vec::new(); det.manifests.len()];
    for (i, m) in det.manifests.iter().enumerate() {
        for rule in &m.identify {
            let hit = eval_rule(rule, &views[i], shell);
            if let Some(line) = &hit {
                scores[i] += rule.weight;
                id_evidence[i].push(Evidence {
                    rule: rule.full_id.clone(),
                    line: line.clone(),
                });
            }
            if let Some(t) = trace.as_deref_mut() {
                t.push(RuleTrace::new(
                    rule,
                    RuleKind::Identify,
                    rule.full_id.clone(),
                    hit,
                ));
            }
        }
    }
    let Some(best) = pick(&scores) else {
        return Detection::default();
    };
    let m = &det.manifests[best];
    let view = &views[best];
    if let Some(t) = trace.as_deref_mut() {
        for rt in t.iter_mut().filter(|rt| rt.kind == RuleKind::Identify) {
            rt.decided = rt.matched && rt.rule.starts_with(&format!("{}/", m.id));
        }
    }

    // The state: the highest-priority state rule that holds.
    let mut decided: Option<(&Rule, String)> = None;
    for rule in m.rules.iter().filter(|r| r.state.is_some()) {
        if decided.is_some() && trace.is_none() {
            break;
        }
        let hit = eval_rule(rule, view, shell);
        let decides = decided.is_none() && hit.is_some();
        if let Some(t) = trace.as_deref_mut() {
            let mut rt = RuleTrace::new(rule, RuleKind::State, rule.full_id.clone(), hit.clone());
            rt.decided = decides;
            t.push(rt);
        }
        if decides {
            decided = hit.map(|line| (rule, line));
        }
    }
    let state = decided
        .as_ref()
        .and_then(|(r, _)| r.state)
        .unwrap_or_default();

    // The error flag: any error rule that holds in a state it applies to.
    let mut error_evidence = Vec::new();
    for rule in m.rules.iter().filter(|r| r.error) {
        if !rule.when.contains(&state) {
            if let Some(t) = trace.as_deref_mut() {
                let mut rt = RuleTrace::new(rule, RuleKind::Error, rule.full_id.clone(), None);
                rt.skipped = Some(format!("not applied in state {state}"));
                t.push(rt);
            }
            continue;
        }
        let hit = eval_rule(rule, view, shell);
        if let Some(line) = &hit {
            error_evidence.push(Evidence {
                rule: rule.full_id.clone(),
                line: line.clone(),
            });
        }
        if let Some(t) = trace.as_deref_mut() {
            let mut rt = RuleTrace::new(rule, RuleKind::Error, rule.full_id.clone(), hit.clone());
            rt.decided = hit.is_some();
            t.push(rt);
        }
    }

    let certainty = agent_certainty(&scores, best);
    let mut evidence = Vec::new();
    let mut rule_id = None;
    let mut confidence = 0.0;
    if let Some((rule, line)) = &decided {
        evidence.push(Evidence {
            rule: rule.full_id.clone(),
            line: line.clone(),
        });
        rule_id = Some(rule.full_id.clone());
        confidence = rule.confidence * certainty;
    }
    let error = !error_evidence.is_empty();
    evidence.extend(error_evidence);
    evidence.append(&mut id_evidence[best]);

    let mut d = Detection {
        state,
        agent: m.agent,
        error,
        confidence,
        evidence,
        rule: rule_id,
        ..Detection::default()
    };
    match state {
        PaneState::Permission => d.permission = Some(permission(m, view, shell)),
        PaneState::Limited => d.limit_reset = extract_one(m, view, shell, ExtractField::LimitReset),
        PaneState::Draft => d.draft = view.input().map(|b| b.typed()).filter(|s| !s.is_empty()),
        _ => {}
    }
    d
}

/// Removes escapes and control bytes only when there are any (the usual capture has none).
fn clean(s: &str) -> Cow<'_, str> {
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        Cow::Owned(ansi::strip(s, false))
    } else {
        Cow::Borrowed(s)
    }
}

fn pick(scores: &[u32]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &s) in scores.iter().enumerate() {
        if s > 0 && best.is_none_or(|b| s > scores[b]) {
            best = Some(i);
        }
    }
    best
}

/// 0.5..1: grows with the winning weight; a tie with another manifest costs a fifth.
fn agent_certainty(scores: &[u32], best: usize) -> f32 {
    let w = scores[best] as f32;
    let mut c = (0.5 + 0.5 * w / CERTAIN_WEIGHT).min(1.0);
    if scores
        .iter()
        .enumerate()
        .any(|(i, &s)| i != best && s == scores[best])
    {
        c *= 0.8;
    }
    c
}

/// All clauses of a rule hold: the evidence line of its first clause.
fn eval_rule<'s, 'a>(
    rule: &Rule,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
) -> Option<String> {
    let mut first = None;
    for clause in &rule.clauses {
        let line = eval_clause(clause, view, shell)?;
        first.get_or_insert(line);
    }
    first
}

fn eval_clause<'s, 'a>(
    clause: &Clause,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
) -> Option<String> {
    let region = clause.sel.region.name();
    let Some(sel) = view.select(&clause.sel, shell) else {
        return (clause.present == Some(false)).then(|| format!("({region} absent)"));
    };
    if clause.present == Some(false) {
        return None;
    }
    if let Some(want_empty) = clause.empty {
        if sel.is_empty() != want_empty {
            return None;
        }
    }
    let mut evidence: Option<&str> = None;
    if !clause.any.is_empty() {
        evidence = Some(
            sel.iter()
                .find(|l| clause.any.iter().any(|r| r.is_match(l)))?,
        );
    }
    for r in &clause.all {
        let hit = sel.iter().find(|l| r.is_match(l))?;
        evidence.get_or_insert(hit);
    }
    if sel.iter().any(|l| clause.not.iter().any(|r| r.is_match(l))) {
        return None;
    }
    Some(match evidence {
        Some(l) => evidence_line(l),
        None if clause.empty == Some(true) => format!("({region} empty)"),
        None => sel
            .iter()
            .next()
            .map_or_else(|| format!("({region} present)"), evidence_line),
    })
}

fn evidence_line(l: &str) -> String {
    let t = l.trim();
    match t.char_indices().nth(MAX_EVIDENCE_CHARS) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

fn extract_one<'s, 'a>(
    m: &Manifest,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
    field: ExtractField,
) -> Option<String> {
    for e in m.extract.iter().filter(|e| e.field == field) {
        if let Some(marker) = &e.between {
            if let Some(v) = extract_between(e, marker, view, shell) {
                return Some(v);
            }
            continue;
        }
        if e.block {
            if let Some(v) = extract_block(e, view, shell) {
                return Some(v);
            }
            continue;
        }
        let Some(sel) = view.select(&e.sel, shell) else {
            continue;
        };
        let lines: Vec<&str> = sel.iter().collect();
        let ordered: Box<dyn Iterator<Item = &&str>> = if e.from_bottom {
            Box::new(lines.iter().rev())
        } else {
            Box::new(lines.iter())
        };
        for l in ordered {
            if let Some(v) = e.pattern.captures(l).and_then(|c| c.name("value")) {
                let v = v.as_str().trim();
                if !v.is_empty() {
                    return Some(evidence_line(v));
                }
            }
        }
    }
    None
}

/// The lines between the first two marker lines of the selection, common indentation
/// removed, when `pattern` matches the first of them.
fn extract_between<'s, 'a>(
    e: &Extract,
    marker: &regex::Regex,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
) -> Option<String> {
    let sel = view.select(&e.sel, shell)?;
    let lines: Vec<&str> = sel.iter().collect();
    let open = lines.iter().position(|l| marker.is_match(l))?;
    let len = lines[open + 1..].iter().position(|l| marker.is_match(l))?;
    let inner: Vec<&str> = lines[open + 1..open + 1 + len]
        .iter()
        .copied()
        .filter(|l| !is_blank(l))
        .collect();
    let first = inner.first()?;
    e.pattern.captures(first)?.name("value")?;
    let depth = inner.iter().map(|l| indent(l)).min().unwrap_or(0);
    let value = inner
        .iter()
        .map(|l| {
            l.chars()
                .skip(depth)
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some(bounded(value))
}

/// Leading whitespace of a line, in characters.
fn indent(l: &str) -> usize {
    l.chars().take_while(|c| c.is_whitespace()).count()
}

/// A block value cut to [`MAX_BLOCK_CHARS`].
fn bounded(value: String) -> String {
    match value.char_indices().nth(MAX_BLOCK_CHARS) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value,
    }
}

/// A value that starts on a matching line (among the selection's `first`/`last` non-blank
/// lines) and runs on over the lines indented at least as deep, common indentation removed.
fn extract_block<'s, 'a>(
    e: &Extract,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
) -> Option<String> {
    let raw = view.raw(e.sel.region, shell)?;
    let total = raw.iter().filter(|l| !is_blank(l)).count();
    let skip = e.sel.last.map_or(0, |n| total.saturating_sub(n));
    let mut seen = 0;
    for (i, line) in raw.iter().enumerate() {
        if is_blank(line) {
            continue;
        }
        seen += 1;
        if seen <= skip {
            continue;
        }
        if e.sel.first.is_some_and(|n| seen > n) {
            break;
        }
        let Some(v) = e.pattern.captures(line).and_then(|c| c.name("value")) else {
            continue;
        };
        let depth = indent(line);
        let mut out = vec![v.as_str().trim_end().to_string()];
        for next in &raw[i + 1..] {
            if is_blank(next) {
                out.push(String::new());
            } else if indent(next) >= depth {
                out.push(
                    next.chars()
                        .skip(depth)
                        .collect::<String>()
                        .trim_end()
                        .to_string(),
                );
            } else {
                break;
            }
        }
        while out.last().is_some_and(|l| l.is_empty()) {
            out.pop();
        }
        return Some(bounded(out.join("\n")));
    }
    None
}

fn permission<'s, 'a>(
    m: &Manifest,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
) -> PermissionRequest {
    let (options, selected) = options(m, view, shell);
    PermissionRequest {
        tool: extract_one(m, view, shell, ExtractField::Tool).unwrap_or_default(),
        action: extract_one(m, view, shell, ExtractField::Action).unwrap_or_default(),
        options,
        selected,
    }
}

/// The menu's options in order, and which one is selected: the option whose line matched
/// the pattern's `sel` group (the selection marker). A line indented deeper than the
/// option's first word above it continues that option (the menu wrapped it).
fn options<'s, 'a>(
    m: &Manifest,
    view: &View<'s, 'a>,
    shell: Option<&View<'s, 'a>>,
) -> (Vec<String>, Option<usize>) {
    for e in m.extract.iter().filter(|e| e.field == ExtractField::Option) {
        let Some(sel) = view.select(&e.sel, shell) else {
            continue;
        };
        let mut out: Vec<String> = Vec::new();
        let mut selected: Option<usize> = None;
        let mut number_col: Option<usize> = None;
        for l in sel.iter() {
            let caps = e.pattern.captures(l);
            if let Some((v, caps)) = caps.as_ref().and_then(|c| Some((c.name("value")?, c))) {
                // The menu is the last block of options: a numbered list above it (a
                // plan, an answer) ended where other text began.
                if number_col.is_none() {
                    out.clear();
                    selected = None;
                }
                if caps.name("sel").is_some() {
                    selected = Some(out.len());
                }
                out.push(v.as_str().trim().to_string());
                // Lines indented past this column continue the option: its number, or in
                // an unnumbered menu the column just before its first word.
                number_col = l
                    .chars()
                    .position(|c| c.is_ascii_digit())
                    .filter(|&c| c < l[..v.start()].chars().count())
                    .or_else(|| Some(l[..v.start()].chars().count().saturating_sub(1)));
            } else if let (Some(col), Some(last)) = (number_col, out.last_mut()) {
                let indent = l.chars().take_while(|c| c.is_whitespace()).count();
                if indent > col {
                    last.push(' ');
                    last.push_str(l.trim());
                } else {
                    number_col = None;
                }
            }
        }
        if !out.is_empty() {
            return (out, selected);
        }
    }
    (Vec::new(), None)
}

impl RuleTrace {
    fn new(rule: &Rule, kind: RuleKind, name: String, hit: Option<String>) -> Self {
        RuleTrace {
            rule: name,
            kind,
            state: rule.state,
            priority: rule.priority,
            weight: rule.weight,
            matched: hit.is_some(),
            line: hit,
            decided: false,
            skipped: None,
            note: rule.note.clone(),
        }
    }
}
