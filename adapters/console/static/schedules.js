// @ts-check
// A workspace's schedules: each with its timetable, next fire times and
// last tick; pause, resume and delete; a form for a new one.
import { api, problemView, query } from "./api.js";
import { agoEl, h, page, renderIfChanged } from "./dom.js";
import { when } from "./format.js";
import { current, every, view } from "./live.js";
import { POLL_MS, definitionNames, workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').Schedule} Schedule */
/** @typedef {import('./types.js').SchedulePage} SchedulePage */

/** @param {Schedule} s */
function timetable(s) {
  return s.cronExpression ? `${s.cronExpression} (${s.timeZone})` : `every ${s.intervalSeconds} s`;
}

/** @param {string} workspaceId */
export async function viewSchedules(workspaceId) {
  const gen = view();
  const header = workspaceHeader(workspaceId, "schedules");
  const body = h("tbody", {});
  const problem = h("div", { "aria-live": "polite" });
  const formStatus = h("div", { "aria-live": "polite" });
  const name = h("input", { id: "sched-name", name: "name", required: true, maxlength: 200, autocomplete: "off" });
  const definition = h("select", { id: "sched-definition", name: "definition", required: true });
  const cron = h("input", { id: "sched-cron", name: "cron", maxlength: 200, autocomplete: "off", placeholder: "0 3 * * *" });
  const zone = h("input", { id: "sched-zone", name: "zone", maxlength: 64, value: "UTC", autocomplete: "off" });
  const interval = h("input", { id: "sched-interval", name: "interval", type: "number", min: 1, placeholder: "or seconds between runs" });
  const overlap = h("select", { id: "sched-overlap", name: "overlap" }, h("option", { value: "skip" }, "skip while the previous run is queued or running"), h("option", { value: "queue" }, "queue anyway"));
  const formTitle = h("h2", {}, "New schedule");
  const submit = h("button", { type: "submit" }, "Create schedule");
  /** The schedule the form edits; null while it creates one. @type {Schedule | null} */
  let editing = null;
  /** @param {Schedule | null} s */
  const edit = (s) => {
    editing = s;
    formTitle.textContent = s ? `Edit ${s.name}` : "New schedule";
    submit.textContent = s ? "Save schedule" : "Create schedule";
    definition.disabled = s !== null;
    if (!s) return;
    name.value = s.name;
    definition.value = s.workflowDefinitionId;
    cron.value = s.cronExpression || "";
    zone.value = s.timeZone;
    interval.value = s.intervalSeconds ? String(s.intervalSeconds) : "";
    overlap.value = s.overlapPolicy;
    name.focus();
  };
  const form = h(
    "form",
    {
      class: "card",
      id: "new-schedule",
      onsubmit: async (/** @type {SubmitEvent} */ e) => {
        e.preventDefault();
        /** @type {Record<string, unknown>} */
        const req = { name: name.value, overlapPolicy: overlap.value };
        if (interval.value) req.intervalSeconds = Number(interval.value);
        else req.cronExpression = cron.value;
        if (!interval.value && zone.value) req.timeZone = zone.value;
        try {
          if (editing) {
            await api("PATCH", `/workflow/schedules/${editing.id}`, req);
            formStatus.replaceChildren(h("div", { class: "notice", role: "status" }, `Schedule ${name.value} saved.`));
            edit(null);
          } else {
            await api("POST", "/workflow/schedules", { ...req, workspaceId, workflowDefinitionId: definition.value });
            formStatus.replaceChildren(h("div", { class: "notice", role: "status" }, `Schedule ${name.value} created.`));
          }
        } catch (err) {
          formStatus.replaceChildren(problemView(err));
        }
      },
    },
    formTitle,
    h("label", { for: "sched-name" }, "Name"),
    name,
    h("label", { for: "sched-definition" }, "Definition"),
    definition,
    h("label", { for: "sched-cron" }, "Cron expression (5 fields, or 6 with seconds first)"),
    cron,
    h("label", { for: "sched-zone" }, "Time zone (IANA)"),
    zone,
    h("label", { for: "sched-interval" }, "Or an interval in seconds"),
    interval,
    h("label", { for: "sched-overlap" }, "When the previous run is still queued or running"),
    overlap,
    submit,
    formStatus,
  );
  page(
    "Schedules",
    header.el,
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "schedules" },
        h("caption", { class: "sr-only" }, "Schedules"),
        h("thead", {}, h("tr", {}, ["Schedule", "Definition", "Timetable", "Next fire times", "Last tick", "Overlap", ""].map((c) => h("th", { scope: "col" }, c)))),
        body,
      ),
    ),
    form,
  );
  /** @type {Map<string, import('./types.js').Definition>} */
  let names;
  try {
    names = await definitionNames(workspaceId);
  } catch (err) {
    problem.replaceChildren(problemView(err));
    return;
  }
  definition.replaceChildren(...[...names.values()].map((d) => h("option", { value: d.id }, d.name)));
  /**
   * @param {"POST" | "DELETE"} method
   * @param {string} path
   * @param {string} done
   */
  const act = async (method, path, done) => {
    try {
      await api(method, path);
      problem.replaceChildren(h("div", { class: "notice", role: "status" }, done));
    } catch (err) {
      problem.replaceChildren(problemView(err));
    }
  };
  /** @param {Schedule[]} items */
  const rows = (items) => {
    const out = items.map((s) => {
      const def = names.get(s.workflowDefinitionId);
      return h(
        "tr",
        { dataset: { schedule: s.id, paused: String(s.paused) } },
        h("td", { "data-label": "Schedule" }, s.name),
        h("td", { "data-label": "Definition" }, def ? h("a", { href: `#/definitions/${def.id}` }, def.name) : ""),
        h("td", { "data-label": "Timetable" }, h("code", {}, timetable(s))),
        h("td", { "data-label": "Next fire times" }, s.paused ? "paused" : s.nextFireTimes.map((t) => when(t)).join(", ")),
        h("td", { "data-label": "Last tick" }, s.lastTick ? agoEl(s.lastTick) : ""),
        h("td", { "data-label": "Overlap" }, s.overlapPolicy),
        h(
          "td",
          { class: "actions" },
          s.paused
            ? h("button", { type: "button", "data-focus-key": `resume-${s.id}`, onclick: () => act("POST", `/workflow/schedules/${s.id}/resume`, `${s.name} resumed.`) }, "Resume")
            : h("button", { type: "button", "data-focus-key": `pause-${s.id}`, onclick: () => act("POST", `/workflow/schedules/${s.id}/pause`, `${s.name} paused.`) }, "Pause"),
          h("button", { type: "button", class: "link", "data-focus-key": `edit-${s.id}`, onclick: () => edit(s) }, "Edit"),
          h("button", { type: "button", class: "danger", "data-focus-key": `delete-${s.id}`, onclick: () => act("DELETE", `/workflow/schedules/${s.id}`, `${s.name} deleted.`) }, "Delete"),
        ),
      );
    });
    if (out.length === 0) out.push(h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No schedules yet: create one below.")));
    return out;
  };
  await every(POLL_MS, async () => {
    await header.refresh();
    /** @type {SchedulePage} */
    const pg = await api("GET", `/workflow/schedules${query({ workspaceId, limit: 200 })}`);
    if (!current(gen)) return;
    renderIfChanged(body, pg.items, () => rows(pg.items));
  });
}
