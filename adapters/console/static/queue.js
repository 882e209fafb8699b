// @ts-check
// A workspace's queue, in the order the dispatcher takes it.
import { api, problemView, query } from "./api.js";
import { agoEl, badge, h, page, renderIfChanged } from "./dom.js";
import { shortId } from "./format.js";
import { current, follow, view } from "./live.js";
import { QUEUE_STATUSES } from "./types.js";
import { waitingView } from "./waiting.js";
import { definitionNames, statusFilter, workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').QueueItem} QueueItem */
/** @typedef {import('./types.js').QueueItemPage} QueueItemPage */
/** @typedef {import('./types.js').QueueStatus} QueueStatus */
/** @typedef {import('./types.js').CancelResponse} CancelResponse */

/** The queue statuses whose item can still be cancelled. */
const CANCELLABLE = new Set(["PENDING", "CLAIMED", "DISPATCHED"]);

/**
 * @param {string} workspaceId
 * @param {URLSearchParams} params
 */
export async function viewQueue(workspaceId, params) {
  const gen = view();
  const wanted = params.get("status") || "";
  const chosen = QUEUE_STATUSES.find((st) => st === wanted) || "";
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
        h("caption", { class: "sr-only" }, "Queue items in the order the dispatcher takes them: priority, then age"),
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Item", "Status", "Waiting on", "Priority", "Age", "Definition", "Attempts", "Dispatch failures", "Last error", "Execution", ""].map((c) => h("th", { scope: "col" }, c)),
          ),
        ),
        body,
      ),
    ),
    note,
  );
  /** @type {Map<string, import('./types.js').Definition>} */
  let names;
  try {
    names = await definitionNames(workspaceId);
  } catch (err) {
    problem.replaceChildren(problemView(err));
    return;
  }
  /** @param {QueueItem} item */
  const cancel = async (item) => {
    try {
      /** @type {CancelResponse} */
      const res = await api("POST", `/workflow/queue/${item.id}/cancel`);
      problem.replaceChildren(h("div", { class: "notice", role: "status" }, `Item ${shortId(item.id)}: ${res.status}.`));
    } catch (err) {
      problem.replaceChildren(problemView(err));
    }
  };
  /** @param {QueueItem[]} items */
  const queueRows = (items) => {
    const rows = items.map((q) => {
      const def = names.get(q.workflowDefinitionId);
      return h(
        "tr",
        { dataset: { queue: q.id, status: q.status } },
        h("td", { "data-label": "Item" }, h("code", { title: q.id }, shortId(q.id))),
        h("td", { "data-label": "Status" }, badge(q.status)),
        h("td", { "data-label": "Waiting on", class: "waiting-on" }, waitingView(q.waitingOn)),
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
          CANCELLABLE.has(q.status)
            ? h("button", { type: "button", class: "danger", "data-focus-key": `cancel-${q.id}`, "aria-label": `Cancel item ${shortId(q.id)}`, onclick: () => cancel(q) }, "Cancel")
            : null,
        ),
      );
    });
    if (rows.length === 0) rows.push(h("tr", {}, h("td", { colspan: 11, class: "empty" }, chosen ? `No ${chosen} items.` : "The queue is empty. A completed run's item is removed; see Executions.")));
    return rows;
  };
  // Loads again on each of the workspace's queue and run events.
  await follow(`/workspaces/${workspaceId}/events`, async () => {
    await header.refresh();
    /** @type {QueueItemPage} */
    const pg = await api("GET", `/workflow/queue${query({ workspaceId, status: chosen, limit: 200 })}`);
    if (!current(gen)) return;
    renderIfChanged(body, pg.items, () => queueRows(pg.items));
    note.textContent = pg.nextCursor ? "Showing the first 200 items, the next to run first." : "";
  });
}
