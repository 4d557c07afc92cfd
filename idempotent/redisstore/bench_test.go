package redisstore_test

import (
	"testing"
	"time"
)

// BenchmarkNewKey measures a new key's store calls against the server at
// REDIS_URL: a claim and a completion, two round trips.
func BenchmarkNewKey(b *testing.B) {
	store, _ := newStore(b)
	ctx := ctxT(b)
	now := time.Now()
	data := []byte(`{"chargeId":"ch_1","amount":1500}`)
	b.ReportAllocs()
	for b.Loop() {
		rec := liveRecord(now)
		if _, err := store.Claim(ctx, rec, now); err != nil {
			b.Fatal(err)
		}
		if err := store.Complete(ctx, completedRecord(rec, data, now)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicate measures a duplicate of a completed key: one refused
// claim that returns the stored record.
func BenchmarkDuplicate(b *testing.B) {
	store, _ := newStore(b)
	ctx := ctxT(b)
	now := time.Now()
	rec := liveRecord(now)
	if _, err := store.Claim(ctx, rec, now); err != nil {
		b.Fatal(err)
	}
	if err := store.Complete(ctx, completedRecord(rec, []byte(`{"chargeId":"ch_1"}`), now)); err != nil {
		b.Fatal(err)
	}
	dup := rec
	dup.Lease = randomHex(16)
	b.ReportAllocs()
	for b.Loop() {
		res, err := store.Claim(ctx, dup, now)
		if err != nil || res.Existing == nil {
			b.Fatal(res, err)
		}
	}
}
