package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// §7: the Redis store's distance from its floor, as §2 measures DynamoDB's,
// against the redis-server scripts/with-redis.sh starts on loopback.

// redisAddedP99Target is the most latency an idempotency check over Redis may
// add to an invocation at p99.
const redisAddedP99Target = 5 * time.Millisecond

// countRedis is a go-redis hook that counts every command the client sends
// (an EVALSHA answered NOSCRIPT and the EVAL that follows are two) in total
// and in the calls of the command's context.
type countRedis struct{ total *calls }

func (h countRedis) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countRedis) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (h countRedis) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

func (h countRedis) count(ctx context.Context, cmd redis.Cmder) {
	op := strings.ToUpper(cmd.Name())
	h.total.record(op)
	if c, ok := ctx.Value(callsKey{}).(*calls); ok {
		c.record(op)
	}
}

// redisEnv is the Redis server of the run, from REDIS_URL.
type redisEnv struct {
	url, addr string
	pid       int // redis-server's pid, 0 if not found on this machine
}

func redisFromEnv() redisEnv {
	r := redisEnv{url: os.Getenv("REDIS_URL")}
	if opts, err := redis.ParseURL(r.url); err == nil {
		r.addr = opts.Addr
		r.pid = listenerPID(r.url)
	}
	return r
}

// newRedisClient connects to REDIS_URL, counting commands in total.
func newRedisClient(ctx context.Context, total *calls) (*redis.Client, error) {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		return nil, errors.New("REDIS_URL is not set: run under scripts/with-redis.sh (make bench does)")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	client := redis.NewClient(opts)
	client.AddHook(countRedis{total: total})
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis at REDIS_URL: %w", err)
	}
	return client, nil
}

// describeRedis is the server's version and persistence settings, for the
// report.
func describeRedis(ctx context.Context, client *redis.Client) string {
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	version := "unknown"
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	persistence := "persistence unknown"
	save, err1 := client.ConfigGet(ctx, "save").Result()
	aof, err2 := client.ConfigGet(ctx, "appendonly").Result()
	if err1 == nil && err2 == nil {
		persistence = fmt.Sprintf("RDB save %q, appendonly %s", save["save"], aof["appendonly"])
		if save["save"] == "" && aof["appendonly"] == "no" {
			persistence = "no persistence (no RDB snapshots, no AOF)"
		}
	}
	return "redis-server " + version + ", " + persistence
}

// The bare check's scripts: what a hand-written idempotency check over Redis
// cannot do without. A claim must test and write atomically, so it is one
// script (one EVALSHA): the same liveness condition as the store's (no
// record, an expired one, or an INPROGRESS one whose lease has lapsed), the
// same fields and the same key expiry; a refused claim answers with the
// record (HGETALL). A completion is one script fenced on the lease. Left out
// of both, as a hand-written check would leave them out, is what the store's
// scripts do beyond that: the key's TYPE check (a foreign key is reported,
// never overwritten), the owner's own record recognized after a lost
// response, the payload fingerprint, the takeover flag, and the server-clock
// check that refuses a key expiry already past.
var (
	bareRedisClaim = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'status', 'expiration', 'in_progress_expiration')
if f[1] then
  local exp, lease_end = tonumber(f[2]), tonumber(f[3])
  if not ((exp and exp < tonumber(ARGV[1])) or (f[1] == 'INPROGRESS' and lease_end and lease_end < tonumber(ARGV[2]))) then
    return redis.call('HGETALL', KEYS[1])
  end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
`)
	bareRedisComplete = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'COMPLETED', 'expiration', ARGV[2], 'data', ARGV[4])
redis.call('HDEL', KEYS[1], 'in_progress_expiration')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
`)
)

// bareRedis is §7's floor: the two scripts above issued with go-redis, no
// record type, no outcome hook, no decoding of the replayed record.
type bareRedis struct {
	client *redis.Client
	prefix string
}

// bareKeyExpiryMs is when Redis should drop a record expiring at t: the
// second after, as the store sets it.
func bareKeyExpiryMs(t time.Time) string { return strconv.FormatInt((t.Unix()+1)*1000, 10) }

// claim returns the refusing record's fields, or nil when the key was claimed.
func (b *bareRedis) claim(ctx context.Context, key, lease string) ([]any, error) {
	now := time.Now()
	exp := now.Add(time.Hour)
	v, err := bareRedisClaim.Run(ctx, b.client, []string{key},
		now.Unix(), now.UnixMilli(), bareKeyExpiryMs(exp),
		"status", "INPROGRESS", "expiration", exp.Unix(), "in_progress_expiration", now.Add(32*time.Second).UnixMilli(),
		"lease", lease, "version", 1,
	).Result()
	if err != nil {
		return nil, err
	}
	if old, ok := v.([]any); ok {
		return old, nil
	}
	return nil, nil
}

func (b *bareRedis) key(e paymentEvent) string {
	sum := sha256.Sum256([]byte(e.IdempotencyKey))
	return b.prefix + hex.EncodeToString(sum[:])
}

func (b *bareRedis) newKey(ctx context.Context, e paymentEvent) error {
	key, lease := b.key(e), randomHex(16)
	old, err := b.claim(ctx, key, lease)
	if err != nil {
		return err
	}
	if old != nil {
		return errors.New("bare redis: key already claimed")
	}
	out, err := chargeHandler(ctx, e)
	if err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	exp := time.Now().Add(time.Hour)
	n, err := bareRedisComplete.Run(ctx, b.client, []string{key}, lease, exp.Unix(), bareKeyExpiryMs(exp), append([]byte{'p'}, data...)).Int()
	if err == nil && n != 1 {
		err = errors.New("bare redis: completion fenced off")
	}
	return err
}

func (b *bareRedis) replay(ctx context.Context, e paymentEvent) error {
	old, err := b.claim(ctx, b.key(e), randomHex(16))
	if err == nil && old == nil {
		return errors.New("bare redis: replay claimed a new record")
	}
	return err
}

// storeOnly is the store's calls without the wrapper: redisstore's Claim
// and Complete called by hand with the records the wrapper would write, so
// §7 can tell the store's cost (its scripts, their replies decoded) from the
// wrapper's.
type storeOnly struct {
	store *redisstore.Store
}

func (s storeOnly) record(e paymentEvent) storage.Record {
	sum := sha256.Sum256([]byte(e.IdempotencyKey))
	now := time.Now()
	return storage.Record{ID: "rstore#" + hex.EncodeToString(sum[:]), Status: storage.StatusInProgress,
		ExpiresAt: now.Add(time.Hour), LeaseExpiresAt: now.Add(32 * time.Second), Lease: randomHex(16), Version: storage.RecordVersion}
}

func (s storeOnly) newKey(ctx context.Context, e paymentEvent) error {
	rec := s.record(e)
	res, err := s.store.Claim(ctx, rec, time.Now())
	if err != nil {
		return err
	}
	if !res.Claimed {
		return errors.New("redisstore alone: key already claimed")
	}
	out, err := chargeHandler(ctx, e)
	if err != nil {
		return err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	rec.Status, rec.Data = storage.StatusCompleted, append([]byte{'p'}, data...)
	rec.ExpiresAt, rec.LeaseExpiresAt = time.Now().Add(time.Hour), time.Time{}
	return s.store.Complete(ctx, rec)
}

func (s storeOnly) replay(ctx context.Context, e paymentEvent) error {
	res, err := s.store.Claim(ctx, s.record(e), time.Now())
	if err == nil && res.Existing == nil {
		return errors.New("redisstore alone: replay claimed a new record")
	}
	return err
}

// redisPath is one path of a §7 case.
type redisPath struct {
	Name    string
	Latency latencies
	Calls   []int    // distinct counts of commands per invocation, sorted
	Ops     []string // the commands of the first invocation
}

// redisFloorResult is one case of §7: the wrapper over redisstore, the
// store's calls alone, the bare scripts, and the handler alone, interleaved.
type redisFloorResult struct {
	Case                          string
	Target                        int // commands per wrapped invocation
	Wrapped, Store, Bare, Handler redisPath
}

func (r redisFloorResult) ratioP50() float64 { return r.Wrapped.Latency.P50 / r.Bare.Latency.P50 }
func (r redisFloorResult) ratioP99() float64 { return r.Wrapped.Latency.P99 / r.Bare.Latency.P99 }

// addedP99 is the latency the check adds to an invocation at p99: the
// wrapped invocation's p99 less the handler's own (µs).
func (r redisFloorResult) addedP99() float64 { return r.Wrapped.Latency.P99 - r.Handler.Latency.P99 }

func (r redisFloorResult) callsOK() bool {
	return len(r.Wrapped.Calls) == 1 && r.Wrapped.Calls[0] == r.Target
}

// runRedisFloor measures count invocations of each path (wrapped, the
// store alone, bare, handler alone) for a new key and a replay, interleaved in rotating order
// at concurrency 1, after warmup unmeasured ones of each. The store's and
// the bare scripts are loaded first, as a function's init would
// (redisstore.Store.LoadScripts).
func runRedisFloor(ctx context.Context, client *redis.Client, tmpl paymentEvent, count, warmup int) ([]redisFloorResult, error) {
	run := randomHex(6)
	store := redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = "idembench:" + run + ":" })
	if err := store.LoadScripts(ctx); err != nil {
		return nil, err
	}
	for _, s := range []*redis.Script{bareRedisClaim, bareRedisComplete} {
		if err := s.Load(ctx, client).Err(); err != nil {
			return nil, err
		}
	}
	b := &bareRedis{client: client, prefix: "idembench:" + run + ":bare#"}
	defer deleteRedisKeys(client, "idembench:"+run+":*")
	engine := idempotent.New(store,
		idempotent.WithPrefix("rfloor"), idempotent.WithExpiry(time.Hour),
		idempotent.WithLogger(slog.New(slog.DiscardHandler)))
	h := idempotent.Wrap(engine, chargeHandler, idempotent.WithKey(eventKey))
	wrapped := func(ctx context.Context, e paymentEvent) error { _, err := h(ctx, e); return err }
	handler := func(ctx context.Context, e paymentEvent) error { _, err := chargeHandler(ctx, e); return err }
	so := storeOnly{store: store}

	type path struct {
		f     func(context.Context, paymentEvent) error
		keys  []string
		lat   []time.Duration
		calls map[int]bool
		ops   []string
	}
	// measure runs the wrapper on wk, the store alone and the bare scripts on
	// bk (their records live under other Redis keys), the handler on wk.
	measure := func(name string, target int, wf, sf, bf func(context.Context, paymentEvent) error, wk, bk []string) (redisFloorResult, error) {
		paths := []*path{{f: wf, keys: wk}, {f: sf, keys: bk}, {f: bf, keys: bk}, {f: handler, keys: wk}}
		for _, p := range paths {
			p.calls = map[int]bool{}
		}
		for i := range wk {
			for j := range paths {
				p := paths[(i+j)%len(paths)] // rotate who goes first
				e := tmpl
				e.IdempotencyKey = p.keys[i]
				c := &calls{}
				if i == 0 {
					c.names = []string{}
				}
				ictx, cancel := context.WithTimeout(withCalls(ctx, c), 30*time.Second)
				t0 := time.Now()
				err := p.f(ictx, e)
				p.lat = append(p.lat, time.Since(t0))
				cancel()
				if err != nil {
					return redisFloorResult{}, fmt.Errorf("redis floor %s: %w", name, err)
				}
				p.calls[int(c.ops.Load())] = true
				if i == 0 {
					p.ops = c.names
				}
			}
		}
		res := func(name string, p *path) redisPath {
			return redisPath{Name: name, Latency: summarize(p.lat), Calls: slices.Sorted(maps.Keys(p.calls)), Ops: p.ops}
		}
		return redisFloorResult{Case: name, Target: target, Wrapped: res("wrapped", paths[0]), Store: res("redisstore alone", paths[1]),
			Bare: res("bare", paths[2]), Handler: res("handler alone", paths[3])}, nil
	}
	keys := func(tag string, n int) []string {
		k := make([]string, n)
		for i := range k {
			k[i] = fmt.Sprintf("r%s-%s-%d", run, tag, i)
		}
		return k
	}

	wk, bk := keys("warm-w", warmup), keys("warm-b", warmup)
	if _, err := measure("warm-up", 2, wrapped, so.newKey, b.newKey, wk, bk); err != nil {
		return nil, err
	}
	if _, err := measure("warm-up", 1, wrapped, so.replay, b.replay, wk, bk); err != nil {
		return nil, err
	}
	wk, bk = keys("w", count), keys("b", count)
	newKey, err := measure("new key", 2, wrapped, so.newKey, b.newKey, wk, bk)
	if err != nil {
		return nil, err
	}
	replay, err := measure("replay", 1, wrapped, so.replay, b.replay, wk, bk)
	if err != nil {
		return nil, err
	}
	return []redisFloorResult{newKey, replay}, nil
}

// deleteRedisKeys deletes the run's keys (they would expire in an hour).
func deleteRedisKeys(client *redis.Client, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := client.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			client.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		client.Unlink(ctx, batch...)
	}
}
