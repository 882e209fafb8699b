// @ts-check
// A workspace's outbound limits: the rate its HTTP_REQUEST nodes are held
// to per target host, listed by host with any pause an upstream's
// Retry-After put on it (a paused host without a limit is listed too),
// polled, with a form that adds a host or edits one, and a Delete for each limit.
import { ApiError, api, problemView } from "./api.js";
import { h, page, renderIfChanged, untilEl } from "./dom.js";
import { when } from "./format.js";
import { current, every, view } from "./live.js";
import { POLL_MS, workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').OutboundLimit} OutboundLimit */
/** @typedef {import('./types.js').OutboundPause} OutboundPause */

/** The form's fields by the pointer the API's problems name them with. */
const FIELDS = { host: "/path/host", rate: "/requestsPerSecond", burst: "/burst" };

/** @param {string} workspaceId */
export async function viewOutbound(workspaceId) {
  const gen = view();
  const header = workspaceHeader(workspaceId, "outbound");
  const body = h("tbody", {});
  const problem = h("div", { "aria-live": "polite" });
  const status = h("div", { "aria-live": "polite" });
  /** @type {Record<keyof FIELDS, HTMLElement>} */
  const errors = {
    host: h("div", { id: "outbound-host-error", class: "field-error", role: "alert" }),
    rate: h("div", { id: "outbound-rate-error", class: "field-error", role: "alert" }),
    burst: h("div", { id: "outbound-burst-error", class: "field-error", role: "alert" }),
  };
  const host = h("input", { id: "outbound-host", name: "host", required: true, maxlength: 253, autocomplete: "off", spellcheck: "false", placeholder: "api.example.com", "aria-describedby": "outbound-host-help outbound-host-error" });
  const rate = h("input", { id: "outbound-rate", name: "requestsPerSecond", type: "number", step: "any", min: 0.001, max: 1000, required: true, "aria-describedby": "outbound-rate-error" });
  const burst = h("input", { id: "outbound-burst", name: "burst", type: "number", step: 1, min: 1, max: 1000, required: true, "aria-describedby": "outbound-burst-error" });
  /** @param {OutboundLimit} l */
  const edit = (l) => {
    host.value = l.host;
    rate.value = String(l.requestsPerSecond);
    burst.value = String(l.burst);
    rate.focus();
  };
  const form = h(
    "form",
    {
      class: "card",
      id: "outbound-form",
      // The browser's own range checks would hide the API's answer, which
      // names the field; the API is the one judge of a limit.
      novalidate: true,
      onsubmit: async (/** @type {SubmitEvent} */ e) => {
        e.preventDefault();
        for (const el of Object.values(errors)) el.replaceChildren();
        status.replaceChildren();
        const name = host.value.trim();
        if (!name) {
          errors.host.replaceChildren("Name the host.");
          return;
        }
        try {
          /** @type {OutboundLimit} */
          const l = await api("PUT", `/workspaces/${workspaceId}/outbound-limits/${encodeURIComponent(name)}`, {
            requestsPerSecond: rate.value === "" ? null : Number(rate.value),
            burst: burst.value === "" ? null : Number(burst.value),
          });
          status.replaceChildren(h("div", { class: "notice", role: "status" }, `${l.host}: ${l.requestsPerSecond}/s, burst ${l.burst}.`));
          await load();
        } catch (err) {
          let shown = false;
          const fieldProblems = err instanceof ApiError ? err.problem.errors || [] : [];
          for (const p of fieldProblems) {
            const key = /** @type {(keyof FIELDS)[]} */ (Object.keys(FIELDS)).find((k) => FIELDS[k] === p.path);
            if (key) {
              errors[key].replaceChildren(p.message);
              shown = true;
            }
          }
          if (!shown) status.replaceChildren(problemView(err));
        }
      },
    },
    h("h2", {}, "Set a host's limit"),
    h("label", { for: "outbound-host" }, "Host"),
    host,
    h("p", { id: "outbound-host-help", class: "help" }, "A DNS name or an IP address, without a port: the limit holds for every port. Setting a host that has a limit changes it."),
    errors.host,
    h("label", { for: "outbound-rate" }, "Requests per second (0.001 to 1000)"),
    rate,
    errors.rate,
    h("label", { for: "outbound-burst" }, "Burst: calls that may go at once (1 to 1000)"),
    burst,
    errors.burst,
    h("button", { type: "submit" }, "Save limit"),
    status,
  );
  page(
    "Outbound limits",
    header.el,
    h("p", { class: "help" }, "The workspace's HTTP_REQUEST nodes calling a host go at most the burst at once, then at the rate; a node over it waits durably, holding no worker slot. An upstream's 429 or 503 with Retry-After pauses the host for this workspace until the time it gives."),
    problem,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "data", id: "outbound" },
        h("caption", { class: "sr-only" }, "Outbound limits by host"),
        h("thead", {}, h("tr", {}, ["Host", "Requests per second", "Burst", "Paused", "Changed", ""].map((c) => h("th", { scope: "col" }, c)))),
        body,
      ),
    ),
    form,
  );
  /** @param {OutboundLimit} l */
  const remove = async (l) => {
    try {
      await api("DELETE", `/workspaces/${workspaceId}/outbound-limits/${encodeURIComponent(l.host)}`);
      problem.replaceChildren(h("div", { class: "notice", role: "status" }, `${l.host}: limit removed.`));
      await load();
    } catch (err) {
      problem.replaceChildren(problemView(err));
    }
  };
  /** load lists the limits as stored now, and the pauses. */
  async function load() {
    /** @type {[OutboundLimit[], OutboundPause[]]} */
    const [limits, pauses] = await Promise.all([api("GET", `/workspaces/${workspaceId}/outbound-limits`), api("GET", `/workspaces/${workspaceId}/outbound-pauses`)]);
    if (!current(gen)) return;
    /** @type {Map<string, string>} */
    const pausedUntil = new Map(pauses.map((p) => [p.host, p.pausedUntil]));
    const hosts = [...new Set([...limits.map((l) => l.host), ...pauses.map((p) => p.host)])].sort();
    renderIfChanged(body, [limits, pauses], () =>
      hosts.length === 0
        ? [h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No host is limited or paused: HTTP nodes call at once."))]
        : hosts.map((host) => {
            const l = limits.find((l) => l.host === host);
            const until = pausedUntil.get(host);
            return h(
              "tr",
              { dataset: { host, paused: String(until !== undefined) } },
              h("th", { scope: "row", "data-label": "Host" }, h("code", {}, host)),
              h("td", { "data-label": "Requests per second", class: "num" }, l ? String(l.requestsPerSecond) : "no limit"),
              h("td", { "data-label": "Burst", class: "num" }, l ? String(l.burst) : ""),
              h("td", { "data-label": "Paused" }, until ? h("span", {}, "until ", h("time", { datetime: until }, when(until)), " (ends ", untilEl(until), ")") : "no"),
              h("td", { "data-label": "Changed" }, l ? h("time", { datetime: l.updatedAt }, when(l.updatedAt)) : ""),
              h(
                "td",
                { class: "actions" },
                l
                  ? [
                      h("button", { type: "button", class: "link", "data-focus-key": `edit-${host}`, "aria-label": `Edit ${host}`, onclick: () => edit(l) }, "Edit"),
                      h("button", { type: "button", class: "danger", "data-focus-key": `delete-${host}`, "aria-label": `Delete the limit of ${host}`, onclick: () => remove(l) }, "Delete"),
                    ]
                  : null,
              ),
            );
          }),
    );
  }
  // Polled, so that a pause shows when an upstream asks for one and goes
  // when it ends; the rows are rebuilt only when they change.
  await every(POLL_MS, async () => {
    try {
      await header.refresh();
      await load();
      problem.querySelector(".problem")?.remove();
    } catch (err) {
      if (current(gen)) problem.replaceChildren(problemView(err));
      throw err;
    }
  });
}
