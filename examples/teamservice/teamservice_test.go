package teamservice_test

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/examples/teamservice"
)

func TestChargeCustomer(t *testing.T) {
	cases := []struct {
		name     string
		in       teamservice.ChargeInput
		wantType string // the failure's type; "" for a receipt
	}{
		{name: "a charge returns its receipt after its hold", in: teamservice.ChargeInput{Customer: "ada", AmountCents: 1200, HoldMs: 2000}},
		{name: "a declined card fails without retrying", in: teamservice.ChargeInput{Customer: "ada", AmountCents: 1200, Decline: true}, wantType: teamservice.ErrDeclined},
		{name: "a charge without a customer is refused", in: teamservice.ChargeInput{AmountCents: 1200}, wantType: "BadCharge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			teamservice.Register(env)
			env.ExecuteWorkflow(teamservice.WorkflowType, tc.in)
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			err := env.GetWorkflowError()
			if tc.wantType != "" {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != tc.wantType || !app.NonRetryable() {
					t.Fatalf("error %v, want a non-retryable %s", err, tc.wantType)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var r teamservice.Receipt
			if err := env.GetWorkflowResult(&r); err != nil {
				t.Fatal(err)
			}
			if r.Customer != "ada" || r.AmountCents != 1200 || r.ChargeID == "" {
				t.Fatalf("receipt %+v", r)
			}
		})
	}
}
