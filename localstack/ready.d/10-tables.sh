#!/bin/bash
# LocalStack READY hook: creates idemkit's three DynamoDB tables under fixed
# names, for tests and local runs that talk to DynamoDB directly (the CDK
# stack, deployed with cdklocal, creates its own tables with generated names).
#
# The calls at the end are the local copy of the table definitions in
# infra/tables.go: every table is on-demand with a string partition key.
# infra/localstack_test.go runs this script with a fake awslocal and checks
# every document it sends against the synthesized CDK template (key schema,
# attribute types, billing mode, TTL): change both together.
#
# Re-running is harmless: existing tables and enabled TTLs are left alone.
set -euo pipefail

# create_table NAME KEY: create-table NAME, billed per request, with the string
# partition key KEY, unless NAME exists.
create_table() {
	local name=$1 key=$2
	if awslocal dynamodb describe-table --table-name "$name" >/dev/null 2>&1; then
		echo "idemkit: table $name exists"
		return 0
	fi
	awslocal dynamodb create-table --cli-input-json "$(printf '{
  "TableName": "%s",
  "AttributeDefinitions": [{"AttributeName": "%s", "AttributeType": "S"}],
  "KeySchema": [{"AttributeName": "%s", "KeyType": "HASH"}],
  "BillingMode": "PAY_PER_REQUEST"
}' "$name" "$key" "$key")" >/dev/null
	awslocal dynamodb wait table-exists --table-name "$name"
	echo "idemkit: created table $name"
}

# enable_ttl NAME ATTRIBUTE: update-time-to-live NAME on ATTRIBUTE (epoch
# seconds), unless NAME's TTL is already on (DynamoDB rejects enabling it
# twice).
enable_ttl() {
	local name=$1 attribute=$2 status
	status=$(awslocal dynamodb describe-time-to-live --table-name "$name" \
		--query TimeToLiveDescription.TimeToLiveStatus --output text)
	if [ "$status" = ENABLED ]; then
		return 0
	fi
	awslocal dynamodb update-time-to-live --cli-input-json "$(printf '{
  "TableName": "%s",
  "TimeToLiveSpecification": {"AttributeName": "%s", "Enabled": true}
}' "$name" "$attribute")" >/dev/null
	echo "idemkit: TTL on for $name"
}

# The idempotency records: partition key id, TTL on expiration (epoch
# seconds). LocalStack deletes expired items only with
# DYNAMODB_REMOVE_EXPIRED_ITEMS=1 (set in ../docker-compose.yml); the store
# checks expiration on every read anyway.
create_table idemkit-idempotency id
enable_ttl idemkit-idempotency expiration

# The payments ledger: one item per payment.
create_table idemkit-payments paymentId

# The inventory: one item per SKU.
create_table idemkit-inventory sku
