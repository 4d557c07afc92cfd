package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// batchGateNote marks §12's time targets while batchTimesGated is false.
func batchGateNote(gated bool) string {
	if gated {
		return ""
	}
	return " (issue 36, not gated yet)"
}

// batchTimeVerdict is a time target's cell: met or missed, and whether it
// fails the command yet.
func batchTimeVerdict(met, gated bool) string {
	v := "met"
	if !met {
		v = "**missed**"
	}
	if gated {
		return v
	}
	return "target" + batchGateNote(gated) + ": " + v
}

// runsText says how many runs each store had.
func (b *batchResult) runsText() string {
	var s []string
	for _, store := range b.batchStores() {
		s = append(s, fmt.Sprintf("%d runs of each batch over %s", b.Runs[store], store))
	}
	if len(s) == 0 {
		return "no runs"
	}
	return strings.Join(s, ", ")
}

// batchStores are the stores §12 measured idemkit over, in the run's order.
func (b *batchResult) batchStores() []string {
	var s []string
	for _, r := range b.Rows {
		if r.Impl == implIdemkit && !slices.Contains(s, r.Store) {
			s = append(s, r.Store)
		}
	}
	return s
}

// batchTargets are §12's rows of the summary: per store, the calls per
// record (gated) and the slowest ordered batch of 100 (gated once
// batchTimesGated); then idemkit against Powertools.
func (r *report) batchTargets() []target {
	b := r.batch
	if b == nil || r.batchErr != "" {
		return nil
	}
	return b.targets(batchTimesGated)
}

func (b *batchResult) targets(gated bool) []target {
	var t []target
	for _, store := range b.batchStores() {
		callsOK, worst := true, map[string]float64{}
		var slowest batchRow
		for _, r := range b.Rows {
			if r.Impl != implIdemkit || r.Store != store {
				continue
			}
			if r.callsTarget() > 0 {
				callsOK = callsOK && r.callsOK()
				if v := r.callsPerRecord(); len(v) > 0 {
					worst[r.Phase] = max(worst[r.Phase], v[len(v)-1])
				}
			}
			if r.timeTargeted() && (slowest.Records == 0 || r.median() > slowest.median() || r.Problem != "") {
				slowest = r
			}
		}
		t = append(t, target{"12", "batch store calls per record, new / replay (every source, every run): " + store,
			"≤ 2 / ≤ 1", fmt.Sprintf("%.2f / %.2f", worst[phaseNew], worst[phaseReplay]), callsOK})
		if slowest.Records > 0 {
			bound := b.timeBound(store)
			t = append(t, target{"12", fmt.Sprintf("ordered batch of %d at %s a call, the slowest (source, phase): %s", batchOrdered, fmtDur(b.Delay), store),
				fmt.Sprintf("≤ %s, ≥ %.0f records/s (%s)%s", fmtMs(bound), rateTarget(bound), b.boundText(store), batchGateNote(gated)),
				fmt.Sprintf("%s, %.0f records/s (%s, %s)", fmtMs(slowest.median()), slowest.perSecond(), slowest.Source, slowest.Phase),
				slowest.timeOK(bound) && slowest.rateOK(bound)})
		}
	}
	if b.PowertoolsErr != "" {
		t = append(t, target{"12", "idemkit (in order) against Powertools (in parallel) over DynamoDB", "measured" + batchGateNote(gated), "not measured", false})
		return t
	}
	cs := b.comparisons()
	for i := 0; i+1 < len(cs); i += 2 {
		n, rp := cs[i], cs[i+1] // new, replay of one source
		got := fmt.Sprintf("new %s vs %s, replay %s vs %s", fmtMs(n.idemkit.median()), fmtMs(n.powertools.median()),
			fmtMs(rp.idemkit.median()), fmtMs(rp.powertools.median()))
		t = append(t, target{"12", fmt.Sprintf("time per batch, idemkit (in order) vs Powertools (in parallel), over DynamoDB at %s a call: %d %s records",
			fmtDur(b.Delay), n.idemkit.Records, n.idemkit.Source), "idemkit ≤ Powertools" + batchGateNote(gated), got, n.ok() && rp.ok()})
	}
	return t
}

// boundText says where store's time bound comes from.
func (b *batchResult) boundText(store string) string {
	w := b.Waves[store]
	if w == 0 {
		return "store wave not measured"
	}
	if batchWaves*w <= batchTimeTarget {
		return fmt.Sprintf("%d ms: a store wave of %d calls took %s here", batchTimeTarget.Milliseconds(), batchOrdered, fmtMs(w))
	}
	return fmt.Sprintf("%d store waves: one of %d calls took %s here", batchWaves, batchOrdered, fmtMs(w))
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func (r *report) writeBatch(p func(string, ...any)) {
	if !section(p, "12. Batches at 5 ms a call", r.batchErr) || r.batch == nil {
		return
	}
	r.batch.write(p, batchTimesGated)
}

// write renders §12.
func (b *batchResult) write(p func(string, ...any), gated bool) {
	d := fmtDur(b.Delay)
	p("The batch front doors with default options (only the store differs: `idempotent.New(store)`, its logger "+
		"discarded), their Lambda handlers called as the runtime calls them, one batch at a time, each with a 30 s "+
		"deadline (bench/batchwave.go): `kinesisbatch.Wrap` with %d records of one shard and one partition key, "+
		"`ddbstreams.Wrap` with %d INSERTs of one stream, `kafkabatch.Wrap` with %d records of one partition, "+
		"`sqsbatch.Wrap` with %d messages of a standard queue, `rabbitmqbatch.Wrap` and `activemqbatch.Wrap` with %d "+
		"messages of one queue (Amazon MQ: no partial batch response, so a failure fails the batch), built from the first record of each sample event in "+
		"events/ (bench/batchevents.go). The handler decodes the record (the front door does) and does no I/O, so a "+
		"batch's time is the store's. Each batch has new keys (the doors' default keys: event ID, offset, message ID), "+
		"and then runs again (**replay**). **Failure at record 50**: 100 Kinesis records whose 50th handler fails "+
		"once; the response names it, and the **redelivery** is that record and every later one (%d), as Lambda "+
		"delivers them. Each store had one unmeasured batch of %d records of each source first; then %s, the "+
		"sources in turn; times are medians over the runs, client side.\n\n",
		batchOrdered, batchOrdered, batchOrdered, batchSQSMessages, batchOrdered, batchOrdered-batchFailAt+1, batchWarmup, b.runsText())
	p("**%s a round trip, in front of each store**: a TCP proxy on loopback (bench/delayproxy.go) that holds each "+
		"chunk the server sends for %s from its arrival, so a request and its response take %s longer however the "+
		"response is cut, and round trips on different connections overlap, as over a network. The same proxy is "+
		"in front of DynamoDB Local (the SDK client's endpoint, idemkit's and Powertools'), redis-server (go-redis "+
		"dials it) and PostgreSQL (pgx's `DialFunc` dials it). A round trip is one request and its response: a "+
		"DynamoDB API call, a Redis pipeline, a PostgreSQL statement's messages (pgx writes them at once).\n\n", d, d, d)
	p("Store calls are counted as the other sections count them: DynamoDB API calls by §1's SDK middleware, Redis "+
		"commands by §7's go-redis hook (each command of a pipeline counts), PostgreSQL round trips by "+
		"internal/pgtrips (§11). The calls target is at most 2 per new record (claim, completion) and 1 per replay "+
		"(the claim answers it): a store that claims many records in one statement makes fewer round trips per "+
		"record, and each batch is also checked for its handler runs (every record of a new batch once, none on "+
		"a replay) and its partial batch response. A missed calls target fails the command. The time targets are "+
		"issue 36's for the batch engine that claims a batch in one wave and completes it in another: an ordered "+
		"batch of %d within %d store waves of its handlers' own time (≤ %d ms at %s a call, a wave costing one round "+
		"trip), ≥ %d records/s per shard, and idemkit keeping order no slower than Powertools in parallel. A **store "+
		"wave** is measured on each store with its raw client, after the warm-up: %d conditional writes of new keys "+
		"sent at once, in as many round trips as the engine's claim wave makes there (DynamoDB: %d `PutItem`s with "+
		"`attribute_not_exists`; Redis: one pipeline of `SET NX`; PostgreSQL: one `INSERT … SELECT unnest(…) ON "+
		"CONFLICT DO NOTHING`), the median of %d. Where a wave costs more than a round trip because the server "+
		"serves its calls in turn (DynamoDB Local, which does not scale out as DynamoDB does), the bound is %d "+
		"measured waves, and the records/s target the batch's records within it; elsewhere it is %d ms and %d records/s.",
		batchOrdered, batchWaves, batchTimeTarget.Milliseconds(), d, batchRateTarget, batchOrdered, batchOrdered,
		batchWaveProbes, batchWaves, batchTimeTarget.Milliseconds(), batchRateTarget)
	if !gated {
		p(" Today's engine, a claim and a completion per record in turn, misses them by design: they are reported, " +
			"**not gated yet** (`batchTimesGated` in bench/batchwave.go).")
	}
	p("\n\n")

	for _, store := range slices.Sorted(maps.Keys(b.StoreErrs)) {
		p("%s: not measured: `%s`\n\n", store, b.StoreErrs[store])
	}
	p("A trivial round trip through the proxy, after each store's unmeasured batches (median of %d: DynamoDB "+
		"`ListTables` with `Limit` 1, Redis `PING`, PostgreSQL an empty statement), is the %s and what the proxy "+
		"and the machine add to it; a store call per record in turn costs at least that much:\n\n", batchProbes, d)
	p("| store | calls counted | a trivial round trip | × %d (2 per record of %d, in turn) | a store wave (%d writes at once, raw client) | time bound of an ordered batch | records/s target |\n|---|---|---|---|---|---|---|\n",
		2*batchOrdered, batchOrdered, batchOrdered)
	for _, store := range b.batchStores() {
		rt, w, bound := b.RoundTrips[store], "–", b.timeBound(store)
		if b.Waves[store] > 0 {
			w = fmtMs(b.Waves[store])
		}
		p("| %s | %s | %s | %s | %s | %s (%s) | %.0f |\n", store, b.Counted[store], fmtMs(rt), fmtMs(rt*2*batchOrdered),
			w, fmtMs(bound), b.boundText(store), rateTarget(bound))
	}
	p("\n")
	p("| store | source | batch | records | time per batch | records/s | store calls per batch | per record | calls target | within the time bound | records/s target |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range b.Rows {
		if r.Impl != implIdemkit {
			continue
		}
		calls, timeCell, rateCell := "–", "–", "–"
		if t := r.callsTarget(); t > 0 {
			calls = fmt.Sprintf("≤ %d: %s", t, verdict(r.callsOK()))
		}
		if r.timeTargeted() {
			bound := b.timeBound(r.Store)
			timeCell, rateCell = batchTimeVerdict(r.timeOK(bound), gated), batchTimeVerdict(r.rateOK(bound), gated)
		}
		rs := fmt.Sprintf("%.0f", r.perSecond())
		if r.Problem != "" {
			rs += " (" + r.Problem + ")"
		}
		p("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Store, r.Source, r.Phase, r.Records,
			r.timeSpread().format("%.1f ms"), rs, joinInts(r.Calls), fmtPerRecord(r.callsPerRecord()), calls, timeCell, rateCell)
	}
	p("\n")

	p("**Powertools**: Powertools for AWS Lambda (TypeScript)'s batch processor (`BatchProcessor`, " +
		"`processPartialResponse`, pinned in bench/powertools/package.json) with its idempotency (`makeIdempotent` on " +
		"the record handler, `DynamoDBPersistenceLayer`), as its documentation pairs them, with its default: the " +
		"records of a batch in parallel, so the Kinesis records out of order. Keyed as idemkit's doors key by " +
		"default (`messageId`, `eventID`), on the same batches (idembench writes them for bench/powertools/batch.mjs, " +
		"the first of each unmeasured), over the same DynamoDB Local through the same proxy; its DynamoDB calls " +
		"counted by a middleware on its client.\n\n")
	if b.PowertoolsErr != "" {
		p("Not measured: `%s`\n\n", b.PowertoolsErr)
	} else {
		p("| source | batch | records | idemkit, in order | Powertools, in parallel | idemkit / Powertools | calls per record, idemkit vs Powertools | idemkit ≤ Powertools |\n")
		p("|---|---|---|---|---|---|---|---|\n")
		for _, c := range b.comparisons() {
			if !c.found {
				continue
			}
			ratio := "–"
			if m := c.powertools.median(); m > 0 {
				ratio = fmt.Sprintf("%.2f", float64(c.idemkit.median())/float64(m))
			}
			pt := c.powertools.timeSpread().format("%.1f ms")
			if c.powertools.Problem != "" {
				pt += " (" + c.powertools.Problem + ")"
			}
			p("| %s | %s | %d | %s | %s | %s | %s vs %s | %s |\n", c.idemkit.Source, c.idemkit.Phase, c.idemkit.Records,
				c.idemkit.timeSpread().format("%.1f ms"), pt, ratio, fmtPerRecord(c.idemkit.callsPerRecord()),
				fmtPerRecord(c.powertools.callsPerRecord()), batchTimeVerdict(c.ok(), gated))
		}
		p("\n")
	}

	p("Each source's time for %d records at %s a call (the closing note's figures; SQS: %d messages):\n\n", batchOrdered, d, batchSQSMessages)
	p("| source | %s |\n|---|%s\n", strings.Join(b.batchStores(), " | "), strings.Repeat("---|", len(b.batchStores())))
	for _, source := range []string{sourceKinesis, sourceDDBStreams, sourceKafka, sourceSQS, sourceRabbitMQ, sourceActiveMQ} {
		for _, phase := range []string{phaseNew, phaseReplay, phaseFailure, phaseRedelivery} {
			cells := make([]string, 0, 3)
			for _, store := range b.batchStores() {
				if row, ok := b.row(implIdemkit, store, source, phase); ok {
					cells = append(cells, fmtMs(row.median()))
				}
			}
			if len(cells) > 0 {
				p("| %s, %s | %s |\n", source, phase, strings.Join(cells, " | "))
			}
		}
	}
	p("\nThe section took %s of wall time.\n\n", b.Wall.Round(100*time.Millisecond))
}
