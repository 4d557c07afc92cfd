package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idemkit/functions/orders"
	"github.com/idemkit/idemkit/functions/payments"
	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/internal/localddb"
)

// record is an idempotency record as the DynamoDB store lays it out.
type record struct {
	ID         string `dynamodbav:"id"`
	Status     string `dynamodbav:"status"`
	Expiration int64  `dynamodbav:"expiration"`
}

// show prints the three tables and the outcome counts.
func (d *demo) show(ctx context.Context) error {
	ledger, err := localddb.Scan[payments.LedgerItem](ctx, d.client, d.tables.Payments)
	if err != nil {
		return err
	}
	slices.SortFunc(ledger, func(a, b payments.LedgerItem) int { return strings.Compare(a.CreatedAt, b.CreatedAt) })
	stock, err := localddb.Scan[orders.InventoryItem](ctx, d.client, d.tables.Inventory)
	if err != nil {
		return err
	}
	slices.SortFunc(stock, func(a, b orders.InventoryItem) int { return strings.Compare(a.SKU, b.SKU) })
	records, err := localddb.Scan[record](ctx, d.client, d.tables.Idempotency)
	if err != nil {
		return err
	}
	slices.SortFunc(records, func(a, b record) int { return strings.Compare(a.ID, b.ID) })

	fmt.Fprintf(d.w, "\nWhat DynamoDB holds now\n")
	fmt.Fprintf(d.w, "\n  payments ledger: %d items, one per execution of the handler\n", len(ledger))
	tw := tabwriter.NewWriter(d.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    step\tpaymentId\tcustomerId\tamount\tcurrency\tstatus\tprocessorKey")
	for _, it := range ledger {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%d\t%s\t%s\t%s…\n", d.paidIn[it.PaymentID], it.PaymentID, it.CustomerID, it.Amount, it.Currency, it.Status, prefix(it.ProcessorKey, 16))
	}
	tw.Flush()

	fmt.Fprintf(d.w, "\n  inventory: each order reserved once (order-1001 arrived 3 times)\n")
	tw = tabwriter.NewWriter(d.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    sku\treserved")
	for _, it := range stock {
		fmt.Fprintf(tw, "    %s\t%d\n", it.SKU, it.Reserved)
	}
	tw.Flush()

	fmt.Fprintf(d.w, "\n  idempotency records: %d, one per key; ids are prefix#SHA-256 of prefix, caller and key (raw keys are never stored)\n", len(records))
	slices.SortStableFunc(records, func(a, b record) int { return cmpStep(d.recordStep[a.ID], d.recordStep[b.ID]) })
	tw = tabwriter.NewWriter(d.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    step\tid\tstatus\texpiration (TTL)")
	for _, r := range records {
		pfx, hash, _ := strings.Cut(r.ID, "#")
		exp := time.Unix(r.Expiration, 0)
		fmt.Fprintf(tw, "    %s\t%s#%s…\t%s\t%s (in %s)\n", d.recordStep[r.ID], pfx, prefix(hash, 16), r.Status, exp.UTC().Format("2006-01-02 15:04:05Z"), hoursMinutes(time.Until(exp)))
	}
	tw.Flush()

	fmt.Fprintf(d.w, "\nOutcomes reported to idempotent.WithOutcomeHook, one per invocation\n")
	for _, fn := range []string{"payments", "orders"} {
		fmt.Fprintf(d.w, "  %-9s %s\n", fn, formatOutcomes(d.totals[fn]))
	}
	fmt.Fprintf(d.w, "  %-12s includes step %d's 400s: a handler's answer is stored, whatever its status\n", idempotent.OutcomeExecuted, stepNumber("invalid-bodies"))
	for _, o := range slices.Sorted(maps.Keys(outcomeReasons)) {
		if steps := d.stepsOf[o]; len(steps) > 0 {
			fmt.Fprintf(d.w, "  %-12s %s: %s\n", o, stepList(steps), outcomeReasons[o])
		}
	}
	d.mu.Lock()
	lines := strings.Split(strings.TrimSpace(d.emfLines.String()), "\n")
	d.mu.Unlock()
	fmt.Fprintf(d.w, "\nThe same outcomes as CloudWatch metrics (package emf): %d Embedded Metric Format log lines, one per invocation; the last:\n  %s\n",
		len(lines), lines[len(lines)-1])
	return nil
}

// outcomeReasons say why the demo's outcomes that are not self-evident
// happened; the summary prints, for each that occurred, the steps it came
// from and its reason.
var outcomeReasons = map[idempotent.Outcome]string{
	idempotent.OutcomeInProgress:   "duplicates while the key's owner ran (or, dead, still held its lease): 409 with Retry-After, or back to SQS",
	idempotent.OutcomeStoreError:   "the simulated crash (a client that never sends the transaction); a real crash reports nothing",
	idempotent.OutcomeRejected:     "refused before any claim, nothing stored: no Idempotency-Key, not JSON, not a valid order",
	idempotent.OutcomeLeaseLost:    "a fenced writer: its lease had been taken over, so its commit (completion and ledger row) was refused",
	idempotent.OutcomeHandlerError: "the handler's writes did not commit (out of stock): its record was released, so a retry runs it again",
}

// stepList formats a set of step numbers: "step N", or "steps N, M, ..." in
// numeric order.
func stepList(steps map[string]bool) string {
	list := slices.SortedFunc(maps.Keys(steps), cmpStep)
	if len(list) == 1 {
		return "step " + list[0]
	}
	return "steps " + strings.Join(list, ", ")
}

// cmpStep orders step numbers numerically.
func cmpStep(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x - y
}

func prefix(s string, n int) string { return s[:min(n, len(s))] }

func hoursMinutes(d time.Duration) string {
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func formatOutcomes(counts map[idempotent.Outcome]int) string {
	return joinSorted(counts, "%s %d", " · ")
}

// joinSorted formats each key of m with its value by format, in key order,
// and joins the results with sep.
func joinSorted[K cmp.Ordered, V any](m map[K]V, format, sep string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(format, k, m[k])
	}
	return strings.Join(parts, sep)
}
