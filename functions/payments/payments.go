package payments

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/storage"
)

const (
	// Path is the route the function serves, with POST.
	Path = "/payments"
	// Prefix is the idempotency key prefix of the payments function: fixed,
	// so that renaming or redeploying the function keeps its records valid.
	Prefix = "payments"
	// Expiry is how long an answer is replayed for its key: one day, as
	// payment APIs commonly keep idempotency keys.
	Expiry = 24 * time.Hour
	// StatusCaptured is the status of every payment this sample records.
	StatusCaptured = "captured"
)

// Ledger is the DynamoDB call the function's side effect makes.
// *dynamodb.Client satisfies it; tests pass fakes that fail or stall.
type Ledger interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ Ledger = (*dynamodb.Client)(nil)

// Payment is the JSON body of a 201 answer, and the core of a LedgerItem.
type Payment struct {
	// PaymentID is the ledger's key: "pay_" and 26 random base32 characters.
	PaymentID string `json:"paymentId" dynamodbav:"paymentId"`
	// CustomerID is the request's customerId.
	CustomerID string `json:"customerId" dynamodbav:"customerId"`
	// Amount is in minor units (cents for EUR).
	Amount int64 `json:"amount" dynamodbav:"amount"`
	// Currency is the ISO 4217 code.
	Currency string `json:"currency" dynamodbav:"currency"`
	// Status is always StatusCaptured in this sample.
	Status string `json:"status" dynamodbav:"status"`
}

// LedgerItem is an item of the payments table (partition key paymentId).
type LedgerItem struct {
	Payment
	// CreatedAt is when the payment was recorded, RFC 3339 in UTC.
	CreatedAt string `json:"createdAt" dynamodbav:"createdAt"`
	// ProcessorKey is idempotent.DownstreamKey of the request: the key a real
	// card processor would receive as its Idempotency-Key. It is the same for
	// every execution of one idempotency key, and so is the PaymentID derived
	// from it: a run after a takeover, or a retry after a write whose outcome
	// was unknown, finds the payment already recorded.
	ProcessorKey string `json:"processorKey,omitempty" dynamodbav:"processorKey,omitempty"`
}

// New returns the payments Lambda handler: POST /payments, made idempotent by
// its Idempotency-Key header with apigateway.WrapV2 over store, recording each
// payment in the ledger table through ledger. opts configure the engine
// (idempotent.New) after the function's own settings (Engine), so they can
// override them and add, for example, idempotent.WithOutcomeHook(...).
func New(store storage.Store, ledger Ledger, table string, opts ...idempotent.Option) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return apigateway.WrapV2(Engine(store, opts...), newHandler(ledger, table, time.Now, NewPaymentID).serve)
}

// Engine returns the engine the payments function runs on: store with its
// settings (prefix Prefix, expiry Expiry), then opts. New and NewURLHandler
// use it; so can a caller that serves NewHTTPHandler itself.
func Engine(store storage.Store, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithPrefix(Prefix), idempotent.WithExpiry(Expiry)}, opts...)...)
}

// handler is the function's logic, before idempotency.
type handler struct {
	ledger Ledger
	table  string
	now    func() time.Time
	newID  func() string
	put    expression.Expression // the ledger write's condition
}

func newHandler(ledger Ledger, table string, now func() time.Time, newID func() string) *handler {
	if ledger == nil {
		panic("payments: New: nil ledger")
	}
	if table == "" {
		panic("payments: New: empty table name")
	}
	// A new payment never overwrites another: the write is conditional.
	put, err := expression.NewBuilder().
		WithCondition(expression.AttributeNotExists(expression.Name("paymentId"))).
		Build()
	if err != nil {
		panic(fmt.Sprintf("payments: build condition: %v", err)) // a constant expression
	}
	return &handler{ledger: ledger, table: table, now: now, newID: newID, put: put}
}

// serve answers one request. Routing and validation answers are 4xx, which
// the adapter stores and replays like any other; a ledger failure is an
// error, which the adapter answers with 500 after releasing the key, so the
// client's retry runs again.
func (h *handler) serve(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	if path != Path {
		return notFound(), nil
	}
	if ev.RequestContext.HTTP.Method != http.MethodPost {
		return methodNotAllowed(), nil
	}
	if !isJSON(header(ev.Headers, "Content-Type")) {
		return unsupportedMediaType(), nil
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		dec, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return invalidRequest(&ValidationError{Params: []InvalidParam{{Reason: "the request body is not valid base64"}}}), nil
		}
		body = dec
	}
	req, err := ParseRequest(body)
	var verr *ValidationError
	if errors.As(err, &verr) {
		return invalidRequest(verr), nil
	}

	// The payment ID comes from the downstream key, the same for every run of
	// this Idempotency-Key (and caller): the ledger's conditional write then
	// records one payment however often the handler runs. Only a run without
	// idempotency (IDEMKIT_DISABLED) gets a fresh one.
	id := paymentIDFor(idempotent.DownstreamKey(ctx))
	if id == "" {
		id = h.newID()
	}
	item := LedgerItem{
		Payment: Payment{
			PaymentID:  id,
			CustomerID: req.CustomerID,
			Amount:     req.Amount,
			Currency:   req.Currency,
			Status:     StatusCaptured,
		},
		CreatedAt:    h.now().UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		ProcessorKey: idempotent.DownstreamKey(ctx),
	}
	if err := h.record(ctx, &item); err != nil {
		if errors.Is(err, errKeyReused) {
			return keyReused(), nil
		}
		return events.APIGatewayV2HTTPResponse{}, err
	}
	inv, _ := idempotent.FromContext(ctx)
	slog.InfoContext(ctx, "payments: captured",
		slog.String("payment_id", item.PaymentID),
		slog.Int64("amount", item.Amount),
		slog.String("currency", item.Currency),
		slog.Bool("took_over", inv.TookOver))

	out, err := json.Marshal(item.Payment)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("payments: encode answer: %w", err)
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusCreated,
		Headers: map[string]string{
			"Content-Type": "application/json",
			"Location":     Path + "/" + item.PaymentID,
		},
		Body: string(out),
	}, nil
}

// errKeyReused: the ledger holds another payment under this payment ID.
var errKeyReused = errors.New("payments: the Idempotency-Key already recorded another payment")

// record writes the ledger item with a conditional PutItem. An item already
// under its payment ID was written by an earlier run of the same key: an SDK
// retry after a lost response, a client retry after a write whose outcome
// was unknown (the key was released), or the run a takeover replaced. If it
// is the same payment, item becomes that item (its first createdAt) and the
// payment counts as recorded, once; if not (the key was reused for another
// payment after its idempotency record expired), record returns
// errKeyReused.
func (h *handler) record(ctx context.Context, item *LedgerItem) error {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return fmt.Errorf("payments: encode ledger item: %w", err)
	}
	_, err = h.ledger.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &h.table,
		Item:                                av,
		ConditionExpression:                 h.put.Condition(),
		ExpressionAttributeNames:            h.put.Names(),
		ExpressionAttributeValues:           h.put.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var exists *types.ConditionalCheckFailedException
	if !errors.As(err, &exists) {
		if err != nil {
			return fmt.Errorf("payments: record payment: %w", err)
		}
		return nil
	}
	if len(exists.Item) == 0 {
		// A server that does not return the item: the ID says it is this
		// key's payment, which payload validation kept the same.
		return nil
	}
	var old LedgerItem
	if err := attributevalue.UnmarshalMap(exists.Item, &old); err != nil {
		return fmt.Errorf("payments: read the recorded payment: %w", err)
	}
	if old.CustomerID != item.CustomerID || old.Amount != item.Amount || old.Currency != item.Currency {
		return errKeyReused
	}
	*item = old
	return nil
}

// paymentIDFor derives a payment ID from a downstream key (32 hex digits):
// "pay_" and its 16 bytes in lower-case base32, the form of NewPaymentID.
// It returns "" for anything else, such as the empty key of a run without
// idempotency.
func paymentIDFor(downstreamKey string) string {
	b, err := hex.DecodeString(downstreamKey)
	if err != nil || len(b) != 16 {
		return ""
	}
	return "pay_" + strings.ToLower(idEncoding.EncodeToString(b))
}

// header returns a request header's value, its name matched
// case-insensitively (HTTP APIs deliver names in lower case).
func header(headers map[string]string, name string) string {
	if v, ok := headers[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewPaymentID returns a fresh random payment ID: "pay_" and 26 lower-case
// base32 characters (128 random bits).
func NewPaymentID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "pay_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
