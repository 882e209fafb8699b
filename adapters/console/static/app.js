// Sluice console: a single-page app over the JSON API under /api/v1.
//
// Rules this file keeps:
// - Tenant data reaches the page only as text (textContent, attribute
//   values), never as HTML, so a workspace's names and payloads cannot
//   inject markup or script.
// - The bearer token lives in sessionStorage and is sent only in the
//   Authorization header of same-origin API calls.
// - Every live view polls with setTimeout after the previous answer, so
//   polls never pile up, and pauses while the tab is hidden.
"use strict";

const TOKEN_KEY = "sluice.token";
const POLL_MS = 1000;
const RUN_POLL_MS = 1000;
const QUEUE_STATUSES = ["PENDING", "CLAIMED", "DISPATCHED", "FAILED", "CANCELLED"];
const EXECUTION_STATUSES = ["RUNNING", "COMPLETED", "FAILED", "CANCELLED"];
const EXAMPLE_GRAPH = {
  nodes: [
    { key: "greet", type: "TRANSFORM", config: { output: { message: "Hello, {{ input.name }}" } } },
    { key: "is_ada", type: "CONDITION", config: { left: "{{ input.name }}", op: "==", right: "Ada" } },
    { key: "welcome", type: "TRANSFORM", config: { output: { text: "{{ steps.greet.output.message }}, welcome back" } } },
    { key: "introduce", type: "TRANSFORM", config: { output: { text: "{{ steps.greet.output.message }}, nice to meet you" } } },
  ],
  edges: [
    { from: "greet", to: "is_ada" },
    { from: "is_ada", to: "welcome", when: true },
    { from: "is_ada", to: "introduce", when: false },
  ],
};

// ---------------------------------------------------------------- DOM helpers

// h builds an element. attrs: plain attributes, except "on*" (listeners),
// "class" and "dataset"; children: nodes, strings (as text) or arrays.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replaceKeepingFocus swaps container's children for the new ones and, if
// focus was on an element with data-focus-key inside it, moves focus to the
// element with the same key, so a keyboard user keeps their place across a
// live refresh.
function replaceKeepingFocus(container, ...children) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute("data-focus-key") : null;
  container.replaceChildren(...children.flat(Infinity).filter((c) => c));
  if (key) {
    const again = container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

// renderIfChanged rebuilds container's children only when data differs
// from what it last showed, so a live view that polls leaves the page (and
// the element under the pointer or the focus) alone while nothing changed.
// Ages and running times tick by themselves (see tickClocks).
function renderIfChanged(container, data, build) {
  const sig = JSON.stringify(data);
  if (container.renderedFrom === sig) return;
  container.renderedFrom = sig;
  replaceKeepingFocus(container, build());
}

// ago and since elements: their text follows the clock without a rebuild.
function agoEl(iso) {
  return h("time", { datetime: iso, title: when(iso), "data-ago": iso }, ago(iso));
}

function sinceEl(iso) {
  return h("span", { "data-since": iso }, duration(span(iso, null)));
}

function tickClocks() {
  const now = Date.now();
  for (const el of document.querySelectorAll("[data-ago]")) el.textContent = ago(el.dataset.ago, now);
  for (const el of document.querySelectorAll("[data-since]")) el.textContent = duration(now - Date.parse(el.dataset.since));
}

// ---------------------------------------------------------------- formatting

function shortId(id) {
  return id ? id.slice(0, 8) : "";
}

function ago(iso, now = Date.now()) {
  if (!iso) return "";
  const secs = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (secs < 60) return `${secs}s ago`;
  if (secs < 3600) return `${Math.floor(secs / 60)}m ${secs % 60}s ago`;
  if (secs < 86400) return `${Math.floor(secs / 3600)}h ${Math.floor((secs % 3600) / 60)}m ago`;
  return `${Math.floor(secs / 86400)}d ago`;
}

function duration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60000)}m ${Math.round((ms % 60000) / 1000)}s`;
}

function span(startIso, endIso) {
  if (!startIso) return null;
  const end = endIso ? Date.parse(endIso) : Date.now();
  return end - Date.parse(startIso);
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { hour12: false });
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function badge(status) {
  return h("span", { class: `badge st-${status}`, "data-status": status }, status);
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// api calls the JSON API with the tab's token. A 401 signs the tab out,
// except for the sign-in form's own probe, which shows the refusal itself.
async function api(method, path, body, { probe = false } = {}) {
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
  if (res.status === 401 && token() && !probe) {
    signOut("The token was refused: sign in again.");
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const str = q.toString();
  return str ? `?${str}` : "";
}

function problemView(err) {
  const p = err.problem || {};
  return h(
    "div",
    { class: "problem", role: "alert" },
    h("strong", {}, p.title || "Error"),
    " ",
    err.message,
    p.errors && p.errors.length
      ? h("ul", {}, p.errors.map((e) => h("li", {}, h("code", {}, e.path), " ", e.message)))
      : null,
  );
}

// ---------------------------------------------------------------- routing

// The route is the hash: #/workspaces, #/workspaces/ID/queue?status=FAILED,
// #/definitions/ID?v=2, #/executions/ID. Links are real anchors, so they
// work with the keyboard, open in new tabs and survive a reload.
// Ids in a route must be UUIDs, so a crafted link cannot steer the
// console's API calls to another path.
const ID = "([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
const re = (src) => new RegExp(src);
const routes = [
  [re(`^\/?$`), () => viewWorkspaces()],
  [re(`^\/workspaces$`), () => viewWorkspaces()],
  [re(`^\/workspaces\/${ID}$`), (m, q) => viewQueue(m[1], q)],
  [re(`^\/workspaces\/${ID}\/queue$`), (m, q) => viewQueue(m[1], q)],
  [re(`^\/workspaces\/${ID}\/executions$`), (m, q) => viewExecutions(m[1], q)],
  [re(`^\/workspaces\/${ID}\/definitions$`), (m) => viewDefinitions(m[1])],
  [re(`^\/definitions\/${ID}$`), (m, q) => viewDefinition(m[1], q)],
  [re(`^\/executions\/${ID}$`), (m) => viewExecution(m[1])],
];

let generation = 0;
let timer = null;

// current reports whether the view that captured gen is still the one shown.
function current(gen) {
  return gen === generation;
}

// every runs fn now and then again ms after each run ends, while the view
// that asked is still shown and fn does not return false; it waits while
// the tab is hidden.
function every(ms, fn) {
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

function route() {
  generation++;
  clearTimeout(timer);
  const main = document.getElementById("main");
  renderWho();
  if (!token()) {
    viewSignIn();
    return;
  }
  const raw = location.hash.startsWith("#") ? location.hash.slice(1) : "";
  const [path, qs] = raw.split("?");
  const params = new URLSearchParams(qs || "");
  for (const [re, view] of routes) {
    const m = path.match(re);
    if (m) {
      main.replaceChildren();
      view(m, params);
      return;
    }
  }
  main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/workspaces" }, "Back to workspaces")));
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function page(title, ...children) {
  const main = document.getElementById("main");
  document.title = `${title} · Sluice`;
  main.replaceChildren(...children.flat(Infinity).filter((c) => c));
}

function crumbs(...items) {
  return h(
    "nav",
    { class: "crumbs", "aria-label": "Breadcrumb" },
    h(
      "ol",
      {},
      items.map((it, i) =>
        h("li", {}, it.href && i < items.length - 1 ? h("a", { href: it.href }, it.label) : h("span", { "aria-current": "page" }, it.label)),
      ),
    ),
  );
}

// ---------------------------------------------------------------- sign in

function renderWho() {
  const who = document.getElementById("who");
  const nav = document.getElementById("nav");
  if (!token()) {
    who.replaceChildren();
    nav.replaceChildren();
    return;
  }
  nav.replaceChildren(h("a", { href: "#/workspaces" }, "Workspaces"));
  who.replaceChildren(
    h(
      "button",
      {
        type: "button",
        class: "link",
        onclick: () => {
          // Signing in again, with whatever token, starts from the overview.
          history.replaceState(null, "", "#/workspaces");
          signOut();
        },
      },
      "Sign out",
    ),
  );
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  signInMessage = message || "";
  route();
}

let signInMessage = "";

function viewSignIn() {
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    "aria-describedby": "token-help",
  });
  const status = h("div", { class: "form-status", "aria-live": "polite" }, signInMessage ? h("div", { class: "problem", role: "alert" }, signInMessage) : null);
  const form = h(
    "form",
    {
      class: "card signin",
      onsubmit: async (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        try {
          await api("GET", "/workspaces?limit=1", undefined, { probe: true });
          signInMessage = "";
          if (!location.hash.startsWith("#/")) location.hash = "#/workspaces";
          route();
        } catch (err) {
          sessionStorage.removeItem(TOKEN_KEY);
          status.replaceChildren(problemView(err));
          input.focus();
        }
      },
    },
    h("h1", {}, "Sign in"),
    h("label", { for: "token" }, "Workspace API key or admin token"),
    input,
    h(
      "p",
      { id: "token-help", class: "help" },
      "A workspace key shows that workspace; the admin token shows all of them. The token is kept in this tab only and is forgotten when it closes.",
    ),
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  page("Sign in", form);
  input.focus();
}

// ---------------------------------------------------------------- workspaces

function meter(active, limit) {
  const bar = h("span", { class: "meter-fill" });
  const ratio = limit > 0 ? Math.min(1, active / limit) : 0;
  bar.style.width = `${Math.round(ratio * 100)}%`;
  if (ratio >= 1) bar.classList.add("full");
  return h(
    "span",
    { class: "meter-wrap" },
    h("span", { class: "meter", role: "img", "aria-label": `${active} of ${limit} slots in use` }, bar),
    h("span", { class: "meter-text" }, `${active} / ${limit}`),
  );
}

async function viewWorkspaces() {
  const gen = generation;
  const body = h("tbody", {});
  const status = h("p", { class: "muted live", "aria-live": "off" });
  const problem = h("div", {});
  page(
    "Workspaces",
    h("h1", {}, "Workspaces"),
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "workspaces" },
        h("caption", { class: "sr-only" }, "Workspaces with their live numbers"),
        h(
          "thead",
          {},
          h("tr", {}, h("th", { scope: "col" }, "Workspace"), h("th", { scope: "col" }, "Plan"), h("th", { scope: "col" }, "Running / limit"), h("th", { scope: "col", class: "num" }, "Pending"), h("th", { scope: "col", class: "num" }, "Failed (1 h)")),
        ),
        body,
      ),
    ),
    status,
  );
  await every(POLL_MS, async () => {
    let items = [];
    let cursor = null;
    try {
      // Up to 1,000 workspaces, five pages of the API's largest page.
      for (let i = 0; i < 5; i++) {
        const pg = await api("GET", `/workspaces${query({ limit: 200, cursor })}`);
        items = items.concat(pg.items);
        cursor = pg.nextCursor;
        if (!cursor) break;
      }
      problem.replaceChildren();
    } catch (err) {
      if (current(gen)) problem.replaceChildren(problemView(err));
      throw err;
    }
    if (!current(gen)) return;
    renderIfChanged(body, items.map((w) => [w.id, w.name, w.plan, w.active, w.limit, w.queued, w.failedLastHour]), () => workspaceRows(items));
    status.textContent = `${items.length} workspace${items.length === 1 ? "" : "s"}${cursor ? " (first 1,000)" : ""} · updated ${new Date().toLocaleTimeString(undefined, { hour12: false })}`;
  });
}

// workspaceRows draws the overview's rows.
function workspaceRows(items) {
  const rows = items.map((w) =>
    h(
      "tr",
      { dataset: { workspace: w.id } },
      h("th", { scope: "row", "data-label": "Workspace" }, h("a", { href: `#/workspaces/${w.id}/queue`, "data-focus-key": `ws-${w.id}` }, w.name)),
      h("td", { "data-label": "Plan" }, h("span", { class: `plan plan-${w.plan}` }, w.plan)),
      h("td", { "data-label": "Running / limit", class: "running" }, meter(w.active, w.limit)),
      h("td", { "data-label": "Pending", class: "num pending" }, String(w.queued)),
      h(
        "td",
        { "data-label": "Failed (1 h)", class: "num failed" },
        w.failedLastHour > 0
          ? h("a", { href: `#/workspaces/${w.id}/executions?status=FAILED`, class: "bad", "data-focus-key": `wsf-${w.id}` }, String(w.failedLastHour))
          : "0",
      ),
    ),
  );
  if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 5, class: "empty" }, "No workspaces yet.")));
  return rows;
}

// workspaceHeader draws a workspace's name, live numbers and tabs; it
// returns the element and a refresh function for the numbers.
function workspaceHeader(id, tab) {
  const title = h("h1", {}, "Workspace");
  const stats = h("dl", { class: "stats" });
  const tabs = h(
    "nav",
    { class: "tabs", "aria-label": "Workspace" },
    [
      ["queue", "Queue"],
      ["executions", "Executions"],
      ["definitions", "Definitions"],
    ].map(([key, label]) => h("a", { href: `#/workspaces/${id}/${key}`, "aria-current": key === tab ? "page" : null }, label)),
  );
  const crumbName = h("span", {}, shortId(id));
  const el = h("div", {}, h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("ol", {}, h("li", {}, h("a", { href: "#/workspaces" }, "Workspaces")), h("li", {}, crumbName))), title, stats, tabs);
  const refresh = async () => {
    const w = await api("GET", `/workspaces/${id}`);
    title.textContent = w.name;
    crumbName.textContent = w.name;
    renderIfChanged(stats, [w.plan, w.active, w.limit, w.queued, w.failedLastHour], () => [
      h("div", {}, h("dt", {}, "Plan"), h("dd", {}, h("span", { class: `plan plan-${w.plan}` }, w.plan))),
      h("div", {}, h("dt", {}, "Running"), h("dd", { class: "running" }, meter(w.active, w.limit))),
      h("div", {}, h("dt", {}, "Pending"), h("dd", { class: "pending" }, String(w.queued))),
      h("div", {}, h("dt", {}, "Failed (1 h)"), h("dd", { class: w.failedLastHour > 0 ? "bad" : "" }, String(w.failedLastHour))),
    ]);
    return w;
  };
  return { el, refresh };
}

function statusFilter(base, statuses, chosen, label) {
  return h(
    "nav",
    { class: "filters", "aria-label": label },
    h("a", { href: base, "aria-current": chosen ? null : "page" }, "All"),
    statuses.map((st) => h("a", { href: `${base}?status=${st}`, "aria-current": chosen === st ? "page" : null }, st)),
  );
}

async function definitionNames(workspaceId) {
  const names = new Map();
  let cursor = null;
  for (let i = 0; i < 5; i++) {
    const pg = await api("GET", `/workflow/definitions${query({ workspaceId, limit: 200, cursor })}`);
    for (const d of pg.items) names.set(d.id, d);
    cursor = pg.nextCursor;
    if (!cursor) break;
  }
  return names;
}

// ---------------------------------------------------------------- queue

const QUEUE_ORDER = Object.fromEntries(QUEUE_STATUSES.map((st, i) => [st, i]));

async function viewQueue(workspaceId, params) {
  const gen = generation;
  const chosen = QUEUE_STATUSES.includes(params.get("status")) ? params.get("status") : "";
  const header = workspaceHeader(workspaceId, "queue");
  const body = h("tbody", {});
  const problem = h("div", { "aria-live": "polite" });
  const note = h("p", { class: "muted" });
  page(
    "Queue",
    header.el,
    statusFilter(`#/workspaces/${workspaceId}/queue`, QUEUE_STATUSES, chosen, "Queue status"),
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "queue" },
        h("caption", { class: "sr-only" }, "Queue items, by status, priority and age"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Item", "Status", "Priority", "Age", "Definition", "Attempts", "Dispatch failures", "Last error", "Execution", ""].map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        body,
      ),
    ),
    note,
  );
  let names = new Map();
  try {
    names = await definitionNames(workspaceId);
  } catch (err) {
    problem.replaceChildren(problemView(err));
    return;
  }
  const cancel = async (item) => {
    try {
      const res = await api("POST", `/workflow/queue/${item.id}/cancel`);
      problem.replaceChildren(h("div", { class: "notice", role: "status" }, `Item ${shortId(item.id)}: ${res.status}.`));
    } catch (err) {
      problem.replaceChildren(problemView(err));
    }
  };
  await every(POLL_MS, async () => {
    await header.refresh();
    const pg = await api("GET", `/workflow/queue${query({ workspaceId, status: chosen, limit: 200 })}`);
    if (!current(gen)) return;
    const items = pg.items.slice().sort(
      (a, b) => QUEUE_ORDER[a.status] - QUEUE_ORDER[b.status] || a.priority - b.priority || Date.parse(a.createdAt) - Date.parse(b.createdAt),
    );
    renderIfChanged(body, items, () => queueRows(items));
    note.textContent = pg.nextCursor ? "Showing the first 200 items." : "";
  });

  function queueRows(items) {
    const rows = items.map((q) => {
      const def = names.get(q.workflowDefinitionId);
      const cancellable = q.status === "PENDING" || q.status === "CLAIMED" || q.status === "DISPATCHED";
      return h(
        "tr",
        { dataset: { queue: q.id, status: q.status } },
        h("td", { "data-label": "Item" }, h("code", { title: q.id }, shortId(q.id))),
        h("td", { "data-label": "Status" }, badge(q.status)),
        h("td", { "data-label": "Priority" }, String(q.priority)),
        h("td", { "data-label": "Age" }, agoEl(q.createdAt)),
        h("td", { "data-label": "Definition" }, def ? h("a", { href: `#/definitions/${def.id}` }, def.name) : h("code", {}, shortId(q.workflowDefinitionId))),
        h("td", { "data-label": "Attempts", class: "num" }, String(q.attemptCount)),
        h("td", { "data-label": "Dispatch failures", class: q.dispatchFailures > 0 ? "num bad" : "num" }, String(q.dispatchFailures)),
        h("td", { "data-label": "Last error", class: "error-text" }, q.lastError || ""),
        h("td", { "data-label": "Execution" }, q.executionId ? h("a", { href: `#/executions/${q.executionId}` }, shortId(q.executionId)) : ""),
        h(
          "td",
          { class: "actions" },
          cancellable
            ? h("button", { type: "button", class: "danger", "data-focus-key": `cancel-${q.id}`, "aria-label": `Cancel item ${shortId(q.id)}`, onclick: () => cancel(q) }, "Cancel")
            : null,
        ),
      );
    });
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 10, class: "empty" }, chosen ? `No ${chosen} items.` : "The queue is empty. A completed run's item is removed; see Executions.")));
    return rows;
  }
}

// ---------------------------------------------------------------- executions

async function viewExecutions(workspaceId, params) {
  const gen = generation;
  const chosen = EXECUTION_STATUSES.includes(params.get("status")) ? params.get("status") : "";
  const defFilter = params.get("definition") || "";
  const header = workspaceHeader(workspaceId, "executions");
  const body = h("tbody", {});
  const problem = h("div", { "aria-live": "polite" });
  const more = h("div", { class: "more" });
  const select = h("select", { id: "definition-filter" }, h("option", { value: "" }, "All definitions"));
  const base = `#/workspaces/${workspaceId}/executions`;
  select.addEventListener("change", () => go(`${base}${query({ status: chosen, definition: select.value })}`));
  page(
    "Executions",
    header.el,
    h(
      "div",
      { class: "filter-row" },
      statusFilter(base, EXECUTION_STATUSES, chosen, "Execution status"),
      h("label", { for: "definition-filter", class: "inline" }, "Definition ", select),
    ),
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "executions" },
        h("caption", { class: "sr-only" }, "Executions, newest first"),
        h("thead", {}, h("tr", {}, ["Execution", "Status", "Definition", "Started", "Duration", "Error"].map((c) => h("th", { scope: "col" }, c)))),
        body,
      ),
    ),
    more,
  );
  // Fix up the status links so they keep the definition filter.
  for (const a of document.querySelectorAll(".filters a")) {
    const u = new URL(a.getAttribute("href").slice(1), "http://x");
    if (defFilter) u.searchParams.set("definition", defFilter);
    a.setAttribute("href", `#${u.pathname}${u.search}`);
  }
  let names;
  try {
    names = await definitionNames(workspaceId);
  } catch (err) {
    problem.replaceChildren(problemView(err));
    return;
  }
  for (const d of names.values()) select.append(h("option", { value: d.id, selected: d.id === defFilter }, d.name));
  let extra = []; // pages loaded with "Load more", kept across refreshes
  let nextCursor = null;
  const row = (e) => {
    const def = names.get(e.workflowDefinitionId);
    return h(
      "tr",
      { dataset: { execution: e.id, status: e.status } },
      h("td", { "data-label": "Execution" }, h("a", { href: `#/executions/${e.id}`, "data-focus-key": `ex-${e.id}` }, h("code", {}, shortId(e.id)))),
      h("td", { "data-label": "Status" }, badge(e.status)),
      h("td", { "data-label": "Definition" }, def ? h("a", { href: `#/definitions/${def.id}?v=${e.workflowVersion}` }, `${def.name} v${e.workflowVersion}`) : `${shortId(e.workflowDefinitionId)} v${e.workflowVersion}`),
      h("td", { "data-label": "Started" }, agoEl(e.startedAt)),
      h("td", { "data-label": "Duration" }, e.durationMs !== null ? duration(e.durationMs) : sinceEl(e.startedAt)),
      h("td", { "data-label": "Error", class: "error-text" }, e.error || ""),
    );
  };
  const render = (first) => {
    const all = first.concat(extra).filter((e) => !defFilter || e.workflowDefinitionId === defFilter);
    renderIfChanged(body, all, () => {
      const rows = all.map(row);
      if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No executions match.")));
      return rows;
    });
    renderIfChanged(more, nextCursor, () =>
      nextCursor
        ? h(
            "button",
            {
              type: "button",
              "data-focus-key": "more",
              onclick: async () => {
                const pg = await api("GET", `/workflow/executions${query({ workspaceId, status: chosen, limit: 50, cursor: nextCursor })}`);
                extra = extra.concat(pg.items);
                nextCursor = pg.nextCursor;
                render(lastFirst);
              },
            },
            "Load more",
          )
        : [],
    );
  };
  let lastFirst = [];
  await every(POLL_MS, async () => {
    await header.refresh();
    const pg = await api("GET", `/workflow/executions${query({ workspaceId, status: chosen, limit: 50 })}`);
    if (!current(gen)) return;
    lastFirst = pg.items;
    if (extra.length === 0) nextCursor = pg.nextCursor;
    render(pg.items);
  });
}

// ---------------------------------------------------------------- definitions

async function viewDefinitions(workspaceId) {
  const gen = generation;
  const header = workspaceHeader(workspaceId, "definitions");
  const body = h("tbody", {});
  const problem = h("div", {});
  const formStatus = h("div", { "aria-live": "polite" });
  const name = h("input", { id: "def-name", name: "name", required: true, maxlength: 200, autocomplete: "off" });
  const graph = h("textarea", { id: "def-graph", name: "graph", rows: 14, spellcheck: "false", required: true });
  graph.value = json(EXAMPLE_GRAPH);
  const form = h(
    "form",
    {
      class: "card",
      id: "new-definition",
      onsubmit: async (e) => {
        e.preventDefault();
        let parsed;
        try {
          parsed = JSON.parse(graph.value);
        } catch (err) {
          formStatus.replaceChildren(h("div", { class: "problem", role: "alert" }, `The graph is not JSON: ${err.message}`));
          graph.focus();
          return;
        }
        try {
          const d = await api("POST", "/workflow/definitions", { workspaceId, name: name.value, graph: parsed });
          go(`#/definitions/${d.id}`);
        } catch (err) {
          formStatus.replaceChildren(problemView(err));
        }
      },
    },
    h("h2", {}, "New definition"),
    h("label", { for: "def-name" }, "Name"),
    name,
    h("label", { for: "def-graph" }, "Graph (JSON: nodes and edges)"),
    graph,
    h("button", { type: "submit" }, "Create definition"),
    formStatus,
  );
  page(
    "Definitions",
    header.el,
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "definitions" },
        h("caption", { class: "sr-only" }, "Definitions"),
        h("thead", {}, h("tr", {}, ["Definition", "Current version", "Nodes", "Updated"].map((c) => h("th", { scope: "col" }, c)))),
        body,
      ),
    ),
    form,
  );
  try {
    await header.refresh();
    const names = await definitionNames(workspaceId);
    if (!current(gen)) return;
    const rows = [...names.values()].map((d) =>
      h(
        "tr",
        {},
        h("td", { "data-label": "Definition" }, h("a", { href: `#/definitions/${d.id}` }, d.name)),
        h("td", { "data-label": "Current version" }, `v${d.currentVersion}`),
        h("td", { "data-label": "Nodes" }, String(d.graph.nodes.length)),
        h("td", { "data-label": "Updated" }, agoEl(d.updatedAt)),
      ),
    );
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 4, class: "empty" }, "No definitions yet: create one below.")));
    body.replaceChildren(...rows);
  } catch (err) {
    problem.replaceChildren(problemView(err));
  }
}

async function viewDefinition(definitionId, params) {
  const gen = generation;
  let def;
  try {
    def = await api("GET", `/workflow/definitions/${definitionId}`);
  } catch (err) {
    page("Definition", h("h1", {}, "Definition"), problemView(err));
    return;
  }
  if (!current(gen)) return;
  const wanted = Number.parseInt(params.get("v") || "", 10);
  const version = wanted >= 1 && wanted <= def.currentVersion ? wanted : def.currentVersion;
  let graph = def.graph;
  let createdAt = def.updatedAt;
  if (version !== def.currentVersion) {
    try {
      const v = await api("GET", `/workflow/definitions/${definitionId}/versions/${version}`);
      graph = v.graph;
      createdAt = v.createdAt;
    } catch (err) {
      page("Definition", h("h1", {}, def.name), problemView(err));
      return;
    }
  }
  if (!current(gen)) return;
  const versions = h(
    "nav",
    { class: "filters", "aria-label": "Versions" },
    Array.from({ length: def.currentVersion }, (_, i) => i + 1)
      .reverse()
      .map((n) => h("a", { href: `#/definitions/${def.id}?v=${n}`, "aria-current": n === version ? "page" : null }, n === def.currentVersion ? `v${n} (current)` : `v${n}`)),
  );

  const input = h("textarea", { id: "run-input", name: "input", rows: 4, spellcheck: "false" });
  input.value = json({ name: "Ada" });
  const priority = h("select", { id: "run-priority", name: "priority" }, [1, 2, 3, 4].map((p) => h("option", { value: p, selected: p === 2 }, `${p}${p === 1 ? " (most urgent)" : ""}`)));
  const startStatus = h("div", { "aria-live": "polite", id: "start-status" });
  const startForm = h(
    "form",
    {
      class: "card",
      id: "start-form",
      onsubmit: async (e) => {
        e.preventDefault();
        let parsed;
        try {
          parsed = input.value.trim() ? JSON.parse(input.value) : {};
        } catch (err) {
          startStatus.replaceChildren(h("div", { class: "problem", role: "alert" }, `The input is not JSON: ${err.message}`));
          input.focus();
          return;
        }
        const since = Date.now();
        try {
          const q = await api("POST", "/workflow/executions/start", {
            workspaceId: def.workspaceId,
            workflowDefinitionId: def.id,
            input: parsed,
            priority: Number(priority.value),
          });
          startStatus.replaceChildren(h("div", { class: "notice", role: "status" }, `Enqueued as item ${shortId(q.queueId)} (${q.status}); waiting for a slot…`));
          followQueueItem(q.queueId, def, since, startStatus);
        } catch (err) {
          startStatus.replaceChildren(problemView(err));
        }
      },
    },
    h("h2", {}, "Start an execution"),
    h("p", { class: "help" }, "Starts the current version. It is queued and runs when the workspace has a free slot."),
    h("label", { for: "run-input" }, "Input (JSON object)"),
    input,
    h("label", { for: "run-priority" }, "Priority"),
    priority,
    h("button", { type: "submit" }, "Start"),
    startStatus,
  );

  page(
    def.name,
    crumbs(
      { href: "#/workspaces", label: "Workspaces" },
      { href: `#/workspaces/${def.workspaceId}/definitions`, label: "Definitions" },
      { label: def.name },
    ),
    h("h1", {}, def.name),
    h(
      "p",
      { class: "muted" },
      `Version ${version} of ${def.currentVersion}, created ${when(createdAt)}. `,
      h("a", { href: `#/workspaces/${def.workspaceId}/executions?definition=${def.id}` }, "Its executions"),
    ),
    versions,
    h("section", { class: "card graph-card", "aria-label": "Graph" }, dagView(graph, null)),
    def.currentVersion === version ? startForm : null,
    versionForm(def, graph),
  );
}

// versionForm saves an edited graph as the definition's next version;
// versions are immutable, so this is the only way to change a graph.
function versionForm(def, graph) {
  const text = h("textarea", { id: "version-graph", name: "graph", rows: 14, spellcheck: "false" });
  text.value = json(graph);
  const status = h("div", { "aria-live": "polite" });
  return h(
    "details",
    { class: "card" },
    h("summary", {}, "Graph JSON and a new version"),
    h(
      "form",
      {
        id: "version-form",
        onsubmit: async (e) => {
          e.preventDefault();
          let parsed;
          try {
            parsed = JSON.parse(text.value);
          } catch (err) {
            status.replaceChildren(h("div", { class: "problem", role: "alert" }, `The graph is not JSON: ${err.message}`));
            text.focus();
            return;
          }
          try {
            const v = await api("POST", `/workflow/definitions/${def.id}/versions`, { graph: parsed });
            go(`#/definitions/${def.id}?v=${v.version}`);
          } catch (err) {
            status.replaceChildren(problemView(err));
          }
        },
      },
      h("label", { for: "version-graph" }, "Graph (JSON)"),
      text,
      h("button", { type: "submit" }, `Save as version ${def.currentVersion + 1}`),
      status,
    ),
  );
}

// followQueueItem watches a just-enqueued item until it names its
// execution, then opens the run page. A quick run may complete, and its
// item be deleted, between two looks: then the run is found by the queue
// id it keeps.
function followQueueItem(queueId, def, since, status) {
  every(250, async () => {
    try {
      const q = await api("GET", `/workflow/queue/${queueId}`);
      if (q.executionId && q.status !== "PENDING" && q.status !== "CLAIMED") {
        go(`#/executions/${q.executionId}`);
        return false;
      }
      if (q.status === "FAILED" || q.status === "CANCELLED") {
        status.replaceChildren(h("div", { class: "problem", role: "alert" }, `Item ${shortId(q.id)} is ${q.status}: ${q.lastError || ""}`));
        return false;
      }
      status.replaceChildren(
        h("div", { class: "notice", role: "status" }, `Item ${shortId(q.id)} is ${q.status}, priority ${q.priority}. `, h("a", { href: `#/workspaces/${def.workspaceId}/queue` }, "See the queue")),
      );
    } catch (err) {
      if (err.status !== 404) throw err;
      const pg = await api("GET", `/workflow/executions${query({ workspaceId: def.workspaceId, queueId, limit: 1 })}`);
      const run = pg.items[0];
      if (run) {
        go(`#/executions/${run.id}`);
        return false;
      }
    }
    return true;
  });
}

// ---------------------------------------------------------------- a run

async function viewExecution(executionId) {
  const gen = generation;
  const head = h("div", {});
  const graphCard = h("section", { class: "card graph-card", "aria-label": "Graph" });
  const nodesEl = h("section", { class: "nodes", "aria-label": "Nodes" });
  const actions = h("div", { "aria-live": "polite" });
  page("Execution", head, actions, graphCard, h("h2", {}, "Nodes"), nodesEl);
  let graph = null;
  let def = null;
  await every(RUN_POLL_MS, async () => {
    let e;
    try {
      e = await api("GET", `/workflow/executions/${executionId}`);
    } catch (err) {
      if (current(gen)) head.replaceChildren(h("h1", {}, "Execution"), problemView(err));
      return false;
    }
    if (!graph) {
      try {
        def = await api("GET", `/workflow/definitions/${e.workflowDefinitionId}`);
      } catch {
        def = null; // deleted: the version below still shows the graph
      }
      const v = await api("GET", `/workflow/definitions/${e.workflowDefinitionId}/versions/${e.workflowVersion}`);
      graph = v.graph;
    }
    if (!current(gen)) return;
    const records = new Map((e.nodes || []).map((n) => [n.key, n]));
    const title = def ? `${def.name} v${e.workflowVersion}` : `v${e.workflowVersion}`;
    document.title = `${title} · ${e.status} · Sluice`;
    if (head.renderedFrom === JSON.stringify(e)) return e.status === "RUNNING";
    head.renderedFrom = JSON.stringify(e);
    replaceKeepingFocus(
      head,
      crumbs(
        { href: "#/workspaces", label: "Workspaces" },
        { href: `#/workspaces/${e.workspaceId}/executions`, label: "Executions" },
        { label: shortId(e.id) },
      ),
      h("h1", {}, "Execution ", h("code", {}, shortId(e.id)), " ", badge(e.status)),
      h(
        "dl",
        { class: "stats" },
        h("div", {}, h("dt", {}, "Definition"), h("dd", {}, def ? h("a", { href: `#/definitions/${def.id}?v=${e.workflowVersion}` }, title) : title)),
        h("div", {}, h("dt", {}, "Started"), h("dd", {}, h("time", { datetime: e.startedAt }, when(e.startedAt)))),
        h("div", {}, h("dt", {}, "Duration"), h("dd", { id: "run-duration" }, e.durationMs !== null ? duration(e.durationMs) : sinceEl(e.startedAt))),
        h("div", {}, h("dt", {}, "Nodes"), h("dd", {}, `${[...records.values()].filter((n) => n.status === "COMPLETED").length} of ${graph.nodes.length} completed`)),
      ),
      e.error ? h("div", { class: "problem", role: "alert" }, h("strong", {}, "Error "), e.error) : null,
      h("details", {}, h("summary", {}, "Input"), h("pre", { class: "json" }, json(e.input))),
    );
    replaceKeepingFocus(
      actions,
      e.status === "RUNNING"
        ? h(
            "button",
            {
              type: "button",
              class: "danger",
              "data-focus-key": "cancel-run",
              onclick: async () => {
                try {
                  const r = await api("POST", `/workflow/executions/${e.id}/cancel`);
                  actions.append(h("div", { class: "notice", role: "status" }, `Cancellation: ${r.status}.`));
                } catch (err) {
                  actions.append(problemView(err));
                }
              },
            },
            "Cancel execution",
          )
        : null,
    );
    replaceKeepingFocus(graphCard, dagView(graph, records), legend());
    replaceKeepingFocus(nodesEl, graph.nodes.map((n) => nodeCard(n, records.get(n.key))));
    return e.status === "RUNNING";
  });
}

function nodeCard(node, rec) {
  const status = rec ? rec.status : "WAITING";
  const fields = [];
  if (rec) {
    fields.push(["Attempt", String(rec.attempt)]);
    fields.push(["Started", rec.startedAt ? when(rec.startedAt) : ""]);
    fields.push(["Completed", rec.completedAt ? when(rec.completedAt) : ""]);
    const d = span(rec.startedAt, rec.completedAt);
    fields.push(["Took", d === null ? "" : rec.completedAt ? duration(d) : sinceEl(rec.startedAt)]);
  }
  return h(
    "article",
    { class: `node-card st-${status}`, id: `node-${node.key}`, tabindex: "-1", "data-node": node.key, "data-status": status },
    h("header", {}, h("h3", {}, node.key), h("span", { class: "muted" }, node.type), badge(status)),
    rec ? h("dl", { class: "kv" }, fields.filter(([, v]) => v).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))) : h("p", { class: "muted" }, "Not run yet."),
    // A skipped node's error is why it was skipped, not a failure.
    rec && rec.error && status === "SKIPPED" ? h("p", { class: "muted skip-reason" }, `Skipped: ${rec.error}`) : null,
    rec && rec.error && status !== "SKIPPED" ? h("div", { class: "problem" }, h("strong", {}, "Error "), rec.error) : null,
    rec && rec.input !== null && rec.input !== undefined ? h("details", { open: true }, h("summary", {}, "Resolved input"), h("pre", { class: "json" }, json(rec.input))) : null,
    rec && rec.output !== null && rec.output !== undefined ? h("details", { open: true }, h("summary", {}, "Output"), h("pre", { class: "json node-output" }, json(rec.output))) : null,
  );
}

function legend() {
  return h(
    "ul",
    { class: "legend", "aria-label": "Colours" },
    ["WAITING", "RUNNING", "COMPLETED", "FAILED", "SKIPPED", "CANCELLED"].map((st) => h("li", {}, h("span", { class: `swatch st-${st}` }), st)),
  );
}

// ---------------------------------------------------------------- the DAG

// layout places a graph's nodes in layers by longest path from a root (a
// node's layer is one more than its deepest predecessor's), then orders
// each layer by the mean position of the node's predecessors, so edges
// mostly run straight down.
function layout(graph) {
  const nodes = graph.nodes || [];
  const edges = (graph.edges || []).filter((e) => e.from !== e.to);
  const preds = new Map(nodes.map((n) => [n.key, []]));
  const succs = new Map(nodes.map((n) => [n.key, []]));
  for (const e of edges) {
    if (preds.has(e.to) && succs.has(e.from)) {
      preds.get(e.to).push(e.from);
      succs.get(e.from).push(e.to);
    }
  }
  // Kahn's order; nodes left on a cycle (a stored graph has none) go last.
  const indeg = new Map(nodes.map((n) => [n.key, preds.get(n.key).length]));
  const order = nodes.filter((n) => indeg.get(n.key) === 0).map((n) => n.key);
  for (let i = 0; i < order.length; i++) {
    for (const t of succs.get(order[i])) {
      indeg.set(t, indeg.get(t) - 1);
      if (indeg.get(t) === 0) order.push(t);
    }
  }
  for (const n of nodes) if (!order.includes(n.key)) order.push(n.key);
  const layer = new Map();
  for (const k of order) layer.set(k, Math.max(0, ...preds.get(k).map((p) => (layer.has(p) ? layer.get(p) + 1 : 0))));
  const layers = [];
  for (const n of nodes) {
    const l = layer.get(n.key);
    (layers[l] = layers[l] || []).push(n.key);
  }
  const pos = new Map();
  layers.forEach((keys, l) => {
    if (l > 0) {
      const bary = (k) => {
        const ps = preds.get(k).filter((p) => pos.has(p));
        return ps.length ? ps.reduce((a, p) => a + pos.get(p).index, 0) / ps.length : 0;
      };
      keys.sort((a, b) => bary(a) - bary(b));
    }
    keys.forEach((k, i) => pos.set(k, { layer: l, index: i, count: keys.length }));
  });
  return { nodes, edges, layers, pos };
}

const NODE_W = 176;
const NODE_H = 66;
const GAP_X = 28;
const GAP_Y = 64;
const PAD = 16;

function dagView(graph, records) {
  const { nodes, edges, layers, pos } = layout(graph);
  const widest = Math.max(1, ...layers.map((l) => l.length));
  const width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X;
  const height = PAD * 2 + layers.length * NODE_H + Math.max(0, layers.length - 1) * GAP_Y;
  const xy = (k) => {
    const p = pos.get(k);
    const rowWidth = p.count * NODE_W + (p.count - 1) * GAP_X;
    return { x: (width - rowWidth) / 2 + p.index * (NODE_W + GAP_X), y: PAD + p.layer * (NODE_H + GAP_Y) };
  };
  const statusOf = (k) => (records ? (records.get(k) ? records.get(k).status : "WAITING") : "NONE");
  const svg = s(
    "svg",
    {
      class: "dag",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "group",
      "aria-label": `Graph of ${nodes.length} node${nodes.length === 1 ? "" : "s"}`,
    },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))),
  );
  for (const e of edges) {
    if (!pos.has(e.from) || !pos.has(e.to)) continue;
    const a = xy(e.from);
    const b = xy(e.to);
    const x1 = a.x + NODE_W / 2;
    const y1 = a.y + NODE_H;
    const x2 = b.x + NODE_W / 2;
    const y2 = b.y;
    const my = (y1 + y2) / 2;
    const skipped = statusOf(e.to) === "SKIPPED";
    const g = s(
      "g",
      { class: `edge${skipped ? " edge-skipped" : ""}`, "data-from": e.from, "data-to": e.to, "data-when": e.when === undefined ? null : String(e.when) },
      s("path", { d: `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2 - 2}`, "marker-end": "url(#arrow)" }),
    );
    if (e.when !== undefined && e.when !== null) {
      const label = `when ${e.when}`;
      const lx = (x1 + x2) / 2;
      const ly = my;
      const w = label.length * 7 + 12;
      g.append(
        s("rect", { class: `edge-label-bg when-${e.when}`, x: lx - w / 2, y: ly - 10, width: w, height: 20, rx: 10 }),
        s("text", { class: "edge-label", x: lx, y: ly + 4, "text-anchor": "middle" }, label),
      );
    }
    svg.append(g);
  }
  for (const n of nodes) {
    const { x, y } = xy(n.key);
    const st = statusOf(n.key);
    const rec = records && records.get(n.key);
    const d = rec && rec.completedAt ? span(rec.startedAt, rec.completedAt) : null;
    const third = rec ? `${st.toLowerCase()}${d !== null ? ` · ${duration(d)}` : ""}${rec.attempt > 1 ? ` · try ${rec.attempt}` : ""}` : records ? "waiting" : configSummary(n);
    const focusTarget = () => {
      const card = document.getElementById(`node-${n.key}`);
      if (card) {
        card.scrollIntoView({ block: "start", behavior: "smooth" });
        card.focus({ preventScroll: true });
      }
    };
    const g = s(
      "g",
      {
        class: `dag-node st-${st}`,
        "data-node": n.key,
        "data-status": st,
        transform: `translate(${x} ${y})`,
        tabindex: records ? 0 : null,
        role: records ? "button" : null,
        "aria-label": `${n.key}, ${n.type}${records ? `, ${st}` : ""}`,
        "data-focus-key": `node-${n.key}`,
        onclick: records ? focusTarget : null,
        onkeydown: records
          ? (ev) => {
              if (ev.key === "Enter" || ev.key === " ") {
                ev.preventDefault();
                focusTarget();
              }
            }
          : null,
      },
      s("title", {}, `${n.key} (${n.type})${records ? `: ${st}` : ""}`),
      s("rect", { class: "node-box", width: NODE_W, height: NODE_H, rx: 8 }),
      s("text", { class: "node-key", x: 12, y: 22 }, clip(n.key, 20)),
      s("text", { class: "node-type", x: 12, y: 40 }, n.type),
      third ? s("text", { class: "node-status", x: 12, y: 56 }, third) : null,
    );
    svg.append(g);
  }
  return h("div", { class: "dag-wrap" }, svg);
}

// configSummary is one line on what a node does, for the drawing of a
// definition, where there is no status to show.
function configSummary(node) {
  const c = node.config || {};
  const str = (v) => (typeof v === "string" ? v : JSON.stringify(v));
  switch (node.type) {
    case "CONDITION":
      return clip(`${str(c.left)} ${c.op || ""} ${c.op === "exists" ? "" : str(c.right)}`.trim(), 22);
    case "DELAY":
      return `wait ${str(c.duration)}`;
    case "HTTP_REQUEST":
      return clip(`${c.method || "GET"} ${str(c.url)}`, 22);
    default:
      return "";
  }
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// ---------------------------------------------------------------- start

window.addEventListener("hashchange", route);
setInterval(tickClocks, 1000);
document.addEventListener("DOMContentLoaded", () => {
  const skip = document.querySelector(".skip");
  skip.addEventListener("click", (e) => {
    e.preventDefault();
    document.getElementById("main").focus();
  });
  route();
});
