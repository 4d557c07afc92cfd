package localddb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Scan reads every item of a table with consistent reads and decodes each
// into a T with attributevalue. It is for inspecting the small tables of
// tests and the demo, not for production tables.
func Scan[T any](ctx context.Context, client *dynamodb.Client, table string) ([]T, error) {
	consistent := true
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: &table, ConsistentRead: &consistent})
	var out []T
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("localddb: scan %s: %w", table, err)
		}
		items := make([]T, len(page.Items))
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &items); err != nil {
			return nil, fmt.Errorf("localddb: decode items of %s: %w", table, err)
		}
		out = append(out, items...)
	}
	return out, nil
}
