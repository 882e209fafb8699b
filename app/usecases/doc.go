// Package usecases is the API role: the commands and queries the HTTP
// adapter calls (Application and its parts: Authenticator, Workspaces,
// Plans, Definitions, Executions with the enqueue of every client way in,
// Events, Streams, Schedules, Webhooks, AllowLists, OutboundLimits,
// Capacity) and the errors it maps to problems. It checks who may do what
// and what a tenant may ask for, builds queue items through queue.NewItem,
// and decides nothing about admission, which is the dispatcher's
// (app/dispatch): a reader of the API opens this package alone.
package usecases
