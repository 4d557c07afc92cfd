package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/idemkit/idemkit/cmd/internal/idemkitcli"
	"github.com/idemkit/idemkit/functions/payments"
	samples "github.com/idemkit/idemkit/internal/sampleevents"
)

// inspect ends the demo as an operator would start: the idemkit command
// (cmd/idemkit's logic, run in process on the demo's table) finds the
// new-payment step's record from the raw Idempotency-Key and caller of its request, and shows
// it with the stored HTTP response.
func (d *demo) inspect(ctx context.Context) error {
	ev := sample(samples.PaymentNew)
	if ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.JWT == nil {
		return fmt.Errorf("the %s sample has no JWT caller", samples.PaymentNew)
	}
	claims := ev.RequestContext.Authorizer.JWT.Claims
	args := []string{"inspect", "--table", d.tables.Idempotency, "--prefix", payments.Prefix,
		"--http-key", ev.Headers["idempotency-key"], "--caller", "jwt",
		"--caller-part", claims["iss"], "--caller-part", claims["sub"], "--show-response"}
	fmt.Fprintf(d.w, "\nStep %d's record through the idemkit command (go install ./cmd/idemkit), found from the request's raw key and caller:\n", stepNumber("new-payment"))
	fmt.Fprintf(d.w, "  $ idemkit %s\n", strings.Join(args, " "))
	var out bytes.Buffer
	code := (&idemkitcli.Command{Stdout: &out, Stderr: &out}).Run(ctx, args)
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		fmt.Fprintf(d.w, "  %s\n", line)
	}
	if code != idemkitcli.ExitOK {
		return fmt.Errorf("idemkit inspect exited %d", code)
	}
	return nil
}
