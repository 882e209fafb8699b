// @ts-check
// Sluice console: a single-page app over the JSON API under /api/v1, in ES
// modules the browser loads as they are (no build step). Each module is
// checked by tsc against the types generated from openapi.yaml (make
// console-check); types.js names them.
//
// The route is the hash: #/workspaces, #/plans, #/capacity, #/workspaces/ID/queue?status=FAILED,
// #/definitions/ID?v=2, #/executions/ID. Links are real anchors, so they
// work with the keyboard, open in new tabs and survive a reload.
import { token, whenRefused } from "./api.js";
import { viewCapacity } from "./capacity.js";
import { h, mainEl, tickClocks } from "./dom.js";
import { viewDefinition, viewDefinitions } from "./definitions.js";
import { viewExecutions } from "./executions.js";
import { viewPlans, viewWorkspaceLimits } from "./limits.js";
import { newView } from "./live.js";
import { viewOutbound } from "./outbound.js";
import { viewQueue } from "./queue.js";
import { viewExecution } from "./run.js";
import { viewSchedules } from "./schedules.js";
import { renderWho, signOut, viewSignIn } from "./signin.js";
import { viewWebhooks } from "./webhooks.js";
import { viewWorkspaces } from "./workspaces.js";

// Ids in a route must be UUIDs, so a crafted link cannot steer the
// console's API calls to another path.
const ID = "([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
/** @param {string} src */
const re = (src) => new RegExp(src);
/** @type {[RegExp, (m: RegExpMatchArray, q: URLSearchParams) => unknown][]} */
const routes = [
  [re(`^\/?$`), () => viewWorkspaces()],
  [re(`^\/workspaces$`), () => viewWorkspaces()],
  [re(`^\/workspaces\/${ID}$`), (m, q) => viewQueue(m[1] || "", q)],
  [re(`^\/workspaces\/${ID}\/queue$`), (m, q) => viewQueue(m[1] || "", q)],
  [re(`^\/workspaces\/${ID}\/executions$`), (m, q) => viewExecutions(m[1] || "", q)],
  [re(`^\/workspaces\/${ID}\/definitions$`), (m) => viewDefinitions(m[1] || "")],
  [re(`^\/workspaces\/${ID}\/schedules$`), (m) => viewSchedules(m[1] || "")],
  [re(`^\/workspaces\/${ID}\/webhooks$`), (m) => viewWebhooks(m[1] || "")],
  [re(`^\/workspaces\/${ID}\/limits$`), (m) => viewWorkspaceLimits(m[1] || "")],
  [re(`^\/workspaces\/${ID}\/outbound$`), (m) => viewOutbound(m[1] || "")],
  [re(`^\/plans$`), () => viewPlans()],
  [re(`^\/capacity$`), () => viewCapacity()],
  [re(`^\/definitions\/${ID}$`), (m, q) => viewDefinition(m[1] || "", q)],
  [re(`^\/executions\/${ID}$`), (m) => viewExecution(m[1] || "")],
];

/** route shows the view the address names, or sign-in without a token. */
function route() {
  newView();
  renderWho();
  if (!token()) {
    viewSignIn();
    return;
  }
  const raw = location.hash.startsWith("#") ? location.hash.slice(1) : "";
  const [path = "", qs = ""] = raw.split("?");
  const params = new URLSearchParams(qs);
  for (const [pattern, show] of routes) {
    const m = path.match(pattern);
    if (m) {
      mainEl().replaceChildren();
      show(m, params);
      return;
    }
  }
  mainEl().replaceChildren(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/workspaces" }, "Back to workspaces")));
}

whenRefused(() => signOut("The token was refused: sign in again."));
window.addEventListener("hashchange", route);
setInterval(tickClocks, 1000);
// A module runs after the document is parsed, as a deferred script does.
const skip = document.querySelector(".skip");
skip?.addEventListener("click", (e) => {
  e.preventDefault();
  mainEl().focus();
});
route();
