package storetest

import (
	"strings"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// traceparent is a W3C traceparent, what idemkit's OpenTelemetry hook
// stores in storage.Record.Trace.
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// longestTrace is the longest Trace the engine writes, of every printable
// ASCII character (its text rule).
func longestTrace() string {
	var b strings.Builder
	for b.Len() < storage.MaxTraceBytes {
		b.WriteByte(byte(0x20 + b.Len()%(0x7f-0x20)))
	}
	return b.String()
}

// traceCases check storage.Record.Trace: Complete writes it as given,
// replacing the stored one, and a claimed record holds none.
func traceCases() []testCase {
	return []testCase{
		{"TraceRoundTrip", base, func(c *checker) {
			for _, trace := range []string{traceparent, longestTrace()} {
				a := c.inProgress(time.Minute)
				c.mustClaim(a, c.now)
				done := completed(a, []byte(`p{"ok":true}`), c.now.Add(time.Hour))
				done.Trace = trace
				c.mustComplete(done)
				got := c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Minute))
				c.sameRecord(got, done)
				if got.Trace != trace {
					c.errorf("Trace of a completed record = %q, want %q", got.Trace, trace)
				}
			}
		}},
		{"TraceIsReplacedByARetriedCompletion", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			c.mustClaim(a, c.now)
			done := completed(a, nil, c.now.Add(time.Hour))
			done.Trace = traceparent
			c.mustComplete(done)
			other := done
			other.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
			c.mustComplete(other)
			if got := c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Minute)); got.Trace != other.Trace {
				c.errorf("Trace after a retried completion with another trace = %q, want %q", got.Trace, other.Trace)
			}
			none := done
			none.Trace = ""
			c.mustComplete(none)
			if got := c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now.Add(time.Minute)); got.Trace != "" {
				c.errorf("Trace after a completion without one = %q, want none", got.Trace)
			}
		}},
		{"ClaimedRecordHoldsNoTrace", base, func(c *checker) {
			a := c.inProgress(time.Minute)
			a.Trace = traceparent
			c.mustClaim(a, c.now)
			if got := c.mustRefuse(rival(a, c.now.Add(2*time.Minute)), c.now); got.Trace != "" {
				c.errorf("Trace of a claimed record = %q, want none", got.Trace)
			}
			// A claim replacing an expired completed record drops its trace too.
			b := c.inProgress(time.Minute)
			c.mustClaim(b, c.now)
			done := completed(b, nil, c.now.Add(time.Second))
			done.Trace = traceparent
			c.mustComplete(done)
			later := c.now.Add(time.Hour)
			again := rival(b, later.Add(time.Minute))
			again.ExpiresAt = later.Add(time.Hour)
			c.mustClaim(again, later)
			if got := c.mustRefuse(rival(again, later.Add(2*time.Minute)), later); got.Trace != "" {
				c.errorf("Trace of a record claimed over an expired completed one = %q, want none", got.Trace)
			}
		}},
	}
}
