// Package redisstore is an storage.Store kept in Redis or Valkey, through
// github.com/redis/go-redis/v9. It has exactly the semantics of the DynamoDB
// store (it passes the same storetest conformance suite) at a fraction of the
// latency, and different durability: read the trade-offs below before
// choosing it.
//
//	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")}) // once, at init
//	store := redisstore.New(client)
//	lambda.Start(idempotent.Wrap(idempotent.New(store), handler, idempotent.WithKey(keyFunc)))
//
// A Store is safe for concurrent use. New accepts any redis.Scripter:
// *redis.Client, *redis.ClusterClient, *redis.Ring, redis.UniversalClient.
//
// # One script per operation
//
// Claim, Complete, Release, AppendStep and Suspend are each one Lua script,
// which Redis runs atomically: no other command runs between the script's
// check of the stored record and its write, so two invocations can never
// both see "no record" and both claim. Each call is one EVALSHA, one round
// trip, whatever its outcome: a refused claim returns the live record in
// the same reply (the equivalent of DynamoDB's ALL_OLD), so a duplicate
// costs one call and a new key two (claim, complete), as with DynamoDB; a
// step costs one call, and resuming none (the claim's reply carries the
// steps). The first call of each script on a
// server that has not cached it costs one more round trip (EVALSHA answered
// NOSCRIPT, then EVAL with the source); Store.LoadScripts, called during a
// Lambda function's init, takes that out of the first invocation.
// ClaimMany (storage.ClaimManyStore, a batch's claims) sends the claim
// script once per record in one pipeline: one round trip for the batch, one
// per primary (in parallel) on a cluster. CompleteMany and ReleaseMany
// (storage.FinishManyStore) send the complete and release scripts so.
//
// The scripts implement the Store contract as the DynamoDB store's
// conditions do:
//   - Claim writes the record if there is none, if it has expired
//     (expiration < now, in seconds) or if it is INPROGRESS with a lapsed
//     lease (in_progress_expiration < now, in milliseconds), of this format
//     (version storage.RecordVersion, with a lease) and the same payload
//     (validation absent on either side, or equal). A record carrying the
//     caller's own lease counts as claimed without a write (a retry whose
//     first response was lost). Replacing another owner's INPROGRESS record
//     is reported as a takeover, or as a resume when its owner suspended
//     it. Otherwise the live record is returned.
//   - A claim keeps the replaced record's steps, in the same script, exactly
//     when that record is resumable (storage.Record.Resumable: INPROGRESS,
//     not expired, the same validation, absent on both sides counting as
//     the same), and returns them in the reply, so a takeover resumes at no
//     extra cost. Every other claim drops them with the old hash.
//   - Complete is fenced on the lease alone: it overwrites status, data and
//     expiration and removes in_progress_expiration, the steps and the
//     suspended field only if the record carries the caller's lease, so a
//     retried completion succeeds again.
//   - Release deletes the record only if it carries the caller's lease; a
//     record already gone is not an error.
//   - AppendStep appends a step to the steps field, and Suspend sets
//     in_progress_expiration and the suspended field, only if the record is
//     INPROGRESS and carries the caller's lease. Suspend keeps the steps, so
//     a handler that failed after finishing some lets the next claim resume
//     them at once.
//
// "Now" is always the caller's (the wrapper's clock), never the server's, so
// every store behaves identically and tests can pass any time. A stored value
// the scripts or the decoder cannot read is reported as
// idempotent.ErrCorruptRecord and left as it is, never replayed, never a
// panic; a key of another Redis type under a record's name is reported the
// same way and never overwritten or deleted.
//
// # Key layout
//
// One Redis hash per record, at the key Options.KeyPrefix (default
// "idemkit:") followed by the record ID ("<function>#<sha256 hex>"), for
// example idemkit:payments#9f86d0…. Its fields carry DynamoDB's attribute
// names:
//
//	status                  INPROGRESS or COMPLETED
//	expiration              epoch seconds, decimal
//	in_progress_expiration  epoch milliseconds, decimal (INPROGRESS only)
//	lease                   the owner's random lease token
//	validation              the payload fingerprint (absent when none)
//	data                    the stored response, binary (absent when none)
//	version                 the record format version, decimal
//	steps                   the finished steps, in order (absent when none)
//	suspended               "1" once the owner suspended the record (absent
//	                        otherwise: the claim rewrites the hash, Complete
//	                        removes it)
//
// A hash without a suspended field, such as every record written before it
// existed, reads as not suspended; the record format version did not change
// for it.
//
// The steps field holds each step as two netstrings, its name and then its
// data, "<length>:<bytes>," with the length in decimal bytes: the steps
// "charge" -> {"id":1} and "email" -> (empty) are stored as
//
//	6:charge,8:{"id":1},5:email,0:,
//
// The lengths keep any byte intact, in names and data alike, and a step is
// appended by concatenation without reading the others. A steps value that
// does not decode is reported as idempotent.ErrCorruptRecord, like any other
// unreadable field; a claim that would keep such steps is refused without
// writing, since resuming past steps it cannot read, or dropping them and
// re-running their side effects, would both be wrong.
//
// Each script touches only its record's key, so the store works unchanged on
// Redis Cluster (every key is its own slot; no hash tags are needed) and
// with read replicas (the scripts write, so they always run on a primary).
// It needs Redis 5.0 or later, or Valkey; the tests run on Redis 7.
//
// # Expiry
//
// Every claim and completion sets the key to expire (PEXPIREAT) at the
// first instant the record counts as expired: the second after its
// expiration second. AppendStep and Suspend leave the expiry as it is, since
// they do not change the record's expiration. Redis
// deletes the key then, by its own clock; the scripts still check expiration
// against the caller's now, so a record the caller considers expired is
// treated as absent even while the key lives. Unlike DynamoDB's TTL, which
// deletes up to days late, a Redis key is gone (never returned) the moment
// its time passes, and its memory is reclaimed shortly after.
//
// Because Redis deletes a key whose expiry time has already passed the moment
// it is set, Claim and Complete refuse, with an error wrapping
// ErrExpiryInPast and without writing, a record whose ExpiresAt has passed by
// the server's clock: a claim that vanished at once would let a duplicate run
// the handler too. The server's clock (TIME) is read for this check only,
// never for the liveness conditions. It means a caller clock far behind the
// server's, or a test passing "now" values in the past: tests that use fake
// times must keep record expiry in the real future, as the storetest suite
// does (or use idempotent.NewMemoryStore).
//
// Times travel through the scripts as Lua numbers (doubles), exact up to 2^53
// milliseconds, the year 287396; a key expiry beyond that is capped there.
//
// # Record size
//
// A completion larger than Options.MaxItemBytes (default 400 KB, DynamoDB's
// item limit, so a handler meets the same limit whatever the store) is
// refused with an error wrapping storage.ErrTooLarge before any call; the
// wrapper then completes the record without its response. The size counted
// is the key plus every field name and value of the completed hash. A step
// that would make the record larger than that, measured the same way with
// the step, is refused by the AppendStep script with an error wrapping
// storage.ErrTooLarge, without writing (the script measures the stored hash
// itself: only the server knows its size without a second round trip).
// Completion drops the steps, so they never count against the response.
//
// # Trade-offs against DynamoDB
//
// Durability. A DynamoDB conditional write is durable across availability
// zones when it is acknowledged. A Redis write is acknowledged from the
// primary's memory:
//   - Persistence: without persistence (a cache-only setup) a restart loses
//     every record; with RDB snapshots it loses the writes since the last
//     snapshot; with AOF and appendfsync everysec (the usual choice) a crash
//     loses about the last second of writes; appendfsync always loses none,
//     at a large cost in write latency.
//   - Replication is asynchronous: a failover promotes a replica that may
//     lack the last writes the old primary acknowledged. A lost claim means
//     a duplicate arriving after the failover runs the handler again while
//     the first invocation may still be running; a lost completion means the
//     record stays INPROGRESS until its lease lapses and is then taken over
//     (the handler runs again). WAIT or WAITAOF after each write would narrow
//     this window, not close it, at the price of a second round trip; this
//     store does not issue them.
//
// Every lost record is a possible second run: pass idempotent.DownstreamKey
// to external APIs so that a re-run does not repeat their side effects.
// Amazon MemoryDB (Redis/Valkey-compatible, with a multi-AZ transaction log
// that makes acknowledged writes durable) removes this trade-off at a higher
// write latency.
//
// Memory. Records live in RAM. A record costs its key, its fields and its
// response plus Redis's per-key overhead (roughly 100-200 bytes); the number
// of live records is about the request rate times the expiry (100 requests a
// second with the default one-hour expiry keep 360,000 records: 360 MB at
// 1 KB each). Size maxmemory for the peak, and set maxmemory-policy
// noeviction on the instance holding the records: every record has an
// expiry, so the volatile-* policies (volatile-lru is ElastiCache's default)
// and the allkeys-* ones would silently evict live records, each a possible
// duplicate run, where noeviction makes writes fail instead. A refused claim
// is harmless (the claim returns an error, the wrapper reports
// idempotent.ErrStore, and the handler does not run); but a completion
// refused with OOM after the handler ran leaves the key INPROGRESS until its
// lease lapses, and the retry after that takes it over and runs the handler
// again. Keep headroom: alarm on used memory well below maxmemory.
//
// Cost and latency. A round trip within a VPC takes well under a
// millisecond, against a few milliseconds for DynamoDB; a Redis node is paid
// by the hour whatever the traffic, DynamoDB on demand by the request. A
// Lambda function reaching ElastiCache must run in the VPC, and should
// create its client once, outside the handler, so warm invocations reuse the
// connection.
//
// When to choose which. Choose DynamoDB by default: durable, serverless, no
// capacity to size. Choose Redis when it is already part of the system and
// its latency or per-request cost matters, and the rare duplicate run after
// a failover or restart is acceptable (or use MemoryDB). Either way,
// idempotent is not exactly-once: a takeover of a crashed or timed-out owner
// re-runs the handler by design.
package redisstore
