package dynamostore

import "github.com/aws/aws-sdk-go-v2/aws"

// The store's expressions are fixed: constant strings with #name and :value
// placeholders, as the SDK's expression package writes them by hand. A
// #name stands for the attribute Options names (see newExprNames); each
// call fills the :values.
//
// The claim is a PutItem of the whole new record (Store.Claim), on condition
// that the stored record may be replaced (storage.Record.Replaceable) and
// holds no steps the write would drop:
//
//   - no record, or the caller's own (a claim retried after a lost response);
//   - an expired record, whatever it holds (its steps die with it);
//   - another owner's INPROGRESS record of this format whose lease has lapsed,
//     that holds no steps, and whose fingerprint the claim may take over
//     (claimConditionBound, for a claim with a fingerprint: none stored, or
//     the same; any, for a claim without one).
//
// :record_version is storage.RecordVersion: a foreign record (another format
// version, or no lease) is never taken over, only replaced once it expires.
const (
	claimConditionBase = "attribute_not_exists(#id) OR #lease = :lease OR #expiration < :now OR " +
		"(#status = :inprogress AND #in_progress_expiration < :now_ms AND #version = :record_version AND " +
		"attribute_exists(#lease) AND attribute_not_exists(#steps)"
	claimCondition      = claimConditionBase + ")"
	claimConditionBound = claimConditionBase + " AND (attribute_not_exists(#validation) OR #validation = :validation))"
)

// replaceCondition and resumeCondition guard the rare second write of a
// claim, the PutItem over a lapsed record that holds steps (which the
// claim's condition refuses): the record must still be exactly as the claim
// read it. Only the owner holding :old_lease writes under it, and what that
// owner can change is compared: its status (Complete), its expiry, its lease
// end (Suspend). Another claim changes the lease.
//
// replaceCondition writes the new record without the steps (the claim may
// replace the record but not keep them: another, compatible payload), so
// they need no comparison: they are dropped whatever they hold.
// resumeCondition writes it with the steps as read (storage.Record.Resumable:
// the same payload), so it also compares their number: the lapsed owner may
// still append a step (only its lease fences AppendStep), which a resume
// must not drop. Steps only grow while the lease and the status stay, so an
// unchanged number is an unchanged list.
const (
	replaceCondition = "#lease = :old_lease AND #status = :inprogress AND #expiration = :old_expiration AND " +
		"#in_progress_expiration = :old_lease_end"
	resumeCondition = replaceCondition + " AND size(#steps) = :old_steps"
)

// Completion is fenced by the lease only (not the status), so a retried
// completion succeeds again. A completed record keeps no steps and is not
// suspended: its response is what a retry gets. Without a response, the
// update removes #data; without a trace context, #trace.
const (
	leaseCondition            = "#lease = :lease"
	completeUpdate            = "SET #status = :status, #data = :data, #expiration = :expiration REMOVE #in_progress_expiration, #steps, #suspended, #trace"
	completeUpdateNoData      = "SET #status = :status, #expiration = :expiration REMOVE #data, #in_progress_expiration, #steps, #suspended, #trace"
	completeUpdateTrace       = "SET #status = :status, #data = :data, #expiration = :expiration, #trace = :trace REMOVE #in_progress_expiration, #steps, #suspended"
	completeUpdateNoDataTrace = "SET #status = :status, #expiration = :expiration, #trace = :trace REMOVE #data, #in_progress_expiration, #steps, #suspended"
)

// The expressions every claim and completion sends, as the *string the SDK
// takes, shared by all calls (the SDK only reads its inputs): taking a
// constant's address allocates a copy per call.
var (
	claimConditionPtr            = aws.String(claimCondition)
	claimConditionBoundPtr       = aws.String(claimConditionBound)
	leaseConditionPtr            = aws.String(leaseCondition)
	completeUpdatePtr            = aws.String(completeUpdate)
	completeUpdateNoDataPtr      = aws.String(completeUpdateNoData)
	completeUpdateTracePtr       = aws.String(completeUpdateTrace)
	completeUpdateNoDataTracePtr = aws.String(completeUpdateNoDataTrace)
)

// A step is appended, and a record suspended, by its owner while it is in
// progress.
const (
	ownerCondition   = "#lease = :lease AND #status = :inprogress"
	appendStepUpdate = "SET #steps = list_append(if_not_exists(#steps, :empty), :step)"
	suspendUpdate    = "SET #in_progress_expiration = :lease_end, #suspended = :suspended"
)

// commitCondition fences a transaction's completion of the record: its
// owner's, in progress, and not given back (Suspend marks the record, Release
// deletes it), so a transaction still in flight when the engine settles an
// unknown outcome commits nothing after the settle.
const commitCondition = ownerCondition + " AND attribute_not_exists(#suspended)"

// releaseCondition admits a missing item, so a conditional failure of a
// release means another lease holds the record, or the caller's record is
// no longer in progress (its completion landed: storage.ErrAlreadyCompleted).
const releaseCondition = "attribute_not_exists(#id) OR (#lease = :lease AND #status = :inprogress)"

// exprNames holds the ExpressionAttributeNames of each expression: the
// #names it uses (DynamoDB refuses any it does not), each mapped to the
// attribute Options gives it. Built once, in New; never written after.
type exprNames struct {
	claim, claimBound, replace, resume, complete, appendStep, suspend, release map[string]string
}

func newExprNames(o *Options) exprNames {
	attr := map[string]string{
		"#id":                     o.KeyAttr,
		"#status":                 o.StatusAttr,
		"#expiration":             o.ExpirationAttr,
		"#in_progress_expiration": o.InProgressExpirationAttr,
		"#lease":                  o.LeaseAttr,
		"#validation":             o.ValidationAttr,
		"#data":                   o.DataAttr,
		"#version":                o.VersionAttr,
		"#steps":                  o.StepsAttr,
		"#suspended":              o.SuspendedAttr,
		"#trace":                  o.TraceAttr,
	}
	pick := func(names ...string) map[string]string {
		m := make(map[string]string, len(names))
		for _, n := range names {
			m[n] = attr[n]
		}
		return m
	}
	claim := []string{"#id", "#lease", "#expiration", "#status", "#in_progress_expiration", "#version", "#steps"}
	return exprNames{
		claim:      pick(claim...),
		claimBound: pick(append(claim, "#validation")...),
		replace:    pick("#lease", "#status", "#expiration", "#in_progress_expiration"),
		resume:     pick("#lease", "#status", "#expiration", "#in_progress_expiration", "#steps"),
		// The four completeUpdate expressions use the same names.
		complete:   pick("#status", "#data", "#expiration", "#in_progress_expiration", "#steps", "#suspended", "#trace", "#lease"),
		appendStep: pick("#steps", "#lease", "#status"),
		suspend:    pick("#in_progress_expiration", "#suspended", "#lease", "#status"),
		release:    pick("#id", "#lease", "#status"),
	}
}
