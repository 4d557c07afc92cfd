package dynamostore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/storage"
	"github.com/idemkit/idemkit/internal/localddb/localddbtest"
)

// The benchmarks compare the store with the same calls written by hand: with
// a no-op client they measure only what the store adds (building inputs,
// reading outputs); against DynamoDB Local, the whole call.

type nopClient struct{}

func (nopClient) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (nopClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, nil
}

func (nopClient) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (nopClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// handClaim is the claim PutItem written by hand (a bound claim: the
// record carries a fingerprint).
func handClaim(ctx context.Context, c dynamostore.Client, table string, rec *storage.Record, now time.Time) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"id":                     &types.AttributeValueMemberS{Value: rec.ID},
			"status":                 &types.AttributeValueMemberS{Value: string(rec.Status)},
			"expiration":             &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.ExpiresAt.Unix(), 10)},
			"in_progress_expiration": &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.LeaseExpiresAt.UnixMilli(), 10)},
			"lease":                  &types.AttributeValueMemberS{Value: rec.Lease},
			"validation":             &types.AttributeValueMemberS{Value: rec.Fingerprint},
			"version":                &types.AttributeValueMemberN{Value: "1"},
		},
		ConditionExpression: aws.String("attribute_not_exists(#id) OR #l = :l OR #e < :now OR " +
			"(#s = :ip AND #ipe < :now_ms AND #v = :v AND attribute_exists(#l) AND attribute_not_exists(#st) AND " +
			"(attribute_not_exists(#val) OR #val = :val))"),
		ExpressionAttributeNames: map[string]string{
			"#id": "id", "#e": "expiration", "#s": "status", "#ipe": "in_progress_expiration", "#l": "lease",
			"#v": "version", "#val": "validation", "#st": "steps",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":l":      &types.AttributeValueMemberS{Value: rec.Lease},
			":v":      &types.AttributeValueMemberN{Value: "1"},
			":val":    &types.AttributeValueMemberS{Value: rec.Fingerprint},
			":now":    &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)},
			":now_ms": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
			":ip":     &types.AttributeValueMemberS{Value: "INPROGRESS"},
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// handComplete is the completion UpdateItem written by hand.
func handComplete(ctx context.Context, c dynamostore.Client, table string, rec *storage.Record) error {
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: rec.ID}},
		UpdateExpression:    aws.String("SET #s = :s, #d = :d, #e = :e REMOVE #ipe, #st, #sus"),
		ConditionExpression: aws.String("#l = :l"),
		ExpressionAttributeNames: map[string]string{
			"#s": "status", "#d": "data", "#e": "expiration", "#ipe": "in_progress_expiration", "#l": "lease",
			"#st": "steps", "#sus": "suspended",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":s": &types.AttributeValueMemberS{Value: string(rec.Status)},
			":d": &types.AttributeValueMemberB{Value: rec.Data},
			":e": &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.ExpiresAt.Unix(), 10)},
			":l": &types.AttributeValueMemberS{Value: rec.Lease},
		},
	})
	return err
}

func benchRecord(now time.Time, i int) storage.Record {
	return storage.Record{
		ID:             "bench#" + strconv.Itoa(i) + "-" + strconv.FormatInt(now.UnixNano(), 36),
		Status:         storage.StatusInProgress,
		ExpiresAt:      now.Add(time.Hour),
		LeaseExpiresAt: now.Add(time.Minute),
		Lease:          "0123456789abcdef0123456789abcdef",
		Fingerprint:    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Version:        storage.RecordVersion,
	}
}

func benchClaimComplete(b *testing.B, c dynamostore.Client, table string) {
	store := dynamostore.New(c, table)
	data := []byte(`p{"payment_id":"pay_123","status":"captured"}`)
	b.Run("store", func(b *testing.B) {
		now := time.Now()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rec := benchRecord(now, i)
			if _, err := store.Claim(b.Context(), rec, now); err != nil {
				b.Fatal(err)
			}
			rec.Status, rec.LeaseExpiresAt, rec.Data = storage.StatusCompleted, time.Time{}, data
			if err := store.Complete(b.Context(), rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handwritten", func(b *testing.B) {
		now := time.Now()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rec := benchRecord(now, i)
			if err := handClaim(b.Context(), c, table, &rec, now); err != nil {
				b.Fatal(err)
			}
			rec.Status, rec.LeaseExpiresAt, rec.Data = storage.StatusCompleted, time.Time{}, data
			if err := handComplete(b.Context(), c, table, &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkClaimComplete(b *testing.B) {
	b.Run("nop-client", func(b *testing.B) { benchClaimComplete(b, nopClient{}, "bench") })
	b.Run("dynamodb-local", func(b *testing.B) {
		client := localddbtest.Client(b)
		benchClaimComplete(b, client, createTable(b, client, false))
	})
}

// BenchmarkClaimCompleteInterleaved alternates the store and the handwritten
// calls against DynamoDB Local, so server warm-up and drift hit both alike,
// and reports each one's time per claim+complete and the store's overhead.
func BenchmarkClaimCompleteInterleaved(b *testing.B) {
	client := localddbtest.Client(b)
	table := createTable(b, client, false)
	store := dynamostore.New(client, table)
	data := []byte(`p{"payment_id":"pay_123","status":"captured"}`)
	now := time.Now()
	var storeTimes, handTimes []time.Duration
	viaStore := func(rec storage.Record) time.Duration {
		start := time.Now()
		if _, err := store.Claim(b.Context(), rec, now); err != nil {
			b.Fatal(err)
		}
		rec.Status, rec.LeaseExpiresAt, rec.Data = storage.StatusCompleted, time.Time{}, data
		if err := store.Complete(b.Context(), rec); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	byHand := func(rec storage.Record) time.Duration {
		start := time.Now()
		if err := handClaim(b.Context(), client, table, &rec, now); err != nil {
			b.Fatal(err)
		}
		rec.Status, rec.LeaseExpiresAt, rec.Data = storage.StatusCompleted, time.Time{}, data
		if err := handComplete(b.Context(), client, table, &rec); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so neither gains from its position.
		if i%2 == 0 {
			storeTimes = append(storeTimes, viaStore(benchRecord(now, 2*i)))
			handTimes = append(handTimes, byHand(benchRecord(now, 2*i+1)))
		} else {
			handTimes = append(handTimes, byHand(benchRecord(now, 2*i+1)))
			storeTimes = append(storeTimes, viaStore(benchRecord(now, 2*i)))
		}
	}
	// Medians: DynamoDB Local's garbage collector makes means noisy.
	storeMedian, handMedian := median(storeTimes), median(handTimes)
	b.ReportMetric(float64(storeMedian.Nanoseconds()), "store-p50-ns")
	b.ReportMetric(float64(handMedian.Nanoseconds()), "hand-p50-ns")
	b.ReportMetric(100*(float64(storeMedian)/float64(handMedian)-1), "overhead-%")
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
