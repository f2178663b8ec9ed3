//! The dashboard end to end, in a real browser: karl-coord with `--http` and a token, its
//! agent and the stand-in in a real tmux pane, and headless Chromium driven over the
//! DevTools protocol. A session started with karl-ctl appears without a reload, new turns
//! show up live, the buttons pause, resume and stop it (checked through karl-ctl), a prompt
//! sent from the page passes the gate first, and a wrong token sees nothing.
//!
//! Screenshots of every page at desktop and phone width go to
//! `target/dashboard-screenshots/` (or `$KARL_SCREENSHOTS`).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use karl_tests::browser::{self, Browser};
use karl_tests::compat::release_or_skip;
use karl_tests::harness::{free_port, Fleet};

const TOKEN: &str = "dash-s3cret";

/// A stand-in that takes a couple of seconds per prompt, so turns arrive one by one.
const SLOW_STANDIN: &str =
    r#"{"default": {"work_ms": 2000, "reply": {"answer": "Done: {prompt}"}}}"#;

fn chromium(test: &str) -> Option<PathBuf> {
    release_or_skip(
        Some(browser::program()),
        |_| browser::available(),
        "Chromium",
        "apt-get install chromium, or set KARL_CHROMIUM",
        test,
    )
}

fn screenshots() -> PathBuf {
    std::env::var_os("KARL_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard-screenshots")
        })
}

/// One HTTP/1.1 request on a fresh connection: the status and body.
fn http(addr: &str, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Content-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| panic!("write: {e}"));
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

fn fleet_with_dashboard() -> (Fleet, String) {
    let http_addr = format!("127.0.0.1:{}", free_port());
    let fleet = Fleet::start_with_token(Some(SLOW_STANDIN), TOKEN, &["--http", &http_addr]);
    (fleet, http_addr)
}

fn login(b: &mut Browser, http_addr: &str, token: &str) {
    b.goto(&format!("http://{http_addr}/"))
        .expect("open the dashboard");
    b.wait_for(
        "!!document.getElementById('token')",
        Duration::from_secs(10),
    )
    .expect("the login form");
    b.eval(&format!(
        "document.getElementById('token').value = {}; document.querySelector('form').submit(); true",
        serde_json::Value::String(token.into())
    ))
    .expect("submit the token");
    // The form posts and the browser follows the redirect (or shows the error).
    std::thread::sleep(Duration::from_millis(500));
    b.wait_for(
        "document.readyState === 'complete'",
        Duration::from_secs(10),
    )
    .expect("the page after logging in");
}

fn shoot(b: &mut Browser, name: &str) {
    let dir = screenshots();
    for (suffix, w, h, mobile) in [("desktop", 1280, 900, false), ("phone", 390, 844, true)] {
        b.viewport(w, h, mobile).expect("viewport");
        std::thread::sleep(Duration::from_millis(300));
        b.screenshot(&dir.join(format!("{name}-{suffix}.png")))
            .expect("screenshot");
        // Nothing wider than the screen: no sideways scrolling on a phone.
        let fits = b
            .eval(&format!("document.documentElement.scrollWidth <= {w}"))
            .expect("page width");
        assert_eq!(fits, true, "{name} is wider than {w} px");
    }
    b.viewport(1280, 900, false).expect("viewport");
}

#[test]
fn a_live_session_shows_up_updates_and_obeys_the_buttons() {
    let Some(_) = chromium("a_live_session_shows_up_updates_and_obeys_the_buttons") else {
        return;
    };
    let (fleet, http_addr) = fleet_with_dashboard();
    let mut b = Browser::start().expect("start chromium");
    login(&mut b, &http_addr, TOKEN);
    if let Err(e) = b.wait_for(
        "document.getElementById('live').textContent === 'live'",
        Duration::from_secs(10),
    ) {
        let page = b
            .eval("location.href + ' | ' + document.body.innerHTML")
            .unwrap_or_default();
        panic!("the live feed never connected: {e}\npage: {page}");
    }
    // A mark on this page: if anything reloads it, the mark is gone.
    b.eval("window.karlMark = 42; true").expect("mark");
    b.wait_for(
        "document.body.textContent.includes('No sessions yet')",
        Duration::from_secs(10),
    )
    .expect("an empty session list");

    // A session started from karl-ctl appears without a reload.
    let steps: Vec<String> = (1..=12)
        .map(|i| format!("Implement part {i} of the parser: the token kind numbered {i}."))
        .collect();
    let plan = fleet.plan(&steps.iter().map(String::as_str).collect::<Vec<_>>());
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "12",
    ]);
    let card = format!("document.querySelector('.session[data-id=\"{id}\"]')");
    b.wait_for(&format!("!!{card}"), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("the session never appeared: {e}"));
    assert_eq!(
        b.eval("window.karlMark").expect("mark"),
        42,
        "the page reloaded"
    );
    shoot(&mut b, "sessions");

    // Its page: new turns arrive live.
    b.eval(&format!("location.hash = '#/session/{id}'; true"))
        .expect("open the session");
    b.wait_for(
        "!!document.getElementById('session-head')",
        Duration::from_secs(10),
    )
    .expect("the session page");
    let first = b
        .wait_for(
            "document.querySelectorAll('#turns li.turn').length",
            Duration::from_secs(30),
        )
        .expect("a first turn");
    let first = first.as_u64().unwrap_or(0);
    let more = format!("document.querySelectorAll('#turns li.turn').length > {first}");
    b.wait_for(&more, Duration::from_secs(30))
        .expect("a new turn without a reload");
    assert_eq!(
        b.eval("window.karlMark").expect("mark"),
        42,
        "the page reloaded"
    );
    let screen = b
        .wait_for(
            "document.getElementById('screen').innerHTML.includes('<span')",
            Duration::from_secs(15),
        )
        .map(|_| {
            b.eval("document.getElementById('screen').textContent")
                .unwrap_or_default()
        });
    let screen = screen.expect("the pane's screen, with colours");
    assert!(
        screen.as_str().unwrap_or("").contains('❯'),
        "the stand-in's screen: {screen}"
    );
    shoot(&mut b, "session");

    // Pause, checked through karl-ctl.
    b.wait_for(
        "!!document.querySelector('button[data-action=pause]')",
        Duration::from_secs(10),
    )
    .expect("a pause button");
    b.eval("document.querySelector('button[data-action=pause]').click(); true")
        .expect("click pause");
    fleet.wait_status(&id, Duration::from_secs(10), |s| s == "paused");
    b.wait_for(
        "document.querySelector('#session-head [data-status]').dataset.status === 'paused'",
        Duration::from_secs(10),
    )
    .expect("the page shows it paused");

    // A prompt sent from the page passes the gate first: a status question is refused.
    b.eval(
        "document.getElementById('send-text').value = 'whats the status? are you done yet?'; \
         document.getElementById('send-button').click(); true",
    )
    .expect("send a status question");
    let refused = b
        .wait_for(
            "document.getElementById('action-result').textContent.includes('not typed') && document.getElementById('action-result').textContent",
            Duration::from_secs(10),
        )
        .expect("the gate's answer");
    assert!(
        refused.as_str().unwrap_or("").contains("status"),
        "{refused}"
    );
    assert!(
        !fleet.received().iter().any(|p| p.contains("are you done")),
        "the status question reached the pane"
    );

    // Resume, then stop (confirming the dialog).
    b.eval("document.querySelector('button[data-action=resume]').click(); true")
        .expect("click resume");
    fleet.wait_status(&id, Duration::from_secs(10), |s| {
        s == "running" || s == "waiting"
    });
    b.wait_for(
        "!!document.querySelector('button[data-action=stop]')",
        Duration::from_secs(10),
    )
    .expect("a stop button");
    b.eval("window.confirm = () => true; document.querySelector('button[data-action=stop]').click(); true")
        .expect("click stop");
    let show = fleet.wait_status(&id, Duration::from_secs(10), |s| s == "stopped");
    assert_eq!(show["session"]["status"], "stopped");
    // The page shows the summary frozen at the end, the one `show` has.
    let summary = b
        .wait_for(
            "(t => t.startsWith('stopped:') && t)(document.getElementById('session-summary').innerText)",
            Duration::from_secs(10),
        )
        .expect("the session's summary");
    let summary = summary.as_str().unwrap_or_default();
    let lines = show["record"]["summary_lines"].as_array();
    for line in lines.expect("show has the summary's lines") {
        assert!(
            summary.contains(line.as_str().unwrap_or("?")),
            "{summary} lacks {line}"
        );
    }
    assert!(summary.contains("phases EXPLORE turn"), "{summary}");

    // The fleet page lists the agent, its tmux and the pane.
    b.eval("location.hash = '#/fleet'; true")
        .expect("open the fleet");
    b.wait_for(
        "!!document.querySelector('.agent[data-machine=mac2]')",
        Duration::from_secs(10),
    )
    .expect("the agent on the fleet page");
    let fleet_text = b
        .eval("document.getElementById('fleet').textContent")
        .expect("fleet");
    assert!(
        fleet_text.as_str().unwrap_or("").contains("tmux"),
        "{fleet_text}"
    );
    shoot(&mut b, "fleet");
    assert_eq!(
        b.eval("window.karlMark").expect("mark"),
        42,
        "the page reloaded"
    );

    // /metrics counts what happened.
    let (status, metrics) = http(
        &http_addr,
        "GET",
        "/metrics",
        &[&format!("Authorization: Bearer {TOKEN}")],
    );
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains("karl_sessions{status=\"stopped\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("karl_turns_total{source=\"plan\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("karl_injections_total{outcome=\"submitted\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("karl_agents_connected 1"), "{metrics}");
}

#[test]
fn a_wrong_token_sees_nothing() {
    let Some(_) = chromium("a_wrong_token_sees_nothing") else {
        return;
    };
    let (fleet, http_addr) = fleet_with_dashboard();
    let plan = fleet.plan(&[
        "Write the lexer for the parser.",
        "Write the parser itself.",
    ]);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan, "--dry-run"]);

    // Over plain HTTP: nothing without the token, everything with it.
    for path in [
        "/api/sessions",
        "/api/fleet",
        &format!("/api/sessions/{id}"),
        "/metrics",
        "/api/events",
    ] {
        let (status, body) = http(&http_addr, "GET", path, &[]);
        assert_eq!(status, 401, "{path}: {body}");
        assert!(!body.contains(&id), "{path} leaked the session: {body}");
        let (status, _) = http(&http_addr, "GET", path, &["Authorization: Bearer not-it"]);
        assert_eq!(status, 401, "{path} with a wrong token");
    }
    let (status, body) = http(
        &http_addr,
        "GET",
        "/api/sessions",
        &[&format!("Authorization: Bearer {TOKEN}")],
    );
    assert_eq!(status, 200);
    assert!(body.contains(&id), "{body}");
    // An action needs the page's header even with the token: another site's form cannot act.
    let (status, body) = http(
        &http_addr,
        "POST",
        &format!("/api/sessions/{id}/stop"),
        &[&format!("Authorization: Bearer {TOKEN}")],
    );
    assert_eq!(status, 403, "{body}");

    // In the browser: a wrong token gets the login page again and no data.
    let mut b = Browser::start().expect("start chromium");
    login(&mut b, &http_addr, "not-the-token");
    let error = b
        .wait_for("document.getElementById('login-error') && document.getElementById('login-error').textContent", Duration::from_secs(10))
        .expect("the login page again");
    assert!(
        error.as_str().unwrap_or("").contains("Wrong token"),
        "{error}"
    );
    let text = b.eval("document.body.textContent").expect("page text");
    assert!(!text.as_str().unwrap_or("").contains(&id), "{text}");
    let api = b
        .eval("fetch('/api/sessions').then(r => r.status)")
        .expect("fetch from the page");
    assert_eq!(api, 401);
    shoot(&mut b, "login");

    // The right token, once, and the cookie keeps it.
    login(&mut b, &http_addr, TOKEN);
    let shown = format!("!!document.querySelector('.session[data-id=\"{id}\"]')");
    b.wait_for(&shown, Duration::from_secs(10))
        .expect("the session after logging in");
    b.goto(&format!("http://{http_addr}/")).expect("open again");
    b.wait_for(&shown, Duration::from_secs(10))
        .expect("the cookie keeps the login");
}
