// Switchboard's local web page: plain JavaScript, no build step, nothing fetched from elsewhere.
// Text from the model or the store is only ever put in the page with textContent; the one
// exception is `html`, which the server renders from Markdown with raw HTML disabled.
"use strict";

const state = { conversation: null, running: null, events: null, sessionRefresh: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path, options) {
  const response = await fetch(path, {
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    ...options,
  });
  if (response.status === 401) {
    window.location.href = "/login";
    throw new Error("signed out");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function usd(value) {
  return "$" + Number(value || 0).toFixed(4);
}

// A ledger sum: `cost_usd` counts only calls with a known price, so calls without one make
// the cost unknown, never free.
function cost(row) {
  if (!row.unpriced_calls) return usd(row.cost_usd);
  if (row.unpriced_calls >= row.calls) return "unknown";
  return usd(row.cost_usd) + " + unknown";
}

function when(text) {
  return text ? text.replace("T", " ").slice(0, 19) : "";
}

// Tabs

function showTab(name) {
  for (const button of document.querySelectorAll(".tab")) {
    button.classList.toggle("active", button.dataset.tab === name);
  }
  for (const panel of document.querySelectorAll(".panel")) {
    panel.hidden = panel.id !== "tab-" + name;
  }
  const loaders = { chat: loadConversations, schedules: loadSchedules, sessions: loadSessions, costs: loadCosts, platforms: loadPlatforms };
  if (loaders[name]) loaders[name]().catch(showFailure);
}

function showFailure(error) {
  console.error(error);
}

// Chat

function bubble(role, extraClass) {
  const body = el("div", { class: "body" });
  const node = el("div", { class: "message " + role + (extraClass ? " " + extraClass : "") }, body);
  document.getElementById("messages").append(node);
  node.scrollIntoView({ block: "end" });
  return body;
}

function setHtml(body, html) {
  // Server-rendered Markdown (raw HTML disabled server-side): safe to insert.
  body.innerHTML = html;
}

function newConversation() {
  state.conversation = null;
  document.getElementById("messages").replaceChildren();
  document.getElementById("conversation-title").textContent = "New conversation";
}

async function loadConversations() {
  const { conversations } = await api("/api/conversations");
  const list = document.getElementById("conversations");
  list.replaceChildren(
    ...conversations.map((c) =>
      el("li", {},
        el("a", { href: "#", "data-conversation": c.conversation, onclick: (e) => { e.preventDefault(); openConversation(c.conversation); } },
          c.title || c.conversation),
        el("span", { class: "muted" }, " " + when(c.updated_at))))
  );
}

async function openConversation(id) {
  const { messages } = await api("/api/conversations/" + encodeURIComponent(id));
  state.conversation = id;
  document.getElementById("conversation-title").textContent = "Conversation " + id;
  document.getElementById("messages").replaceChildren();
  for (const message of messages) {
    if (message.role === "user") bubble("user").textContent = message.text;
    else if (message.role === "assistant") {
      for (const call of message.tool_calls) bubble("progress").textContent = "↳ " + call.name + " " + JSON.stringify(call.arguments);
      if (message.text) setHtml(bubble("assistant"), message.html);
    }
  }
}

async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

// A sign of life while the model works and nothing shows yet: from the send until text
// streams in, and again while a tool runs or after a question is answered.
function thinking(shown) {
  let node = document.getElementById("thinking");
  if (!shown) {
    if (node) node.remove();
    return;
  }
  node = node || el("div", { id: "thinking", class: "message thinking", role: "status" }, "Thinking…");
  const messages = document.getElementById("messages");
  messages.append(node);  // (moved) below the newest message
  node.scrollIntoView({ block: "end" });
}

async function send(text) {
  const stop = document.getElementById("stop");
  const sendButton = document.getElementById("send");
  bubble("user").textContent = text;
  let answer = null;
  sendButton.disabled = true;
  stop.disabled = false;
  thinking(true);
  try {
    const response = await fetch("/api/chat", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(state.conversation ? { text, conversation: state.conversation } : { text }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      bubble("notice", "failed").textContent = body.error || response.statusText;
      return;
    }
    for await (const { event, data } of sseEvents(response)) {
      if (event === "conversation") {
        state.conversation = data.conversation;
        state.running = data.id;
        document.getElementById("conversation-title").textContent = "Conversation " + data.conversation;
      } else if (event === "delta") {
        thinking(false);
        answer = answer || bubble("assistant", "streaming");
        setHtml(answer, data.html);
      } else if (event === "progress") {
        bubble("progress").textContent = "↳ " + data.text;
        thinking(true);
      } else if (event === "question") {
        thinking(false);
        showQuestion(data.text, data.question);
      } else if (event === "decision") {
        // The answer is in (from this page or another chat): the question without its buttons.
        const asked = [...document.querySelectorAll(".message.question .body")].pop();
        if (asked) asked.replaceChildren(el("div", {}, data.text));
        thinking(true);
      } else if (event === "reply") {
        thinking(false);
        answer = answer || bubble("assistant");
        setHtml(answer, data.html);
        answer.parentElement.classList.remove("streaming");
        answer.parentElement.classList.add("done");
        if (data.failed) answer.parentElement.classList.add("failed");
      } else if (event === "notice" || event === "notification") {
        thinking(false);
        if (answer) answer.parentElement.classList.remove("streaming");
        bubble("notice").textContent = data.text;
      } else if (event === "file") {
        for (const file of data.files || []) {
          const link = el("a", { href: file.href, download: file.name }, file.name);
          bubble("notice", "file").append("📎 ", link, ` (${file.size})`, data.text ? " — " + data.text : "");
        }
      }
    }
  } finally {
    thinking(false);
    state.running = null;
    sendButton.disabled = false;
    stop.disabled = true;
    loadConversations().catch(showFailure);
  }
}

function showQuestion(text, question) {
  const body = bubble("question");
  const conversation = state.conversation;
  if (!question) {
    // A free question (`ask_user`): the answer is typed here, as the person's next message.
    const input = el("input", { class: "answer-text", type: "text", "aria-label": "Your answer" });
    const send = el("button", { class: "answer-send" }, "Answer");
    const reply = async () => {
      if (!input.value.trim()) return;
      input.disabled = send.disabled = true;
      const sent = { conversation, text: input.value };
      await api("/api/answer", { method: "POST", body: JSON.stringify(sent) });
    };
    send.addEventListener("click", () => reply().catch(showFailure));
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") reply().catch(showFailure); });
    body.append(el("div", {}, text), input, send);
    return;
  }
  const answer = async (word, buttons) => {
    for (const b of buttons) b.disabled = true;
    // A press names its question, like every platform's buttons.
    const sent = { conversation, answer: word, question };
    await api("/api/answer", { method: "POST", body: JSON.stringify(sent) });
  };
  const yes = el("button", { class: "answer-yes" }, "Yes");
  const no = el("button", { class: "answer-no" }, "No");
  yes.addEventListener("click", () => answer("yes", [yes, no]).catch(showFailure));
  no.addEventListener("click", () => answer("no", [yes, no]).catch(showFailure));
  body.append(el("div", {}, text), yes, no);
}

async function stopTurn() {
  if (!state.conversation) return;
  await api("/api/stop", { method: "POST", body: JSON.stringify({ conversation: state.conversation }) });
}

// Events

function connectEvents() {
  const status = document.getElementById("events-status");
  const source = new EventSource("/api/events");
  state.events = source;
  source.addEventListener("ready", (e) => {
    status.textContent = "live: " + JSON.parse(e.data).topics.join(", ");
    document.body.dataset.events = "live";
  });
  source.addEventListener("event", (e) => addEvent(JSON.parse(e.data)));
  source.onerror = () => { status.textContent = "reconnecting…"; };
}

function details(item) {
  const data = item.data || {};
  // depth and parent_run_id: a sub-agent's event, under the turn that delegated it.
  const keys = ["depth", "parent_run_id", "name", "text", "duration_ms", "cost_usd", "message", "model"];
  return keys.filter((k) => data[k] !== undefined && data[k] !== null && data[k] !== "")
    .map((k) => k + "=" + shownValue(data[k])).join(" ").slice(0, 300);
}

function shownValue(value) {
  if (typeof value === "string") return value;
  if (typeof value === "number" && !Number.isInteger(value)) return String(Math.round(value * 10000) / 10000);
  return JSON.stringify(value);
}

function addEvent(item) {
  const row = el("tr", { "data-platform": item.platform || "", "data-chat": item.chat || "", "data-kind": item.kind || "" },
    el("td", {}, when(item.at).slice(11)), el("td", {}, item.topic),
    el("td", {}, ((item.data || {}).depth ? "↳ " : "") + item.kind),
    el("td", {}, item.platform), el("td", {}, item.chat), el("td", {}, details(item)));
  const body = document.querySelector("#events tbody");
  body.prepend(row);
  while (body.rows.length > 500) body.deleteRow(-1);
  filterRow(row);
}

function filterRow(row) {
  const wanted = (id) => document.getElementById(id).value.trim().toLowerCase();
  const matches = (value, want) => !want || value.toLowerCase().includes(want);
  row.hidden = !(matches(row.dataset.platform, wanted("filter-platform"))
    && matches(row.dataset.chat, wanted("filter-chat"))
    && matches(row.dataset.kind, wanted("filter-kind")));
}

// Schedules

async function loadSchedules() {
  const { schedules } = await api("/api/schedules");
  const body = document.querySelector("#schedules tbody");
  body.replaceChildren(...schedules.map((s) => {
    const last = s.last_run ? s.last_run.status + (s.last_run.error ? ": " + s.last_run.error : "") : "";
    // A finished schedule (a one-off that ran or was given up) has nothing to pause or resume;
    // a recurring one disabled after failures may be resumed.
    const resumable = s.status === "paused" || (s.status === "disabled" && s.cadence.kind !== "once");
    const toggle = s.status === "active"
      ? el("button", { onclick: () => scheduleAction(s.id, "pause") }, "Pause")
      : resumable ? el("button", { onclick: () => scheduleAction(s.id, "resume") }, "Resume") : null;
    return el("tr", { "data-schedule": s.id },
      el("td", {}, s.id), el("td", {}, s.cadence_text), el("td", {}, s.prompt), el("td", {}, s.status),
      el("td", {}, when(s.next_run_at)), el("td", {}, last), el("td", {}, s.deliver_to_text),
      el("td", {}, toggle,
        el("button", { class: "runs", onclick: () => showRuns(s.id) }, "Runs"),
        el("button", { class: "delete", onclick: () => scheduleAction(s.id, "delete") }, "Delete")));
  }));
}

async function scheduleAction(id, action) {
  const path = "/api/schedules/" + encodeURIComponent(id);
  try {
    if (action === "delete") await api(path, { method: "DELETE" });
    else await api(path + "/" + action, { method: "POST" });
  } catch (error) {
    showScheduleError(error.message);
  }
  await loadSchedules();
}

function showScheduleError(text) {
  const node = document.getElementById("schedule-error");
  node.textContent = text;
  node.hidden = !text;
}

async function createSchedule(event) {
  event.preventDefault();
  const kind = document.getElementById("schedule-kind").value;
  const body = {
    prompt: document.getElementById("schedule-prompt").value,
    policy: document.getElementById("schedule-policy").value,
    deliver_to: document.getElementById("schedule-to").value || "web:" + (state.conversation || "inbox"),
    tz: document.getElementById("schedule-tz").value || "UTC",
  };
  body[kind] = document.getElementById("schedule-when").value;
  try {
    await api("/api/schedules", { method: "POST", body: JSON.stringify(body) });
    showScheduleError("");
    document.getElementById("schedule-form").reset();
  } catch (error) {
    showScheduleError(error.message);
  }
  await loadSchedules();
}

async function showRuns(id) {
  const { runs } = await api("/api/schedules/" + encodeURIComponent(id) + "/runs");
  const box = document.getElementById("runs");
  box.replaceChildren(el("h2", {}, "Runs of " + id),
    ...(runs.length ? runs.map((r) => el("div", { class: "run" },
      el("div", {}, when(r.started_at) + " · " + r.status + (r.cost_usd != null ? " · " + usd(r.cost_usd) : "")),
      el("pre", {}, r.output || r.error || "(no output)"))) : [el("p", { class: "muted" }, "No runs yet.")]));
}

// Sessions

async function loadSessions() {
  const { sessions } = await api("/api/sessions?limit=100");
  document.querySelector("#sessions tbody").replaceChildren(...sessions.map((s) =>
    el("tr", { class: "clickable", onclick: () => showSession(s.id).catch(showFailure) },
      el("td", {}, s.id), el("td", {}, s.key), el("td", {}, s.message_count), el("td", {}, when(s.updated_at)))));
}

async function showSession(id) {
  const path = "/api/sessions/" + encodeURIComponent(id);
  const { session, messages, cost: spent } = await api(path);
  const control = await api(path + "/takeover").catch(() => null);  // null: not a chat
  const box = document.getElementById("session-detail");
  const model = session.model ? "model " + session.model : "default model";  // chosen with /model
  // What the operator is writing survives the view being drawn again.
  const writing = document.getElementById("takeover-text");
  const draft = writing ? writing.value : "";
  const focused = writing !== null && writing === document.activeElement;
  box.replaceChildren(el("h2", {}, session.key + " · " + model + " · " + messages.length + " messages · " + cost(spent)),
    ...(control ? [takeoverPanel(id, control)] : []),
    ...messages.map((m) => {
      const body = el("div", { class: "body" });
      if (m.html) setHtml(body, m.html); else body.textContent = m.text;
      const calls = m.tool_calls.map((c) => el("code", { class: "tool-call" }, "→ " + c.name + " " + JSON.stringify(c.arguments)));
      const title = m.role === "tool" ? "tool " + m.name + (m.is_error ? " (error)" : "") :
        m.speaker === "operator" ? "operator" : m.speaker === "switchboard" ? "note" : m.role;
      return el("div", { class: "message " + m.role + (m.speaker ? " " + m.speaker : "") },
        el("div", { class: "muted" }, "[" + m.seq + "] " + title), body, ...calls);
    }));
  const input = document.getElementById("takeover-text");
  if (input && draft) input.value = draft;
  if (input && focused) input.focus();
  // While taken over, people's messages show as they come: the view reads the session again.
  clearTimeout(state.sessionRefresh);
  if (control && control.takeover) {
    state.sessionRefresh = setTimeout(() => {
      if (!document.getElementById("tab-sessions").hidden) showSession(id).catch(showFailure);
    }, 2000);
  }
}

// Taking a chat over: the bot answers nothing there; what is written here goes out as the bot.
function takeoverPanel(id, control) {
  const path = "/api/sessions/" + encodeURIComponent(id);
  const status = el("span", { id: "takeover-status", class: "muted" });
  const error = el("span", { id: "takeover-error", class: "error" });
  const act = async (route, body) => {
    try {
      await api(path + route, { method: "POST", body: JSON.stringify(body || {}) });
      await showSession(id);
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  if (!control.takeover) {
    status.textContent = "The bot answers in " + control.chat + ".";
    return el("div", { id: "takeover", class: "row" }, status,
      el("button", { id: "take-over", type: "button", onclick: () => act("/takeover") }, "Take over"), error);
  }
  status.textContent = "You answer in " + control.chat + " until " + when(control.takeover.until) + " UTC; the bot stays quiet.";
  const input = el("textarea", { id: "takeover-text", rows: "2", "aria-label": "Your answer, as the operator", placeholder: "Write as the operator (sent through the bot's account)" });
  const form = el("form", { id: "takeover-form", class: "row" }, input, el("button", { type: "submit", id: "takeover-send" }, "Send"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    const text = input.value;
    input.value = "";
    act("/say", { text });
  });
  return el("div", { id: "takeover" },
    el("div", { class: "row" }, status,
      el("button", { id: "hand-back", type: "button", onclick: () => act("/handback") }, "Hand back"), error),
    form);
}

// Costs

async function loadCosts() {
  const costs = await api("/api/costs");
  const t = costs.total;
  document.getElementById("cost-total").textContent =
    "Total: " + cost(t) + " · " + t.calls + " model calls · " + t.tokens + " tokens" +
    (t.unpriced_calls ? " · " + t.unpriced_calls + " calls without a known price" : "");
  drawChart(document.getElementById("cost-chart"), costs.days);
  document.querySelector("#cost-models tbody").replaceChildren(...costs.models.map((m) =>
    el("tr", {}, el("td", {}, m.model), el("td", {}, m.tokens), el("td", {}, cost(m)))));
  document.querySelector("#cost-conversations tbody").replaceChildren(...costs.conversations.map((c) =>
    el("tr", { "data-session": c.session }, el("td", {}, c.key || c.session), el("td", {}, c.calls), el("td", {}, c.tokens), el("td", {}, cost(c)))));
  document.querySelector("#cost-budgets tbody").replaceChildren(...(costs.budgets.length ? costs.budgets.map((b) =>
    el("tr", { "data-budget": b.name }, el("td", {}, b.name), el("td", {}, usd(b.limit_usd)),
      b.spent_usd === null ? el("td", { class: "muted" }, "not measured here") :
        el("td", {}, el("meter", { min: "0", max: String(b.limit_usd), value: String(Math.min(b.spent_usd, b.limit_usd)) }), " " + usd(b.spent_usd)),
      el("td", {}, b.left_usd === null ? "" : usd(b.left_usd)))) :
    [el("tr", {}, el("td", { colspan: "4", class: "muted" }, "No budgets are set."))]));
}

// Platforms: the watchdog's view of each platform, from the heartbeats (`switchboard status`).

// Seconds (as of the process's last beat, `seen`) counted on to `now`; "never" when none.
function age(seconds, seen, now) {
  if (seconds === null || seconds === undefined) return "never";
  const total = Math.max(0, Math.round(seconds + (Date.parse(now) - Date.parse(seen)) / 1000));
  if (total < 120) return total + " s ago";
  if (total < 7200) return Math.floor(total / 60) + " min ago";
  return Math.floor(total / 3600) + " h ago";
}

// The state in words (never colour alone): an open incident names its kind and its sentence.
function platformState(process, health) {
  if (health.problem || health.incident) {
    const kind = (health.problem || "incident").replace("_", " ").toUpperCase();
    return el("td", { class: "incident" }, el("strong", {}, kind), ": " + (health.incident || ""));
  }
  if (process.missing) return el("td", { class: "incident" }, el("strong", {}, "PROCESS MISSING"));
  return el("td", {}, "ok");
}

async function loadPlatforms() {
  const { now, processes } = await api("/api/platforms");
  const rows = [];
  for (const p of processes) {
    const name = (p.role + " " + p.detail).trim() + " (" + p.host + ":" + p.pid + ")";
    for (const h of p.platforms) {
      rows.push(el("tr", { "data-platform": h.platform },
        el("td", {}, name), el("td", {}, h.platform), platformState(p, h),
        el("td", {}, age(h.since_update, p.seen_at, now)),
        el("td", {}, age(h.since_delivery, p.seen_at, now)),
        el("td", {}, h.poll_lag === null ? "not polled" : age(h.poll_lag, p.seen_at, now)),
        el("td", {}, h.failure_rate === null ? "none yet" : Math.round(h.failure_rate * 100) + " %")));
    }
  }
  document.querySelector("#platforms tbody").replaceChildren(...(rows.length ? rows :
    [el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No process reports a platform."))]));
}

function drawChart(box, days) {
  // A hand-drawn SVG bar chart: tokens per day (height), with the day's cost as a label.
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  const width = Math.max(320, days.length * 60), height = 160;
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("role", "img");
  // Its text alternative: every bar's day, tokens and cost.
  const described = "Tokens and cost per day: " +
    days.map((d) => d.day + ", " + d.tokens + " tokens, " + cost(d)).join("; ");
  svg.setAttribute("aria-label", described);
  const title = document.createElementNS(ns, "title");
  title.textContent = described;
  svg.append(title);
  const top = Math.max(1, ...days.map((d) => d.tokens));
  days.forEach((d, i) => {
    const h = Math.round((d.tokens / top) * (height - 50));
    const bar = document.createElementNS(ns, "rect");
    bar.setAttribute("x", 10 + i * 60); bar.setAttribute("y", height - 30 - h);
    bar.setAttribute("width", 40); bar.setAttribute("height", h); bar.setAttribute("class", "bar");
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", 10 + i * 60); label.setAttribute("y", height - 15);
    label.textContent = d.day.slice(5);
    const value = document.createElementNS(ns, "text");
    value.setAttribute("x", 10 + i * 60); value.setAttribute("y", height - 35 - h);
    value.textContent = cost(d);
    svg.append(bar, label, value);
  });
  box.replaceChildren(days.length ? svg : el("p", { class: "muted" }, "Nothing spent yet."));
}

// Start

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll(".tab")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  document.getElementById("new-conversation").addEventListener("click", newConversation);
  document.getElementById("stop").addEventListener("click", () => stopTurn().catch(showFailure));
  const input = document.getElementById("chat-input");
  document.getElementById("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || state.running) return;
    input.value = "";
    send(text).catch(showFailure);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      document.getElementById("composer").requestSubmit();
    }
  });
  document.getElementById("schedule-form").addEventListener("submit", createSchedule);
  for (const id of ["filter-platform", "filter-chat", "filter-kind"]) {
    document.getElementById(id).addEventListener("input", () => {
      for (const row of document.querySelectorAll("#events tbody tr")) filterRow(row);
    });
  }
  connectEvents();
  loadConversations().catch(showFailure);
});
