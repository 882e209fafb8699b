// @ts-check
// Views and their polls. Every live view polls with setTimeout after the
// previous answer, so polls never pile up, and pauses while the tab is
// hidden; a view's polls stop when another view is shown.
import { ApiError } from "./api.js";

let generation = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let timer;

/**
 * newView stops the polls of the view shown so far; the router calls it
 * before it shows the next.
 */
export function newView() {
  generation++;
  clearTimeout(timer);
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
