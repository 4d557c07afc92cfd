package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// ErrExpiryInPast is returned (wrapped) by Claim and Complete, which then
// write nothing, when the record's ExpiresAt has already passed by the Redis
// server's clock: Redis would delete the key the moment it was written, and a
// claim that vanishes at once would let a duplicate run the handler too. It
// means the caller's clock is far behind the server's, or a test passes
// times in the past (give records an expiry in the real future, as the
// storetest suite does).
var ErrExpiryInPast = errors.New("redisstore: record expiry has already passed by the Redis server's clock")

var (
	_ storage.Store  = (*Store)(nil)
	_ redis.Scripter = (redis.UniversalClient)(nil)
)

// Store is an storage.Store kept in Redis (or Valkey), one hash per
// record. Create it with New. A Store is safe for concurrent use.
type Store struct {
	client redis.Scripter
	opts   Options
}

// New returns a Store that keeps its records through client: a
// *redis.Client, *redis.ClusterClient, *redis.Ring or any
// redis.UniversalClient. Create the client once, at start-up, and share it.
// The options start from the defaults documented on Options; each optFn then
// modifies them.
//
// New panics if client is nil: a programmer error, found at start-up.
func New(client redis.Scripter, optFns ...func(*Options)) *Store {
	if client == nil {
		panic("redisstore: New: nil client")
	}
	opts := defaultOptions()
	for _, fn := range optFns {
		fn(&opts)
	}
	opts.normalize()
	return &Store{client: client, opts: opts}
}

// Options returns a copy of the Store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Key returns the Redis key that holds the record id: Options.KeyPrefix
// followed by id.
func (s *Store) Key(id string) string { return s.opts.KeyPrefix + id }

// LoadScripts loads the Store's Lua scripts into the server's script cache
// (SCRIPT LOAD; on a cluster client, into every primary). Calling it is
// optional: without it, the first call of each operation on a server that
// lacks its script costs one extra round trip (EVALSHA answered NOSCRIPT,
// then EVAL). Call it during a Lambda function's init phase to take that
// cost out of the first invocation.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.client).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}

// Claim implements storage.Store with one script that checks the stored
// record and, if there is none or it is claimable, replaces it with rec and
// sets the key to expire when rec does. A refused claim costs nothing more:
// the script returns the live record.
//
// A claim that replaces a record resumable for rec (storage.Record.Resumable)
// keeps its steps in the same script and returns them in ClaimResult.Steps;
// steps that do not decode refuse the claim, without writing, with an error
// wrapping storage.ErrCorruptRecord (resuming past unknown steps, or
// dropping them and re-running their side effects, would both be wrong).
//
// Replacing another owner's INPROGRESS record is a takeover
// (ClaimResult.TookOver), or a resume (ClaimResult.Resumed) when its owner
// suspended it.
//
// A claim retried by the client after its first response was lost finds the
// caller's own record; the lease token identifies it, and the claim counts as
// made without writing (TookOver and Resumed are then false, as the first
// response that knew otherwise was lost), with the record's steps when it is
// resumable, as the first response carried them.
func (s *Store) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return storage.ClaimResult{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	key := s.Key(rec.ID)
	reply, err := claimScript.Run(ctx, s.client, []string{key}, claimArgs(&rec, now)...).Slice()
	if err != nil {
		return storage.ClaimResult{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	return claimResult(&rec, key, reply)
}

// claimArgs are claimScript's ARGV for a claim of rec at now.
func claimArgs(rec *storage.Record, now time.Time) []any {
	args := make([]any, 0, 5+2*7)
	args = append(args, rec.Lease, itoa(now.Unix()), itoa(now.UnixMilli()), itoa(keyExpiryMs(rec.ExpiresAt)), rec.Fingerprint)
	return claimFields(args, rec)
}

// claimResult decodes claimScript's reply to a claim of rec under key.
func claimResult(rec *storage.Record, key string, reply []any) (storage.ClaimResult, error) {
	tag, rest := splitReply(reply)
	switch tag {
	case "claimed", "own":
		var replaced int64 // claimScript's: 0 nothing, 1 a takeover, 2 a resume
		if tag == "claimed" {
			var ok bool
			if replaced, ok = intAt(rest, 0); !ok || replaced < 0 || replaced > 2 {
				break
			}
			rest = rest[1:]
		}
		raw, ok := stringAt(rest, 0)
		if !ok {
			break
		}
		steps, err := decodeSteps(raw)
		if err != nil {
			// The claim script refuses to keep steps that do not decode, so
			// this is the caller's own record ("own": nothing was written),
			// or a script that disagrees with decodeSteps.
			return storage.ClaimResult{}, fmt.Errorf("redisstore: claim: key %q: %w: field %q is malformed: %w", key, storage.ErrCorruptRecord, fieldSteps, err)
		}
		return storage.ClaimResult{Claimed: true, TookOver: replaced == 1, Resumed: replaced == 2, Steps: steps}, nil
	case "refused":
		flat, ok := sliceAt(rest, 0)
		if !ok {
			break
		}
		existing, err := decodeHash(rec.ID, flat)
		if err != nil {
			return storage.ClaimResult{}, fmt.Errorf("redisstore: claim: key %q: %w", key, err)
		}
		return storage.ClaimResult{Existing: &existing}, nil
	case "badsteps":
		_, err := decodeSteps(strAt(rest, 0))
		if err == nil {
			err = errors.New("the claim script refused it")
		}
		return storage.ClaimResult{}, fmt.Errorf("redisstore: claim: key %q: %w: field %q of the record to resume is malformed (left as stored): %w",
			key, storage.ErrCorruptRecord, fieldSteps, err)
	case "wrongtype":
		return storage.ClaimResult{}, fmt.Errorf("redisstore: claim: %w: key %q holds a Redis %s, not a hash", storage.ErrCorruptRecord, key, strAt(rest, 0))
	case "past":
		return storage.ClaimResult{}, pastError("claim", rec.ExpiresAt, rest)
	}
	return storage.ClaimResult{}, unexpected("claim", reply)
}

// Complete implements storage.Store with one script that, if the stored
// record carries rec.Lease, overwrites its status, data and expiration,
// removes its lease end, and moves the key's expiry to rec.ExpiresAt. The
// status is not checked, so a retried completion succeeds again. A record
// larger than Options.MaxItemBytes is refused before any call.
func (s *Store) Complete(ctx context.Context, rec storage.Record) error {
	key := s.Key(rec.ID)
	if size := completedSize(key, &rec); size > s.opts.MaxItemBytes {
		return fmt.Errorf("redisstore: complete: %w: the record would be %d bytes (limit %d)", storage.ErrTooLarge, size, s.opts.MaxItemBytes)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	reply, err := completeScript.Run(ctx, s.client, []string{key}, completeArgs(&rec)...).Slice()
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	return completeReply(&rec, key, reply)
}

// completeArgs are completeScript's ARGV for the completion rec.
func completeArgs(rec *storage.Record) []any {
	return []any{rec.Lease, itoa(keyExpiryMs(rec.ExpiresAt)), string(rec.Status), itoa(rec.ExpiresAt.Unix()), rec.Data, rec.Trace}
}

// completeReply decodes completeScript's reply to the completion rec under
// key: Complete's error.
func completeReply(rec *storage.Record, key string, reply []any) error {
	tag, rest := splitReply(reply)
	switch tag {
	case "ok":
		return nil
	case "gone":
		return fmt.Errorf("redisstore: complete: %w (the record is gone)", storage.ErrLeaseLost)
	case "lost":
		return fmt.Errorf("redisstore: complete: %w (the record has another lease)", storage.ErrLeaseLost)
	case "wrongtype":
		return foreignKeyError("complete", key, rest)
	case "past":
		return pastError("complete", rec.ExpiresAt, rest)
	}
	return unexpected("complete", reply)
}

// Release implements storage.Store with one script that deletes the record
// if it carries lease and is INPROGRESS. A record that is already gone
// (released before, or expired and removed by Redis) is not an error; the
// caller's completed record is kept (storage.ErrAlreadyCompleted).
func (s *Store) Release(ctx context.Context, id, lease string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	key := s.Key(id)
	reply, err := releaseScript.Run(ctx, s.client, []string{key}, lease).Slice()
	if err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return releaseReply(key, reply)
}

// releaseReply decodes releaseScript's reply to a release under key:
// Release's error.
func releaseReply(key string, reply []any) error {
	tag, rest := splitReply(reply)
	switch tag {
	case "ok", "gone":
		return nil
	case "lost":
		if status := strAt(rest, 0); status != "" {
			return fmt.Errorf("redisstore: release: %w (the record is %s under another lease)", storage.ErrLeaseLost, status)
		}
		return fmt.Errorf("redisstore: release: %w", storage.ErrLeaseLost)
	case "done":
		return givenBackError("release", rest)
	case "wrongtype":
		return foreignKeyError("release", key, rest)
	}
	return unexpected("release", reply)
}

// foreignKeyError reports a key that holds something other than a hash: it
// is not the caller's record (so the lease is lost), and it is not a record
// at all. Nothing was written or deleted.
func foreignKeyError(op, key string, rest []any) error {
	return fmt.Errorf("redisstore: %s: %w: %w: key %q holds a Redis %s, not a hash", op, storage.ErrLeaseLost, storage.ErrCorruptRecord, key, strAt(rest, 0))
}

func pastError(op string, expires time.Time, rest []any) error {
	if ms, ok := intAt(rest, 0); ok {
		return fmt.Errorf("redisstore: %s: %w: the record expires at %s, the server's time is %s",
			op, ErrExpiryInPast, expires.UTC().Format(time.RFC3339), time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
	}
	return fmt.Errorf("redisstore: %s: %w", op, ErrExpiryInPast)
}

func unexpected(op string, reply []any) error {
	return fmt.Errorf("redisstore: %s: unexpected script reply %.200v", op, reply)
}

// splitReply splits a script's reply into its tag and the rest.
func splitReply(reply []any) (string, []any) {
	if len(reply) == 0 {
		return "", nil
	}
	tag, _ := reply[0].(string)
	return tag, reply[1:]
}

func intAt(v []any, i int) (int64, bool) {
	if i >= len(v) {
		return 0, false
	}
	n, ok := v[i].(int64)
	return n, ok
}

func strAt(v []any, i int) string {
	if i >= len(v) {
		return ""
	}
	s, _ := v[i].(string)
	return s
}

// stringAt is strAt that also reports whether v[i] is a string.
func stringAt(v []any, i int) (string, bool) {
	if i >= len(v) {
		return "", false
	}
	s, ok := v[i].(string)
	return s, ok
}

func sliceAt(v []any, i int) ([]any, bool) {
	if i >= len(v) {
		return nil, false
	}
	s, ok := v[i].([]any)
	return s, ok
}
