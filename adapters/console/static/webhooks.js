// @ts-check
// A workspace's completion webhooks: each endpoint with its latest
// deliveries (status, attempts, last answer) and a button that sends a
// delivery again.
import { api, problemView } from "./api.js";
import { badge, h, page } from "./dom.js";
import { shortId, when } from "./format.js";
import { current, reroute, view } from "./live.js";
import { workspaceHeader } from "./workspaces.js";

/** @typedef {import('./types.js').WebhookEndpoint} WebhookEndpoint */
/** @typedef {import('./types.js').WebhookDeliveryPage} WebhookDeliveryPage */
/** @typedef {import('./types.js').WebhookDelivery} WebhookDelivery */

/** @param {string} workspaceId */
export async function viewWebhooks(workspaceId) {
  const gen = view();
  const header = workspaceHeader(workspaceId, "webhooks");
  const list = h("div", { id: "webhooks" });
  page("Webhooks", header.el, list);
  try {
    await header.refresh();
    /** @type {WebhookEndpoint[]} */
    const endpoints = await api("GET", `/webhooks/endpoints?workspaceId=${encodeURIComponent(workspaceId)}`);
    /** @type {WebhookDeliveryPage[]} */
    const pages = await Promise.all(endpoints.map((e) => api("GET", `/webhooks/endpoints/${e.id}/deliveries?limit=20`)));
    if (!current(gen)) return;
    list.replaceChildren(
      ...(endpoints.length === 0
        ? [h("p", { class: "empty" }, "No webhook endpoints. Register one with POST /api/v1/webhooks/endpoints.")]
        : endpoints.map((e, i) => endpointCard(e, pages[i]?.items || []))),
    );
  } catch (err) {
    if (current(gen)) list.replaceChildren(problemView(err));
  }
}

/**
 * endpointCard shows an endpoint and its latest deliveries.
 * @param {WebhookEndpoint} e
 * @param {WebhookDelivery[]} deliveries
 */
function endpointCard(e, deliveries) {
  return h(
    "section",
    { class: "card", "data-endpoint": e.id },
    h("h2", {}, h("code", {}, e.url)),
    h("p", { class: "muted" }, e.events.join(", "), e.workflowDefinitionId ? ` · definition ${shortId(e.workflowDefinitionId)}` : ""),
    h(
      "table",
      {},
      h("thead", {}, h("tr", {}, ["Delivery", "Event", "Status", "Attempts", "Last answer", "Created", ""].map((c) => h("th", { scope: "col" }, c)))),
      h(
        "tbody",
        {},
        deliveries.length === 0
          ? h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No deliveries yet."))
          : deliveries.map((d) =>
              h(
                "tr",
                { "data-delivery": d.id, "data-status": d.status },
                h("td", {}, h("code", { title: d.id }, shortId(d.id))),
                h("td", {}, d.event),
                h("td", {}, badge(d.status)),
                h("td", {}, String(d.attempts)),
                h("td", {}, d.lastStatusCode !== null ? String(d.lastStatusCode) : d.lastError || ""),
                h("td", {}, h("time", { datetime: d.createdAt }, when(d.createdAt))),
                h(
                  "td",
                  {},
                  h(
                    "button",
                    {
                      type: "button",
                      onclick: async () => {
                        await api("POST", `/webhooks/deliveries/${d.id}/resend`);
                        reroute();
                      },
                    },
                    "Send again",
                  ),
                ),
              ),
            ),
      ),
    ),
  );
}
