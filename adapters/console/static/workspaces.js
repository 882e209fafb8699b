// @ts-check
// The workspaces overview, and the header every workspace page shares.
import { api, problemView, query } from "./api.js";
import { h, page, renderIfChanged } from "./dom.js";
import { shortId } from "./format.js";
import { current, every, view } from "./live.js";

/** @typedef {import('./types.js').Workspace} Workspace */
/** @typedef {import('./types.js').WorkspacePage} WorkspacePage */
/** @typedef {import('./types.js').Definition} Definition */
/** @typedef {import('./types.js').DefinitionPage} DefinitionPage */

export const POLL_MS = 1000;

/**
 * meter draws slots in use against the plan's limit.
 * @param {number} active
 * @param {number} limit
 */
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

export async function viewWorkspaces() {
  const gen = view();
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
    /** @type {Workspace[]} */
    let items = [];
    /** @type {string | null} */
    let cursor = null;
    try {
      // Up to 1,000 workspaces, five pages of the API's largest page.
      for (let i = 0; i < 5; i++) {
        /** @type {WorkspacePage} */
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

/**
 * workspaceRows draws the overview's rows.
 * @param {Workspace[]} items
 */
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

/**
 * workspaceHeader draws a workspace's name, live numbers and tabs; it
 * returns the element and a refresh function for the numbers.
 * @param {string} id
 * @param {"queue" | "executions" | "definitions" | "schedules" | "webhooks" | "limits" | "outbound"} tab
 */
export function workspaceHeader(id, tab) {
  const title = h("h1", {}, "Workspace");
  const stats = h("dl", { class: "stats" });
  const tabs = h(
    "nav",
    { class: "tabs", "aria-label": "Workspace" },
    [
      ["queue", "Queue"],
      ["executions", "Executions"],
      ["definitions", "Definitions"],
      ["schedules", "Schedules"],
      ["webhooks", "Webhooks"],
      ["limits", "Limits"],
      ["outbound", "Outbound"],
    ].map(([key, label]) => h("a", { href: `#/workspaces/${id}/${key}`, "aria-current": key === tab ? "page" : null }, label)),
  );
  const crumbName = h("span", {}, shortId(id));
  const el = h("div", {}, h("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, h("ol", {}, h("li", {}, h("a", { href: "#/workspaces" }, "Workspaces")), h("li", {}, crumbName))), title, stats, tabs);
  const refresh = async () => {
    /** @type {Workspace} */
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

/**
 * statusFilter links to a list by each status, and to all of it.
 * @param {string} base
 * @param {string[]} statuses
 * @param {string} chosen
 * @param {string} label
 * @param {Record<string, string>} [keep] other filters the links keep
 */
export function statusFilter(base, statuses, chosen, label, keep = {}) {
  return h(
    "nav",
    { class: "filters", "aria-label": label },
    h("a", { href: `${base}${query(keep)}`, "aria-current": chosen ? null : "page" }, "All"),
    statuses.map((st) => h("a", { href: `${base}${query({ status: st, ...keep })}`, "aria-current": chosen === st ? "page" : null }, st)),
  );
}

/**
 * definitionNames reads up to 1,000 of a workspace's definitions, by id,
 * to name them in lists.
 * @param {string} workspaceId
 */
export async function definitionNames(workspaceId) {
  /** @type {Map<string, Definition>} */
  const names = new Map();
  /** @type {string | null} */
  let cursor = null;
  for (let i = 0; i < 5; i++) {
    /** @type {DefinitionPage} */
    const pg = await api("GET", `/workflow/definitions${query({ workspaceId, limit: 200, cursor })}`);
    for (const d of pg.items) names.set(d.id, d);
    cursor = pg.nextCursor;
    if (!cursor) break;
  }
  return names;
}
