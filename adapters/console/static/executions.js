// @ts-check
// A workspace's executions, newest first, filtered on the server by status
// and definition.
import { api, problemView, query } from "./api.js";
import { agoEl, badge, h, page, renderIfChanged, sinceEl } from "./dom.js";
import { duration, shortId } from "./format.js";
import { current, every, go, view } from "./live.js";
import { EXECUTION_STATUSES } from "./types.js";
import { POLL_MS, definitionNames, statusFilter, workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').Execution} Execution */
/** @typedef {import('./types.js').ExecutionPage} ExecutionPage */
/** @typedef {import('./types.js').Definition} Definition */

/** The ids the console puts in a route and so in an API path. */
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * @param {string} workspaceId
 * @param {URLSearchParams} params
 */
export async function viewExecutions(workspaceId, params) {
  const gen = view();
  const wanted = params.get("status") || "";
  const chosen = EXECUTION_STATUSES.find((st) => st === wanted) || "";
  const defFilter = UUID.test(params.get("definition") || "") ? params.get("definition") || "" : "";
  // Runs whose WAIT_FOR_EVENT waits: their page sends the event.
  const waiting = params.get("waiting") === "1";
  const header = workspaceHeader(workspaceId, "executions");
  const body = h("tbody", {});
  const problem = h("div", { "aria-live": "polite" });
  const more = h("div", { class: "more" });
  const select = h("select", { id: "definition-filter" }, h("option", { value: "" }, "All definitions"));
  const base = `#/workspaces/${workspaceId}/executions`;
  select.addEventListener("change", () => go(`${base}${query({ status: chosen, definition: select.value, waiting: waiting ? "1" : "" })}`));
  const waitingBox = h("input", { type: "checkbox", id: "waiting-filter", checked: waiting });
  waitingBox.addEventListener("change", () => go(`${base}${query({ status: chosen, definition: defFilter, waiting: waiting ? "" : "1" })}`));
  page(
    "Executions",
    header.el,
    h(
      "div",
      { class: "filter-row" },
      statusFilter(base, EXECUTION_STATUSES, chosen, "Execution status", defFilter ? { definition: defFilter } : {}),
      h("label", { for: "definition-filter", class: "inline" }, "Definition ", select),
      h("label", { for: "waiting-filter", class: "inline" }, waitingBox, " Waiting for an event"),
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
  /** @type {Map<string, Definition>} */
  let names;
  try {
    names = await definitionNames(workspaceId);
  } catch (err) {
    problem.replaceChildren(problemView(err));
    return;
  }
  for (const d of names.values()) select.append(h("option", { value: d.id, selected: d.id === defFilter }, d.name));
  const filter = { workspaceId, status: chosen, workflowDefinitionId: defFilter, waitingForEvent: waiting ? "true" : "", limit: 50 };
  /** @type {Execution[]} */
  let extra = []; // pages loaded with "Load more", kept across refreshes
  /** @type {string | null} */
  let nextCursor = null;
  /** @type {Execution[]} */
  let lastFirst = [];
  /** @param {Execution} e */
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
  const render = () => {
    const all = lastFirst.concat(extra);
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
                /** @type {ExecutionPage} */
                const pg = await api("GET", `/workflow/executions${query({ ...filter, cursor: nextCursor })}`);
                extra = extra.concat(pg.items);
                nextCursor = pg.nextCursor;
                render();
              },
            },
            "Load more",
          )
        : [],
    );
  };
  await every(POLL_MS, async () => {
    await header.refresh();
    /** @type {ExecutionPage} */
    const pg = await api("GET", `/workflow/executions${query(filter)}`);
    if (!current(gen)) return;
    lastFirst = pg.items;
    if (extra.length === 0) nextCursor = pg.nextCursor;
    render();
  });
}
