// The pane's bounds (seed 003, "Bus -> browser chat pane"). The server serves the same numbers
// (lemon_web.PANE_QUEUE_ENTRIES, ...); a browser test compares them.
export const PANE_QUEUE_ENTRIES = 256;
export const MAX_EVENT_BYTES = 65536;
export const LIVE_SEGMENT_BYTES = 65536;
export const PAGE_CACHE_ITEMS = 400;
export const TERMINAL_TOMBSTONES = 128;

const encoder = new TextEncoder();

/** Whether `text` is longer than `limit` UTF-8 bytes (encodes only when it must). */
export function overBytes(text, limit) {
  if (text.length > limit) return true;
  if (text.length * 3 <= limit) return false;
  return encoder.encode(text).length > limit;
}

/** The longest prefix of `text` that fits `limit` UTF-8 bytes (never splits a code point). */
export function clipUtf8(text, limit) {
  if (text.length * 3 <= limit) return text;
  const bytes = encoder.encode(text);
  if (bytes.length <= limit) return text;
  let end = limit;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end -= 1; // back to a code point start
  return new TextDecoder().decode(bytes.subarray(0, end));
}

/** A Map that keeps at most `limit` entries; the oldest inserted (or touched) goes first. */
export class BoundedMap {
  constructor(limit, onEvict = null) {
    this.limit = limit;
    this.map = new Map();
    this.onEvict = onEvict;
    this.evicted = 0;
  }
  get size() { return this.map.size; }
  has(key) { return this.map.has(key); }
  get(key) { return this.map.get(key); }
  set(key, value) {
    if (this.map.has(key)) this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.limit) {
      const [oldKey, oldValue] = this.map.entries().next().value;
      this.map.delete(oldKey);
      this.evicted += 1;
      if (this.onEvict) this.onEvict(oldKey, oldValue);
    }
    return this;
  }
  delete(key) { return this.map.delete(key); }
  clear() { this.map.clear(); }
  values() { return this.map.values(); }
  keys() { return this.map.keys(); }
}

/** The run ids of the last `limit` finished runs: late events of those runs are ignored. */
export class Tombstones {
  constructor(limit = TERMINAL_TOMBSTONES) {
    this.limit = limit;
    this.set = new Set();
  }
  add(runId) {
    if (!runId) return;
    this.set.delete(runId);
    this.set.add(runId);
    while (this.set.size > this.limit) this.set.delete(this.set.values().next().value);
  }
  has(runId) { return this.set.has(runId); }
  get size() { return this.set.size; }
}

/**
 * The pane's inbound queue while it is suspended (hidden tab, or paused): at most
 * PANE_QUEUE_ENTRIES event frames and one overflow marker. Overflowing drops what waits (the
 * snapshot read on resume recovers it) and leaves the one marker; a frame above
 * MAX_EVENT_BYTES is never kept: it counts as an overflow too.
 */
export class PaneQueue {
  constructor(limit = PANE_QUEUE_ENTRIES) {
    this.limit = limit;
    this.items = [];
    this.marker = false; // whether items[0] is the overflow marker
    this.dropped = 0;
    this.overflows = 0;
  }
  push(frame, bytes) {
    if (bytes > MAX_EVENT_BYTES) { this.overflow(1); return; }
    const events = this.items.length - (this.marker ? 1 : 0);
    if (events >= this.limit) { this.overflow(1); return; }
    this.items.push(frame);
  }
  overflow(extra) {
    this.dropped += this.items.length - (this.marker ? 1 : 0) + extra;
    this.overflows += 1;
    this.items = [OVERFLOW];
    this.marker = true;
  }
  drain() {
    const items = this.items;
    this.items = [];
    this.marker = false;
    return items;
  }
  get length() { return this.items.length; }
}

export const OVERFLOW = Object.freeze({ type: "overflow" });
