package app

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
	Definitions *Definitions
	Executions  *Executions
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
}

// NewApplication wires the use cases. engine may be nil in a process that
// cannot reach Temporal.
func NewApplication(s Stores, engine ports.WorkflowEngine, quotas domain.Quotas, templateBudget int, adminToken string) *Application {
	return &Application{
		Auth:        NewAuthenticator(s.APIKeys, adminToken),
		Workspaces:  NewWorkspaces(s.Workspaces, s.APIKeys),
		Plans:       NewPlans(s.Plans, s.Workspaces),
		Definitions: NewDefinitions(s.Definitions, s.Workspaces, quotas, templateBudget),
		Executions:  NewExecutions(s.Queue, s.Executions, s.Definitions, s.Workspaces, engine, quotas),
	}
}
