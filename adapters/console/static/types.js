// @ts-check
// The API's types, as the TypeScript client generates them from
// openapi.yaml: the console names them here once, and every module imports
// them from this file, so a change of the contract is a type error in the
// console (make console-check) instead of a page that quietly breaks.
// The file is only comments to the browser.

/** @typedef {import('../../../api/typescript/src/schema').components['schemas']} Schemas */
/** @typedef {Schemas['Caller']} Caller */
/** @typedef {Schemas['Workspace']} Workspace */
/** @typedef {Schemas['WorkspacePage']} WorkspacePage */
/** @typedef {Schemas['Definition']} Definition */
/** @typedef {Schemas['DefinitionPage']} DefinitionPage */
/** @typedef {Schemas['DefinitionVersion']} DefinitionVersion */
/** @typedef {Schemas['Graph']} Graph */
/** @typedef {Schemas['Node']} GraphNode */
/** @typedef {Schemas['Edge']} GraphEdge */
/** @typedef {Schemas['EnqueuedExecution']} EnqueuedExecution */
/** @typedef {Schemas['QueueItem']} QueueItem */
/** @typedef {Schemas['QueueItemPage']} QueueItemPage */
/** @typedef {Schemas['QueueStatus']} QueueStatus */
/** @typedef {Schemas['Execution']} Execution */
/** @typedef {Schemas['ExecutionPage']} ExecutionPage */
/** @typedef {Schemas['ExecutionStatus']} ExecutionStatus */
/** @typedef {Schemas['NodeRecord']} NodeRecord */
/** @typedef {Schemas['NodeRecordPage']} NodeRecordPage */
/** @typedef {Schemas['NodeStatus']} NodeStatus */
/** @typedef {Schemas['CancelResponse']} CancelResponse */
/** @typedef {Schemas['Schedule']} Schedule */
/** @typedef {Schemas['SchedulePage']} SchedulePage */
/** @typedef {Schemas['Problem']} Problem */
/** @typedef {Schemas['FieldError']} FieldError */
/** @typedef {Schemas['PlanLimits']} PlanLimits */
/** @typedef {Schemas['WorkspaceLimits']} WorkspaceLimits */
/** @typedef {Schemas['Capacity']} Capacity */
/** @typedef {Schemas['PlanUse']} PlanUse */
/** @typedef {Schemas['OutboundLimit']} OutboundLimit */
/** @typedef {Schemas['OutboundPause']} OutboundPause */
/** @typedef {Schemas['WebhookEndpoint']} WebhookEndpoint */
/** @typedef {Schemas['WebhookDelivery']} WebhookDelivery */
/** @typedef {Schemas['WebhookDeliveryPage']} WebhookDeliveryPage */

/**
 * The queue's statuses in the order the queue page's filter lists them.
 * Typed as a record over QueueStatus, so a status the API adds or drops is
 * a type error here rather than a filter that misses it.
 * @type {Record<QueueStatus, true>}
 */
const queueStatuses = { PENDING: true, CLAIMED: true, DISPATCHED: true, FAILED: true, CANCELLED: true };
export const QUEUE_STATUSES = /** @type {QueueStatus[]} */ (Object.keys(queueStatuses));

/** @type {Record<ExecutionStatus, true>} */
const executionStatuses = { RUNNING: true, COMPLETED: true, FAILED: true, CANCELLED: true };
export const EXECUTION_STATUSES = /** @type {ExecutionStatus[]} */ (Object.keys(executionStatuses));

/**
 * A node's colour in a run's drawing: its NodeStatus, or WAITING before it
 * has a record.
 * @type {Record<NodeStatus | "WAITING", true>}
 */
const nodeStatuses = { WAITING: true, RUNNING: true, COMPLETED: true, FAILED: true, SKIPPED: true, CANCELLED: true };
export const NODE_STATUSES = /** @type {(NodeStatus | "WAITING")[]} */ (Object.keys(nodeStatuses));
