package modelcheck

import (
	"fmt"
	"math"
	"time"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The reference model. It knows the documented rules, not the code: instants
// are int64 nanoseconds since the epoch, added with saturation (so no option,
// however large, wraps a time into the past); lease ends are kept in whole
// milliseconds and expiries in whole seconds, the precision the Store
// contract compares them at.

func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// satMul multiplies a ≥ 0 by b > 0.
func satMul(a, b int64) int64 {
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) == (b < 0) {
		q++
	}
	return q
}

// tri is a model answer that may be unknown: the lease of an invocation with
// a deadline depends on the real instant the wrapper measured it, which the
// model only brackets. An unknown answer is settled by the store's.
type tri int

const (
	no tri = iota
	maybe
	yes
)

func or(a, b tri) tri { return max(a, b) }

// options are a wrapper's documented option values, as given.
type options struct {
	maxLease, skew, expiry time.Duration
}

func (o options) String() string {
	return fmt.Sprintf("WithMaxLease(%v) WithClockSkew(%v) WithExpiry(%v)", o.maxLease, o.skew, o.expiry)
}

// maxOption is where duration options saturate (documented on
// idempotent.Option): about 100 years. A duration above it may be lowered to
// it, or kept: the model brackets both (the smaller value gives a span's low
// end, the larger its high end), so it insists only that a lease end or an
// expiry never comes before the smaller one, which is what keeps owners and
// replays safe. Any time past the clock's horizon is "never" for a check.
const maxOption = 100 * 365 * 24 * time.Hour

// option is a duration option's value after the documented floor, capped at
// maxOption or not.
func option(d, floor time.Duration, capped bool) int64 {
	d = max(d, floor)
	if capped {
		d = min(d, maxOption)
	}
	return int64(d)
}

// The documented floors of WithMaxLease, WithClockSkew and WithExpiry.
func (o options) maxLeaseNs(capped bool) int64 { return option(o.maxLease, time.Second, capped) }
func (o options) skewNs(capped bool) int64     { return option(o.skew, 0, capped) }
func (o options) expiryNs(capped bool) int64   { return option(o.expiry, time.Second, capped) }

// span is a lease end in milliseconds known to lie in [lo, hi]. approx
// marks one measured from a deadline on the real clock.
type span struct {
	lo, hi int64
	approx bool
}

// lapsed: the Store contract's LeaseExpiresAt.UnixMilli() < now.UnixMilli().
func (s *span) lapsed(now int64) tri {
	ms := floorDiv(now, 1e6)
	switch {
	case s.hi < ms:
		return yes
	case s.lo >= ms:
		return no
	}
	return maybe
}

// claimTimes is the lease end and expiry of a claim at now (ns): the lease
// is the time to the context's deadline capped by the maximum lease (or the
// maximum lease alone without a deadline), plus the clock skew; the record
// expires after the expiry, never before its lease. The wrapper reads the
// deadline's remaining time on the real clock somewhere in [realFrom,
// realTo], hence spans.
func (o options) claimTimes(now int64, deadline, realFrom, realTo time.Time) (lease span, expLo, expHi int64) {
	end := func(capped bool, real time.Time) int64 {
		budget := o.maxLeaseNs(capped)
		if !deadline.IsZero() {
			budget = min(budget, int64(deadline.Sub(real))) // Sub saturates
		}
		return satAdd(now, satAdd(budget, o.skewNs(capped)))
	}
	lo, hi := end(true, realTo), end(false, realFrom)
	expLo = ceilDiv(max(satAdd(now, o.expiryNs(true)), lo), 1e9)
	expHi = ceilDiv(max(satAdd(now, o.expiryNs(false)), hi), 1e9)
	return span{floorDiv(lo, 1e6), floorDiv(hi, 1e6), !deadline.IsZero()}, expLo, expHi
}

// handlerTime is the least real time the wrapper lets the handler of a claim
// run: the lease budget less the reserve kept to complete or release,
// min(1 s, budget/4).
func (o options) handlerTime(deadline, realTo time.Time) time.Duration {
	budget := o.maxLeaseNs(true)
	if !deadline.IsZero() {
		budget = min(budget, int64(deadline.Sub(realTo)))
	}
	return time.Duration(budget - min(int64(time.Second), budget/4))
}

// completedExpiry is the expiry span (s) of a record completed at now.
func (o options) completedExpiry(now int64) (lo, hi int64) {
	return ceilDiv(satAdd(now, o.expiryNs(true)), 1e9), ceilDiv(satAdd(now, o.expiryNs(false)), 1e9)
}

// record is the model of the one stored record of a key.
type record struct {
	status  storage.Status
	payload int    // the payload it was claimed with (its fingerprint)
	owner   int    // the invocation whose claim wrote it
	lease   string // that claim's lease token
	span    *span  // INPROGRESS: the lease end, shared with the owner
	expLo   int64  // expiry in seconds, known to lie in [expLo, expHi]
	expHi   int64
	resp    string // COMPLETED: the response of the run whose completion landed
	// stepDone: an INPROGRESS record holds the finished step of a wrapper
	// with steps (its owners' handlers take one step, "effect", on entry).
	stepDone bool
}

// expired: the Store contract's ExpiresAt.Unix() < now.Unix().
func (r *record) expired(now int64) tri {
	s := floorDiv(now, 1e9)
	switch {
	case r.expHi < s:
		return yes
	case r.expLo >= s:
		return no
	}
	return maybe
}

// claimable says whether a claim for payload at now may replace r: r has
// expired, or it is INPROGRESS, its lease has lapsed and the claim is for the
// payload it is bound to (a lapsed owner's record stays bound to its payload
// until it expires; only a retry of that payload takes it over).
func (r *record) claimable(payload int, now int64) tri {
	e := r.expired(now)
	if r.status != storage.StatusInProgress || r.payload != payload {
		return e
	}
	return or(e, r.span.lapsed(now))
}

// refused narrows what is unknown about r after the store refused a claim
// for payload at now: it had not expired, nor (when that mattered) lapsed.
func (r *record) refused(payload int, now int64) {
	r.expLo = max(r.expLo, floorDiv(now, 1e9))
	if r.status == storage.StatusInProgress && r.payload == payload {
		r.span.lo = max(r.span.lo, floorDiv(now, 1e6))
	}
}
