#!/bin/bash
# LocalStack READY hook: creates idemkit's three DynamoDB tables under fixed
# names, for tests and local runs that talk to DynamoDB directly (the CDK
# stack, deployed with cdklocal, creates its own tables with generated names).
#
# The JSON documents below are the local copy of the table definitions in
# infra/tables.go. infra/localstack_test.go runs this script with a fake
# awslocal and checks every document against the synthesized CDK template
# (key schema, attribute types, billing mode, TTL): change both together.
#
# Re-running is harmless: existing tables and enabled TTLs are left alone.
set -euo pipefail

# create_table NAME: create-table from the JSON on stdin, unless NAME exists.
create_table() {
	local name=$1 input
	input=$(cat)
	if awslocal dynamodb describe-table --table-name "$name" >/dev/null 2>&1; then
		echo "idemkit: table $name exists"
		return 0
	fi
	awslocal dynamodb create-table --cli-input-json "$input" >/dev/null
	awslocal dynamodb wait table-exists --table-name "$name"
	echo "idemkit: created table $name"
}

# enable_ttl NAME: update-time-to-live from the JSON on stdin, unless NAME's
# TTL is already on (DynamoDB rejects enabling it twice).
enable_ttl() {
	local name=$1 input status
	input=$(cat)
	status=$(awslocal dynamodb describe-time-to-live --table-name "$name" \
		--query TimeToLiveDescription.TimeToLiveStatus --output text)
	if [ "$status" = ENABLED ]; then
		return 0
	fi
	awslocal dynamodb update-time-to-live --cli-input-json "$input" >/dev/null
	echo "idemkit: TTL on for $name"
}

# The idempotency records: partition key id, TTL on expiration (epoch
# seconds). LocalStack deletes expired items only with
# DYNAMODB_REMOVE_EXPIRED_ITEMS=1 (set in ../docker-compose.yml); the store
# checks expiration on every read anyway.
create_table idemkit-idempotency <<'JSON'
{
  "TableName": "idemkit-idempotency",
  "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
  "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
  "BillingMode": "PAY_PER_REQUEST"
}
JSON
enable_ttl idemkit-idempotency <<'JSON'
{
  "TableName": "idemkit-idempotency",
  "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": true}
}
JSON

# The payments ledger: one item per payment.
create_table idemkit-payments <<'JSON'
{
  "TableName": "idemkit-payments",
  "AttributeDefinitions": [{"AttributeName": "paymentId", "AttributeType": "S"}],
  "KeySchema": [{"AttributeName": "paymentId", "KeyType": "HASH"}],
  "BillingMode": "PAY_PER_REQUEST"
}
JSON

# The inventory: one item per SKU.
create_table idemkit-inventory <<'JSON'
{
  "TableName": "idemkit-inventory",
  "AttributeDefinitions": [{"AttributeName": "sku", "AttributeType": "S"}],
  "KeySchema": [{"AttributeName": "sku", "KeyType": "HASH"}],
  "BillingMode": "PAY_PER_REQUEST"
}
JSON
