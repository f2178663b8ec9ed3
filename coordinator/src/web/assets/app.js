// KARL's dashboard: three views (sessions, fleet, one session) read from /api/*, kept
// current by the server-sent events of /api/events. No framework, no build step.
"use strict";

const main = document.getElementById("main");
const live = document.getElementById("live");
let route = { view: "sessions" };
let skew = 0; // server clock minus ours, from the last reply's now_ms
let pending = null;
let generation = 0;

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function ago(ms) {
  if (!ms) return "—";
  const s = Math.max(0, Math.round((Date.now() + skew - ms) / 1000));
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.floor(s / 60) + "m ago";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m ago";
  return Math.floor(s / 86400) + "d ago";
}

async function getJson(path) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (r.status === 401) { location.reload(); throw new Error("logged out"); }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  if (body.now_ms) skew = body.now_ms - Date.now();
  return body;
}

async function postJson(path, body) {
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Karl-Request": "1" },
    body: JSON.stringify(body || {}),
  });
  const reply = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(reply.error || r.statusText);
  return reply;
}

function parseRoute() {
  const h = location.hash.replace(/^#\/?/, "");
  const [view, ...rest] = h.split("/");
  if (view === "session" && rest.length) return { view: "session", id: decodeURIComponent(rest.join("/")) };
  if (view === "fleet") return { view: "fleet" };
  return { view: "sessions" };
}

function badge(status) {
  return `<span class="badge ${esc(status)}" data-status="${esc(status)}">${esc(status)}</span>`;
}

// ── sessions ────────────────────────────────────────────────────────────────────────
function sessionCard(s) {
  const perm = s.permission ? `<dt>permission</dt><dd>${esc(s.permission)}</dd>` : "";
  return `<article class="card session${s.needs_human ? " human" : ""}" data-id="${esc(s.id)}">
    <div class="top"><a href="#/session/${encodeURIComponent(s.id)}"><b>${esc(s.id)}</b></a>${badge(s.status)}</div>
    <div class="goal">${esc(s.project)} — ${esc(s.goal)}</div>
    ${s.reason ? `<div class="reason">${esc(s.reason)}</div>` : ""}
    <dl>
      <dt>pane</dt><dd>${esc(s.machine)} ${esc(s.target)}</dd>
      <dt>turn</dt><dd class="turn-count">${s.turns}/${s.max_turns}${s.dry_run ? " (dry run)" : ""} · ${esc(s.phase)}</dd>
      <dt>screen</dt><dd>${esc(s.pane_state)} (by ${esc(s.evidence)})</dd>
      ${perm}
      <dt>task</dt><dd>${esc(s.task || "—")}</dd>
      <dt>last prompt</dt><dd>${esc(s.last_prompt || "—")}</dd>
      <dt>changed</dt><dd>${ago(s.last_change_ms || s.updated_ms)}</dd>
    </dl>
  </article>`;
}

async function showSessions(gen) {
  const data = await getJson("/api/sessions");
  if (gen !== generation) return;
  if (!data.sessions.length) {
    main.innerHTML = `<h2>Sessions</h2><p class="muted">No sessions yet: start one with <code>karl-ctl drive MACHINE PANE --goal "…"</code>.</p>`;
    return;
  }
  main.innerHTML = `<h2>Sessions</h2><div class="cards" id="sessions">${data.sessions.map(sessionCard).join("")}</div>`;
}

// ── fleet ───────────────────────────────────────────────────────────────────────────
async function showFleet(gen) {
  const data = await getJson("/api/fleet");
  if (gen !== generation) return;
  if (!data.agents.length) {
    main.innerHTML = `<h2>Fleet</h2><p class="muted">No agent is connected: start karl-agent on each Mac with --coord pointing here.</p>`;
    return;
  }
  main.innerHTML = `<h2>Fleet</h2><div class="cards" id="fleet">${data.agents.map((a) => `
    <article class="card agent" data-machine="${esc(a.machine)}">
      <div class="top"><b>${esc(a.machine)}</b><span class="muted">${esc(a.hostname)}</span></div>
      <dl>
        <dt>agent</dt><dd>${esc(a.version)}</dd>
        <dt>tmux</dt><dd>${esc(a.tmux_version || "?")}</dd>
        <dt>connected</dt><dd>${ago(a.connected_ms)} from ${esc(a.peer)}</dd>
        <dt>heartbeat</dt><dd>${ago(a.heartbeat_ms)}</dd>
      </dl>
      <table><thead><tr><th>pane</th><th>command</th><th>path</th><th>driven by</th></tr></thead><tbody>
      ${a.panes.map((p) => `<tr data-pane="${esc(p.pane_id)}"><td data-label="pane">${esc(p.target)} <span class="muted">${esc(p.pane_id)}</span></td><td data-label="runs">${esc(p.command)}</td><td data-label="in">${esc(p.path)}</td>
        <td data-label="driven by">${p.driven_by ? `<a href="#/session/${encodeURIComponent(p.driven_by)}">${esc(p.driven_by)}</a>` : "—"}</td></tr>`).join("")}
      </tbody></table>
    </article>`).join("")}</div>`;
}

// ── one session ─────────────────────────────────────────────────────────────────────
const ACTION_LABELS = { pause: "Pause", resume: "Resume", stop: "Stop", approve: "Approve", deny: "Deny" };

function sessionSkeleton(id) {
  main.innerHTML = `
    <p><a href="#/sessions">← sessions</a></p>
    <section id="session-head" class="card"></section>
    <div class="actions" id="actions"></div>
    <form class="send" id="send-form" hidden>
      <input id="send-text" placeholder="Type a prompt (it passes the gate first)" autocomplete="off">
      <button type="submit" class="primary" id="send-button">Send</button>
    </form>
    <div class="result" id="action-result"></div>
    <div class="layout">
      <section><h3>Screen <span class="muted" id="screen-age"></span></h3><pre class="screen" id="screen">—</pre></section>
      <section><h3>Turns</h3><ol class="turns" id="turns"></ol>
        <h3>Tasks</h3><ol class="tasks" id="tasks"></ol>
        <h3>Digest</h3><ul id="digest" class="muted"></ul>
      </section>
    </div>`;
  main.dataset.session = id;
  document.getElementById("send-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const input = document.getElementById("send-text");
    const text = input.value.trim();
    if (!text) return;
    await act(() => postJson(`/api/sessions/${encodeURIComponent(id)}/send`, { text }), (r) => {
      if (r.typed) input.value = "";
      return `${r.typed ? "typed" : "not typed"}: ${r.result}`;
    });
  });
}

async function act(call, describe) {
  const out = document.getElementById("action-result");
  out.className = "result";
  out.textContent = "…";
  try {
    const r = await call();
    out.textContent = describe(r);
  } catch (e) {
    out.className = "result bad";
    out.textContent = e.message;
  }
  schedule(0);
}

function turnItem(t) {
  const gate = t.gate.length
    ? `<ul class="gate">${t.gate.map((g) => `<li class="${/^blocked/.test(g) ? "rejected" : ""}">${esc(g)}</li>`).join("")}</ul>`
    : "";
  const tools = t.tools.length ? `<div class="muted">tools: ${t.tools.map(esc).join(", ")}</div>` : "";
  const response = t.response ? `<details><summary class="muted">agent's answer</summary><div class="prompt">${esc(t.response)}</div></details>` : "";
  return `<li data-n="${t.n}" class="turn">
    <div class="turn-head"><span class="n">#${t.n}</span><span>${esc(t.source)}</span><span>${esc(t.outcome)}</span>
      <span>${esc(t.inject)}</span>${t.model_latency_ms ? `<span>model ${t.model_latency_ms} ms</span>` : ""}<span>${ago(t.unix_ms)}</span></div>
    <div class="prompt">${esc(t.prompt)}</div>${gate}${tools}${response}</li>`;
}

async function showSession(id, gen) {
  const data = await getJson(`/api/sessions/${encodeURIComponent(id)}`);
  if (gen !== generation) return;
  if (main.dataset.session !== id || !document.getElementById("session-head")) sessionSkeleton(id);
  const s = data.session;
  const rej = Object.entries(data.rejections).map(([k, v]) => `${esc(k)} ${v}`).join(", ") || "none";
  document.getElementById("session-head").innerHTML = `
    <div class="top"><h2 id="session-id">${esc(s.id)}</h2>${badge(s.status)}</div>
    <div class="goal">${esc(s.project)} — ${esc(s.goal)}</div>
    ${s.reason ? `<div class="reason" id="session-reason">${esc(s.reason)}</div>` : ""}
    <dl class="facts">
      <dt>pane</dt><dd>${esc(s.machine)} ${esc(s.target)}${s.pane_id !== s.target ? " " + esc(s.pane_id) : ""}</dd>
      <dt>turn</dt><dd id="session-turns">${s.turns}/${s.max_turns}${s.dry_run ? " (dry run)" : ""} · ${esc(s.phase)}</dd>
      <dt>screen</dt><dd>${esc(s.pane_state)} (by ${esc(s.evidence)})</dd>
      ${s.permission ? `<dt>permission</dt><dd>${esc(s.permission)}</dd>` : ""}
      <dt>task</dt><dd>${esc(s.task || "—")}</dd>
      <dt>gate refused</dt><dd>${rej}; fallbacks ${data.fallbacks}</dd>
      <dt>changed</dt><dd>${ago(s.last_change_ms || s.updated_ms)}</dd>
      <dt>summary</dt><dd id="session-summary">${data.summary_lines.map(esc).join("<br>")}</dd>
    </dl>`;
  const actions = document.getElementById("actions");
  actions.innerHTML = data.actions.filter((a) => a !== "send").map((a) =>
    `<button data-action="${a}" class="${a === "stop" || a === "deny" ? "danger" : ""}">${ACTION_LABELS[a]}</button>`).join("");
  actions.querySelectorAll("button").forEach((b) => b.addEventListener("click", () => {
    const a = b.dataset.action;
    if (a === "stop" && !confirm("Stop this session?")) return;
    act(() => postJson(`/api/sessions/${encodeURIComponent(id)}/${a}`), (r) => `${a}: the session is ${r.status}`);
  }));
  document.getElementById("send-form").hidden = !data.actions.includes("send");
  document.getElementById("turns").innerHTML = data.turns.map(turnItem).join("") || `<li class="muted">No turns yet.</li>`;
  document.getElementById("tasks").innerHTML = data.tasks.map((t) =>
    `<li class="${esc(t.status)}">${esc(t.title)}${t.blocker ? ` — ${esc(t.blocker)}` : ""}</li>`).join("") || `<li class="muted">No plan.</li>`;
  document.getElementById("digest").innerHTML = data.digest.map((d) => `<li>${esc(d)}</li>`).join("") || `<li>Nothing folded yet.</li>`;
  const screen = document.getElementById("screen");
  if (data.screen_html !== null && data.screen_html !== undefined) {
    screen.innerHTML = data.screen_html;
    document.getElementById("screen-age").textContent = data.screen_ms ? ago(data.screen_ms) : "";
  } else {
    screen.textContent = s.live ? "Waiting for the pane's first settled screen…" : "The session has ended.";
  }
}

// ── routing and live updates ────────────────────────────────────────────────────────
async function refresh() {
  pending = null;
  const gen = ++generation;
  document.querySelectorAll("[data-nav]").forEach((a) =>
    a.classList.toggle("on", a.dataset.nav === route.view || (route.view === "session" && a.dataset.nav === "sessions")));
  try {
    if (route.view === "fleet") await showFleet(gen);
    else if (route.view === "session") await showSession(route.id, gen);
    else await showSessions(gen);
  } catch (e) {
    if (gen === generation) main.innerHTML = `<p class="reason">${esc(e.message)}</p>`;
  }
}

function schedule(delay = 150) {
  if (pending) return;
  pending = setTimeout(refresh, delay);
}

window.addEventListener("hashchange", () => {
  route = parseRoute();
  delete main.dataset.session;
  refresh();
});

function connect() {
  const es = new EventSource("/api/events");
  const on = () => { live.textContent = "live"; live.className = "live on"; };
  es.onopen = on;
  es.addEventListener("hello", () => { on(); schedule(0); });
  es.addEventListener("session", (e) => {
    const d = JSON.parse(e.data);
    if (route.view === "session" ? route.id === d.id : true) schedule();
  });
  es.addEventListener("fleet", () => { if (route.view === "fleet") schedule(); });
  es.addEventListener("tick", () => { if (route.view !== "session") schedule(); });
  es.addEventListener("resync", () => schedule(0));
  es.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
}

route = parseRoute();
refresh();
connect();
