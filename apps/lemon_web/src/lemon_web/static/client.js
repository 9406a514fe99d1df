// The control-plane protocol client of the page: one WebSocket to the daemon's own /ws,
// `connect` -> `hello-ok`, requests answered by `res` frames, events handed to one listener.
//
// Connection states (the reference's four): connecting, online, offline, reconnecting. A lost
// socket reconnects with a capped backoff; every (re)connect is a new handshake, and the
// listener hears `{type: "online", reconnect}` so it can recover from a snapshot.
//
// While the pane is suspended (hidden tab, or `suspend()`), event frames wait in one bounded
// queue (bounds.js PaneQueue: 256 entries, one overflow marker); responses are never queued
// (their number is bounded by the requests in flight). A frame above 65,536 bytes is never
// handed on: it counts as an overflow, and the listener recovers from a snapshot.

import { MAX_EVENT_BYTES, OVERFLOW, PaneQueue, overBytes } from "./bounds.js";

const REQUEST_TIMEOUT_MS = 30000;
const MAX_BACKOFF_MS = 5000;

export class ProtocolError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

export class ControlPlaneClient {
  constructor({ url, clientId, onEvent, onState }) {
    this.url = url;
    this.clientId = clientId;
    this.onEvent = onEvent;
    this.onState = onState;
    this.state = "offline";
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.hello = null;
    this.connectedOnce = false;
    this.backoff = 250;
    this.stopped = false;
    this.suspended = false;
    this.queue = new PaneQueue();
    this.received = 0;
    this.oversized = 0;
    this.lastSeq = 0;
  }

  setState(state, detail = null) {
    this.state = state;
    if (this.onState) this.onState(state, detail);
  }

  start() {
    this.stopped = false;
    this.open();
  }

  stop() {
    this.stopped = true;
    if (this.ws) this.ws.close(1000, "bye");
  }

  open() {
    this.setState(this.connectedOnce ? "reconnecting" : "connecting");
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => this.handshake(ws);
    ws.onmessage = (message) => this.receive(message.data);
    ws.onclose = (event) => this.closed(ws, event);
  }

  async handshake(ws) {
    try {
      const hello = await this.send("connect", {
        role: "operator",
        client: { id: this.clientId, mode: "webchat" },
        maxEventBytes: MAX_EVENT_BYTES,
      });
      if (ws !== this.ws) return;
      this.hello = hello;
      this.backoff = 250;
      const reconnect = this.connectedOnce;
      this.connectedOnce = true;
      this.lastSeq = 0;
      this.setState("online");
      this.onEvent({ type: "online", reconnect, hello });
    } catch (error) {
      if (error.code === "UNAUTHORIZED") {
        this.stopped = true; // no retry loop with a bad credential
        this.setState("offline", "unauthorized");
        this.onEvent({ type: "unauthorized" });
      }
    }
  }

  closed(ws, event) {
    if (ws !== this.ws) return;
    for (const [, waiter] of this.pending) waiter.reject(new ProtocolError("UNAVAILABLE", "the connection closed"));
    this.pending.clear();
    if (event.code === 4001) {
      this.stopped = true;
      this.setState("offline", "unauthorized");
      this.onEvent({ type: "unauthorized" });
      return;
    }
    if (this.stopped) { this.setState("offline"); return; }
    this.setState("offline");
    const delay = this.backoff;
    this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
    setTimeout(() => { if (!this.stopped) this.open(); }, delay);
  }

  /** Send a request frame; resolves with the payload of its `res` (or the hello-ok). */
  send(method, params = {}) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new ProtocolError("UNAVAILABLE", "not connected"));
    }
    const id = `w${this.nextId++}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new ProtocolError("TIMEOUT", `${method} timed out`));
      }, REQUEST_TIMEOUT_MS);
      this.pending.set(id, {
        method,
        resolve: (value) => { clearTimeout(timer); resolve(value); },
        reject: (error) => { clearTimeout(timer); reject(error); },
      });
      ws.send(JSON.stringify({ type: "req", id, method, params }));
    });
  }

  /** A method the server advertised in hello-ok (the capability gate). */
  supports(method) {
    return Boolean(this.hello && this.hello.features && this.hello.features.methods.includes(method));
  }

  receive(data) {
    this.received += 1;
    if (typeof data !== "string") return;
    // An event above the pane's bound is never rendered (and, as this server writes events,
    // never even parsed): the listener recovers from a snapshot instead. Responses of any size
    // are answers to this page's own requests (a long history page) and are always read.
    const big = overBytes(data, MAX_EVENT_BYTES);
    if (big && data.startsWith('{"type":"event"')) {
      this.oversized += 1;
      this.event(OVERFLOW, data.length);
      return;
    }
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.type === "hello-ok" || frame.type === "res") {
      this.answer(frame);
      return;
    }
    if (frame.type !== "event") return;
    if (big) {
      this.oversized += 1;
      this.event(OVERFLOW, data.length);
      return;
    }
    this.event(frame, data.length);
  }

  answer(frame) {
    const id = frame.type === "hello-ok" ? this.connectId() : frame.id;
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    if (frame.type === "hello-ok") waiter.resolve(frame);
    else if (frame.ok) waiter.resolve(frame.payload);
    else waiter.reject(new ProtocolError(frame.error?.code || "ERROR", frame.error?.message || "request failed"));
  }

  connectId() {
    for (const [id, waiter] of this.pending) if (waiter.method === "connect") return id;
    return null;
  }

  event(frame, bytes) {
    if (frame !== OVERFLOW && typeof frame.seq === "number") {
      // The connection's seq has no gaps unless the server dropped events for us (it then
      // also sends stream.resync); a gap seen here recovers all the same.
      if (this.lastSeq && frame.seq !== this.lastSeq + 1) {
        this.lastSeq = frame.seq;
        this.deliver(OVERFLOW, 0);
      }
      this.lastSeq = frame.seq;
    }
    this.deliver(frame, bytes);
  }

  deliver(frame, bytes) {
    if (this.suspended) {
      if (frame.event === "tick" || frame.event === "health") return; // liveness only
      if (frame === OVERFLOW) this.queue.overflow(0);
      else this.queue.push(frame, bytes);
      return;
    }
    this.onEvent(frame === OVERFLOW ? { type: "overflow" } : frame);
  }

  /** Stop handing events on; they wait (bounded) until resume(). */
  suspend() { this.suspended = true; }

  /** Hand on what waited (an overflow marker first, if there was one), then go live. */
  resume() {
    this.suspended = false;
    for (const frame of this.queue.drain()) this.onEvent(frame === OVERFLOW ? { type: "overflow" } : frame);
  }

  statistics() {
    return {
      state: this.state,
      suspended: this.suspended,
      queued: this.queue.length,
      queueMarker: this.queue.marker,
      dropped: this.queue.dropped,
      overflows: this.queue.overflows,
      oversized: this.oversized,
      received: this.received,
    };
  }
}
