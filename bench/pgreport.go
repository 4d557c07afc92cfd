package main

import "fmt"

// pgTargets are §11's rows of the summary.
func (r *report) pgTargets() []target {
	if r.pg == nil {
		return nil
	}
	var t []target
	for _, c := range r.pg.Calls {
		got := joinInts(c.Calls)
		if c.Problem != "" {
			got += " (" + c.Problem + ")"
		}
		t = append(t, target{"11", "PostgreSQL round trips: " + c.Scenario, fmt.Sprint(c.Target), got, c.ok()})
	}
	for _, c := range r.pg.Cases {
		w := c.wrapped()
		t = append(t, target{"11", "PostgreSQL round trips, every measured invocation: " + c.Case + ", " + w.Name, fmt.Sprint(w.Target),
			joinInts(w.Trips), w.ok()})
	}
	for _, c := range r.pg.Cases {
		t = append(t, target{"11", "latency the PostgreSQL check adds at p99: " + c.Case + " (one INSERT, wrapped − bare)",
			fmt.Sprintf("< %d ms", pgAddedP99Target.Milliseconds()),
			fmt.Sprintf("%.3f ms (wrapped / bare: p50 %.3f, p99 %.3f)", c.addedP99()/1000,
				c.wrapped().Latency.P50/c.bare().Latency.P50, c.wrapped().Latency.P99/c.bare().Latency.P99), c.addedOK()})
	}
	return t
}

func (r *report) writePGFloor(p func(string, ...any)) {
	if !section(p, "11. The PostgreSQL store: distance from the floor", r.pgErr) || r.pg == nil {
		return
	}
	p("`pgstore` over the PostgreSQL server `scripts/with-postgres.sh` starts (see the machine table; a throwaway " +
		"cluster, so no fsync: a COMMIT here costs no disk flush), through pgx v5's `pgxpool` with one connection, the " +
		"invocations one at a time (bench/pgfloor.go). The handler is the classic one on PostgreSQL: it inserts one " +
		"ledger row (id, customer, amount, currency) for the 1 KB payment event. **Bare** is that `INSERT` alone, in " +
		"autocommit (one round trip): the handler's own work without idempotency, and what a duplicate would cost " +
		"without the check (the handler runs again). **Wrapped** is the same `INSERT` through `idempotent.Wrap` over " +
		"`pgstore.New`, in `pgstore.Tx`, so the row commits with the record: the claim, `BEGIN`, the `INSERT`, the " +
		"completion's `UPDATE`, `COMMIT`. **Wrapped, a handler without SQL** is the store's own two statements around " +
		"a handler that writes nothing.\n\n")
	p("Round trips are counted on the connection (internal/pgtrips, as pgstore's tests count them: pgx sends a " +
		"statement's messages in one write, then reads the answer), on a warm connection: pgx prepares each statement " +
		"once per connection, one more round trip the first time; `pgxpool`'s ping of a connection idle for a second " +
		"is turned off (see [PostgreSQL](docs/postgresql.md#round-trips)).\n\n")
	p("| scenario | outcome | target | round trips measured | |\n|---|---|---|---|---|\n")
	for _, c := range r.pg.Calls {
		got := joinInts(c.Calls)
		if c.Problem != "" {
			got += " (" + c.Problem + ")"
		}
		p("| %s | %s | %d | %s | %s |\n", c.Scenario, c.Outcome, c.Target, got, verdict(c.ok()))
	}
	p("\nThe in-progress duplicate is another engine's (another instance's): one engine answers a duplicate of a run " +
		"it has in flight without a call.\n\n")
	p("Latency: the paths interleaved in rotating order, one invocation at a time, after %d unmeasured invocations "+
		"of each; per invocation, client side. The replay case replays the new-key case's keys; its bare path inserts "+
		"fresh rows. **Added by the check** is the wrapped invocation's latency less the bare one's, at the same "+
		"percentile; the target is under %d ms at p99.\n\n", r.cfg.PGFloorWarmup, pgAddedP99Target.Milliseconds())
	p("| case | path | invocations | round trips per invocation | p50 | p99 | / bare p50 | / bare p99 | |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.pg.Cases {
		b := c.bare()
		for i, x := range c.Paths {
			trips, ok := joinInts(x.Trips), ""
			r50, r99 := fmt.Sprintf("%.3f", x.Latency.P50/b.Latency.P50), fmt.Sprintf("%.3f", x.Latency.P99/b.Latency.P99)
			if x.Target > 0 {
				trips += fmt.Sprintf(" (target %d)", x.Target)
				ok = verdict(x.ok())
			}
			if i == 1 {
				r50, r99 = "**"+r50+"**", "**"+r99+"**"
			}
			p("| %s | %s | %d | %s | %.1f µs | %.1f µs | %s | %s | %s |\n", c.Case, x.Name, x.Latency.N, trips,
				x.Latency.P50, x.Latency.P99, r50, r99, ok)
		}
	}
	p("\n| case | added by the check: p50 | added by the check: p99 | target | |\n|---|---|---|---|---|\n")
	for _, c := range r.pg.Cases {
		p("| %s | %.0f µs | **%.0f µs** | < %d ms | %s |\n", c.Case, c.addedP50(), c.addedP99(),
			pgAddedP99Target.Milliseconds(), verdict(c.addedOK()))
	}
	p("\nHere a round trip is loopback on the same %d cores, and PostgreSQL's backends are among the \"other "+
		"processes\" of [Run conditions](#run-conditions). Against a database across a network, each round trip adds "+
		"the network's latency: a new key whose handler writes in `pgstore.Tx` makes 5 round trips where the bare "+
		"`INSERT` makes 1 (a handler that already used a transaction makes 3: the check adds the claim and the "+
		"completion), a replay 1.\n\n", r.machine.Cores)
}
