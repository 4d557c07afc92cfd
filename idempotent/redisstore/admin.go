package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// The operator methods below (Get, Delete, Scan) serve tools such as the
// idemkit command, not the wrapper: they are never on an invocation's path.

// Errors of the operator methods. Match them with errors.Is.
var (
	// ErrNotFound: no key holds the record id (it never existed, was
	// released, forgotten, or expired).
	ErrNotFound = errors.New("redisstore: no record with this id")

	// ErrChanged: Delete found the record changed since it was read (a
	// completion, a takeover, a new claim, or it is gone); nothing was
	// deleted. Read it again before deciding.
	ErrChanged = errors.New("redisstore: record changed since it was read")
)

// CorruptError reports a key that does not hold a readable record: a hash
// that does not decode, or a key of another Redis type. It wraps
// storage.ErrCorruptRecord. Nothing here ever rewrites such a key.
type CorruptError struct {
	// ID is the record id (the key without Options.KeyPrefix).
	ID string
	// Type is the key's Redis type ("hash" for a hash that does not decode).
	Type string
	// Fields holds the hash's fields as stored (nil for other types).
	Fields map[string]string
	// Err says what is wrong; it wraps storage.ErrCorruptRecord.
	Err error
}

// Error names the record and what is wrong with it.
func (e *CorruptError) Error() string { return fmt.Sprintf("record %s: %v", e.ID, e.Err) }

// Unwrap returns Err, which wraps storage.ErrCorruptRecord.
func (e *CorruptError) Unwrap() error { return e.Err }

// getScript reads a record's hash. Replies: {'none'}, {'hash', HGETALL},
// {'wrongtype', type}.
var getScript = redis.NewScript(luaHelpers + `
if kind == 'none' then return {'none'} end
return {'hash', redis.call('HGETALL', key)}
`)

// deleteScript deletes a record if it is still exactly as read. ARGV:
// [1] status, [2] expiration (epoch s), [3] lease end (epoch ms, "" for
// none), [4] lease, [5] fingerprint ("" for none), [6] version, [7] the
// steps as stored ("" for none), [8] the suspended field ("" for none).
// Numbers are compared as numbers, absent fields as "" (version as 0).
// Replies: {'ok'}, {'none'}, {'changed'}, {'wrongtype', type}.
var deleteScript = redis.NewScript(luaHelpers + `
if kind == 'none' then return {'none'} end
local f = redis.call('HMGET', key, 'status', 'expiration', 'in_progress_expiration', 'lease', 'validation', 'version', 'steps', 'suspended')
local function num(v) if v == false or v == '' then return nil end return int(v) end
if (f[1] or '') ~= ARGV[1] or num(f[2]) ~= num(ARGV[2]) or num(f[3]) ~= num(ARGV[3]) or
   (f[4] or '') ~= ARGV[4] or (f[5] or '') ~= ARGV[5] or (num(f[6]) or 0) ~= num(ARGV[6]) or
   (f[7] or '') ~= ARGV[7] or (f[8] or '') ~= ARGV[8] then
  return {'changed'}
end
redis.call('DEL', key)
return {'ok'}
`)

// Get reads the record id with one script. It returns an error wrapping
// ErrNotFound when there is no such key, and a *CorruptError (wrapping
// storage.ErrCorruptRecord) when the key does not hold a readable record.
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	reply, err := getScript.Run(ctx, s.client, []string{s.Key(id)}).Slice()
	if err != nil {
		return storage.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	return s.decodeAdmin(id, reply)
}

// decodeAdmin reads getScript's reply.
func (s *Store) decodeAdmin(id string, reply []any) (storage.Record, error) {
	tag, rest := splitReply(reply)
	switch tag {
	case "none":
		return storage.Record{}, fmt.Errorf("redisstore: get %s: %w", id, ErrNotFound)
	case "wrongtype":
		typ := strAt(rest, 0)
		return storage.Record{}, &CorruptError{ID: id, Type: typ,
			Err: fmt.Errorf("%w: key %q holds a Redis %s, not a hash", storage.ErrCorruptRecord, s.Key(id), typ)}
	case "hash":
		flat, ok := sliceAt(rest, 0)
		if !ok {
			break
		}
		rec, err := decodeHash(id, flat)
		if err != nil {
			fields := make(map[string]string, len(flat)/2)
			for i := 0; i+1 < len(flat); i += 2 {
				fields[fmt.Sprint(flat[i])] = fmt.Sprint(flat[i+1])
			}
			return storage.Record{}, &CorruptError{ID: id, Type: "hash", Fields: fields, Err: err}
		}
		return rec, nil
	}
	return storage.Record{}, unexpected("get", reply)
}

// Delete deletes the record rec.ID with one script, on condition that it is
// still exactly as rec describes it (as Get returned it): status, lease,
// lease end, expiry, fingerprint, version, steps and suspension. A record
// that changed meanwhile (completed, taken over, claimed anew, a step
// finished or suspended since, or gone) is left alone and the error
// wraps ErrChanged (and ErrNotFound as well when it is gone). Deleting a live
// INPROGRESS record lets a duplicate run the handler while its owner may
// still be running: the caller decides that, not Delete.
func (s *Store) Delete(ctx context.Context, rec storage.Record) error {
	leaseEnd := ""
	if !rec.LeaseExpiresAt.IsZero() {
		leaseEnd = itoa(rec.LeaseExpiresAt.UnixMilli())
	}
	var steps strings.Builder
	for _, st := range rec.Steps {
		steps.WriteString(encodeStep(st))
	}
	suspended := ""
	if rec.Suspended {
		suspended = suspendedValue
	}
	reply, err := deleteScript.Run(ctx, s.client, []string{s.Key(rec.ID)},
		string(rec.Status), itoa(rec.ExpiresAt.Unix()), leaseEnd, rec.Lease, rec.Fingerprint, itoa(int64(rec.Version)),
		steps.String(), suspended,
	).Slice()
	if err != nil {
		return fmt.Errorf("redisstore: delete: %w", err)
	}
	tag, rest := splitReply(reply)
	switch tag {
	case "ok":
		return nil
	case "none":
		return fmt.Errorf("redisstore: delete %s: %w: %w", rec.ID, ErrChanged, ErrNotFound)
	case "changed":
		return fmt.Errorf("redisstore: delete %s: %w", rec.ID, ErrChanged)
	case "wrongtype":
		return fmt.Errorf("redisstore: delete %s: %w: key holds a Redis %s", rec.ID, ErrChanged, strAt(rest, 0))
	}
	return unexpected("delete", reply)
}

// ScanOptions bounds and filters a Scan.
type ScanOptions struct {
	// Status, when set, keeps only records of that status.
	Status storage.Status

	// IDPrefix, when set, keeps only records whose id starts with it (for
	// example "payments#": one function's records). It narrows SCAN's MATCH
	// pattern, so the keys of other records are not read one by one; SCAN
	// still walks the whole keyspace.
	IDPrefix string

	// PageSize is the COUNT hint of each SCAN call; zero or less means 100.
	PageSize int64

	// Progress, when set, is called after each SCAN call.
	Progress func(ScanProgress)
}

// ScanProgress is how far a Scan has come.
type ScanProgress struct {
	// Pages is the number of SCAN calls made.
	Pages int
	// Scanned is the number of keys under Options.KeyPrefix (and
	// ScanOptions.IDPrefix) read.
	Scanned int64
	// Matched is the number of records passed to the callback.
	Matched int64
}

// ScanClient is what Scan needs beyond redis.Scripter: *redis.Client and
// *redis.Ring have it. A *redis.ClusterClient is scanned on each primary.
type ScanClient interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// Scan passes every record under Options.KeyPrefix (and opts.IDPrefix) to
// fn (SCAN MATCH, then one script per key to read it), until all are read,
// fn returns false, or ctx ends. A key that does not hold a readable record
// is passed with a *CorruptError and a zero Record; a key that expires
// between the SCAN and the read is skipped. SCAN walks the whole keyspace of
// the database, not only the prefix, and may return a key more than once
// (Redis's guarantee); the store's client must implement ScanClient or be a
// *redis.ClusterClient, whose primaries are scanned one after the other
// (replicas are not read: they hold the same keys).
func (s *Store) Scan(ctx context.Context, opts ScanOptions, fn func(storage.Record, error) bool) error {
	if opts.PageSize <= 0 {
		opts.PageSize = 100
	}
	var p ScanProgress
	walk := func(ctx context.Context, sc ScanClient) error {
		var cursor uint64
		for {
			keys, next, err := sc.Scan(ctx, cursor, escapeGlob(s.opts.KeyPrefix+opts.IDPrefix)+"*", opts.PageSize).Result()
			if err != nil {
				return fmt.Errorf("redisstore: scan: %w", err)
			}
			p.Pages++
			for _, key := range keys {
				p.Scanned++
				id := strings.TrimPrefix(key, s.opts.KeyPrefix)
				rec, err := s.Get(ctx, id)
				switch {
				case errors.Is(err, ErrNotFound):
					continue
				case err != nil && !errors.Is(err, storage.ErrCorruptRecord):
					return err
				case err == nil && opts.Status != "" && rec.Status != opts.Status:
					continue
				}
				p.Matched++
				if !fn(rec, err) {
					return errStop
				}
			}
			report(opts.Progress, p)
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		// ForEachMaster runs its function on every primary at once; the
		// callback is promised one record at a time, and nothing after a stop.
		var mu sync.Mutex
		stopped := false
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return errStop
			}
			err := walk(ctx, node)
			stopped = errors.Is(err, errStop)
			return err
		})
	case ScanClient:
		err = walk(ctx, c)
	default:
		return fmt.Errorf("redisstore: scan: the client (%T) has no Scan method", s.client)
	}
	if errors.Is(err, errStop) {
		report(opts.Progress, p)
		return nil
	}
	return err
}

// errStop ends a Scan whose callback returned false.
var errStop = errors.New("redisstore: scan stopped")

func report(progress func(ScanProgress), p ScanProgress) {
	if progress != nil {
		progress(p)
	}
}

// escapeGlob escapes the characters SCAN MATCH treats as a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
