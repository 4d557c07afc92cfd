package modelcheck

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/idempotent/storetest"
)

// Transactional completion in the model: a wrapper drawn with tx adds a
// write of its own (named after the invocation) to its run's transaction
// when its handler returns, and, when Finish draws it, a write that fails,
// so that the commit aborts. Invariant 8: an invocation's write committed
// exactly when its completion landed — a crash, a lost lease, a failed
// write, a handler error or a store fault at any point leaves either both
// or neither.

// faultTxStore is a faultStore over a storage.TxStore: the engine sees a
// TxStore, and each run's commit is a fenced write of the faultStore
// (logged as a Complete with the writes, faulted as planned, dropped for a
// crashed owner).
type faultTxStore struct{ *faultStore }

func (s faultTxStore) BeginTx(ctx context.Context, id, lease string) (storage.Tx, error) {
	tx, err := s.inner.(storage.TxStore).BeginTx(ctx, id, lease)
	if err != nil {
		return nil, err
	}
	return &faultTx{s: s.faultStore, inner: tx}, nil
}

type faultTx struct {
	s     *faultStore
	inner storage.Tx
}

func (t *faultTx) Commit(ctx context.Context, rec storage.Record) error {
	return t.s.write(observation{op: opComplete, tx: true, inv: invOf(ctx), lease: rec.Lease, rec: rec},
		func() error { return t.inner.Commit(ctx, rec) })
}

func (t *faultTx) Rollback(ctx context.Context) error { return t.inner.Rollback(ctx) }

// innerTx is the store's own Tx under the faultStore's, for TxWrites.
func innerTx(tx storage.Tx) storage.Tx {
	if ft, ok := tx.(*faultTx); ok {
		return ft.inner
	}
	return tx
}

// memTxStore is a storage.TxStore over the memory store, and its own
// storetest.TxWrites: a write is a name, committed under one lock with the
// record's completion, or not at all. It tracks the lease of each stored
// record (every write passes through it), so that a commit with a failing
// write tells a lost lease (ErrLeaseLost, as DynamoDB's record condition
// does) from an abort.
type memTxStore struct {
	inner storage.StepStore

	mu        sync.Mutex
	leases    map[string]string // record id → the stored record's lease
	committed map[string]bool
}

var (
	_ storage.TxStore    = (*memTxStore)(nil)
	_ storage.StepStore  = (*memTxStore)(nil)
	_ storetest.TxWrites = (*memTxStore)(nil)
)

func newMemTxStore() *memTxStore {
	return &memTxStore{inner: idempotent.NewMemoryStore(), leases: map[string]string{}, committed: map[string]bool{}}
}

func (s *memTxStore) Claim(ctx context.Context, rec storage.Record, now time.Time) (storage.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.inner.Claim(ctx, rec, now)
	if err == nil && res.Claimed {
		s.leases[rec.ID] = rec.Lease
	}
	return res, err
}

func (s *memTxStore) Complete(ctx context.Context, rec storage.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner.Complete(ctx, rec)
}

func (s *memTxStore) Release(ctx context.Context, id, lease string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.inner.Release(ctx, id, lease)
	if err == nil && s.leases[id] == lease {
		delete(s.leases, id)
	}
	return err
}

func (s *memTxStore) AppendStep(ctx context.Context, id, lease string, step storage.Step) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner.AppendStep(ctx, id, lease, step)
}

func (s *memTxStore) Suspend(ctx context.Context, id, lease string, leaseEnd time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner.Suspend(ctx, id, lease, leaseEnd)
}

func (s *memTxStore) BeginTx(_ context.Context, id, lease string) (storage.Tx, error) {
	return &memTx{s: s, id: id}, nil
}

func (s *memTxStore) Add(_ context.Context, tx storage.Tx, name string, fail bool) error {
	t := tx.(*memTx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if fail {
		t.fail = true
	} else {
		t.writes = append(t.writes, name)
	}
	return nil
}

func (s *memTxStore) Committed(_ context.Context, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed[name], nil
}

type memTx struct {
	s  *memTxStore
	id string

	mu     sync.Mutex
	writes []string
	fail   bool
}

func (t *memTx) Commit(ctx context.Context, rec storage.Record) error {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if rec.ID != t.id {
		return fmt.Errorf("%w: the record %q is not the transaction's", storage.ErrTxAborted, rec.ID)
	}
	owned := rec.ID == "" || s.leases[rec.ID] == rec.Lease
	if t.fail && owned {
		return fmt.Errorf("memtx: %w: a write's condition failed", storage.ErrTxAborted)
	}
	if rec.ID != "" {
		if err := s.inner.Complete(ctx, rec); err != nil {
			return err // the fence failed: nothing of this run is applied
		}
	}
	for _, w := range t.writes {
		s.committed[w] = true
	}
	return nil
}

func (t *memTx) Rollback(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes, t.fail = nil, false
	return nil
}

// TestMemTxStoreConformance runs the conformance suite on the model's
// memory TxStore, so that its answers are the contract's.
func TestMemTxStoreConformance(t *testing.T) {
	s := newMemTxStore()
	storetest.Run(t, s)
	storetest.RunTx(t, s, s)
}

// dynamoWrites is storetest.TxWrites on a DynamoDB table whose partition
// key is pk: a write is a Put of the item named; a failing one a
// ConditionCheck that an absent item exists.
type dynamoWrites struct {
	client *dynamodb.Client
	table  string
}

func (w dynamoWrites) Add(_ context.Context, tx storage.Tx, name string, fail bool) error {
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: name}}
	if fail {
		return tx.(*dynamostore.Tx).Add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: &w.table, Key: key, ConditionExpression: aws.String("attribute_exists(pk)"),
		}})
	}
	return tx.(*dynamostore.Tx).Add(types.TransactWriteItem{Put: &types.Put{TableName: &w.table, Item: key}})
}

func (w dynamoWrites) Committed(ctx context.Context, name string) (bool, error) {
	out, err := w.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &w.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: name}}})
	if err != nil {
		return false, err
	}
	return out.Item != nil, nil
}
