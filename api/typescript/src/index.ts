/**
 * The Sluice TypeScript client: openapi-fetch over the types that
 * openapi-typescript generates from openapi.yaml (src/schema.d.ts, never
 * edited by hand: `npm run generate`).
 */
import createClient, { type Client, type ClientOptions } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

/** A client whose paths, parameters, bodies and responses are typed from openapi.yaml. */
export type SluiceClient = Client<paths>;

/** Named schemas from openapi.yaml, e.g. `Schema<"Execution">`. */
export type Schema<Name extends keyof components["schemas"]> = components["schemas"][Name];

/** RFC 9457 problem details: the body of every 4xx and 5xx answer. */
export type Problem = components["schemas"]["Problem"];

/**
 * Creates a client for the Sluice API at `baseUrl` (e.g. http://localhost:8080)
 * that sends `Authorization: Bearer <token>` on every request. `token` is the
 * admin token or a workspace API key; leave it out (or empty) to send no
 * credentials at all. `options` go to openapi-fetch's createClient (a custom
 * `fetch`, extra `headers`, ...); the Authorization header always wins.
 */
export function createSluiceClient(
  baseUrl: string,
  token?: string,
  options: Omit<ClientOptions, "baseUrl"> = {},
): SluiceClient {
  const headers = new Headers(options.headers as ConstructorParameters<typeof Headers>[0]);
  if (token) {
    headers.set("Authorization", `Bearer ${token}`);
  }
  return createClient<paths>({
    ...options,
    baseUrl: baseUrl.replace(/\/+$/, ""),
    headers: Object.fromEntries(headers.entries()),
  });
}

export {
  type ChildWorkflow,
  executeWorkflow,
  GatedApiError,
  GatedRun,
  GatedRunError,
  GATING_NODE_TYPE,
  type StartOptions,
} from "./gated.js";
