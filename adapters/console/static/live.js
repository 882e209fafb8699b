// @ts-check
// Views and how they stay live. A run's page and a workspace's queue and
// executions follow the API's event streams (follow): they load once, and
// load again only when an event says something changed. The overview of
// every workspace, which has no stream, polls (every) with setTimeout
// after the previous answer, so polls never pile up, and pauses while the
// tab is hidden. A view's polls and streams stop when another is shown.
import { ApiError, token } from "./api.js";

let generation = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;
/** @type {AbortController[]} */
let streams = [];

/**
 * newView stops the polls and streams of the view shown so far; the
 * router calls it before it shows the next.
 */
export function newView() {
  generation++;
  clearTimeout(timer);
  for (const c of streams) c.abort();
  streams = [];
}

/**
 * follow runs fn now, then again after events of the event stream at path
 * (under /api/v1), while the view that asked is shown and fn does not
 * return false. Events that come while fn runs make one more run, not
 * one each. The stream is read with fetch, which sends the bearer token
 * (EventSource cannot); a dropped stream is opened again after a second
 * with Last-Event-ID, so no event is missed.
 * @param {string} path
 * @param {() => Promise<boolean | void>} fn
 */
export async function follow(path, fn) {
  const gen = generation;
  const ctrl = new AbortController();
  streams.push(ctrl);
  let running = false;
  let again = false;
  let done = false;
  const refresh = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        if (!current(gen)) return;
        if ((await fn()) === false) done = true;
      } while (again && !done);
    } catch (err) {
      if (!(err instanceof ApiError)) console.error(err);
    } finally {
      running = false;
    }
    if (done) ctrl.abort();
  };
  await refresh();
  if (done || !current(gen)) return;
  void listen(path, ctrl.signal, refresh, () => current(gen) && !done);
}

/**
 * listen reads the stream at path until signal aborts, calling onEvent for
 * each event, and opens it again with Last-Event-ID while open() holds.
 * @param {string} path
 * @param {AbortSignal} signal
 * @param {() => void} onEvent
 * @param {() => boolean} open
 */
async function listen(path, signal, onEvent, open) {
  let lastId = "";
  while (open()) {
    try {
      /** @type {Record<string, string>} */
      const headers = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
      if (lastId) headers["Last-Event-ID"] = lastId;
      const res = await fetch(`/api/v1${path}`, { headers, signal, cache: "no-store" });
      if (res.ok && res.body) {
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
            const id = /^id: (\d+)$/m.exec(buf.slice(0, i));
            buf = buf.slice(i + 2);
            if (id) {
              lastId = id[1] || "";
              onEvent();
            }
          }
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** view is the token of the view now shown, for current. */
export function view() {
  return generation;
}

/**
 * current reports whether the view that captured gen is still the one
 * shown.
 * @param {number} gen
 */
export function current(gen) {
  return gen === generation;
}

/**
 * every runs fn now and then again ms after each run ends, while the view
 * that asked is still shown and fn does not return false; it waits while
 * the tab is hidden.
 * @param {number} ms
 * @param {() => Promise<boolean | void>} fn
 */
export function every(ms, fn) {
  const gen = generation;
  const tick = async () => {
    if (!current(gen)) return;
    if (!document.hidden) {
      try {
        if ((await fn()) === false) return;
      } catch (err) {
        if (!(err instanceof ApiError)) console.error(err);
      }
    }
    if (current(gen)) timer = setTimeout(tick, ms);
  };
  return tick();
}

/** reroute shows the view of the current address again. */
export function reroute() {
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

/**
 * go shows the view at hash, also when it is the one shown.
 * @param {string} hash
 */
export function go(hash) {
  if (location.hash === hash) reroute();
  else location.hash = hash;
}
