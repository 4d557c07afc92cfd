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
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent"
	"github.com/idemkit/idemkit/idempotent/apigateway"
	"github.com/idemkit/idemkit/idempotent/dynamostore"
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
	// ChargeStep is the name of the step that charges the processor.
	ChargeStep = "charge"
)

// Ledger is the DynamoDB call the function makes to record a payment when
// its run has no transaction (its store is not a dynamostore.Store, such as
// the memory store of tests). *dynamodb.Client satisfies it; tests pass
// fakes that fail or stall.
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
	// ProcessorKey is the idempotency key the processor was charged with:
	// the charge step's idempotent.DownstreamKey, the same for every run of
	// one Idempotency-Key (and caller).
	ProcessorKey string `json:"processorKey,omitempty" dynamodbav:"processorKey,omitempty"`
	// ChargeID is the processor's charge.
	ChargeID string `json:"chargeId,omitempty" dynamodbav:"chargeId,omitempty"`
}

// New returns the payments Lambda handler: POST /payments, made idempotent by
// its Idempotency-Key header with apigateway.WrapV2 over store, charging
// through processor and recording each payment in the ledger table (in the
// completion's transaction over a dynamostore.Store, through ledger over
// other stores). opts configure the engine (idempotent.New) after the
// function's own settings (Engine), so they can override them and add, for
// example, idempotent.WithOutcomeHook(...).
func New(store storage.Store, processor Processor, ledger Ledger, table string, opts ...idempotent.Option) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return apigateway.WrapV2(Engine(store, opts...), newHandler(processor, ledger, table, NewPaymentID).serve)
}

// Engine returns the engine the payments function runs on: store with its
// settings (prefix Prefix, expiry Expiry), then opts. New and NewURLHandler
// use it; so can a caller that serves NewHTTPHandler itself.
func Engine(store storage.Store, opts ...idempotent.Option) *idempotent.Engine {
	return idempotent.New(store, append([]idempotent.Option{idempotent.WithPrefix(Prefix), idempotent.WithExpiry(Expiry)}, opts...)...)
}

// handler is the function's logic, before idempotency.
type handler struct {
	processor Processor
	ledger    Ledger
	table     string
	newID     func() string
}

func newHandler(processor Processor, ledger Ledger, table string, newID func() string) *handler {
	if processor == nil {
		panic("payments: New: nil processor")
	}
	if ledger == nil {
		panic("payments: New: nil ledger")
	}
	if table == "" {
		panic("payments: New: empty table name")
	}
	return &handler{processor: processor, ledger: ledger, table: table, newID: newID}
}

// The ledger write's condition: a new payment, or the same charge again (a
// run after the key's record expired, whose charge the processor answered
// from its own key). Another payment under the ID is never overwritten.
const (
	ledgerCondition = "attribute_not_exists(#id) OR #charge = :charge"
)

var ledgerNames = map[string]string{"#id": "paymentId", "#charge": "chargeId"}

// serve answers one request. Routing and validation answers are 4xx, which
// the adapter stores and replays like any other. The charge is a step: a
// run that resumes the record (after a crash, a lost lease, or a failure
// after the charge) gets the recorded charge back without charging again.
// The ledger row is added to the completion's transaction: it commits with
// the record's completion or not at all. A failure is an error, which the
// adapter answers with 500 after giving the key back, so the client's retry
// runs again (and resumes after the charge).
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
	// this Idempotency-Key (and caller). Only a run without idempotency
	// (IDEMKIT_DISABLED) gets a fresh one.
	id := paymentIDFor(idempotent.DownstreamKey(ctx))
	if id == "" {
		id = h.newID()
	}
	charge, err := idempotent.Step(ctx, ChargeStep, func(ctx context.Context) (Charge, error) {
		// The step's own downstream key: a crash after the processor
		// charged and before the step was recorded repeats no charge.
		key := idempotent.DownstreamKey(ctx)
		if key == "" {
			key = id
		}
		return h.processor.Charge(ctx, key, ChargeRequest(req))
	})
	switch {
	case errors.Is(err, ErrProcessorKeyReused):
		return keyReused(), nil
	case errors.Is(err, idempotent.ErrStepNotRecorded):
		// Charged, but not recorded: going on records the payment with the
		// charge; failing now would make the retry charge again (the
		// processor's key would then answer with this charge).
		slog.WarnContext(ctx, "payments: the charge step was not recorded", slog.String("error", err.Error()))
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("payments: charge: %w", err)
	}
	item := LedgerItem{
		Payment: Payment{
			PaymentID:  id,
			CustomerID: req.CustomerID,
			Amount:     req.Amount,
			Currency:   req.Currency,
			Status:     StatusCaptured,
		},
		CreatedAt:    charge.Created.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		ProcessorKey: charge.Key,
		ChargeID:     charge.ID,
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

// record writes the ledger item with a conditional Put (ledgerCondition).
// In a run over a dynamostore.Store the Put joins the completion's
// transaction: the row commits with the record's completion, fenced on the
// run's lease, or not at all, so a run that loses its lease, or dies before
// completing, leaves no row, and the run that completes leaves exactly one.
// A Put whose condition fails there (another charge holds the payment ID)
// cancels the transaction; the caller gets an error, and the key is given
// back. Over another store (no transaction) it is a PutItem of its own, and
// a failed condition is errKeyReused.
func (h *handler) record(ctx context.Context, item *LedgerItem) error {
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		return fmt.Errorf("payments: encode ledger item: %w", err)
	}
	values := map[string]types.AttributeValue{":charge": &types.AttributeValueMemberS{Value: item.ChargeID}}
	tx, err := dynamostore.Transaction(ctx)
	switch {
	case err == nil:
		err := tx.Add(types.TransactWriteItem{Put: &types.Put{
			TableName:                           &h.table,
			Item:                                av,
			ConditionExpression:                 aws.String(ledgerCondition),
			ExpressionAttributeNames:            ledgerNames,
			ExpressionAttributeValues:           values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
		if err != nil {
			return fmt.Errorf("payments: record payment: %w", err)
		}
		return nil
	case !errors.Is(err, idempotent.ErrNoTx):
		return fmt.Errorf("payments: record payment: %w", err)
	}
	_, err = h.ledger.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &h.table,
		Item:                      av,
		ConditionExpression:       aws.String(ledgerCondition),
		ExpressionAttributeNames:  ledgerNames,
		ExpressionAttributeValues: values,
	})
	var exists *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &exists):
		return errKeyReused
	case err != nil:
		return fmt.Errorf("payments: record payment: %w", err)
	}
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
