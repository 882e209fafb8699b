// @ts-check
// Why a PENDING queue item waits (its waitingOn), in words: the reason,
// the figure that holds it, and for a reason in time when it can next go.
// A reason or a field this module does not know is still shown, as its
// name and value, so a new one appears without a change here.
import { h, untilEl } from "./dom.js";
import { when } from "./format.js";

/** @typedef {import('./types.js').QueueItem} QueueItem */

/** An ISO 8601 time, as the API writes date-time fields. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The reasons the console words itself; typed by name rather than over the
 * API's enum, so a reason added there needs no change here to be shown.
 * Each says what holds the item, and which fields it has read into words.
 * @type {Record<string, (w: Record<string, unknown>) => {text: string, used: string[]}>}
 */
const REASONS = {
  WORKSPACE_LIMIT: (w) => ({ text: `Workspace limit: ${w["running"]} of ${w["limit"]} running`, used: ["running", "limit"] }),
  KEY_LIMIT: (w) => ({ text: `Key ${w["key"]}: ${w["running"]} of ${w["limit"]} running`, used: ["key", "running", "limit"] }),
  BACK_OFF: () => ({ text: "Backing off after a failed start", used: [] }),
  NOT_BEFORE: () => ({ text: "Delayed start (notBefore)", used: [] }),
  START_RATE: () => ({ text: "Start rate", used: [] }),
  POOL_FULL: (w) => ({ text: `Pool full: ${w["running"]} of ${w["limit"]} running`, used: ["running", "limit"] }),
  FLOOR_OWNERS: (w) => ({
    text: `Waiting for floors' owners: ${w["reserved"]} free slots of the pool held for workspaces below their floor (${w["running"]} of ${w["limit"]} running)`,
    used: ["reserved", "running", "limit"],
  }),
};

/**
 * label turns a field or reason name into words: "nextAt" is "next at",
 * "WORKSPACE_LIMIT" is "workspace limit".
 * @param {string} name
 */
export function label(name) {
  return name
    .replace(/_/g, " ")
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase();
}

/**
 * figure is a field's value as text: objects (a rate, say) as their
 * fields' names and values.
 * @param {unknown} value
 * @returns {string}
 */
function figure(value) {
  if (value !== null && typeof value === "object") {
    return Object.entries(value)
      .map(([k, v]) => `${label(k)} ${figure(v)}`)
      .join(", ");
  }
  return String(value);
}

/**
 * waitingView shows what holds an item: null when nothing does.
 * @param {QueueItem["waitingOn"]} waitingOn
 */
export function waitingView(waitingOn) {
  if (!waitingOn) return null;
  /** @type {Record<string, unknown>} */
  const w = { ...waitingOn };
  const reason = String(w["reason"]);
  const words = REASONS[reason];
  const { text, used } = words ? words(w) : { text: label(reason).replace(/^./, (c) => c.toUpperCase()), used: [] };
  /** @type {import('./dom.js').Child[]} */
  const parts = [text];
  for (const [name, value] of Object.entries(w)) {
    if (name === "reason" || used.includes(name) || value === null || value === undefined) continue;
    if (typeof value === "string" && ISO_TIME.test(value)) {
      // A time: when the item can next go, and how long until then.
      parts.push(` · ${name === "until" ? "can go at" : label(name)} ${when(value)} (`, untilEl(value), ")");
    } else {
      parts.push(` · ${label(name)} ${figure(value)}`);
    }
  }
  return h("span", { class: "waiting", dataset: { reason } }, parts);
}
