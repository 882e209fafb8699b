// @ts-check
// Calls to the JSON API under /api/v1. The bearer token lives in the tab's
// sessionStorage and is sent only in the Authorization header of
// same-origin calls, never as a cookie.
import { h } from "./dom.js";

/** @typedef {import('./types.js').Problem} Problem */

const TOKEN_KEY = "sluice.token";

/** ApiError is an answer of the API that is not a success. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {Partial<Problem> | null} problem
   */
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    /** @type {Partial<Problem>} */
    this.problem = problem || {};
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** @param {string} value */
export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** @type {() => void} */
let onRefused = () => {};

/**
 * whenRefused sets what a 401 does: sign the tab out. Set by the app, so
 * that this module needs none of the pages.
 * @param {() => void} fn
 */
export function whenRefused(fn) {
  onRefused = fn;
}

/**
 * api calls the JSON API with the tab's token and resolves to the decoded
 * body; the caller names its type from types.js. A 401 signs the tab out,
 * except for the sign-in form's own probe, which shows the refusal itself.
 * @param {"GET" | "POST" | "PUT" | "PATCH" | "DELETE"} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {{probe?: boolean}} [options]
 * @returns {Promise<any>}
 */
export async function api(method, path, body, { probe = false } = {}) {
  /** @type {Record<string, string>} */
  const headers = { Authorization: `Bearer ${token()}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { detail: text.slice(0, 200) };
    }
  }
  if (res.status === 401 && token() && !probe) onRefused();
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

/** @typedef {import('./types.js').Caller} Caller */

/** @type {{token: string | null, answer: Promise<Caller>} | null} */
let callerAsked = null;

/**
 * caller tells who the tab's token is: the admin, or a workspace key with
 * its workspace (GET /me, which any valid token may ask). Asked once per
 * token; a refusal is not kept, so the next call asks again.
 * @returns {Promise<Caller>}
 */
export function caller() {
  const t = token();
  if (!callerAsked || callerAsked.token !== t) {
    const asked = { token: t, answer: /** @type {Promise<Caller>} */ (api("GET", "/me", undefined, { probe: true })) };
    asked.answer.catch(() => {
      if (callerAsked === asked) callerAsked = null;
    });
    callerAsked = asked;
  }
  return callerAsked.answer;
}

/** isAdmin tells whether the tab's token is the admin's. */
export function isAdmin() {
  return caller().then(
    (c) => c.admin,
    () => false,
  );
}

/**
 * query is a query string of the params that are set.
 * @param {Record<string, string | number | null | undefined>} params
 */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const str = q.toString();
  return str ? `?${str}` : "";
}

/**
 * problemView shows a failed call: the problem's title, detail and the
 * fields at fault.
 * @param {unknown} err
 */
export function problemView(err) {
  const p = err instanceof ApiError ? err.problem : {};
  const message = err instanceof Error ? err.message : String(err);
  return h(
    "div",
    { class: "problem", role: "alert" },
    h("strong", {}, p.title || "Error"),
    " ",
    message,
    p.errors && p.errors.length ? h("ul", {}, p.errors.map((e) => h("li", {}, h("code", {}, e.path), " ", e.message))) : null,
  );
}
