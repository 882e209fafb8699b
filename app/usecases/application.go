package usecases

import (
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Application is the API's use cases, one group per aggregate. Every use
// case takes the caller (a domain.Actor), checks what it may do, and then
// acts through its ports.
type Application struct {
	Auth        *Authenticator
	Workspaces  *Workspaces
	Plans       *Plans
	Capacity    *Capacity
	Definitions *Definitions
	Executions  *Executions
	// Outbound is nil when Stores has no OutboundLimits.
	Outbound *OutboundLimits
	// AllowLists is nil when Stores has no AllowLists.
	AllowLists *AllowLists
	Schedules  *Schedules
	Events     *Events
	// Webhooks are set by the API's composition (NewWebhooks): they need
	// the outbound guard, which the other use cases do not.
	Webhooks *Webhooks
	// Streams are set by the API's composition (NewStreams): they need the
	// process's event hub.
	Streams *Streams
}

// Stores are the storage ports the API's use cases need; one adapter may
// implement them all.
type Stores struct {
	Workspaces  ports.WorkspaceStore
	Plans       ports.PlanStore
	APIKeys     ports.APIKeyStore
	Definitions ports.DefinitionStore
	Queue       ports.QueueStore
	Executions  ports.ExecutionReader
	// OutboundLimits keeps the workspaces' host limits.
	OutboundLimits ports.OutboundLimitStore
	Schedules      ports.ScheduleStore
	// Timetables reads the schedules' cron expressions.
	Timetables ports.TimetableParser
	// Events keeps the events sent to WAIT_FOR_EVENT nodes.
	Events ports.EventStore
	// AllowLists keep what the workspaces' TEMPORAL_WORKFLOW nodes may
	// start; without them every such node is refused at save.
	AllowLists ports.AllowLists
	// OwnTaskQueues are Sluice's own task queues, which no allow-list
	// may open.
	OwnTaskQueues domain.ReservedTaskQueues
	// Capacity reads the capacity page's series.
	Capacity ports.CapacityStore
}

// NewApplication wires the use cases. engine may be nil in a process that
// cannot reach Temporal.
func NewApplication(s Stores, engine ports.WorkflowEngine, quotas domain.ProcessQuotas, templateBudget int, auth AuthConfig) *Application {
	authenticator := NewAuthenticator(s.APIKeys, auth)
	a := &Application{
		Auth:        authenticator,
		Workspaces:  NewWorkspaces(s.Workspaces, s.APIKeys, authenticator),
		Plans:       NewPlans(s.Plans, s.Workspaces, ExternalWorker{}),
		Capacity:    NewCapacity(s.Capacity),
		Definitions: NewDefinitions(s.Definitions, s.Workspaces, quotas, templateBudget).CheckingAllowLists(s.AllowLists, s.OwnTaskQueues),
		Executions:  NewExecutions(s.Queue, s.Executions, s.Definitions, s.Workspaces, engine, quotas),
		Schedules:   NewSchedules(s.Schedules, s.Definitions, s.Workspaces, s.Timetables),
		Events:      NewEvents(s.Executions, s.Definitions, s.Events, engine, quotas),
	}
	if s.OutboundLimits != nil {
		a.Outbound = NewOutboundLimits(s.OutboundLimits, s.Workspaces)
	}
	if s.AllowLists != nil {
		a.AllowLists = NewAllowLists(s.AllowLists, s.Workspaces, s.OwnTaskQueues)
	}
	return a
}
