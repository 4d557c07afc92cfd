package dynamostore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// The attribute slots of a fuzzed item, in the order of FuzzDecodeRecord's
// string arguments. Each slot's kind is 4 bits of its kinds argument
// (slot i at bits 4i..4i+3); see fuzzAttr for what each kind becomes.
const (
	slotID = iota
	slotStatus
	slotExpiration
	slotLeaseEnd
	slotLease
	slotValidation
	slotData
	slotVersion
	slotOther // an attribute the store does not know
	slotSteps // built from the other and data arguments, see fuzzSteps
	numSlots
)

// The kinds of an attribute value (the low 4 bits of a slot).
const (
	kindAbsent = iota
	kindS
	kindN
	kindB
	kindBOOL
	kindNULL
	kindL
	kindM
	kindSS
	kindNS
	kindBS
	kindNilInterface
	kindNilS
	kindNilN
	kindNilB
	kindUnknown
)

// fuzzKinds packs one kind per slot, slot 0 first.
func fuzzKinds(kinds ...int) uint64 {
	var k uint64
	for i, kind := range kinds {
		k |= uint64(kind&15) << (4 * i)
	}
	return k
}

// fuzzLease is the lease token of the claims FuzzDecodeRecord makes.
const fuzzLease = "fuzz-lease"

// fuzzNow is the time of those claims.
var fuzzNow = time.Unix(1_700_000_000, 0)

// fuzzSteps makes the steps attribute of a kind. It takes no argument of
// its own (the corpus predates steps): kindL is a valid list of one step
// named other holding data, kindM a list whose one step has no name, and
// every other kind is what fuzzAttr makes of it, of the wrong type.
func fuzzSteps(kind int, other string, data []byte) (av types.AttributeValue, present bool) {
	switch kind {
	case kindL:
		return &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"name": &types.AttributeValueMemberS{Value: other},
			"data": &types.AttributeValueMemberB{Value: data},
		}}}}, true
	case kindM:
		return &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"data": &types.AttributeValueMemberB{Value: data},
		}}}}, true
	default:
		return fuzzAttr(kind, other)
	}
}

// FuzzDecodeRecord feeds arbitrary items (every attribute absent, of any
// DynamoDB type, or nil, with arbitrary contents) to the store's decoder, to
// a Claim that DynamoDB refuses with that item, and to a wrapped handler on
// that store. Decoding never panics and yields either exactly the record the
// item describes or an error wrapping idempotent.ErrCorruptRecord; Claim and
// the wrapper never panic and never treat a corrupt item as anything else.
// Under plain go test it runs the seeds in testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	exp := strconv.FormatInt(fuzzNow.Add(time.Hour).Unix(), 10)
	leaseEnd := strconv.FormatInt(fuzzNow.Add(time.Minute).UnixMilli(), 10)
	valid := fuzzKinds(kindS, kindS, kindN, kindAbsent, kindS, kindS, kindB, kindN, kindAbsent)
	f.Add(valid, false, "p#1", "COMPLETED", exp, "", "other", "fp", []byte(`p{"a":1}`), "1", "")
	f.Add(valid, true, "p#1", "COMPLETED", exp, "", "other", "fp", []byte(`p{"a":1}`), "1", "")
	f.Add(fuzzKinds(kindS, kindS, kindN, kindN, kindS, kindAbsent, kindAbsent, kindN, kindAbsent), false,
		"p#1", "INPROGRESS", exp, leaseEnd, "other", "", []byte(nil), "1", "")
	f.Add(fuzzKinds(kindS, kindS, kindN, kindN, kindS, kindAbsent, kindAbsent, kindN, kindAbsent), false,
		"p#1", "INPROGRESS", exp, leaseEnd, fuzzLease, "", []byte(nil), "1", "")
	f.Add(fuzzKinds(kindS, kindS, kindN, kindN, kindAbsent, kindS, kindS, kindAbsent, kindS), false,
		"p.handler#1", "COMPLETED", exp, leaseEnd, "", "md5", []byte(`{"a":1}`), "", "powertools")
	f.Add(fuzzKinds(kindS, kindN, kindS, kindNilN, kindNilS, kindNilInterface, kindBOOL, kindSS, kindUnknown), false,
		"p#1", "1", "soon", "", "", "", []byte("x"), "1.5", "")
	f.Add(valid, false, "p#1", "COMPLETED", "99999999999999999999", "", "other", "fp", []byte(`z`), "-9223372036854775808", "")
	f.Add(uint64(0), false, "", "", "", "", "", "", []byte(nil), "", "")
	// Steps: kept by a live record, by the claim's own, by a lapsed or an
	// expired one (replaced), and damaged.
	withSteps := func(stepsKind int, kinds ...int) uint64 { return fuzzKinds(append(kinds, stepsKind)...) }
	inProgress := []int{kindS, kindS, kindN, kindN, kindS, kindAbsent, kindAbsent, kindN, kindAbsent}
	lapsed := strconv.FormatInt(fuzzNow.Add(-time.Second).UnixMilli(), 10)
	expired := strconv.FormatInt(fuzzNow.Add(-time.Hour).Unix(), 10)
	f.Add(withSteps(kindL, inProgress...), false, "p#1", "INPROGRESS", exp, leaseEnd, "other", "", []byte(`{"id":"ch_1"}`), "1", "charge")
	f.Add(withSteps(kindL, inProgress...), true, "p#1", "INPROGRESS", exp, leaseEnd, fuzzLease, "", []byte(`{}`), "1", "charge")
	f.Add(withSteps(kindL, inProgress...), false, "p#1", "INPROGRESS", exp, lapsed, "other", "", []byte(`{}`), "1", "charge")
	f.Add(withSteps(kindL, inProgress...), false, "p#1", "INPROGRESS", expired, leaseEnd, "other", "", []byte(`{}`), "1", "charge")
	f.Add(withSteps(kindM, inProgress...), false, "p#1", "INPROGRESS", exp, leaseEnd, "other", "", []byte(`{}`), "1", "charge")
	f.Add(withSteps(kindS, inProgress...), false, "p#1", "INPROGRESS", exp, leaseEnd, fuzzLease, "", []byte(`{}`), "1", "charge")

	f.Fuzz(func(t *testing.T, kinds uint64, composite bool, id, status, expiration, leaseEnd, lease, validation string, data []byte, version, other string) {
		var optFns []func(*Options)
		if composite {
			optFns = append(optFns, func(o *Options) { o.KeyAttr, o.SortKeyAttr = "pk", "sk" })
		}
		store := New(&refusingClient{}, "fuzz", optFns...)
		o := store.Options()
		idAttr := o.KeyAttr
		if composite {
			idAttr = o.SortKeyAttr
		}
		names := [numSlots]string{idAttr, o.StatusAttr, o.ExpirationAttr, o.InProgressExpirationAttr, o.LeaseAttr,
			o.ValidationAttr, o.DataAttr, o.VersionAttr, "x-other", o.StepsAttr}
		values := [numSlots]string{id, status, expiration, leaseEnd, lease, validation, string(data), version, other, other}
		item := map[string]types.AttributeValue{}
		if composite {
			item[o.KeyAttr] = attrS(o.StaticPartitionKey)
		}
		var kindOf [numSlots]int
		for i := range numSlots {
			kindOf[i] = int(kinds>>(4*i)) & 15
			av, present := fuzzAttr(kindOf[i], values[i])
			if i == slotSteps {
				av, present = fuzzSteps(kindOf[i], other, data)
			}
			if present {
				item[names[i]] = av
			}
		}

		rec, err := store.decode(item)
		want, wantErr := expectRecord(kindOf, values, data)
		switch {
		case wantErr != "" && err == nil:
			t.Fatalf("decode: no error, want one (%s); got %+v", wantErr, rec)
		case wantErr != "" && !errors.Is(err, idempotent.ErrCorruptRecord):
			t.Fatalf("decode: %v does not wrap ErrCorruptRecord", err)
		case wantErr == "" && err != nil:
			t.Fatalf("decode: %v, want %+v", err, want)
		case wantErr == "" && !sameRecord(rec, want):
			t.Fatalf("decode = %+v, want %+v", rec, want)
		}

		// The same item as DynamoDB's answer to a refused claim.
		store = New(&refusingClient{item: item}, "fuzz", optFns...)
		claim := storage.Record{ID: "p#claim", Status: storage.StatusInProgress, ExpiresAt: fuzzNow.Add(time.Hour),
			LeaseExpiresAt: fuzzNow.Add(time.Minute), Lease: fuzzLease, Version: storage.RecordVersion}
		res, cerr := store.Claim(context.Background(), claim, fuzzNow)
		ours := kindOf[slotLease] == kindS && lease == fuzzLease
		empty := len(item) == 0 // as if the record vanished: claimed again, then an error
		// The claim decides on the record without its steps, and reads
		// the steps only of a record it keeps them from or is refused by.
		head, headErr := expectRecord(withoutSteps(kindOf), values, data)
		_, stepsErr := expectSteps(kindOf[slotSteps], other, data)
		switch {
		case empty:
			if cerr == nil || errors.Is(cerr, idempotent.ErrCorruptRecord) {
				t.Fatalf("Claim refused without a record = %+v, %v; want a store error", res, cerr)
			}
		case ours && stepsErr != "":
			if !errors.Is(cerr, idempotent.ErrCorruptRecord) {
				t.Fatalf("Claim over the claim's own item with corrupt steps = %+v, %v; want ErrCorruptRecord", res, cerr)
			}
		case ours:
			if cerr != nil || !res.Claimed {
				t.Fatalf("Claim over an item with the claim's own lease = %+v, %v; want claimed", res, cerr)
			}
		case headErr != "":
			if !errors.Is(cerr, idempotent.ErrCorruptRecord) {
				t.Fatalf("Claim over a corrupt item = %+v, %v; want ErrCorruptRecord", res, cerr)
			}
		case head.Replaceable(&claim, fuzzNow):
			// Refused, whatever its steps, by a record the claim may replace:
			// as if it kept changing. Tried again (and replaced, if it
			// holds steps), then an error.
			if cerr == nil || errors.Is(cerr, idempotent.ErrCorruptRecord) {
				t.Fatalf("Claim refused with a record that is not live = %+v, %v; want an error", res, cerr)
			}
		case err != nil:
			if !errors.Is(cerr, idempotent.ErrCorruptRecord) {
				t.Fatalf("Claim refused by an item with corrupt steps = %+v, %v; want ErrCorruptRecord", res, cerr)
			}
		default:
			if cerr != nil || res.Claimed || res.Existing == nil || !sameRecord(*res.Existing, rec) {
				t.Fatalf("Claim = %+v, %v; want refused by %+v", res, cerr, rec)
			}
		}

		// And through the wrapper: never a panic, never a replay of an
		// item that is corrupt or of another version.
		var ran bool
		e := idempotent.New(store, idempotent.WithClock(func() time.Time { return fuzzNow }), idempotent.WithLogger(slog.New(slog.DiscardHandler)))
		wrapped := idempotent.Wrap(e, func(context.Context, string) (string, error) {
			ran = true
			return "ran", nil
		}, idempotent.WithKey(func(in string) (string, error) { return in, nil }))
		out, werr := wrapped(context.Background(), "key")
		switch {
		case ran:
			t.Fatalf("the handler ran, but every claim was refused")
		case werr == nil && (err != nil || rec.Version != storage.RecordVersion || rec.Status != storage.StatusCompleted):
			t.Fatalf("replayed %q from an item that is corrupt (%v) or not a completed record of version %d (%+v)",
				out, err, storage.RecordVersion, rec)
		case werr != nil && err != nil && !empty && !errors.Is(werr, idempotent.ErrCorruptRecord):
			t.Fatalf("wrapper: %v for a corrupt item, want ErrCorruptRecord", werr)
		}
	})
}

// fuzzAttr makes the attribute value of a kind; present is false for
// kindAbsent.
func fuzzAttr(kind int, v string) (av types.AttributeValue, present bool) {
	switch kind {
	case kindAbsent:
		return nil, false
	case kindS:
		return &types.AttributeValueMemberS{Value: v}, true
	case kindN:
		return &types.AttributeValueMemberN{Value: v}, true
	case kindB:
		return &types.AttributeValueMemberB{Value: []byte(v)}, true
	case kindBOOL:
		return &types.AttributeValueMemberBOOL{Value: v != ""}, true
	case kindNULL:
		return &types.AttributeValueMemberNULL{Value: true}, true
	case kindL:
		return &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: v}}}, true
	case kindM:
		return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"v": &types.AttributeValueMemberS{Value: v}}}, true
	case kindSS:
		return &types.AttributeValueMemberSS{Value: []string{v}}, true
	case kindNS:
		return &types.AttributeValueMemberNS{Value: []string{v}}, true
	case kindBS:
		return &types.AttributeValueMemberBS{Value: [][]byte{[]byte(v)}}, true
	case kindNilInterface:
		return nil, true
	case kindNilS:
		return (*types.AttributeValueMemberS)(nil), true
	case kindNilN:
		return (*types.AttributeValueMemberN)(nil), true
	case kindNilB:
		return (*types.AttributeValueMemberB)(nil), true
	default:
		return &types.UnknownUnionMember{Tag: "X", Value: []byte(v)}, true
	}
}

// withoutSteps is kinds with the steps slot absent.
func withoutSteps(kinds [numSlots]int) [numSlots]int {
	kinds[slotSteps] = kindAbsent
	return kinds
}

// expectSteps is what fuzzSteps makes of a kind: the steps, or why they
// are corrupt.
func expectSteps(kind int, other string, data []byte) ([]storage.Step, string) {
	switch kind {
	case kindAbsent:
		return nil, ""
	case kindL:
		return []storage.Step{{Name: other, Data: data}}, ""
	case kindM:
		return nil, "a step without a name"
	default:
		return nil, "wrong type"
	}
}

// expectRecord is the record an item of these kinds and values describes,
// or, when it is corrupt, why: required attributes must be present with the
// right type, optional ones absent or of the right type, and numbers
// integers that fit.
func expectRecord(kind [numSlots]int, v [numSlots]string, data []byte) (storage.Record, string) {
	var rec storage.Record
	need := func(slot, want int, required bool) (bool, string) {
		switch k := kind[slot]; {
		case k == kindAbsent && required:
			return false, "missing"
		case k == kindAbsent:
			return false, ""
		case k != want:
			return false, "wrong type"
		}
		return true, ""
	}
	integer := func(s string, bits int) (int64, string) {
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return 0, "not an integer"
		}
		return n, ""
	}
	if _, why := need(slotID, kindS, true); why != "" {
		return rec, "id " + why
	}
	rec.ID = v[slotID]
	if _, why := need(slotStatus, kindS, true); why != "" {
		return rec, "status " + why
	}
	rec.Status = storage.Status(v[slotStatus])
	if _, why := need(slotExpiration, kindN, true); why != "" {
		return rec, "expiration " + why
	}
	exp, why := integer(v[slotExpiration], 64)
	if why != "" {
		return rec, "expiration " + why
	}
	rec.ExpiresAt = time.Unix(exp, 0)
	if ok, why := need(slotLeaseEnd, kindN, rec.Status == storage.StatusInProgress); why != "" {
		return rec, "lease end " + why
	} else if ok {
		ms, why := integer(v[slotLeaseEnd], 64)
		if why != "" {
			return rec, "lease end " + why
		}
		rec.LeaseExpiresAt = time.UnixMilli(ms)
	}
	if _, why := need(slotLease, kindS, true); why != "" {
		return rec, "lease " + why
	}
	rec.Lease = v[slotLease]
	if ok, why := need(slotValidation, kindS, false); why != "" {
		return rec, "validation " + why
	} else if ok {
		rec.Fingerprint = v[slotValidation]
	}
	if ok, why := need(slotData, kindB, false); why != "" {
		return rec, "data " + why
	} else if ok {
		rec.Data = []byte(v[slotData])
	}
	if ok, why := need(slotVersion, kindN, false); why != "" {
		return rec, "version " + why
	} else if ok {
		ver, why := integer(v[slotVersion], strconv.IntSize)
		if why != "" {
			return rec, "version " + why
		}
		rec.Version = int(ver)
	}
	steps, why := expectSteps(kind[slotSteps], v[slotOther], data)
	if why != "" {
		return rec, "steps " + why
	}
	rec.Steps = steps
	return rec, ""
}

func sameRecord(a, b storage.Record) bool {
	return a.ID == b.ID && a.Status == b.Status && a.ExpiresAt.Equal(b.ExpiresAt) &&
		a.LeaseExpiresAt.Equal(b.LeaseExpiresAt) && a.Lease == b.Lease && a.Fingerprint == b.Fingerprint &&
		bytes.Equal(a.Data, b.Data) && a.Version == b.Version && sameSteps(a.Steps, b.Steps)
}

func sameSteps(a, b []storage.Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// refusingClient is a Client that refuses every conditional write with item,
// as DynamoDB does when a live record exists (and answers a read with it):
// the claim's PutItem and the one that replaces a record. Release
// succeeds; the fuzzed handler never runs, so nothing else is called.
type refusingClient struct {
	item map[string]types.AttributeValue
}

func (c *refusingClient) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, &types.ConditionalCheckFailedException{Message: new(string), Item: c.item}
}

func (c *refusingClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, &types.ConditionalCheckFailedException{Message: new(string), Item: c.item}
}

func (c *refusingClient) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (c *refusingClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: c.item}, nil
}
