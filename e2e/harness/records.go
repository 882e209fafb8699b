package harness

import (
	"strings"
	"time"

	"github.com/sluicehq/sluice/ports/porttest"
)

// WaitForStatus polls an execution until it has one of statuses, for up
// to within.
func (e *E2E) WaitForStatus(execID string, within time.Duration, statuses ...string) Execution {
	e.T.Helper()
	var ex Execution
	porttest.Eventually(e.T, within, porttest.Holds("execution to reach "+strings.Join(statuses, " or "), func() bool {
		ex = Execution{}
		Call(e.T, "GET", e.Base+"/api/v1/workflow/executions/"+execID, TestAdminToken, nil, &ex)
		for _, s := range statuses {
			if ex.Status == s {
				return true
			}
		}
		return false
	}))
	return ex
}
