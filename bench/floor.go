package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// bare is the floor: what an idempotent invocation cannot avoid, made by
// hand with the SDK and nothing else: the DynamoDB calls, one SHA-256 of the
// key, the response encoded on a first run and decoded on a replay (a
// duplicate's caller gets the stored response back); no record type, no
// outcome hook, no logging check. Its items have the same attributes and
// sizes as the wrapper's, and its requests are the store's (captured from
// dynamostore: storeClaim, storeComplete).
type bare struct {
	client *dynamodb.Client
	table  string
	// prefix is its record ids' prefix, "bare" if empty. The drivers give
	// it the wrapper's ("bench"), so that both items' ids have one length:
	// the same item, byte for byte in size, on both paths.
	prefix string
}

// recordID is the floor's record id for key: its prefix, "#", and the
// SHA-256 of the key in hex, as long as the engine's ids of that prefix.
func (b *bare) recordID(key string) string { return b.recordIDOf(sha256.Sum256([]byte(key))) }

// recordIDOf is recordID of a key whose SHA-256 is sum.
func (b *bare) recordIDOf(sum [sha256.Size]byte) string {
	prefix := b.prefix
	if prefix == "" {
		prefix = "bare"
	}
	return prefix + "#" + hex.EncodeToString(sum[:])
}

func attrN(v int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func attrS(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }

// claim sends the claim dynamostore sends (storeClaim: the same item
// attributes, condition expression, names and value shapes), for id, lease
// and now; it returns the refusing item
// (ReturnValuesOnConditionCheckFailure=ALL_OLD) when the key is taken.
func (b *bare) claim(ctx context.Context, id, lease string) (map[string]types.AttributeValue, error) {
	return b.claimAs(ctx, storeClaim, id, lease, "")
}

// claimAs sends the captured claim tmpl for id, lease and now, with the
// payload fingerprint fp in place of sentinelFingerprint (storeClaimFP).
func (b *bare) claimAs(ctx context.Context, tmpl *dynamodb.PutItemInput, id, lease, fp string) (map[string]types.AttributeValue, error) {
	now := time.Now()
	subst := func(v types.AttributeValue) types.AttributeValue {
		switch n := v.(type) {
		case *types.AttributeValueMemberN:
			switch n.Value {
			case sentinelNow:
				return attrN(now.Unix())
			case sentinelNowMs:
				return attrN(now.UnixMilli())
			case sentinelExpiry:
				return attrN(now.Add(time.Hour).Unix())
			case sentinelLeaseEnd:
				return attrN(now.Add(32 * time.Second).UnixMilli())
			}
		case *types.AttributeValueMemberS:
			switch n.Value {
			case sentinelID:
				return attrS(id)
			case sentinelLease:
				return attrS(lease)
			case sentinelFingerprint:
				return attrS(fp)
			}
		}
		return v
	}
	in := *tmpl
	in.TableName = &b.table
	in.Item = make(map[string]types.AttributeValue, len(tmpl.Item))
	for k, v := range tmpl.Item {
		in.Item[k] = subst(v)
	}
	in.ExpressionAttributeValues = make(map[string]types.AttributeValue, len(tmpl.ExpressionAttributeValues))
	for k, v := range tmpl.ExpressionAttributeValues {
		in.ExpressionAttributeValues[k] = subst(v)
	}
	_, err := b.client.PutItem(ctx, &in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, nil
	}
	return nil, err
}

// The values of the claim storeClaim captures, recognised and replaced in
// each bare claim.
const (
	sentinelNow      = "1000000001"
	sentinelNowMs    = "1000000001000"
	sentinelExpiry   = "1000003601"
	sentinelLeaseEnd = "1000000033000"
	sentinelLease    = "bench-sentinel-lease"
	sentinelID       = "capture#id"
	// A SHA-256 in hex, as the engine writes a fingerprint, all 'f'.
	sentinelFingerprint = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
)

// storeClaim is the PutItem dynamostore sends to claim a new key without
// a payload fingerprint, captured once from a store over a client that
// answers nothing, so the floor's claim is the store's to the byte: a
// cheaper hand-made one would put the cost of the store's own condition on
// the wrapper's side.
var storeClaim = captureClaim("")

// storeClaimFP is the claim of a call with a payload fingerprint, as every
// request through the net/http middleware has (§9's floor): its condition
// also checks the stored fingerprint, and its item holds one.
var storeClaimFP = captureClaim(sentinelFingerprint)

func captureClaim(fingerprint string) *dynamodb.PutItemInput {
	c := &capture{}
	now := time.Unix(1_000_000_001, 0)
	_, _ = dynamostore.New(c, "capture").Claim(context.Background(), storage.Record{
		ID: sentinelID, Status: storage.StatusInProgress, ExpiresAt: now.Add(time.Hour),
		LeaseExpiresAt: now.Add(32 * time.Second), Lease: sentinelLease, Version: storage.RecordVersion,
		Fingerprint: fingerprint,
	}, now)
	if c.put == nil {
		panic("idembench: dynamostore's claim made no PutItem")
	}
	return c.put
}

// storeComplete is the UpdateItem dynamostore sends to complete a record
// with a response, captured as storeClaim is: the floor's completion is the
// store's to the byte (its update also removes the steps and suspension
// attributes, and its condition is the store's lease fence).
var storeComplete = captureComplete()

func captureComplete() *dynamodb.UpdateItemInput {
	c := &capture{}
	now := time.Unix(1_000_000_001, 0)
	_ = dynamostore.New(c, "capture").Complete(context.Background(), storage.Record{
		ID: sentinelID, Status: storage.StatusCompleted, ExpiresAt: now.Add(time.Hour),
		Lease: sentinelLease, Version: storage.RecordVersion, Data: []byte("p{}"),
	})
	if c.update == nil {
		panic("idembench: dynamostore's completion made no UpdateItem")
	}
	return c.update
}

// capture is a dynamostore.Client that keeps the first PutItem and
// UpdateItem and fails every call.
type capture struct {
	put    *dynamodb.PutItemInput
	update *dynamodb.UpdateItemInput
}

var errCaptured = errors.New("idembench: captured, not sent")

func (c *capture) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.put == nil {
		c.put = in
	}
	return nil, errCaptured
}

func (c *capture) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if c.update == nil {
		c.update = in
	}
	return nil, errCaptured
}

func (c *capture) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, errCaptured
}

func (c *capture) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errCaptured
}

// newKey is a first invocation: claim, run the handler, store its JSON.
func (b *bare) newKey(ctx context.Context, e paymentEvent) error {
	id, lease := b.recordID(e.IdempotencyKey), randomHex(16)
	old, err := b.claim(ctx, id, lease)
	if err != nil {
		return err
	}
	if old != nil {
		return errors.New("bare: key already claimed")
	}
	out, err := chargeHandler(ctx, e)
	if err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return b.complete(ctx, id, lease, data)
}

// complete sends the completion dynamostore sends (storeComplete: the same
// update and condition expressions, names and value shapes) for id, lease
// and the response's JSON data, after the one-byte prefix the store's
// envelope gives an uncompressed response.
func (b *bare) complete(ctx context.Context, id, lease string, data []byte) error {
	tmpl := storeComplete
	in := *tmpl
	in.TableName = &b.table
	in.Key = map[string]types.AttributeValue{"id": attrS(id)}
	in.ExpressionAttributeValues = make(map[string]types.AttributeValue, len(tmpl.ExpressionAttributeValues))
	for k, v := range tmpl.ExpressionAttributeValues {
		switch k {
		case ":lease":
			v = attrS(lease)
		case ":expiration":
			v = attrN(time.Now().Add(time.Hour).Unix())
		case ":data":
			v = &types.AttributeValueMemberB{Value: append([]byte{'p'}, data...)}
		}
		in.ExpressionAttributeValues[k] = v
	}
	_, err := b.client.UpdateItem(ctx, &in)
	return err
}

// replay is a duplicate: one claim that fails and returns the record, whose
// response is decoded for the caller.
func (b *bare) replay(ctx context.Context, e paymentEvent) error {
	old, err := b.claim(ctx, b.recordID(e.IdempotencyKey), randomHex(16))
	if err == nil && old == nil {
		return errors.New("bare: replay claimed a new record")
	}
	if err != nil {
		return err
	}
	_, err = storedResponse(old)
	return err
}

// storedResponse decodes the response a completed item holds (complete's
// one-byte prefix, then its JSON): what a replay hands its caller.
func storedResponse(item map[string]types.AttributeValue) (paymentResult, error) {
	var out paymentResult
	data, ok := item["data"].(*types.AttributeValueMemberB)
	if !ok || len(data.Value) == 0 {
		return out, errors.New("bare: the record holds no response")
	}
	return out, json.Unmarshal(data.Value[1:], &out)
}

// invoke is one invocation on the floor whatever the record holds: the
// claim, and for a new key the handler and the completion (the calls of
// newKey), for a duplicate the stored response decoded (replay's). §2's CPU
// children run it, as they run the wrapper, over new keys and then their
// replays.
func (b *bare) invoke(ctx context.Context, e paymentEvent) error {
	id, lease := b.recordID(e.IdempotencyKey), randomHex(16)
	old, err := b.claim(ctx, id, lease)
	if err != nil {
		return err
	}
	if old != nil {
		_, err := storedResponse(old)
		return err
	}
	out, err := chargeHandler(ctx, e)
	if err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return b.complete(ctx, id, lease, data)
}

// floorResult compares wrapped invocations with the bare calls, one case,
// over several runs.
type floorResult struct {
	Case          string
	Bare, Wrapped latencies // over every run's invocations
	Ratios        []float64 // wrapped / bare median latency, one per run
}

// ratioP50 is the median over the runs of their wrapped / bare median
// latency: the gate.
func (r floorResult) ratioP50() float64 { return r.ratio().Median }
func (r floorResult) ratio() spread     { return spreadOf(r.Ratios) }
func (r floorResult) ratioP99() float64 { return r.Wrapped.P99 / r.Bare.P99 }

// side is one path of a floor measurement: an invocation with key that
// must succeed (a replay must be one).
type side func(ctx context.Context, key string) error

// floorSides are the four paths of a floor: wrapped and bare, for a new key
// and for its replay.
type floorSides struct {
	wrappedNew, bareNew, wrappedReplay, bareReplay side
	// prepare, if not nil, builds what the invocations of keys are sent,
	// before they are timed.
	prepare func(keys []string) error
}

// measureFloor is §2's method, used by §2, §9 and §10: runs runs, each of
// count/runs new keys through each path, interleaved one invocation at a
// time (A/B, B/A, ...: neither path always follows the other), then the
// same keys again, their replays, interleaved the same way; after warmup
// unmeasured invocations of each path and case. Each run gives a ratio of
// medians; the gate is their median, so a burst of load from elsewhere on
// the machine spoils a run, not the figure.
func measureFloor(ctx context.Context, tag string, s floorSides, runs, count, warmup int) ([]floorResult, error) {
	run := tag + randomHex(6)
	keys := func(name string, n int) []string {
		k := make([]string, n)
		for i := range k {
			k[i] = fmt.Sprintf("%s-%s-%d", run, name, i)
		}
		return k
	}
	one := func(f side, key string, into *[]time.Duration) error {
		t0 := time.Now()
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(ictx, key)
		cancel()
		*into = append(*into, time.Since(t0))
		return err
	}
	interleave := func(name string, wk, bk []string, w, b side) (wl, bl []time.Duration, err error) {
		if s.prepare != nil {
			if err := s.prepare(slices.Concat(wk, bk)); err != nil {
				return nil, nil, err
			}
		}
		wl, bl = make([]time.Duration, 0, len(wk)), make([]time.Duration, 0, len(bk))
		for i := range wk {
			first, second := func() error { return one(w, wk[i], &wl) }, func() error { return one(b, bk[i], &bl) }
			if i%2 == 1 {
				first, second = second, first
			}
			for _, f := range []func() error{first, second} {
				if err := f(); err != nil {
					// The floor compares like with like: any failure spoils it.
					return nil, nil, fmt.Errorf("floor %s: %w", name, err)
				}
			}
		}
		return wl, bl, nil
	}

	wk, bk := keys("warm-w", warmup), keys("warm-b", warmup)
	if _, _, err := interleave("warm-up", wk, bk, s.wrappedNew, s.bareNew); err != nil {
		return nil, err
	}
	if _, _, err := interleave("warm-up", wk, bk, s.wrappedReplay, s.bareReplay); err != nil {
		return nil, err
	}
	res := []floorResult{{Case: "new key"}, {Case: "replay"}}
	all := make([][2][]time.Duration, len(res)) // wrapped, bare
	per := max(count/runs, 1)
	for r := range runs {
		wk, bk := keys(fmt.Sprintf("w%d", r), per), keys(fmt.Sprintf("b%d", r), per)
		for c, paths := range [][2]side{{s.wrappedNew, s.bareNew}, {s.wrappedReplay, s.bareReplay}} {
			wl, bl, err := interleave(res[c].Case, wk, bk, paths[0], paths[1])
			if err != nil {
				return nil, err
			}
			res[c].Ratios = append(res[c].Ratios, summarize(wl).P50/summarize(bl).P50)
			all[c][0], all[c][1] = append(all[c][0], wl...), append(all[c][1], bl...)
		}
	}
	for c := range res {
		res[c].Wrapped, res[c].Bare = summarize(all[c][0]), summarize(all[c][1])
	}
	return res, nil
}

// runFloor is §2: the wrapper against bare, by measureFloor.
func runFloor(ctx context.Context, client *dynamodb.Client, table string, tmpl paymentEvent, runs, count, warmup int) ([]floorResult, error) {
	b := &bare{client: client, table: table}
	engine := idempotent.New(dynamostore.New(client, table),
		idempotent.WithPrefix("floor"), idempotent.WithExpiry(time.Hour),
		idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	h := idempotent.Wrap(engine, chargeHandler, idempotent.WithKey(eventKey))
	event := func(key string) paymentEvent { e := tmpl; e.IdempotencyKey = key; return e }
	wrapped := func(ctx context.Context, key string) error { _, err := h(ctx, event(key)); return err }
	return measureFloor(ctx, "f", floorSides{
		wrappedNew:    wrapped,
		bareNew:       func(ctx context.Context, key string) error { return b.newKey(ctx, event(key)) },
		wrappedReplay: wrapped,
		bareReplay:    func(ctx context.Context, key string) error { return b.replay(ctx, event(key)) },
	}, runs, count, warmup)
}
