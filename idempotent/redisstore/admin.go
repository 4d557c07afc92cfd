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

// The methods below make the Store a storage.AdminStore, for tools such as
// the idemkit command, not the wrapper: they are never on an invocation's
// path.

var _ storage.AdminStore = (*Store)(nil)

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

// Get reads the record id with one script, as storage.AdminStore says. A
// key that does not hold a readable record (a hash that does not decode, or
// a key of another Redis type) is a *storage.CorruptRecordError whose
// Fields hold the hash's fields, each value quoted, or, for a key of
// another type, "(redis type)" and that type.
func (s *Store) Get(ctx context.Context, id string) (storage.Record, error) {
	reply, err := getScript.Run(ctx, s.client, []string{s.Key(id)}).Slice()
	if err != nil {
		return storage.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	return s.decodeAdmin(id, reply)
}

// redisTypeField names, in a CorruptRecordError's Fields, the Redis type of
// a key that is not a hash.
const redisTypeField = "(redis type)"

// decodeAdmin reads getScript's reply.
func (s *Store) decodeAdmin(id string, reply []any) (storage.Record, error) {
	tag, rest := splitReply(reply)
	switch tag {
	case "none":
		return storage.Record{}, fmt.Errorf("redisstore: get %s: %w", id, storage.ErrNotFound)
	case "wrongtype":
		typ := strAt(rest, 0)
		return storage.Record{}, &storage.CorruptRecordError{ID: id, Fields: map[string]string{redisTypeField: typ},
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
				fields[fmt.Sprint(flat[i])] = fmt.Sprintf("%q", fmt.Sprint(flat[i+1]))
			}
			return storage.Record{}, &storage.CorruptRecordError{ID: id, Fields: fields, Err: err}
		}
		return rec, nil
	}
	return storage.Record{}, unexpected("get", reply)
}

// Delete deletes the record rec.ID as storage.AdminStore says, with one
// script that compares status, lease, lease end, expiry, fingerprint,
// version, steps and suspension. A key of another Redis type is a change.
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
		return fmt.Errorf("redisstore: delete %s: %w: %w", rec.ID, storage.ErrChanged, storage.ErrNotFound)
	case "changed":
		return fmt.Errorf("redisstore: delete %s: %w", rec.ID, storage.ErrChanged)
	case "wrongtype":
		return fmt.Errorf("redisstore: delete %s: %w: key holds a Redis %s", rec.ID, storage.ErrChanged, strAt(rest, 0))
	}
	return unexpected("delete", reply)
}

// ScanClient is what Scan needs beyond redis.Scripter: *redis.Client and
// *redis.Ring have it. A *redis.ClusterClient is scanned on each primary.
type ScanClient interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// Scan passes the records opts selects to fn, as storage.AdminStore says:
// SCAN MATCH of the keys under Options.KeyPrefix and opts.IDPrefix (a
// COUNT hint of Options.ScanCount each), then one script per key to read
// it. Scanned counts those keys, Matched the records passed; a key that
// expires between the SCAN and the read is skipped. SCAN walks the whole keyspace of
// the database, not only the prefix, and may return a key more than once
// (Redis's guarantee); the store's client must implement ScanClient or be a
// *redis.ClusterClient, whose primaries are scanned one after the other
// (replicas are not read: they hold the same keys).
func (s *Store) Scan(ctx context.Context, opts storage.ScanOptions, fn func(storage.Record, error) bool) error {
	var p storage.ScanProgress
	walk := func(ctx context.Context, sc ScanClient) error {
		var cursor uint64
		for {
			keys, next, err := sc.Scan(ctx, cursor, escapeGlob(s.opts.KeyPrefix+opts.IDPrefix)+"*", s.opts.ScanCount).Result()
			if err != nil {
				return fmt.Errorf("redisstore: scan: %w", err)
			}
			p.Pages++
			for _, key := range keys {
				p.Scanned++
				id := strings.TrimPrefix(key, s.opts.KeyPrefix)
				rec, err := s.Get(ctx, id)
				switch {
				case errors.Is(err, storage.ErrNotFound):
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

func report(progress func(storage.ScanProgress), p storage.ScanProgress) {
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
