package dynamostore

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expressions never change for a Store, only their values do. New builds
// each one once with the expression builder, giving it these sentinel values,
// and finds the sentinels again in the builder's output to learn which
// placeholder (":0", ":1", ...) each value got. A call then fills a fresh
// values map and reuses the expression strings and names map.
const (
	roleNow        = "\x00now"
	roleNowMs      = "\x00now_ms"
	roleInProgress = "\x00inprogress"
	roleStatus     = "\x00status"
	roleData       = "\x00data"
	roleExpiration = "\x00expiration"
	roleLease      = "\x00lease"
	roleValidation = "\x00validation"
	roleVersion    = "\x00version"
	roleLeaseEnd   = "\x00lease_end"
	roleEmpty      = "\x00empty"
	roleStep       = "\x00step"
	roleSuspended  = "\x00suspended"
	roleRecordVer  = "\x00record_version"
)

// compiled is one built expression: its strings, its names map (shared by
// every call and never written after New) and the placeholder of each role.
type compiled struct {
	condition *string
	update    *string
	names     map[string]string
	values    map[string]string // role -> placeholder
}

// valuePlaceholder matches a value placeholder of the builder's output.
var valuePlaceholder = regexp.MustCompile(`:[0-9]+`)

func compile(b expression.Builder, roles ...string) compiled {
	e, err := b.Build()
	if err != nil {
		panic(fmt.Sprintf("dynamostore: New: build expression: %v", err))
	}
	c := compiled{names: e.Names(), values: make(map[string]string, len(roles))}
	// The builder gives every use of a value its own placeholder, even for
	// the same sentinel (the claim uses :lease in its update and its
	// condition). Each role keeps one placeholder, the other uses are
	// rewritten to it, so a call fills one value per role.
	same := make(map[string]string)
	for placeholder, v := range e.Values() {
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		if first, seen := c.values[s.Value]; !seen || placeholder < first {
			c.values[s.Value] = placeholder
		}
		same[placeholder] = s.Value
	}
	rewrite := func(expr *string) *string {
		if expr == nil {
			return nil
		}
		out := valuePlaceholder.ReplaceAllStringFunc(*expr, func(p string) string {
			if role, ok := same[p]; ok {
				return c.values[role]
			}
			return p
		})
		return &out
	}
	c.condition, c.update = rewrite(e.Condition()), rewrite(e.Update())
	for _, role := range roles {
		if c.values[role] == "" {
			panic(fmt.Sprintf("dynamostore: New: no placeholder for %q in the built expression", role))
		}
	}
	return c
}

func name(n string) expression.NameBuilder { return expression.NameNoDotSplit(n) }

func value(role string) expression.ValueBuilder { return expression.Value(role) }

// claimExpr is the claim: an UpdateItem that writes every attribute of the
// claimed record except the steps, which it leaves as they are:
//
//	SET #status = :status, #expiration = :expiration, #lease = :lease,
//	    #version = :version, #in_progress_expiration = :lease_end,
//	    #validation = :validation, #data = :data
//	REMOVE #suspended, #data, ...  (each optional attribute the claim does not carry)
//
// on the condition that the stored record may be replaced by the liveness
// rule (storage.Record.Replaceable) and either holds no steps or is
// resumable for this claim (storage.Record.Resumable), so that the steps it
// keeps are exactly the ones it may keep:
//
//	attribute_not_exists(#id) OR #lease = :lease OR
//	(attribute_not_exists(#steps) AND #expiration < :now) OR
//	(#status = :inprogress AND #in_progress_expiration < :now_ms AND
//	 #version = :record_version AND attribute_exists(#lease) AND
//	 ((attribute_not_exists(#steps) AND <fingerprint compatible>) OR
//	  (#expiration >= :now AND <same fingerprint>)))
//
// :record_version is storage.RecordVersion: a foreign record (another
// format version, or no lease) is never taken over, only replaced once it
// expires.
//
// For a claim with a fingerprint (bound), compatible is
// attribute_not_exists(#validation) OR #validation = :validation and same is
// #validation = :validation; without one, compatible always holds and same is
// attribute_not_exists(#validation). A replaceable record that holds steps
// it may not keep fails the condition: Claim then replaces it with
// replaceExpr.
type claimExpr struct {
	update, condition *string
	names             map[string]string
	now, nowMs, inProgress, status, expiration, lease,
	version, recordVersion, leaseEnd, validation, data string
}

// claimShape selects one of the claim expressions: which optional
// attributes the claimed record carries.
type claimShape struct {
	fingerprint, leaseEnd, data bool
}

// index is the shape's slot in Store.claims.
func (c claimShape) index() int {
	i := 0
	if c.fingerprint {
		i |= 1
	}
	if c.leaseEnd {
		i |= 2
	}
	if c.data {
		i |= 4
	}
	return i
}

// compileClaims builds the claim expression of every shape.
func compileClaims(o *Options) [8]claimExpr {
	var out [8]claimExpr
	for i := range out {
		shape := claimShape{fingerprint: i&1 != 0, leaseEnd: i&2 != 0, data: i&4 != 0}
		out[shape.index()] = compileClaim(o, shape)
	}
	return out
}

func compileClaim(o *Options, shape claimShape) claimExpr {
	upd := expression.Set(name(o.StatusAttr), value(roleStatus)).
		Set(name(o.ExpirationAttr), value(roleExpiration)).
		Set(name(o.LeaseAttr), value(roleLease)).
		Set(name(o.VersionAttr), value(roleVersion))
	roles := []string{roleNow, roleNowMs, roleInProgress, roleStatus, roleExpiration, roleLease, roleVersion, roleRecordVer}
	optional := []struct {
		attr, role string
		set        bool
	}{
		{o.InProgressExpirationAttr, roleLeaseEnd, shape.leaseEnd},
		{o.ValidationAttr, roleValidation, shape.fingerprint},
		{o.DataAttr, roleData, shape.data},
	}
	for _, a := range optional {
		if a.set {
			upd = upd.Set(name(a.attr), value(a.role))
			roles = append(roles, a.role)
		} else {
			upd = upd.Remove(name(a.attr))
		}
	}
	// The claimed record is not suspended, whichever record it replaces
	// (a resumed one included).
	upd = upd.Remove(name(o.SuspendedAttr))

	noSteps := name(o.StepsAttr).AttributeNotExists()
	lapsed := name(o.StatusAttr).Equal(value(roleInProgress)).And(
		name(o.InProgressExpirationAttr).LessThan(value(roleNowMs)),
		name(o.VersionAttr).Equal(value(roleRecordVer)),
		name(o.LeaseAttr).AttributeExists())
	var keeps expression.ConditionBuilder // a lapsed record whose steps this claim may keep
	if shape.fingerprint {
		compatible := name(o.ValidationAttr).AttributeNotExists().Or(name(o.ValidationAttr).Equal(value(roleValidation)))
		keeps = noSteps.And(compatible).Or(
			name(o.ExpirationAttr).GreaterThanEqual(value(roleNow)).And(name(o.ValidationAttr).Equal(value(roleValidation))))
	} else {
		keeps = noSteps.Or(
			name(o.ExpirationAttr).GreaterThanEqual(value(roleNow)).And(name(o.ValidationAttr).AttributeNotExists()))
	}
	cond := name(o.KeyAttr).AttributeNotExists().Or(
		name(o.LeaseAttr).Equal(value(roleLease)),
		noSteps.And(name(o.ExpirationAttr).LessThan(value(roleNow))),
		lapsed.And(keeps),
	)
	c := compile(expression.NewBuilder().WithUpdate(upd).WithCondition(cond), roles...)
	return claimExpr{
		update:        c.update,
		condition:     c.condition,
		names:         c.names,
		now:           c.values[roleNow],
		nowMs:         c.values[roleNowMs],
		inProgress:    c.values[roleInProgress],
		status:        c.values[roleStatus],
		expiration:    c.values[roleExpiration],
		lease:         c.values[roleLease],
		version:       c.values[roleVersion],
		recordVersion: c.values[roleRecordVer],
		leaseEnd:      c.values[roleLeaseEnd],
		validation:    c.values[roleValidation],
		data:          c.values[roleData],
	}
}

// replaceExpr is the condition of the rare second write of a claim, the
// PutItem that replaces a replaceable record whose steps the claim may not
// keep: the record must still be exactly as the claim read it,
//
//	#lease = :lease AND #status = :status AND #expiration = :expiration AND
//	#in_progress_expiration = :lease_end  (or attribute_not_exists when it had none)
//
// Only the owner holding the lease writes under it, and the attributes that
// owner can change (status, expiry, lease end) are all compared, so the
// record is still replaceable when the condition holds. Its steps need no
// comparison: the replacement drops them either way.
type replaceExpr struct {
	condition                           *string
	names                               map[string]string
	lease, status, expiration, leaseEnd string
}

func compileReplace(o *Options, leaseEnd bool) replaceExpr {
	cond := name(o.LeaseAttr).Equal(value(roleLease)).And(
		name(o.StatusAttr).Equal(value(roleStatus)),
		name(o.ExpirationAttr).Equal(value(roleExpiration)))
	roles := []string{roleLease, roleStatus, roleExpiration}
	if leaseEnd {
		cond = cond.And(name(o.InProgressExpirationAttr).Equal(value(roleLeaseEnd)))
		roles = append(roles, roleLeaseEnd)
	} else {
		cond = cond.And(name(o.InProgressExpirationAttr).AttributeNotExists())
	}
	c := compile(expression.NewBuilder().WithCondition(cond), roles...)
	return replaceExpr{
		condition:  c.condition,
		names:      c.names,
		lease:      c.values[roleLease],
		status:     c.values[roleStatus],
		expiration: c.values[roleExpiration],
		leaseEnd:   c.values[roleLeaseEnd],
	}
}

// appendStepExpr records a step, fenced by the lease:
//
//	SET #steps = list_append(if_not_exists(#steps, :empty), :step)
//	condition #lease = :lease AND #status = :inprogress
type appendStepExpr struct {
	update, condition              *string
	names                          map[string]string
	empty, step, lease, inProgress string
}

func compileAppendStep(o *Options) appendStepExpr {
	upd := expression.Set(name(o.StepsAttr),
		expression.ListAppend(expression.IfNotExists(name(o.StepsAttr), value(roleEmpty)), value(roleStep)))
	cond := name(o.LeaseAttr).Equal(value(roleLease)).And(name(o.StatusAttr).Equal(value(roleInProgress)))
	c := compile(expression.NewBuilder().WithUpdate(upd).WithCondition(cond), roleEmpty, roleStep, roleLease, roleInProgress)
	return appendStepExpr{
		update:     c.update,
		condition:  c.condition,
		names:      c.names,
		empty:      c.values[roleEmpty],
		step:       c.values[roleStep],
		lease:      c.values[roleLease],
		inProgress: c.values[roleInProgress],
	}
}

// suspendExpr ends a lease early and marks the record suspended, keeping
// the record and its steps:
//
//	SET #in_progress_expiration = :lease_end, #suspended = :suspended (BOOL true)
//	condition #lease = :lease AND #status = :inprogress
type suspendExpr struct {
	update, condition                      *string
	names                                  map[string]string
	leaseEnd, suspended, lease, inProgress string
}

func compileSuspend(o *Options) suspendExpr {
	upd := expression.Set(name(o.InProgressExpirationAttr), value(roleLeaseEnd)).
		Set(name(o.SuspendedAttr), value(roleSuspended))
	cond := name(o.LeaseAttr).Equal(value(roleLease)).And(name(o.StatusAttr).Equal(value(roleInProgress)))
	c := compile(expression.NewBuilder().WithUpdate(upd).WithCondition(cond), roleLeaseEnd, roleSuspended, roleLease, roleInProgress)
	return suspendExpr{
		update:     c.update,
		condition:  c.condition,
		names:      c.names,
		leaseEnd:   c.values[roleLeaseEnd],
		suspended:  c.values[roleSuspended],
		lease:      c.values[roleLease],
		inProgress: c.values[roleInProgress],
	}
}

// completeExpr is the completion update, fenced by the lease only:
//
//	SET #status = :status, #data = :data, #expiration = :expiration
//	REMOVE #in_progress_expiration, #steps, #suspended
//	condition #lease = :lease
//
// Without data (an empty response) the update removes #data instead. A
// completed record keeps no steps and is not suspended: its response is
// what a retry gets.
type completeExpr struct {
	update, condition               *string
	names                           map[string]string
	status, data, expiration, lease string
}

func compileComplete(o *Options, withData bool) completeExpr {
	upd := expression.Set(name(o.StatusAttr), value(roleStatus))
	roles := []string{roleStatus, roleExpiration, roleLease}
	if withData {
		upd = upd.Set(name(o.DataAttr), value(roleData))
		roles = append(roles, roleData)
	}
	upd = upd.Set(name(o.ExpirationAttr), value(roleExpiration)).
		Remove(name(o.InProgressExpirationAttr)).Remove(name(o.StepsAttr)).Remove(name(o.SuspendedAttr))
	if !withData {
		upd = upd.Remove(name(o.DataAttr))
	}
	cond := name(o.LeaseAttr).Equal(value(roleLease))
	c := compile(expression.NewBuilder().WithUpdate(upd).WithCondition(cond), roles...)
	return completeExpr{
		update:     c.update,
		condition:  c.condition,
		names:      c.names,
		status:     c.values[roleStatus],
		data:       c.values[roleData],
		expiration: c.values[roleExpiration],
		lease:      c.values[roleLease],
	}
}

// releaseExpr is the release condition: attribute_not_exists(#id) OR
// #lease = :lease. The first half makes a missing item a success, so a
// conditional failure always means another lease holds the record.
type releaseExpr struct {
	condition *string
	names     map[string]string
	lease     string
}

func compileRelease(o *Options) releaseExpr {
	cond := name(o.KeyAttr).AttributeNotExists().Or(name(o.LeaseAttr).Equal(value(roleLease)))
	c := compile(expression.NewBuilder().WithCondition(cond), roleLease)
	return releaseExpr{condition: c.condition, names: c.names, lease: c.values[roleLease]}
}
