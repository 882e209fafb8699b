// @ts-check
// Signing in and out with a workspace API key or the admin token.
import { caller, forgetToken, isAdmin, problemView, setToken, token } from "./api.js";
import { h, page } from "./dom.js";
import { reroute } from "./live.js";

let signInMessage = "";

/** renderWho shows the header's navigation and Sign out while signed in. */
export function renderWho() {
  const who = /** @type {HTMLElement} */ (document.getElementById("who"));
  const nav = /** @type {HTMLElement} */ (document.getElementById("nav"));
  if (!token()) {
    who.replaceChildren();
    nav.replaceChildren();
    return;
  }
  nav.replaceChildren(h("a", { href: "#/workspaces" }, "Workspaces"));
  // The plans and the capacity page are the admin's only: their links
  // show for the admin token.
  isAdmin().then((admin) => {
    if (admin && token() && !nav.querySelector("#nav-plans")) {
      nav.append(h("a", { href: "#/plans", id: "nav-plans" }, "Plans"), h("a", { href: "#/capacity", id: "nav-capacity" }, "Capacity"));
    }
  });
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

/**
 * signOut forgets the token and shows the sign-in form, with message.
 * @param {string} [message]
 */
export function signOut(message) {
  forgetToken();
  signInMessage = message || "";
  reroute();
}

export function viewSignIn() {
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
      onsubmit: async (/** @type {SubmitEvent} */ e) => {
        e.preventDefault();
        setToken(input.value.trim());
        try {
          await caller();
          signInMessage = "";
          if (!location.hash.startsWith("#/")) history.replaceState(null, "", "#/workspaces");
          reroute();
        } catch (err) {
          forgetToken();
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
