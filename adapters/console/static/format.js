// @ts-check
// Text for times, durations and ids, as the pages show them.

/** @param {string | null | undefined} id */
export function shortId(id) {
  return id ? id.slice(0, 8) : "";
}

/**
 * @param {string | null | undefined} iso
 * @param {number} [now]
 */
export function ago(iso, now = Date.now()) {
  if (!iso) return "";
  const secs = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (secs < 60) return `${secs}s ago`;
  if (secs < 3600) return `${Math.floor(secs / 60)}m ${secs % 60}s ago`;
  if (secs < 86400) return `${Math.floor(secs / 3600)}h ${Math.floor((secs % 3600) / 60)}m ago`;
  return `${Math.floor(secs / 86400)}d ago`;
}

/**
 * inTime is how long until iso: "in 4s", or "now" once it has come.
 * @param {string | null | undefined} iso
 * @param {number} [now]
 */
export function inTime(iso, now = Date.now()) {
  if (!iso) return "";
  const secs = Math.round((Date.parse(iso) - now) / 1000);
  if (secs <= 0) return "now";
  if (secs < 60) return `in ${secs}s`;
  if (secs < 3600) return `in ${Math.floor(secs / 60)}m ${secs % 60}s`;
  if (secs < 86400) return `in ${Math.floor(secs / 3600)}h ${Math.floor((secs % 3600) / 60)}m`;
  return `in ${Math.floor(secs / 86400)}d`;
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60000)}m ${Math.round((ms % 60000) / 1000)}s`;
}

/**
 * span is the milliseconds from start to end, or to now while end is
 * unset; null without a start.
 * @param {string | null | undefined} startIso
 * @param {string | null | undefined} endIso
 */
export function span(startIso, endIso) {
  if (!startIso) return null;
  const end = endIso ? Date.parse(endIso) : Date.now();
  return end - Date.parse(startIso);
}

/** @param {string | null | undefined} iso */
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { hour12: false });
}

/** @param {unknown} value */
export function json(value) {
  return JSON.stringify(value, null, 2);
}

/**
 * @param {string} text
 * @param {number} n
 */
export function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}
