package dynamostore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// TxClient is a Client that also writes transactions. *dynamodb.Client is
// one. A Store whose client is not a TxClient has no transactions:
// Transaction returns an error wrapping storage.ErrNoTx.
type TxClient interface {
	Client
	TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var (
	_ TxClient        = (*dynamodb.Client)(nil)
	_ storage.TxStore = (*Store)(nil)
	_ storage.Tx      = (*Tx)(nil)
)

// Tx holds the writes a handler adds to its completion: when the handler
// returns, they commit together with the record's completion in one
// TransactWriteItems, or none of them does. Get it with Transaction inside a
// handler run by an idempotent front door over a Store. A Tx is safe for
// concurrent use.
type Tx struct {
	s         *Store
	id, lease string // "" for a run without a record
	nonce     string // the run's identity in the ClientRequestToken

	mu    sync.Mutex
	items []types.TransactWriteItem
	meta  []itemMeta // per item: its table, key and size
	state txState
}

type txState int

const (
	txOpen       txState = iota
	txCommitting         // Commit was called: the items are fixed
	txRolledBack
)

// itemMeta is what the limits and the error of a canceled transaction need
// of one handler item.
type itemMeta struct {
	table string
	key   map[string]types.AttributeValue // nil for a Put whose key schema is unknown
	put   map[string]types.AttributeValue // a Put's item
	size  int                             // on the request (see checkBytes)
}

// Transaction returns the transaction of the handler run ctx belongs to,
// beginning it on the first call: the writes added to it commit with the
// run's completion. A handler run by an idempotent front door over a Store
// calls it; elsewhere (outside such a run, over another kind of store, or
// inside a Step's function) it returns an error wrapping storage.ErrNoTx
// (idempotent.ErrNoTx).
//
// What becomes exactly-once is the writes to this DynamoDB account and
// region while the record lives. A run resumed after a crash or a lost lease
// runs again from its last recorded step and adds its writes again: the
// earlier run's writes never committed.
func Transaction(ctx context.Context) (*Tx, error) {
	tx, err := storage.TxFromContext(ctx)
	if err != nil {
		return nil, err
	}
	t, ok := tx.(*Tx)
	if !ok {
		return nil, fmt.Errorf("%w: the run's store is a %T, not a dynamostore.Store", storage.ErrNoTx, tx)
	}
	return t, nil
}

// BeginTx implements storage.TxStore. It makes no call: the writes are held
// until Commit.
func (s *Store) BeginTx(_ context.Context, id, lease string) (storage.Tx, error) {
	if _, ok := s.client.(TxClient); !ok {
		return nil, fmt.Errorf("%w: the Store's client (%T) has no TransactWriteItems (dynamostore.TxClient)", storage.ErrNoTx, s.client)
	}
	nonce := lease
	if id == "" {
		// A run without a record: its token needs an identity of its own.
		var b [16]byte
		_, _ = rand.Read(b[:])
		nonce = hex.EncodeToString(b[:])
	}
	return &Tx{s: s, id: id, lease: lease, nonce: nonce}, nil
}

// Add adds items to the transaction, in order. Each is a Put, Update, Delete
// or ConditionCheck on a table of this account and region, as the SDK
// describes it (ConditionExpression and ReturnValuesOnConditionCheckFailure
// included). Do not modify an item after adding it.
//
// The transaction's limits are checked here, before any call: an item
// without exactly one action or without a table, more items than
// MaxTransactActions allows (the record's own completion counts as one),
// items whose request size passes MaxTransactBytes, an item on the record's
// own key, or two items on one key yield an error wrapping ErrTxLimit, and
// none of items is added. A Put's key is known on the Store's own table and
// on tables whose key another item of the transaction names; two Puts of
// one item on another table are refused by DynamoDB at commit
// (storage.ErrTxAborted).
//
// After the handler returned (the transaction is committing, committed or
// rolled back), Add returns an error wrapping storage.ErrNoTx.
func (t *Tx) Add(items ...types.TransactWriteItem) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != txOpen {
		return fmt.Errorf("dynamostore: add to the transaction: %w: the handler already returned", storage.ErrNoTx)
	}
	meta := make([]itemMeta, 0, len(t.meta)+len(items))
	meta = append(meta, t.meta...)
	for i := range items {
		m, err := t.s.describe(&items[i])
		if err != nil {
			return fmt.Errorf("dynamostore: add item %d: %w: %w", len(t.items)+i, ErrTxLimit, err)
		}
		meta = append(meta, m)
	}
	if err := t.s.checkActions(t.id, meta); err != nil {
		return fmt.Errorf("dynamostore: add to the transaction: %w", err)
	}
	if err := checkBytes(meta, 0); err != nil {
		return fmt.Errorf("dynamostore: add to the transaction: %w", err)
	}
	t.items = append(t.items, items...)
	t.meta = meta
	return nil
}

// Commit implements storage.Tx. With a record and items it makes one
// TransactWriteItems: the record's completion first (an Update with
// Complete's expression, conditioned on #lease = :lease AND
// #status = :inprogress AND the record not suspended,
// ReturnValuesOnConditionCheckFailure=ALL_OLD), then
// the handler's items in the order added. Its ClientRequestToken is derived
// from the record id, the lease and the completion's content, so the SDK's
// retries and a repeated Commit of the same content apply at most once;
// beyond DynamoDB's ten-minute token window, the status condition still
// refuses a second application, and the record, completed under this lease,
// tells Commit that the first one committed.
//
// With a record and no items it is Complete (one UpdateItem, a plain
// write's capacity); with items and no record (a run without idempotency)
// the items alone go in one TransactWriteItems; with neither it makes no
// call.
//
// Errors: storage.ErrLeaseLost when the record is gone or another lease
// holds it (nothing committed); storage.ErrTooLarge when the completed record
// would pass Options.MaxItemBytes, or when the transaction would pass
// MaxTransactBytes with the response but not without it (nothing written;
// the engine commits again without the response); a *TxCanceledError when
// DynamoDB canceled the transaction for a reason of the handler's items
// (a failed condition, a conflicting write, throttling) and an error
// wrapping ErrTxLimit when the items break a limit, both wrapping
// storage.ErrTxAborted; a *TxRefusedError when DynamoDB refused the request
// as a whole (see TxRefusedError), wrapping storage.ErrTxRefused. In these
// cases nothing committed. Any other error leaves the outcome unknown: the
// engine settles it by the record's fence (docs/transactions.md), which
// commitCondition makes final (a transaction still in flight fails on a
// record given back).
func (t *Tx) Commit(ctx context.Context, rec storage.Record) error {
	t.mu.Lock()
	if t.state == txRolledBack {
		t.mu.Unlock()
		return fmt.Errorf("dynamostore: commit: %w: the transaction was rolled back", storage.ErrTxAborted)
	}
	t.state = txCommitting
	items, meta := t.items, t.meta
	t.mu.Unlock()

	s := t.s
	record := rec.ID != ""
	switch {
	case rec.ID != t.id:
		return fmt.Errorf("dynamostore: commit: %w: the record %q is not the transaction's (%q)", storage.ErrTxAborted, rec.ID, t.id)
	case len(items) == 0 && record:
		return s.Complete(ctx, rec)
	case len(items) == 0:
		return nil
	}
	// Checked again: the items may have changed since Add, and the
	// record's size is known only now.
	if err := s.checkActions(t.id, meta); err != nil {
		return fmt.Errorf("dynamostore: commit: %w: %w", storage.ErrTxAborted, err)
	}
	recSize := 0
	if record {
		if recSize = s.completedSize(&rec); recSize > s.opts.MaxItemBytes {
			return fmt.Errorf("dynamostore: commit: %w: the record would be %d bytes (limit %d)", storage.ErrTooLarge, recSize, s.opts.MaxItemBytes)
		}
	}
	if err := checkBytes(meta, recSize); err != nil {
		noData := rec
		noData.Data = nil
		if record && len(rec.Data) > 0 && checkBytes(meta, s.completedSize(&noData)) == nil {
			// Without the response it fits: the engine commits again so.
			return fmt.Errorf("dynamostore: commit: %w: %w", storage.ErrTooLarge, err)
		}
		return fmt.Errorf("dynamostore: commit: %w: %w", storage.ErrTxAborted, err)
	}

	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: t.token(&rec, len(items))}
	if record {
		vals := new(requestValues)
		update, values := s.completion(&rec, vals)
		values[":inprogress"] = inProgressAttrValue
		in.TransactItems = make([]types.TransactWriteItem, 0, 1+len(items))
		in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Update: &types.Update{
			TableName:                           s.table,
			Key:                                 s.keyOf(vals.str(rec.ID)),
			UpdateExpression:                    update,
			ConditionExpression:                 aws.String(commitCondition),
			ExpressionAttributeNames:            s.names.complete,
			ExpressionAttributeValues:           values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
		in.TransactItems = append(in.TransactItems, items...)
	} else {
		in.TransactItems = items
	}
	_, err := s.client.(TxClient).TransactWriteItems(ctx, in)
	if err == nil {
		return nil
	}
	return t.commitError(ctx, &rec, meta, err)
}

// commitError turns the failure of a commit's TransactWriteItems into the
// error storage.Tx documents.
func (t *Tx) commitError(ctx context.Context, rec *storage.Record, meta []itemMeta, err error) error {
	s := t.s
	record := rec.ID != ""
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		reasons := tce.CancellationReasons
		offset := 0
		if record {
			offset = 1
			if len(reasons) != 1+len(meta) {
				// A server that does not say why: the record tells.
				return t.decideOnRecord(ctx, rec, nil, err)
			}
			if aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
				return t.decideOnRecord(ctx, rec, reasons[0].Item, err)
			}
		}
		cerr := &TxCanceledError{Err: err}
		for i, r := range reasons {
			code := aws.ToString(r.Code)
			if code == "" || code == "None" {
				continue
			}
			reason := TxCancelReason{Index: i - offset, Code: code, Message: aws.ToString(r.Message), Item: r.Item}
			if reason.Index < 0 {
				reason.Table, reason.Key = aws.ToString(s.table), s.key(rec.ID)
			} else if reason.Index < len(meta) {
				reason.Table, reason.Key = meta[reason.Index].table, meta[reason.Index].key
			}
			cerr.Reasons = append(cerr.Reasons, reason)
		}
		return cerr
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && refusals[ae.ErrorCode()] {
		// Refused as a whole before anything applied. An item past
		// DynamoDB's size limit may be the record only if its completion is
		// that large (MaxItemBytes set above DynamoDB's limit).
		if record && itemTooLarge(err) && s.completedSize(rec) > storage.DefaultMaxItemBytes {
			return fmt.Errorf("dynamostore: commit: %w: %w", storage.ErrTooLarge, err)
		}
		return &TxRefusedError{Code: ae.ErrorCode(), Message: ae.ErrorMessage(), Err: err}
	}
	return fmt.Errorf("dynamostore: commit: %w", err)
}

// refusals are the error codes with which DynamoDB refuses a
// TransactWriteItems request as a whole, before applying any of it, and for
// a reason that a retry of the same request does not change.
var refusals = map[string]bool{
	"ValidationException":       true, // the request is invalid (an expression, a type, a size)
	"ResourceNotFoundException": true, // a table it names does not exist
	"AccessDeniedException":     true, // the credentials may not write there
	"UnknownOperationException": true, // a server without transactions (dynalite)
}

// TxRefusedError is the error of a commit that DynamoDB refused as a
// whole, before applying any of it: the request is invalid
// (ValidationException), names a table that does not exist
// (ResourceNotFoundException), is not allowed to the function's role
// (AccessDeniedException), or the server has no transactions
// (UnknownOperationException, as dynalite answers). Nothing committed;
// the engine releases the record at once and returns this error, which
// wraps storage.ErrTxRefused (idempotent.ErrTxRefused) and the SDK's error.
// A configuration or programming error, not an outage: the same request is
// refused again until it is fixed.
type TxRefusedError struct {
	// Code is DynamoDB's error code, such as ResourceNotFoundException.
	Code string
	// Message is DynamoDB's description.
	Message string
	// Err is the SDK's error.
	Err error
}

// Error names the refusal.
func (e *TxRefusedError) Error() string {
	msg := "dynamostore: DynamoDB refused the transaction: " + e.Code
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns storage.ErrTxRefused and the SDK's error.
func (e *TxRefusedError) Unwrap() []error { return []error{storage.ErrTxRefused, e.Err} }

// decideOnRecord decides a transaction canceled because the record's
// condition failed (or for reasons the server did not give), on the stored
// record (item, read if nil): completed under the caller's lease, it is the
// caller's own commit, which an earlier attempt applied (its response lost,
// beyond the token's window); another lease or no record is a lost lease;
// still the caller's in progress (reasons not given), the handler's items
// were refused.
func (t *Tx) decideOnRecord(ctx context.Context, rec *storage.Record, item map[string]types.AttributeValue, cause error) error {
	s := t.s
	if len(item) == 0 {
		var err error
		if item, err = s.refusingItem(ctx, "commit", rec.ID, &types.ConditionalCheckFailedException{}); err != nil {
			return fmt.Errorf("dynamostore: commit: the transaction was canceled (%w); %w", cause, err)
		}
	}
	if s.hasLease(item, rec.Lease) {
		if s.status(item) == string(storage.StatusCompleted) {
			return nil
		}
		return &TxCanceledError{Err: cause}
	}
	return fmt.Errorf("dynamostore: commit: %w (%s); nothing committed", storage.ErrLeaseLost, s.fenced(item, rec.Lease))
}

// token is the commit's ClientRequestToken: the same for a commit of the
// same content in the same run (an SDK retry, or Commit called again), and
// another for another content (the engine commits again without the
// response after ErrTooLarge; DynamoDB would refuse the same token with
// other parameters). The items are fixed once Commit is called, so their
// number stands for them. 36 characters, DynamoDB's maximum.
func (t *Tx) token(rec *storage.Record, items int) *string {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{t.id, t.nonce, rec.ID, rec.Lease, string(rec.Status)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	binary.BigEndian.PutUint64(n[:], uint64(rec.ExpiresAt.Unix()))
	h.Write(n[:])
	binary.BigEndian.PutUint64(n[:], uint64(items))
	h.Write(n[:])
	d := sha256.Sum256(rec.Data)
	h.Write(d[:])
	sum := h.Sum(nil)
	return aws.String(hex.EncodeToString(sum)[:36])
}

// Rollback implements storage.Tx: it discards the items, making no call.
func (t *Tx) Rollback(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.items, t.meta, t.state = nil, nil, txRolledBack
	return nil
}

// TxCanceledError is the error of a commit that DynamoDB canceled for a
// reason of the handler's items: a condition of theirs failed (stock would go
// negative), another write to one of their items was in progress
// (TransactionConflict), or capacity ran out. Nothing committed, neither the
// items nor the completion; the engine releases the record as after a
// handler error and returns this error to the caller. It wraps
// storage.ErrTxAborted (idempotent.ErrTxAborted) and the SDK's
// *types.TransactionCanceledException.
type TxCanceledError struct {
	// Reasons are the items DynamoDB named, in order (items it did not
	// name are left out).
	Reasons []TxCancelReason
	// Err is the SDK's error.
	Err error
}

// TxCancelReason is why DynamoDB canceled a transaction, for one item.
type TxCancelReason struct {
	// Index is the item's position among the handler's items, in the order
	// they were added (from 0); -1 for the record's own completion.
	Index int
	// Table is the item's table.
	Table string
	// Key is the item's key; nil for a Put whose key schema the Store did
	// not know (see Tx.Add).
	Key map[string]types.AttributeValue
	// Code is DynamoDB's reason: ConditionalCheckFailed, TransactionConflict,
	// ProvisionedThroughputExceeded, ThrottlingError, ValidationError, ...
	Code string
	// Message is DynamoDB's description.
	Message string
	// Item is the stored item, when the action asked for it
	// (ReturnValuesOnConditionCheckFailure=ALL_OLD) and its condition failed.
	Item map[string]types.AttributeValue
}

// Error names each reason: the item, its table and key, the code and the
// message.
func (e *TxCanceledError) Error() string {
	var b strings.Builder
	b.WriteString("dynamostore: the transaction was canceled")
	if len(e.Reasons) == 0 {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	for i, r := range e.Reasons {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if r.Index < 0 {
			b.WriteString("the record")
		} else {
			fmt.Fprintf(&b, "item %d", r.Index)
		}
		fmt.Fprintf(&b, " (table %s", r.Table)
		if r.Key != nil {
			fmt.Fprintf(&b, ", key %s", formatKey(r.Key))
		}
		fmt.Fprintf(&b, "): %s", r.Code)
		if r.Message != "" {
			fmt.Fprintf(&b, ": %s", r.Message)
		}
	}
	return b.String()
}

// Unwrap returns storage.ErrTxAborted and the SDK's error.
func (e *TxCanceledError) Unwrap() []error { return []error{storage.ErrTxAborted, e.Err} }
