// Subagent tasks on the page (issue 29): a card per child of this session's runs, and a child's
// question to the person as its own prompt.
//
// Task cards: the wire events the control plane sends for the parent's session (task.started /
// .completed / .error / .timeout / .aborted, task.progress after each of the child's model and
// tool calls, run.graph.changed) update one card per task id, placed under its parent run:
// status, turns, tokens, dollars, the last action, then the answer's preview or the reason it
// stopped. A card expands to the child's transcript (chat.history of the child's session, read
// when opened) and links to it. After a reload the cards come back from the snapshot's tasks
// (the active run's) and tasks.list (every task of the session not yet ended, a detached one
// outliving its run too).
//
// Parent questions: a child's ask_parent reaches the person as an approval of the parent's run
// (tool "ask_parent", the question in its action). The page shows it as a question instead: the
// question, its options as buttons, or a free-text answer, sent with tasks.answer (the first
// answer wins; the approval then ends and the card goes).
//
// Everything a child wrote (its description, answer, last action, question, transcript) is
// untrusted: it is set as textContent, never parsed as HTML.

import { BoundedMap, PAGE_CACHE_ITEMS, clipUtf8 } from "./bounds.js";

export const TASK_ENDED = new Set(["completed", "failed", "timeout", "cancelled", "unknown"]);
const EVENT_STATUS = {
  "task.started": "running",
  "task.completed": "completed",
  "task.error": "failed",
  "task.timeout": "timeout",
  "task.aborted": "cancelled",
};
const STATUS_WORDS = { timeout: "timed out", waiting_for_parent: "waiting for you" };
const PREVIEW_BYTES = 2000;
const TRANSCRIPT_MESSAGES = 50;
const TRANSCRIPT_ENTRY_BYTES = 4000;
const ANSWER_BYTES = 4000;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

const str = (v) => (typeof v === "string" ? v : "");
const int = (v) => (Number.isInteger(v) ? v : null);
const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);

export function isTaskEvent(name) {
  return name in EVENT_STATUS || name === "task.progress" || name === "run.graph.changed";
}

/** One task as this page last heard of it. */
function newTask(id) {
  return {
    id, parentRunId: "", sessionKey: "", agent: "", description: "", status: "queued",
    durationMs: null, preview: "", error: "", turns: null, tokens: null, costUsd: null,
    budgetUsd: null, lastAction: "", card: null,
  };
}

function setStatus(task, status) {
  // An ended task stays ended (a late "running" changes nothing).
  if (status && (!TASK_ENDED.has(task.status) || TASK_ENDED.has(status))) task.status = status;
}

export class TaskCards {
  /**
   * `send(method, params)`: a control-plane request; `place(task, el)`: put a new card in the
   * transcript (under its parent run when it is shown); `chatPath(key)`: a session's page.
   */
  constructor({ send, place, chatPath }) {
    this.send = send;
    this.place = place;
    this.chatPath = chatPath;
    this.tasks = new BoundedMap(PAGE_CACHE_ITEMS);
  }

  clear() { this.tasks = new BoundedMap(PAGE_CACHE_ITEMS); }

  get size() { return this.tasks.size; }

  /** A task wire event of this session's child: its card, updated (created when new). */
  onEvent(name, p) {
    const id = str(p.taskId);
    if (!id) return null;
    const task = this.tasks.get(id) || newTask(id);
    this.tasks.set(id, task);
    task.parentRunId = str(p.parentRunId) || task.parentRunId;
    task.sessionKey = str(p.sessionKey) || task.sessionKey;
    task.agent = str(p.agentId) || task.agent;
    task.description = str(p.description) || task.description;
    if (int(p.turns) !== null) task.turns = p.turns;
    if (int(p.tokens) !== null) task.tokens = p.tokens;
    if (num(p.costUsd) !== null) task.costUsd = p.costUsd;
    if (num(p.budgetUsd) !== null) task.budgetUsd = p.budgetUsd;
    if (name === "run.graph.changed" || name === "task.progress") {
      setStatus(task, str(p.status));
      if (str(p.lastAction)) task.lastAction = clipUtf8(p.lastAction, 400);
    } else {
      setStatus(task, EVENT_STATUS[name]);
      const duration = name === "task.timeout" ? int(p.timeoutMs) : int(p.durationMs);
      if (duration !== null) task.durationMs = duration;
      if (str(p.resultPreview)) task.preview = clipUtf8(p.resultPreview, PREVIEW_BYTES);
      const error = str(p.error) || str(p.reason);
      if (error) task.error = clipUtf8(error, PREVIEW_BYTES);
    }
    this.show(task);
    return task;
  }

  /**
   * A run-graph row: the snapshot's (camelCase) or tasks.list's (a TaskNode: snake_case).
   * It fills what the page does not know; a status an event already told is only replaced by
   * an ended one (the row may be older than the event).
   */
  fromRow(row) {
    const id = str(row.taskId) || str(row.task_id);
    if (!id) return null;
    const known = this.tasks.get(id);
    const task = known || newTask(id);
    this.tasks.set(id, task);
    task.parentRunId = str(row.parentRunId) || str(row.parent_run_id) || task.parentRunId;
    task.sessionKey = str(row.sessionKey) || str(row.session_key) || task.sessionKey;
    task.agent = str(row.agent) || task.agent;
    task.description = str(row.description) || task.description;
    const status = str(row.status);
    if (!known || TASK_ENDED.has(status)) setStatus(task, status);
    if (int(row.tokens) !== null && row.tokens > 0) task.tokens = row.tokens;
    const usage = row.usage && typeof row.usage === "object" ? row.usage : null;
    if (usage) {
      if (int(usage.turns)) task.turns = usage.turns;
      const tokens = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]
        .reduce((sum, k) => sum + (int(usage[k]) || 0), 0);
      if (tokens) task.tokens = tokens;
      if (num(usage.cost_usd)) task.costUsd = usage.cost_usd;
    }
    const started = int(row.started_at_ms);
    const finished = int(row.finished_at_ms);
    if (started !== null && finished !== null) task.durationMs = finished - started;
    if (str(row.answer)) task.preview = clipUtf8(row.answer, PREVIEW_BYTES);
    const error = str(row.error) || str(row.reason);
    if (error && task.status !== "completed") task.error = clipUtf8(error, PREVIEW_BYTES);
    this.show(task);
    return task;
  }

  /** After the transcript was replaced: the cards of the tasks whose run is shown, or that
   * have not ended, back in place. */
  reattach(isShown) {
    for (const task of this.tasks.values()) {
      if (task.card && task.card.el.isConnected) continue;
      if (isShown(task.parentRunId) || !TASK_ENDED.has(task.status)) this.show(task);
    }
  }

  show(task) {
    if (!task.card) task.card = this.build(task);
    render(task);
    if (!task.card.el.isConnected) this.place(task, task.card.el);
  }

  build(task) {
    const details = el("details", "task-card");
    details.dataset.taskId = task.id;
    const summary = el("summary");
    const dot = el("span", "task-dot");
    const head = el("span", "task-head");
    const what = el("span", "task-what");
    const agent = el("span", "task-agent");
    const state = el("span", "task-state");
    head.append(what, agent, state);
    const facts = el("span", "task-facts");
    const last = el("span", "task-last");
    const result = el("span", "task-result");
    const lines = el("span", "task-lines");
    lines.append(head, facts, last, result);
    summary.append(dot, lines);
    const body = el("div", "task-body");
    const open = el("a", "task-open", "Open the child's session");
    const transcript = el("div", "task-transcript");
    body.append(open, transcript);
    details.append(summary, body);
    details.addEventListener("toggle", () => { if (details.open) this.loadTranscript(task); });
    return { el: details, dot, what, agent, state, facts, last, result, open, transcript };
  }

  async loadTranscript(task) {
    const box = task.card.transcript;
    if (!task.sessionKey) { box.replaceChildren(el("p", "task-note", "The child's session is not known yet.")); return; }
    box.replaceChildren(el("p", "task-note", "Reading the child's transcript…"));
    try {
      const page = await this.send("chat.history", { sessionKey: task.sessionKey, limit: TRANSCRIPT_MESSAGES });
      const items = (page.messages || []).map((m) => {
        const row = el("div", `task-entry role-${str(m.role)}`);
        const who = m.role === "user" ? "task" : m.role === "tool" ? str(m.tool) || "tool" : "child";
        row.append(el("span", "task-entry-who", who), el("span", "task-entry-text", clipUtf8(str(m.content), TRANSCRIPT_ENTRY_BYTES)));
        return row;
      });
      box.replaceChildren(...(items.length ? items : [el("p", "task-note", "Nothing in the child's transcript yet.")]));
    } catch (error) {
      box.replaceChildren(el("p", "task-note", `Could not read the child's transcript: ${error.message}`));
    }
  }
}

function statusWords(task) {
  let words = STATUS_WORDS[task.status] || task.status;
  if (task.durationMs !== null && TASK_ENDED.has(task.status)) words += ` in ${(task.durationMs / 1000).toFixed(1)} s`;
  return words;
}

function render(task) {
  const c = task.card;
  const ended = TASK_ENDED.has(task.status);
  c.el.dataset.status = task.status;
  c.what.textContent = task.description || task.id;
  c.what.title = task.id;
  c.agent.textContent = task.agent;
  c.agent.hidden = !task.agent;
  c.state.textContent = statusWords(task);
  c.dot.setAttribute("aria-label", statusWords(task));
  const facts = [];
  if (task.turns !== null) facts.push(`${task.turns} turn${task.turns === 1 ? "" : "s"}`);
  if (task.tokens !== null) facts.push(`${task.tokens.toLocaleString("en-US")} tokens`);
  if (task.costUsd) facts.push(`$${task.costUsd.toFixed(4)}`);
  if (task.budgetUsd !== null) facts.push(`budget $${task.budgetUsd.toFixed(2)}`);
  c.facts.textContent = facts.join(" · ");
  c.facts.hidden = !facts.length;
  c.last.textContent = task.lastAction && !ended ? `last: ${task.lastAction}` : "";
  c.last.hidden = !c.last.textContent;
  const failed = ended && task.status !== "completed";
  c.result.textContent = failed ? task.error : task.status === "completed" ? task.preview : "";
  c.result.classList.toggle("bad", failed);
  c.result.hidden = !c.result.textContent;
  if (task.sessionKey) c.open.href = new URL(taskPath(task.sessionKey), window.location.href).pathname;
  c.open.hidden = !task.sessionKey;
}

function taskPath(key) { return "/chat/" + encodeURIComponent(key); }

/** Whether an approval payload is a child's question to the person (ask_parent). */
export function isQuestion(payload) {
  return payload.tool === "ask_parent" && payload.action && typeof payload.action.question_id === "string";
}

/**
 * The card of a child's question (from its ask_parent approval): the question as text, its
 * options as buttons or a free-text answer; `answer(questionId, text)` sends it and rejects
 * with the daemon's error.
 */
export function questionCard(payload, { describe, answer }) {
  const action = payload.action;
  const questionId = action.question_id;
  const card = el("div", "question");
  card.dataset.approvalId = payload.approvalId || payload.id;
  card.dataset.questionId = questionId;
  card.setAttribute("role", "group");
  card.tabIndex = 0;
  const titleId = `question-${questionId}`;
  card.setAttribute("aria-labelledby", titleId);
  const title = el("p", "question-title");
  title.id = titleId;
  title.append(el("strong", "", `${describe(str(action.task_id))} asks you:`));
  const text = el("p", "question-text", clipUtf8(str(action.question), 4000));
  card.append(title, text);
  const error = el("p", "question-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  const options = Array.isArray(action.options) ? action.options.filter((o) => typeof o === "string") : [];
  let controls = [];
  const sendAnswer = async (value) => {
    if (!value.trim()) { showError("Write an answer first."); return; }
    for (const c of controls) c.disabled = true;
    error.hidden = true;
    card.dataset.answer = value;
    try {
      await answer(questionId, value);
    } catch (e) {
      for (const c of controls) c.disabled = false;
      delete card.dataset.answer;
      showError(`Not answered: ${e.message}`);
    }
  };
  const showError = (message) => { error.textContent = message; error.hidden = false; };
  if (options.length) {
    const row = el("div", "decisions");
    for (const option of options) {
      const button = el("button", "", option);
      button.type = "button";
      button.dataset.option = option;
      button.addEventListener("click", () => sendAnswer(option));
      row.append(button);
    }
    controls = [...row.children];
    card.append(row);
  } else {
    const form = el("form", "question-form");
    const box = el("textarea", "question-input");
    box.rows = 2;
    box.maxLength = ANSWER_BYTES;
    box.setAttribute("aria-label", "Your answer to the child's question");
    box.placeholder = "Your answer (Enter sends, Shift+Enter a new line)";
    const submit = el("button", "primary", "Answer");
    submit.type = "submit";
    form.append(box, submit);
    form.addEventListener("submit", (event) => { event.preventDefault(); sendAnswer(box.value); });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); sendAnswer(box.value); }
    });
    controls = [box, submit];
    card.append(form);
  }
  const deadline = int(payload.expiresAtMs) ?? int(payload.expires_at_ms);
  const hint = deadline
    ? `The child waits until ${new Date(deadline).toLocaleTimeString()}; unanswered, it goes on without an answer.`
    : "Unanswered by its deadline, the child goes on without an answer.";
  card.append(error, el("p", "approval-hint", hint));
  card.focusTarget = () => (options.length ? card.querySelector("button") : card.querySelector("textarea")) || card;
  return card;
}

/** The note a question card leaves once it ended: what became of it, when the daemon said
 * (`task.question`, which may come before or after the approval's end), else what this page
 * knows. */
export function questionNote(card, decision, final = null) {
  const mine = card.dataset.answer;
  if (final && final.status === "answered") {
    const answer = clipUtf8(str(final.answer), 200);
    if (mine && mine === final.answer) return `✓ answered: ${answer}`;
    return final.answeredBy === "parent" ? `the parent agent answered: ${answer}` : `answered elsewhere: ${answer}`;
  }
  if (final && final.status === "timeout") return "unanswered in time: the child went on without an answer";
  if (final && final.status === "cancelled") return "the question was withdrawn (the child stopped)";
  if (mine) return `✓ answered: ${clipUtf8(mine, 200)}`;
  return decision === "expired" || decision === "timeout" ? "the question went unanswered" : "the question was answered or ended elsewhere";
}
