package dynamostore

import (
	"fmt"

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
)

// compiled is one built expression: its strings, its names map (shared by
// every call and never written after New) and the placeholder of each role.
type compiled struct {
	condition *string
	update    *string
	names     map[string]string
	values    map[string]string // role -> placeholder
}

func compile(b expression.Builder, roles ...string) compiled {
	e, err := b.Build()
	if err != nil {
		panic(fmt.Sprintf("dynamostore: New: build expression: %v", err))
	}
	c := compiled{condition: e.Condition(), update: e.Update(), names: e.Names(), values: make(map[string]string, len(roles))}
	for placeholder, v := range e.Values() {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			c.values[s.Value] = placeholder
		}
	}
	for _, role := range roles {
		if c.values[role] == "" {
			panic(fmt.Sprintf("dynamostore: New: no placeholder for %q in the built expression", role))
		}
	}
	return c
}

func name(n string) expression.NameBuilder { return expression.NameNoDotSplit(n) }

func value(role string) expression.ValueBuilder { return expression.Value(role) }

// claimExpr is the claim condition:
//
//	attribute_not_exists(#id) OR #expiration < :now OR
//	(#status = :inprogress AND #in_progress_expiration < :now_ms)
//
// and, for a claim that carries a payload fingerprint (bound), a takeover of
// a lapsed owner also needs the same payload (storage.Record.Replaceable):
//
//	(#status = :inprogress AND #in_progress_expiration < :now_ms AND
//	 (attribute_not_exists(#validation) OR #validation = :validation))
type claimExpr struct {
	condition                          *string
	names                              map[string]string
	now, nowMs, inProgress, validation string
}

func compileClaim(o *Options, bound bool) claimExpr {
	takeover := name(o.StatusAttr).Equal(value(roleInProgress)).And(
		name(o.InProgressExpirationAttr).LessThan(value(roleNowMs)))
	roles := []string{roleNow, roleNowMs, roleInProgress}
	if bound {
		takeover = takeover.And(name(o.ValidationAttr).AttributeNotExists().Or(
			name(o.ValidationAttr).Equal(value(roleValidation))))
		roles = append(roles, roleValidation)
	}
	cond := name(o.KeyAttr).AttributeNotExists().Or(
		name(o.ExpirationAttr).LessThan(value(roleNow)),
		takeover,
	)
	c := compile(expression.NewBuilder().WithCondition(cond), roles...)
	return claimExpr{
		condition:  c.condition,
		names:      c.names,
		now:        c.values[roleNow],
		nowMs:      c.values[roleNowMs],
		inProgress: c.values[roleInProgress],
		validation: c.values[roleValidation],
	}
}

// completeExpr is the completion update, fenced by the lease only:
//
//	SET #status = :status, #data = :data, #expiration = :expiration
//	REMOVE #in_progress_expiration
//	condition #lease = :lease
//
// Without data (an empty response) the update removes #data instead.
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
	upd = upd.Set(name(o.ExpirationAttr), value(roleExpiration)).Remove(name(o.InProgressExpirationAttr))
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
