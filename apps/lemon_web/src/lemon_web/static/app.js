// The chat page: one session at a time, over the control-plane protocol (client.js).
//
// Authority and recovery (seed 003, "TUI / browser after dropped progress"): the transcript is
// read from chat.history and the live state from sessions.snapshot. On first load, a session
// switch, a reconnect, a stream.resync or a local overflow, the page re-reads both and replaces
// what it shows; a read during which events of the session arrived is discarded and retried
// (bounded). A run recovered from a snapshot is replacement-only until it completes: its live
// deltas are not appended to an uncertain prefix (they schedule another snapshot read instead),
// and its completion re-reads the transcript. Nothing typed offline is replayed.
//
// Bounds: a live answer segment keeps at most 65,536 bytes; the transcript, the runs and the
// tool cards keep at most 400 items each; the last 128 finished runs are tombstones whose late
// events are ignored.

import { ControlPlaneClient } from "./client.js";
import {
  BoundedMap, LIVE_SEGMENT_BYTES, MAX_EVENT_BYTES, PAGE_CACHE_ITEMS, PANE_QUEUE_ENTRIES,
  TERMINAL_TOMBSTONES, Tombstones, clipUtf8, overBytes,
} from "./bounds.js";
import { escapeHtml, renderCode, renderMarkdown } from "./markdown.js";
import { TaskCards, isQuestion, isTaskEvent, questionCard, questionNote } from "./tasks.js";

const $ = (id) => document.getElementById(id);
const ui = {
  transcript: $("transcript"), input: $("composer-input"), composer: $("composer"),
  send: $("send"), stop: $("stop"), mode: $("mode"), modeLabel: $("mode-label"),
  conn: $("conn"), model: $("model"), sessions: $("sessions"), title: $("title"),
  usage: $("usage"), login: $("login"), loginForm: $("login-form"), loginToken: $("login-token"),
  loginError: $("login-error"), sidebar: $("sidebar"), toggle: $("toggle-sidebar"),
  newChat: $("new-chat"), announce: $("announce"), modelError: $("model-error"),
  mcp: $("mcp"), mcpServers: $("mcp-servers"),
};

const TAB_PREFIX = "agent:default:web:browser:unknown:tab-";
const DECISIONS = [
  ["approve_once", "Allow once"],
  ["approve_session", "Allow for this session"],
  ["approve_global", "Always allow"],
  ["deny", "Deny"],
];
const HISTORY_PAGE = 200;
const RELOAD_TRIES = 3;

// -- the session key --------------------------------------------------------------------------

function newTabKey() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return TAB_PREFIX + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function keyFromPath() {
  const path = window.location.pathname;
  if (!path.startsWith("/chat/")) return null;
  try {
    const key = decodeURIComponent(path.slice("/chat/".length));
    return key || null;
  } catch {
    return null;
  }
}

function chatPath(key) { return "/chat/" + encodeURIComponent(key); }

let sessionKey = keyFromPath() || sessionStorage.getItem("lemon.sessionKey") || newTabKey();

function rememberKey(push) {
  sessionStorage.setItem("lemon.sessionKey", sessionKey);
  const path = chatPath(sessionKey);
  if (window.location.pathname !== path) {
    if (push) history.pushState({ key: sessionKey }, "", path);
    else history.replaceState({ key: sessionKey }, "", path);
  }
}

// -- page state -------------------------------------------------------------------------------

const page = {
  runs: new BoundedMap(PAGE_CACHE_ITEMS),
  tools: new BoundedMap(PAGE_CACHE_ITEMS),
  approvals: new Map(),
  tombstones: new Tombstones(TERMINAL_TOMBSTONES),
  ownRuns: new Tombstones(PAGE_CACHE_ITEMS), // runs this page sent (their prompts are shown)
  notes: new BoundedMap(PAGE_CACHE_ITEMS), // run id -> the "queued"/"steer" notes of its messages
  answered: 0, // chat.send answers received
  busyRun: null,
  generation: 0,
  loading: false,
  sessionEvents: 0,
  droppedWhileLoading: 0,
  reloadQueued: false,
  activeTimer: null,
  activeRetries: 0,
  totalCost: 0,
  totalTokens: 0,
};

// -- transcript items (at most PAGE_CACHE_ITEMS) ------------------------------------------------

function addItem(el) {
  const atBottom = nearBottom();
  ui.transcript.append(el);
  while (ui.transcript.children.length > PAGE_CACHE_ITEMS) ui.transcript.firstElementChild.remove();
  if (atBottom) scrollToEnd();
  return el;
}

function nearBottom() {
  const t = ui.transcript;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 120;
}

let scrollPending = false;
function scrollToEnd() {
  if (scrollPending) return;
  scrollPending = true;
  requestAnimationFrame(() => {
    scrollPending = false;
    ui.transcript.scrollTop = ui.transcript.scrollHeight;
  });
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function userItem(text) {
  const item = el("article", "msg user");
  item.append(el("div", "who", "You"));
  const body = el("div", "bubble");
  body.textContent = text;
  item.append(body);
  return addItem(item);
}

function noticeItem(text, kind = "info") {
  const item = el("div", `notice ${kind}`, text);
  return addItem(item);
}

// -- segments: the streamed answer, rendered as sanitized Markdown ------------------------------

const renderQueue = new Set();
let renderScheduled = false;

function queueRender(segment) {
  renderQueue.add(segment);
  if (renderScheduled) return;
  renderScheduled = true;
  const flush = () => {
    if (!renderScheduled) return;
    renderScheduled = false;
    const atBottom = nearBottom();
    for (const seg of renderQueue) renderSegment(seg);
    renderQueue.clear();
    if (atBottom) scrollToEnd();
  };
  requestAnimationFrame(flush);
  setTimeout(flush, 100); // a hidden tab has no animation frames
}

function renderSegment(seg) {
  seg.el.innerHTML = renderMarkdown(seg.text);
  if (seg.truncated) {
    const note = seg.final
      ? `… shown up to ${LIVE_SEGMENT_BYTES} bytes.`
      : `… the live answer is cut at ${LIVE_SEGMENT_BYTES} bytes; the rest shows when the run completes.`;
    seg.el.append(el("p", "truncated", note));
  }
}

function newSegment(run, text = "") {
  const seg = { el: el("div", "segment md"), text: "", truncated: false };
  run.body.append(seg.el);
  run.blocks.push(seg);
  setSegmentText(seg, text, true);
  return seg;
}

function setSegmentText(seg, text, now = false) {
  if (overBytes(text, LIVE_SEGMENT_BYTES)) {
    seg.text = clipUtf8(text, LIVE_SEGMENT_BYTES);
    seg.truncated = true;
  } else {
    seg.text = text;
    seg.truncated = false;
  }
  if (now) renderSegment(seg); // a whole text at once; streamed deltas render once a frame
  else queueRender(seg);
}

function appendToSegment(seg, text) {
  if (seg.truncated) return;
  setSegmentText(seg, seg.text + text);
}

// -- runs ---------------------------------------------------------------------------------------

function ensureRun(runId) {
  let run = page.runs.get(runId);
  if (run && run.item.isConnected) return run;
  const item = el("article", "msg assistant");
  item.dataset.runId = runId;
  item.append(el("div", "who", "Lemon"));
  const body = el("div", "answer");
  const status = el("div", "run-status", "");
  item.append(body, status);
  run = { id: runId, item, body, status, blocks: [], replacement: false, done: false };
  page.runs.set(runId, run);
  addItem(item);
  return run;
}

function lastSegment(run) {
  const last = run.blocks[run.blocks.length - 1];
  return last && last.kind !== "tool" ? last : null;
}

function setBusy(runId) {
  page.busyRun = runId;
  const busy = Boolean(runId);
  ui.stop.hidden = !busy;
  ui.modeLabel.hidden = !busy;
  document.body.classList.toggle("busy", busy);
  ui.transcript.setAttribute("aria-busy", String(busy)); // no word-by-word announcements
  for (const run of page.runs.values()) {
    run.status.textContent = run.id === runId && !run.done ? "working…" : run.status.dataset.final || "";
    run.item.classList.toggle("running", run.id === runId && !run.done);
  }
}

function finishRun(run, payload) {
  run.done = true;
  page.tombstones.add(run.id);
  for (const block of run.blocks) {
    if (block.kind === "tool" && block.phase === "started") setToolPhase(block, "unknown");
  }
  const parts = [];
  if (payload && payload.ok === false) {
    run.item.classList.add("failed");
    parts.push(payload.error || payload.errorCode || "the run failed");
  }
  const usage = payload && payload.usage;
  if (usage) {
    parts.push(`${usage.inputTokens} in · ${usage.outputTokens} out tokens`);
    if (typeof usage.costUsd === "number") parts.push(`$${usage.costUsd.toFixed(4)}`);
    page.totalTokens += usage.totalTokens || 0;
    page.totalCost += usage.costUsd || 0;
    ui.usage.textContent = `${page.totalTokens} tokens · $${page.totalCost.toFixed(4)} this session`;
  }
  if (payload && typeof payload.durationMs === "number") parts.push(`${(payload.durationMs / 1000).toFixed(2)} s`);
  if (payload && payload.model) parts.push(payload.model);
  run.status.dataset.final = parts.join(" · ");
  run.status.textContent = run.status.dataset.final;
  run.item.classList.remove("running");
  if (page.busyRun === run.id) setBusy(null);
}

// -- tool cards ---------------------------------------------------------------------------------

function toolCard(run, action) {
  let card = page.tools.get(action.id);
  if (card && card.el.isConnected) return card;
  const details = el("details", "tool");
  const summary = el("summary");
  const status = el("span", "tool-status");
  const name = el("span", "tool-name");
  const mcp = el("span", "tool-mcp");
  mcp.hidden = true;
  const title = el("code", "tool-title");
  const exit = el("span", "tool-exit");
  const facts = el("span", "tool-web-facts");
  summary.append(status, name, mcp, title, facts, exit);
  const body = el("div", "tool-body");
  details.append(summary, body);
  card = { kind: "tool", id: action.id, el: details, status, name, mcp, title, facts, exit, body, phase: "started", args: null, result: null, web: null };
  page.tools.set(action.id, card);
  run.body.append(details);
  run.blocks.push(card);
  return card;
}

function setToolPhase(card, phase, ok = null) {
  card.phase = phase;
  const state = phase === "started" ? "running" : phase === "unknown" ? "unknown" : ok === false ? "failed" : "done";
  card.el.dataset.state = state;
  card.status.setAttribute("aria-label", state === "unknown" ? "outcome unknown" : state);
  card.status.title = card.status.getAttribute("aria-label");
  if (state === "unknown") card.exit.textContent = "outcome unknown";
}

function diffText(name, args) {
  if (!args) return "";
  if (name === "edit" && typeof args.old_text === "string") {
    const minus = args.old_text.split("\n").map((l) => "-" + l);
    const plus = String(args.new_text ?? "").split("\n").map((l) => "+" + l);
    return `--- ${args.path ?? ""}\n+++ ${args.path ?? ""}\n${minus.join("\n")}\n${plus.join("\n")}`;
  }
  if (name === "write" && typeof args.content === "string") {
    return `+++ ${args.path ?? ""}\n` + args.content.split("\n").map((l) => "+" + l).join("\n");
  }
  return "";
}

function updateTool(run, payload) {
  const action = payload.action || {};
  const detail = action.detail || {};
  const card = toolCard(run, action);
  const name = detail.name || card.name.textContent || action.kind || "tool";
  card.name.textContent = name;
  showMcpOrigin(card, detail.mcp);
  if (detail.args) card.args = detail.args;
  const args = card.args || {};
  const shown = typeof args.command === "string" ? args.command : action.title || args.path || "";
  if (shown && !card.title.textContent) card.title.textContent = shown;
  if (payload.phase === "updated") {
    // Live output of a running tool (the card keeps spinning until "completed").
    if (payload.message !== null && payload.message !== undefined) card.result = payload.message;
    setToolPhase(card, "started");
  } else if (payload.phase !== "started") {
    card.result = detail.result ?? payload.message ?? card.result;
    if (detail.web && typeof detail.web === "object") card.web = detail.web;
    setToolPhase(card, "completed", payload.ok);
    const code = /exit(?: code|ed with)?:?\s*(-?\d+)/i.exec(String(card.result ?? ""));
    card.exit.textContent = code ? `exit ${code[1]}` : payload.ok === false ? "failed" : "ok";
  } else {
    setToolPhase(card, "started");
  }
  renderToolBody(card, name);
}

// An MCP tool's card names its server (detail.mcp = {server, tool}), as the TUI's "MCP S".
function showMcpOrigin(card, origin) {
  if (!origin || typeof origin.server !== "string" || !origin.server) return;
  card.mcp.textContent = `MCP ${origin.server}`;
  card.mcp.title = `the tool ${typeof origin.tool === "string" ? origin.tool : ""} of the MCP server ${origin.server}`;
  card.mcp.hidden = false;
}

function renderToolBody(card, name) {
  const parts = [];
  const args = card.args;
  const diff = diffText(name, args);
  if (diff) parts.push(`<div class="tool-label">Diff</div><pre class="diff"><code class="hljs language-diff">${renderCode(clipUtf8(diff, LIVE_SEGMENT_BYTES), "diff")}</code></pre>`);
  else if (args && Object.keys(args).length) parts.push(`<div class="tool-label">Arguments</div><pre><code>${escapeHtml(clipUtf8(JSON.stringify(args, null, 2), LIVE_SEGMENT_BYTES))}</code></pre>`);
  if (card.result !== null && card.result !== undefined) {
    parts.push(`<div class="tool-label">Output</div><pre class="output"><code>${escapeHtml(clipUtf8(String(card.result), LIVE_SEGMENT_BYTES))}</code></pre>`);
  }
  card.body.innerHTML = parts.join("");
  if (card.web) renderWebCard(card, card.web);
}

// The web tools' card (detail.web, as the daemon's bridge passed it): the URL, status, size and
// time of a fetch, the flag rules, and a browser screenshot's thumbnail. Built with DOM nodes
// and textContent only (the URL and title come from the web); the thumbnail is shown only as a
// PNG data URL (what the browser tool drew), never any other URL.
const PNG_DATA_URL = /^data:image\/png;base64,[A-Za-z0-9+/]+={0,2}$/;

function byteSize(n) {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

function renderWebCard(card, web) {
  const url = typeof web.final_url === "string" ? web.final_url : typeof web.url === "string" ? web.url : "";
  const facts = [];
  if (typeof web.status === "number") facts.push(`HTTP ${web.status}`);
  if (web.cached === true) facts.push("cached");
  else if (typeof web.bytes === "number") facts.push(byteSize(web.bytes));
  const shot = web.screenshot && typeof web.screenshot === "object" ? web.screenshot : null;
  if (shot && typeof shot.width === "number" && typeof shot.height === "number") facts.push(`${shot.width}×${shot.height} PNG`);
  if (shot && typeof shot.bytes === "number") facts.push(byteSize(shot.bytes));
  if (typeof web.elapsed_s === "number") facts.push(`${web.elapsed_s.toFixed(2)} s`);
  if (typeof web.results === "number") facts.push(`${web.results} result(s)`);
  card.facts.textContent = facts.join(" · ");
  const box = el("div", "tool-web");
  box.append(el("div", "tool-label", "Web"));
  if (url) box.append(el("code", "tool-web-url", url));
  if (web.flagged === true) {
    const rules = Array.isArray(web.flags) ? web.flags.filter((r) => typeof r === "string") : [];
    box.append(el("div", "tool-web-flag", `⚠ flagged as untrusted: ${rules.join(", ") || "suspicious content"}`));
  }
  if (typeof web.hidden_removed === "number" && web.hidden_removed > 0) box.append(el("div", "tool-web-note", `${web.hidden_removed} hidden element(s) removed`));
  if (typeof web.thumbnail === "string" && PNG_DATA_URL.test(web.thumbnail)) {
    const img = el("img", "tool-thumb");
    img.alt = url ? `screenshot of ${url}` : "screenshot";
    img.src = web.thumbnail;
    box.append(img);
    let small = card.el.querySelector("summary .tool-thumb-small");
    if (!small) {
      small = el("img", "tool-thumb-small");
      small.alt = "";
      card.facts.before(small);
    }
    small.src = web.thumbnail;
  }
  card.body.prepend(box);
}

// A tool call of the history, with its real outcome as the transcript records it (chat.history's
// `outcome`): ran ok ("done") or failed, or did not run / did not finish (denied, expired,
// cancelled: never shown as done). A daemon that does not say shows "outcome unknown".
const NOT_RUN = { denied: "denied: did not run", expired: "expired: did not run", cancelled: "cancelled: did not finish" };

function historyTool(run, m) {
  const text = m.content || "";
  const colon = text.indexOf(":");
  const named = typeof m.tool === "string" && m.tool ? m.tool : colon > 0 && colon < 40 ? text.slice(0, colon) : null;
  const name = named || "tool";
  const card = toolCard(run, { id: `history-${run.id}-${run.blocks.length}` });
  card.name.textContent = name;
  card.result = named && text.startsWith(named + ":") ? text.slice(named.length + 1).trim() : text;
  const outcome = m.outcome;
  if (outcome === "ok" || outcome === "failed") {
    setToolPhase(card, "completed", outcome === "ok");
    const code = /exit(?: code|ed with)?:?\s*(-?\d+)/i.exec(String(card.result));
    card.exit.textContent = code ? `exit ${code[1]}` : outcome === "ok" ? "ok" : "failed";
  } else if (NOT_RUN[outcome]) {
    card.phase = "completed";
    card.el.dataset.state = outcome;
    card.status.setAttribute("aria-label", outcome);
    card.status.title = outcome;
    card.exit.textContent = NOT_RUN[outcome];
  } else {
    setToolPhase(card, "unknown");
  }
  renderToolBody(card, name);
}

// -- approvals ----------------------------------------------------------------------------------

// What a grant is bound to: ExecApprovals keys it by the tool and a hash of the exact action
// (its canonical JSON), owned by the session ("session") or by no one ("global"). For bash the
// action is the command's argument list (a plain command: the same words, spacing and quoting
// aside) or its exact text (anything with operators, variables, globs...; coding_agent.policy
// shell_action). So the card names the exact command (or arguments) a grant will let through.
function actionSummary(action) {
  if (action && Array.isArray(action.argv)) {
    const words = action.argv.map((w) => (/^[\w@%+=:,./-]+$/.test(String(w)) ? String(w) : `'${String(w).replaceAll("'", "'\\''")}'`));
    return { command: words.join(" "), how: " exactly (these words; spacing and quoting aside)" };
  }
  if (action && typeof action.command === "string") return { command: action.command, how: " exactly (this exact text)" };
  return null;
}

function scopeTexts(tool, action) {
  const cmd = actionSummary(action);
  const what = cmd ? [`${tool} `, code(clipUtf8(cmd.command, 300)), cmd.how] : [`${tool} with exactly these arguments`];
  const noun = cmd ? "this exact command" : "these exact arguments";
  return {
    approve_once: ["This call only; the next one asks again."],
    approve_session: [...what, `, for the rest of this session (until the daemon restarts). Any other ${cmd ? "command" : "call"} asks again.`],
    approve_global: [`Always: ${noun}, every session, kept after restarts (remove it with `, code("lemon approvals revoke"), "). Asks for a confirmation."],
    deny: ["This call fails; nothing is remembered."],
  };
}

function code(text) {
  return el("code", "", text);
}

function approvalCard(payload) {
  const id = payload.approvalId || payload.id;
  if (!id || page.approvals.has(id)) return;
  if (isQuestion(payload)) { askCard(id, payload); return; }
  const tool = payload.tool || "this tool";
  const card = el("div", "approval");
  card.dataset.approvalId = id;
  card.setAttribute("role", "group");
  card.tabIndex = 0; // a Tab stop of its own (and Alt+A's target): keys decide only from here
  const titleId = `approval-${id}`;
  card.setAttribute("aria-labelledby", titleId);
  const title = el("p", "approval-title");
  title.id = titleId;
  title.append(el("strong", "", `Allow ${tool}?`), document.createTextNode(" " + (payload.rationale || "")));
  card.append(title);
  if (payload.action && Object.keys(payload.action).length) {
    const pre = el("pre", "approval-action");
    pre.textContent = clipUtf8(JSON.stringify(payload.action, null, 2), 4096);
    card.append(pre);
  }
  const scopes = scopeTexts(tool, payload.action);
  const list = el("ul", "scopes");
  const row = el("div", "decisions");
  DECISIONS.forEach(([decision, label], index) => {
    const item = el("li", "scope");
    item.dataset.scopeFor = decision;
    item.id = `${titleId}-${decision}`;
    item.append(el("strong", "", `${index + 1} ${label}: `), ...scopes[decision].map((part) => typeof part === "string" ? document.createTextNode(part) : part));
    list.append(item);
    const button = el("button", decision === "deny" ? "danger" : decision === "approve_once" ? "primary" : "", label);
    button.type = "button";
    button.dataset.decision = decision;
    button.dataset.label = label;
    button.setAttribute("aria-describedby", item.id);
    button.addEventListener("click", () => choose(id, decision, card));
    row.append(button);
  });
  card.append(list, row);
  const hint = el("p", "approval-hint", "Keys work once the card has focus (Tab or Alt+A): 1-4 choose, ←/→ move, Esc denies.");
  card.append(hint);
  card.addEventListener("focusout", (event) => {
    if (!card.contains(event.relatedTarget)) disarm(card);
  });
  card.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (!["3", "Enter", " ", "Shift"].includes(event.key)) disarm(card);
    const buttons = [...row.querySelectorAll("button")];
    const at = buttons.indexOf(document.activeElement);
    if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); disarm(card); decide(id, "deny", card); }
    else if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      event.preventDefault();
      disarm(card);
      const from = at < 0 ? (event.key === "ArrowRight" ? -1 : 0) : at;
      const next = (from + (event.key === "ArrowRight" ? 1 : buttons.length - 1)) % buttons.length;
      buttons[next].focus();
    } else if (/^[1-4]$/.test(event.key)) {
      event.preventDefault();
      const button = buttons[Number(event.key) - 1];
      if (button.disabled) return;
      choose(id, button.dataset.decision, card);
    }
  });
  const run = payload.runId && page.runs.get(payload.runId);
  if (run && run.item.isConnected) run.body.append(card);
  else addItem(card);
  page.approvals.set(id, card);
  scrollToEnd();
  announce(`Approval needed: ${tool}. ${payload.rationale || ""} Press Alt+A to reach it.`);
  // The focus stays where it is: a card that took it would take the keys being typed into the
  // message box (a space clicks a focused button). Alt+A or Tab reaches it deliberately.
}

// A child's question to the person (its ask_parent approval): its own prompt, answered with
// tasks.answer (tasks.js). Like an approval card it never takes the focus; Alt+A reaches it.
function askCard(id, payload) {
  const card = questionCard(payload, {
    describe: (taskId) => {
      const task = taskId && tasks.tasks.get(taskId);
      return task && task.description ? `The child task “${task.description}”` : `The child task ${taskId || "?"}`;
    },
    answer: (questionId, text) => client.send("tasks.answer", { questionId, answer: text }),
  });
  // Under the parent's run: the approval's own, or (a detached child asking after its run
  // ended: the question is on the session) the run its task card is under.
  const task = tasks.tasks.get(payload.action.task_id);
  const runId = payload.runId || (task && task.parentRunId);
  const run = runId && page.runs.get(runId);
  if (run && run.item.isConnected) run.body.append(card);
  else addItem(card);
  page.approvals.set(id, card);
  scrollToEnd();
  announce(`A child task asks you a question. Press Alt+A to answer it.`);
}

// "Always allow" is remembered in every session and survives restarts: the first press arms
// it (the button asks to confirm), a second press of the same decision sends it, any other
// key or decision disarms it.
function choose(id, decision, card) {
  if (decision === "approve_global") {
    const button = card.querySelector("button[data-decision=approve_global]");
    if (button.dataset.armed !== "1") {
      disarm(card);
      button.dataset.armed = "1";
      button.textContent = "Confirm: always allow";
      button.focus();
      announce("Press 3 or click again to always allow this exact action; any other key cancels.");
      return;
    }
  }
  disarm(card);
  decide(id, decision, card);
}

function disarm(card) {
  for (const button of card.querySelectorAll("button[data-armed]")) {
    delete button.dataset.armed;
    button.textContent = button.dataset.label;
  }
}

function focusApproval() {
  const card = page.approvals.values().next().value;
  if (!card) return false;
  card.scrollIntoView({ block: "nearest" });
  (card.focusTarget ? card.focusTarget() : card).focus();
  return true;
}

async function decide(id, decision, card) {
  if (card.contains(document.activeElement)) card.dataset.hadFocus = "1"; // disabling blurs
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    await client.send("exec.approval.resolve", { approvalId: id, decision });
  } catch (error) {
    removeApproval(id, error.code === "CONFLICT" ? "already decided elsewhere" : `could not decide: ${error.message}`);
  }
}

function removeApproval(id, note, decision) {
  const card = page.approvals.get(id);
  if (!card) return;
  const questionId = card.dataset.questionId;
  if (questionId && note === undefined) note = questionNote(card, decision, questions.get(questionId));
  const hadFocus = card.contains(document.activeElement) || card.dataset.hadFocus === "1";
  page.approvals.delete(id);
  if (note) {
    const line = el("div", "approval-note", note);
    if (questionId) {
      line.dataset.questionId = questionId;
      if (card.dataset.answer) line.dataset.answer = card.dataset.answer;
    }
    card.replaceWith(line);
  } else {
    card.remove();
  }
  if (hadFocus) {
    const next = page.approvals.values().next().value;
    if (next) next.focus();
    else ui.input.focus();
  }
}

function decisionNote(payload) {
  const tool = payload.tool || "tool";
  const labels = { approve_once: "allowed once", approve_session: "allowed for this session", approve_agent: "allowed for this agent", approve_global: "always allowed", deny: "denied" };
  return `${payload.decision === "deny" ? "✗" : "✓"} ${tool} ${labels[payload.decision] || payload.decision}`;
}

function announce(text) {
  ui.announce.textContent = "";
  requestAnimationFrame(() => { ui.announce.textContent = text; });
}

// -- events -------------------------------------------------------------------------------------

function onEvent(frame) {
  if (frame.type === "online") { onOnline(frame); return; }
  if (frame.type === "unauthorized") { showLogin(); return; }
  if (frame.type === "overflow") { scheduleReload(); return; }
  const name = frame.event;
  const p = frame.payload || {};
  if (name === "stream.resync") { scheduleReload(); return; }
  if (name === "shutdown") { noticeItem(`The daemon is shutting down: ${p.reason || ""}`, "warn"); return; }
  if (name === "tick" || name === "health") return;
  if (name === "mcp.server") { mcp.fresh.add(p.name); mcpServerRow(p); return; }
  if (isTaskEvent(name)) { if (p.parentSessionKey === sessionKey) tasks.onEvent(name, p); return; }
  if (name === "task.question") {
    // A child's question as its record stands: its note says what became of it.
    if (p.parentSessionKey !== sessionKey || typeof p.questionId !== "string") return;
    questions.set(p.questionId, p);
    const line = p.status !== "pending" && ui.transcript.querySelector(`.approval-note[data-question-id="${CSS.escape(p.questionId)}"]`);
    if (line) line.textContent = questionNote(line, null, p);
    return;
  }
  if (name === "task.notice") {
    // A detached child ended after its run (or a restart left it unknown): its result, as text.
    if (p.parentSessionKey === sessionKey && typeof p.text === "string") noticeItem(p.text);
    return;
  }
  if (p.sessionKey !== sessionKey) {
    if (name === "agent" && p.type === "completed") refreshSessions();
    return;
  }
  page.sessionEvents += 1;
  if (page.loading) { page.droppedWhileLoading += 1; return; }
  if (name === "exec.approval.requested") { approvalCard(p); return; }
  if (name === "exec.approval.resolved") {
    const run = p.runId && page.runs.get(p.runId);
    const card = page.approvals.get(p.approvalId);
    const question = card && card.dataset.questionId;
    // A child's approval relayed here names the child's run: its note takes the card's place.
    const inPlace = card && !question && !run ? decisionNote(p) : undefined;
    removeApproval(p.approvalId, inPlace, p.decision);
    if (card && !question && run) run.body.append(el("div", "approval-note", decisionNote(p)));
    return;
  }
  const runId = p.runId;
  if (!runId || page.tombstones.has(runId)) return; // late events of a finished run
  if (name === "agent" && (p.type === "started" || p.type === "completed")) {
    // A queued message runs now; a steer ran with the run it joined.
    for (const note of page.notes.get(runId) || []) note.remove();
    page.notes.delete(runId);
  }
  if (name === "agent" && p.type === "started") {
    ensureRun(runId);
    setBusy(runId);
    // A run on a model the picker does not show: the session's model may have been changed
    // by another client; read it (the run itself may also have named its own model).
    if (p.provider && p.model && `${p.provider}:${p.model}` !== picker.current) showSessionModel();
    return;
  }
  const known = page.runs.get(runId);
  if (!known && p.type !== "started") {
    // An event of a run this page never saw start: reconcile from authority instead of
    // letting it claim the session (seed 003: untagged events request reconciliation).
    if (p.type === "completed") { page.tombstones.add(runId); scheduleReload(); }
    else scheduleActiveRefresh();
    return;
  }
  if (name === "chat" && p.type === "delta") {
    const run = ensureRun(runId);
    if (page.busyRun !== runId) setBusy(runId);
    if (run.replacement) { scheduleActiveRefresh(); return; }
    const seg = lastSegment(run) || newSegment(run);
    appendToSegment(seg, p.text || "");
    return;
  }
  if (name === "agent" && p.type === "tool_use") {
    const run = ensureRun(runId);
    if (run.replacement) { scheduleActiveRefresh(); return; }
    updateTool(run, p);
    return;
  }
  if (name === "agent" && p.type === "completed") {
    const run = ensureRun(runId);
    if (run.replacement) {
      finishRun(run, p);
      scheduleReload(); // the transcript is the authority for a recovered run
      refreshSessions();
      return;
    }
    const answer = typeof p.answer === "string" ? p.answer : "";
    const seg = lastSegment(run);
    if (answer && (!seg || (seg.text !== answer && !seg.text.endsWith(answer)))) {
      const target = seg || newSegment(run);
      target.final = true;
      setSegmentText(target, answer, true); // the run's own answer replaces what streamed
    } else if (seg && seg.truncated) {
      seg.final = true;
      renderSegment(seg);
    }
    finishRun(run, p);
    refreshSessions();
    // A run another client sent (the TUI, say): its prompt is in the transcript, not here.
    if (!page.ownRuns.has(runId)) scheduleReload();
  }
}

// -- authority reads ----------------------------------------------------------------------------

function scheduleReload() {
  if (page.reloadQueued) return;
  page.reloadQueued = true;
  setTimeout(() => { page.reloadQueued = false; reload(); }, 0);
}

function scheduleActiveRefresh() {
  if (page.activeTimer) return;
  page.activeTimer = setTimeout(async () => {
    page.activeTimer = null;
    const generation = page.generation;
    try {
      const snap = await client.send("sessions.snapshot", { sessionKey });
      if (generation !== page.generation || page.loading) return;
      if (snap.status === "retry" && page.activeRetries < RELOAD_TRIES) {
        page.activeRetries += 1;
        scheduleActiveRefresh();
        return;
      }
      page.activeRetries = 0;
      if (!snap.active) { scheduleReload(); return; }
      applyActive(snap.active);
      applyApprovals(snap.pendingApprovals || []);
    } catch { /* the next event or reconnect reads again */ }
  }, 250);
}

async function readHistory(key) {
  let messages = [];
  let before;
  while (messages.length < PAGE_CACHE_ITEMS) {
    const params = { sessionKey: key, limit: HISTORY_PAGE };
    if (before !== undefined) params.before = before;
    const page_ = await client.send("chat.history", params);
    messages = page_.messages.concat(messages);
    if (!page_.more || !page_.messages.length) break;
    const first = page_.messages[0].id;
    const index = Number(String(first).slice(String(first).lastIndexOf("#") + 1));
    if (!Number.isFinite(index) || index <= 0) break;
    before = index;
  }
  return messages.slice(-PAGE_CACHE_ITEMS);
}

async function reload() {
  if (client.state !== "online") return;
  const generation = ++page.generation;
  page.loading = true;
  try {
    let snap = null;
    let messages = [];
    for (let attempt = 0; attempt < RELOAD_TRIES; attempt += 1) {
      const seen = page.sessionEvents;
      page.droppedWhileLoading = 0;
      [snap, messages] = await Promise.all([
        client.send("sessions.snapshot", { sessionKey }),
        readHistory(sessionKey),
      ]);
      if (generation !== page.generation) return;
      // Nothing moved during the read, and the snapshot's owners agreed ("retry": they did not).
      if (page.sessionEvents === seen && snap.status !== "retry") break;
    }
    page.loading = false;
    applyAuthority(messages, snap);
    if (page.droppedWhileLoading) scheduleActiveRefresh();
  } catch (error) {
    if (generation === page.generation) {
      page.loading = false;
      if (error.code !== "UNAVAILABLE") noticeItem(`Could not load this session: ${error.message}`, "error");
    }
  }
}

function resetView() {
  ui.transcript.replaceChildren();
  page.runs.clear();
  page.tools.clear();
  page.approvals.clear();
  page.notes.clear();
  renderQueue.clear();
}

function applyAuthority(messages, snap) {
  const hadFocus = ui.transcript.contains(document.activeElement);
  resetView();
  let run = null;
  let n = 0;
  let firstUser = null;
  for (const m of messages) {
    n += 1;
    if (m.role === "user") {
      run = null;
      userItem(m.content);
      if (!firstUser) firstUser = m.content;
      continue;
    }
    if (!run) {
      run = ensureRun(`history-${n}`);
      run.done = true;
    }
    if (m.role === "tool") historyTool(run, m);
    else {
      const seg = newSegment(run, m.content || "");
      if (m.truncated) seg.el.append(el("p", "truncated", "… shortened by the daemon's transcript read"));
    }
  }
  ui.title.textContent = firstUser ? firstUser.slice(0, 80) : "New chat";
  setBusy(null);
  if (snap && snap.active) {
    const last = lastSent();
    // The daemon writes a run's prompt to the transcript as the run starts: shown from here only
    // when the transcript does not have it yet (the run has not reached its model).
    const latestUser = messages.filter((m) => m.role === "user").pop();
    const written = latestUser && latestUser.content === (last && last.prompt);
    if (last && last.key === sessionKey && last.runId === snap.active.runId && !written) userItem(last.prompt);
    applyActive(snap.active);
  }
  for (const row of (snap && snap.tasks) || []) tasks.fromRow(row);
  tasks.reattach((runId) => { const r = runId && page.runs.get(runId); return Boolean(r && r.item.isConnected); });
  readTasks();
  applyApprovals((snap && snap.pendingApprovals) || []);
  if (snap && snap.lastRunId && !(snap.active && snap.active.runId === snap.lastRunId)) page.tombstones.add(snap.lastRunId);
  if (hadFocus && !ui.transcript.contains(document.activeElement)) ui.input.focus();
  scrollToEnd();
  document.body.dataset.ready = "1";
  performance.mark("lemon:ready");
}

// The session's tasks not yet ended (a detached child outliving its run too), from the graph.
async function readTasks() {
  if (!client.supports("tasks.list")) return;
  const key = sessionKey;
  try {
    const listed = await client.send("tasks.list", { sessionKey: key });
    if (key !== sessionKey) return;
    for (const row of listed.tasks || []) if (row.parent_session_key === key) tasks.fromRow(row);
  } catch { /* the events keep the cards */ }
}

function lastSent() {
  try {
    return JSON.parse(sessionStorage.getItem("lemon.lastSent") || "null");
  } catch {
    return null;
  }
}

function applyActive(active) {
  const run = ensureRun(active.runId);
  run.replacement = true;
  // Replace the answer and the cards; approval cards stay (moving them would lose focus).
  for (const child of [...run.body.children]) if (!child.matches(".approval, .question, .task-card")) child.remove();
  run.blocks = [];
  const seg = newSegment(run, active.text || "");
  run.body.prepend(seg.el);
  for (const action of active.actions || []) {
    const card = toolCard(run, { id: action.id, kind: action.kind, title: action.title });
    card.name.textContent = action.kind === "command" ? "bash" : action.kind || "tool";
    card.title.textContent = action.title || "";
    if (action.phase === "completed") {
      card.result = action.message;
      setToolPhase(card, "completed", action.ok);
      card.exit.textContent = action.ok === false ? "failed" : "ok";
    } else {
      setToolPhase(card, "started");
    }
    renderToolBody(card, card.name.textContent);
    const firstApproval = run.body.querySelector(".approval, .question, .task-card");
    if (firstApproval) run.body.insertBefore(card.el, firstApproval);
  }
  setBusy(active.runId);
}

function applyApprovals(pending) {
  const keep = new Set(pending.map((p) => p.approvalId));
  for (const id of [...page.approvals.keys()]) if (!keep.has(id)) removeApproval(id);
  for (const p of pending) approvalCard(p);
}

// -- connection ---------------------------------------------------------------------------------

function onState(state, detail) {
  ui.conn.dataset.state = state;
  ui.conn.textContent = detail === "unauthorized" ? "sign-in needed" : state;
  document.body.dataset.conn = state;
}

async function onOnline(frame) {
  performance.mark("lemon:online");
  ui.login.hidden = true;
  ui.composer.hidden = false;
  try { await client.send("events.subscribe", { sessionKeys: [sessionKey] }); } catch { /* older server: all events */ }
  watchMcp();
  // The session's model is read again on every connect (another client may have changed it).
  (async () => { if (!frame.reconnect) await loadModels(); await showSessionModel(); })();
  refreshSessions();
  reload();
}

// The MCP servers' state (the sidebar's "MCP servers"): subscribed to the "mcp" topic first (so
// no change is missed), then read from mcp.status; each mcp.server event updates its row. Both
// take the admin scope: a connection without it shows no MCP section.
const mcp = { rows: new Map(), fresh: new Set() };
// mcp.status says "ready" where the events say "connected"; the labels people read.
const MCP_STATUS_STATES = { ready: "connected" };
const MCP_STATE_LABELS = { stopped: "not started", needs_login: "needs login" };

async function watchMcp() {
  if (!client.supports("mcp.status")) { ui.mcp.hidden = true; return; }
  mcp.fresh = new Set(); // servers an event told of during this read: newer than its answer
  try {
    await client.send("events.subscribe", { topics: ["mcp"] });
    const status = await client.send("mcp.status", {});
    for (const s of status.servers || []) {
      if (mcp.fresh.has(s.name)) continue;
      mcpServerRow({
        name: s.name, state: MCP_STATUS_STATES[s.state] || s.state, tools: s.tools,
        detail: s.detail, error: s.needs_login ? "needs a login" : s.last_error,
      });
    }
  } catch { ui.mcp.hidden = true; }
}

function mcpServerRow(p) {
  if (typeof p.name !== "string" || !p.name) return;
  let row = mcp.rows.get(p.name);
  if (!row) {
    const li = el("li", "mcp-server");
    const name = el("span", "mcp-name", p.name);
    const state = el("span", "mcp-state");
    const facts = el("span", "mcp-facts");
    li.append(name, state, facts);
    row = { li, state, facts };
    mcp.rows.set(p.name, row);
    const after = [...mcp.rows.keys()].sort().indexOf(p.name);
    const next = [...ui.mcpServers.children][after];
    ui.mcpServers.insertBefore(li, next || null);
  }
  const state = typeof p.state === "string" ? p.state : "unknown";
  row.li.dataset.state = state;
  row.state.textContent = MCP_STATE_LABELS[state] || state;
  const facts = [];
  if (typeof p.tools === "number" && p.state === "connected") facts.push(`${p.tools} tool${p.tools === 1 ? "" : "s"}`);
  if (typeof p.detail === "string" && p.detail) facts.push(p.detail);
  row.facts.textContent = facts.join(" · ");
  row.li.title = typeof p.error === "string" && p.error ? p.error : "";
  ui.mcp.hidden = false;
}

// The model picker shows the session's model (session.detail: its own, else the daemon's
// default) and changing it sets the session's model with sessions.patch (the admin scope; a
// loopback connection has every scope, a token's connection what its token grants). Runs of the
// session then use it. A refused change is shown and the picker goes back to what the session
// has; the picker never claims a model the daemon did not confirm.
const picker = { models: false, current: null, pending: 0 };

async function loadModels() {
  if (!client.supports("models.list")) { ui.model.hidden = true; return; }
  try {
    const { models } = await client.send("models.list", {});
    ui.model.hidden = !models.length;
    // Grouped by provider (names alone can be ambiguous: "alpha"); each option's title is its ref.
    const groups = new Map();
    for (const m of models) {
      const provider = m.provider || m.id.split(":")[0];
      if (!groups.has(provider)) groups.set(provider, el("optgroup"));
      groups.get(provider).label = provider;
      groups.get(provider).append(modelOption(m.id, m.name || m.id));
    }
    ui.model.replaceChildren(...groups.values());
    picker.models = models.length > 0;
  } catch { ui.model.hidden = true; }
}

function modelOption(ref, name) {
  const option = el("option", "", name);
  option.value = ref;
  option.title = ref;
  return option;
}

function canPatchModel() {
  const scopes = client.hello && client.hello.auth && client.hello.auth.scopes;
  return client.supports("sessions.patch") && (!Array.isArray(scopes) || scopes.includes("admin"));
}

function showModel(ref) {
  picker.current = ref;
  if (!ref) return;
  if (![...ui.model.options].some((o) => o.value === ref)) ui.model.append(modelOption(ref, ref));
  ui.model.value = ref;
}

async function showSessionModel() {
  if (!picker.models) return;
  const patchable = canPatchModel();
  ui.model.disabled = !patchable;
  ui.model.title = patchable ? "The model of this session" : "Changing the model needs the admin scope, which this connection does not have";
  if (!client.supports("session.detail")) return;
  const key = sessionKey;
  const pending = picker.pending;
  try {
    const { session } = await client.send("session.detail", { sessionKey: key });
    if (key !== sessionKey || pending !== picker.pending) return; // a newer read or change wins
    const ref = session.modelOverride || (session.provider && session.model ? `${session.provider}:${session.model}` : null);
    showModel(ref);
  } catch { /* the picker keeps what it shows; the next connect reads it again */ }
}

async function changeModel() {
  const key = sessionKey;
  const wanted = ui.model.value;
  const before = picker.current;
  picker.pending += 1;
  hideModelError();
  ui.model.disabled = true;
  try {
    const { session } = await client.send("sessions.patch", { sessionKey: key, model: wanted });
    if (key === sessionKey) {
      showModel(session.model || wanted);
      announce(`Model for this session: ${ui.model.selectedOptions[0].textContent}`);
    }
  } catch (error) {
    if (key === sessionKey) {
      showModel(before);
      if (!before) ui.model.selectedIndex = -1;
      showModelError(`Could not switch the model to ${wanted}: ${error.message}`);
    }
  } finally {
    ui.model.disabled = !canPatchModel();
  }
}

function showModelError(text) {
  ui.modelError.textContent = text;
  ui.modelError.hidden = false;
}

function hideModelError() {
  ui.modelError.hidden = true;
  ui.modelError.textContent = "";
}

async function refreshSessions() {
  if (!client || client.state !== "online") return;
  try {
    const { sessions } = await client.send("sessions.list", { limit: 100 });
    const rows = underParents(sessions.some((s) => s.sessionKey === sessionKey) ? sessions : [{ sessionKey, lastAnswerPreview: null }, ...sessions]);
    ui.sessions.replaceChildren(...rows.map((s) => {
      const li = el("li");
      const a = el("a", "session");
      a.href = chatPath(s.sessionKey);
      a.dataset.key = s.sessionKey;
      const [base, , child] = s.sessionKey.split(/(:sub:)/);
      const name = child ? `↳ ${child.replace(/^task_/, "task ").slice(0, 11)}` : base.startsWith(TAB_PREFIX) ? "tab " + base.slice(TAB_PREFIX.length, TAB_PREFIX.length + 6) : base;
      if (child) a.classList.add("child-session");
      a.append(el("span", "session-name", name), el("span", "session-preview", (s.lastAnswerPreview || "").slice(0, 80)));
      if (s.active) a.classList.add("active-run");
      if (s.sessionKey === sessionKey) a.setAttribute("aria-current", "page");
      a.addEventListener("click", (event) => {
        if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
        event.preventDefault();
        switchSession(s.sessionKey, true);
      });
      li.append(a);
      return li;
    }));
  } catch { /* shown on the next refresh */ }
}

// A child task's session (`<parent>:sub:<task id>`) is listed right under its parent's.
function underParents(rows) {
  const children = new Map();
  const top = [];
  for (const s of rows) {
    const at = s.sessionKey.indexOf(":sub:");
    const parent = at > 0 ? s.sessionKey.slice(0, at) : null;
    if (parent && rows.some((r) => r.sessionKey === parent)) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(s);
    } else {
      top.push(s);
    }
  }
  return top.flatMap((s) => [s, ...(children.get(s.sessionKey) || [])]);
}

async function switchSession(key, push) {
  sessionKey = key;
  delete document.body.dataset.ready;
  rememberKey(push);
  closeSidebar();
  page.totalCost = 0;
  page.totalTokens = 0;
  tasks.clear();
  ui.usage.textContent = "";
  hideModelError();
  showSessionModel();
  try { await client.send("events.subscribe", { sessionKeys: [sessionKey] }); } catch { /* reconnect subscribes */ }
  refreshSessions();
  reload();
  ui.input.focus();
}

// -- composer -----------------------------------------------------------------------------------

async function sendMessage() {
  const text = ui.input.value;
  if (!text.trim()) return;
  if (client.state !== "online") { announce("Not connected: the message was not sent."); return; }
  const params = { sessionKey, prompt: text, queueMode: page.busyRun ? ui.mode.value : "collect" };
  ui.input.value = "";
  const item = userItem(text);
  const note = page.busyRun ? el("div", "queued-note", ui.mode.selectedOptions[0].textContent.toLowerCase()) : null;
  if (note) item.append(note);
  if (ui.title.textContent === "New chat") ui.title.textContent = text.slice(0, 80);
  try {
    const sent = await client.send("chat.send", params);
    page.answered += 1;
    page.ownRuns.add(sent.runId);
    // The note says what waits; it goes once the message ran: its run started (queued), or
    // the run it joined ended (a steer).
    if (note && sent.runId) {
      if (page.tombstones.has(sent.runId)) note.remove();
      else page.notes.set(sent.runId, [...(page.notes.get(sent.runId) || []), note]);
    }
    // Shown again if this tab reloads while the run is active and its prompt is not in the
    // transcript yet (it is written once the run starts). Display only: never re-sent from here.
    sessionStorage.setItem("lemon.lastSent", JSON.stringify({ runId: sent.runId, key: sessionKey, prompt: text }));
    if (!page.busyRun && sent.runId && !page.tombstones.has(sent.runId)) setBusy(sent.runId);
  } catch (error) {
    item.classList.add("failed");
    item.append(el("div", "error", `Not sent: ${error.message}`));
    ui.input.value = text; // nothing is lost
  }
}

function installComposer() {
  ui.composer.addEventListener("submit", (event) => { event.preventDefault(); sendMessage(); });
  ui.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); sendMessage(); }
    if (event.key === "Escape" && page.busyRun) { event.preventDefault(); stopRun(); }
  });
  ui.stop.addEventListener("click", stopRun);
  ui.model.addEventListener("change", changeModel);
  ui.newChat.addEventListener("click", () => switchSession(newTabKey(), true));
  ui.toggle.addEventListener("click", () => {
    const open = !document.body.classList.contains("sidebar-open");
    document.body.classList.toggle("sidebar-open", open);
    ui.toggle.setAttribute("aria-expanded", String(open));
    if (open) (ui.sessions.querySelector("a") || ui.newChat).focus();
  });
  window.addEventListener("popstate", () => {
    const key = keyFromPath();
    if (key && key !== sessionKey) switchSession(key, false);
  });
  ui.loginForm.addEventListener("submit", login);
  document.addEventListener("keydown", (event) => {
    // Alt+A (by key position, so any layout): focus the waiting approval card.
    if (event.altKey && !event.ctrlKey && !event.metaKey && event.code === "KeyA") {
      if (focusApproval()) event.preventDefault();
      return;
    }
    if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) {
      closeSidebar();
      ui.toggle.focus();
    }
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") client.suspend();
    else client.resume();
  });
}

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  ui.toggle.setAttribute("aria-expanded", "false");
}

async function stopRun() {
  try {
    await client.send("chat.abort", page.busyRun ? { runId: page.busyRun, sessionKey } : { sessionKey });
  } catch (error) {
    announce(`Could not stop: ${error.message}`);
  }
}

// -- login (a bind that needs a token) ----------------------------------------------------------

function showLogin() {
  ui.login.hidden = false;
  ui.composer.hidden = true;
  ui.loginToken.focus();
}

async function login(event) {
  event.preventDefault();
  ui.loginError.textContent = "";
  const response = await fetch("/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token: ui.loginToken.value }),
    credentials: "same-origin",
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    ui.loginError.textContent = body.error || `sign-in failed (${response.status})`;
    return;
  }
  ui.loginToken.value = "";
  ui.login.hidden = true;
  ui.composer.hidden = false;
  startClient();
}

// -- start --------------------------------------------------------------------------------------

let client = null;
// The last word on each child question heard (`task.question`), by question id.
const questions = new BoundedMap(PAGE_CACHE_ITEMS);

// A task card goes under its parent run when that is shown, else at the end of the transcript.
const tasks = new TaskCards({
  send: (method, params) => client.send(method, params),
  chatPath,
  place: (task, card) => {
    const run = task.parentRunId && page.runs.get(task.parentRunId);
    if (run && run.item.isConnected) {
      const approval = run.body.querySelector(".approval, .question");
      if (approval) run.body.insertBefore(card, approval);
      else run.body.append(card);
    } else {
      addItem(card);
    }
  },
});

function startClient() {
  if (client) {
    // The old client's late close must not reach the page the new one now drives.
    client.onEvent = () => {};
    client.onState = () => {};
    client.stop();
  }
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  client = new ControlPlaneClient({
    url: `${scheme}//${window.location.host}/ws`,
    clientId: `lemon-web@${window.location.host}`,
    onEvent,
    onState,
  });
  if (document.visibilityState === "hidden") client.suspend();
  client.start();
}

performance.mark("lemon:script");
rememberKey(false);
installComposer();
startClient();
ui.input.focus();

// For the browser tests and the bench: the pane's bounds and counters (no secrets here).
window.lemon = {
  bounds: { PANE_QUEUE_ENTRIES, MAX_EVENT_BYTES, LIVE_SEGMENT_BYTES, PAGE_CACHE_ITEMS, TERMINAL_TOMBSTONES },
  get sessionKey() { return sessionKey; },
  suspend: () => client.suspend(),
  // Hand a frame to the page as if the socket had delivered it (the bounds tests use it).
  inject: (frame) => onEvent(frame),
  // Close the socket as a lost network would (the client reconnects on its own).
  drop: () => client.ws && client.ws.close(4000, "dropped"),
  resume: () => client.resume(),
  statistics: () => ({
    ...client.statistics(),
    busyRun: page.busyRun,
    runs: page.runs.size,
    tools: page.tools.size,
    approvals: page.approvals.size,
    tasks: tasks.size,
    tombstones: page.tombstones.size,
    items: ui.transcript.children.length,
    loading: page.loading,
    answered: page.answered,
  }),
};
