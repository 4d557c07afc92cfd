// The Powertools for AWS Lambda (TypeScript) side of idemkit's batch benchmark (§12 of bench/doc.go): its batch
// processor (BatchProcessor, processPartialResponse) with its idempotency (makeIdempotent on the record handler,
// DynamoDBPersistenceLayer), as its documentation shows them together, with its defaults: the records of a batch in
// parallel. The batches are idemkit's (idembench writes them): a standard queue's 10 SQS messages and 100 Kinesis
// records of one shard, keyed as idemkit keys them by default (the message ID, the event ID). Each batch runs new,
// then again (a replay); the first batch of each source is unmeasured. One JSON line per measured batch.
//
//   node bench/powertools/batch.mjs --table T --events FILE
//
// The endpoint comes from AWS_ENDPOINT_URL_DYNAMODB (credentials test/test): idembench points it at the delaying
// proxy its own DynamoDB calls go through.
import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

const { values: opt } = parseArgs({ options: { table: { type: 'string' }, events: { type: 'string' } } });
const endpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB;
if (!opt.table || !opt.events || !endpoint) {
  console.error('batch.mjs: --table, --events and AWS_ENDPOINT_URL_DYNAMODB are required');
  process.exit(2);
}
const batches = JSON.parse(readFileSync(opt.events, 'utf8'));

// One client with keep-alive and a socket for every record of a batch in flight; every call counted.
const client = new DynamoDBClient({
  endpoint,
  region: process.env.AWS_REGION || 'us-east-1',
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  requestHandler: { httpAgent: new Agent({ keepAlive: true, maxSockets: 256 }) },
});
let calls = 0;
client.middlewareStack.add((next) => async (args) => { calls++; return next(args); },
  { step: 'initialize', name: 'idembenchCountOps' });

// The record handler: it decodes and does no I/O, as idembench's.
let handled = 0;
const sources = {
  sqs: { type: EventType.SQS, key: 'messageId', decode: (r) => JSON.parse(r.body).orderId },
  kinesis: {
    type: EventType.KinesisDataStreams, key: 'eventID',
    decode: (r) => JSON.parse(Buffer.from(r.kinesis.data, 'base64').toString('utf8')).paymentId,
  },
};
for (const [name, s] of Object.entries(sources)) {
  // A persistence layer per source: each is configured once, by its first idempotent call.
  const persistenceStore = new DynamoDBPersistenceLayer({
    tableName: opt.table, awsSdkV3Client: client, keyAttr: 'id', expiryAttr: 'expiration',
    inProgressExpiryAttr: 'in_progress_expiration', statusAttr: 'status', dataAttr: 'data', validationKeyAttr: 'validation',
  });
  s.config = new IdempotencyConfig({ eventKeyJmesPath: s.key, expiresAfterSeconds: 3600 });
  s.processor = new BatchProcessor(s.type);
  s.record = makeIdempotent(async (record) => {
    handled++;
    return { id: s.decode(record) };
  }, { persistenceStore, config: s.config, keyPrefix: `bench-${name}` });
}

// A Lambda context with a 30 s deadline, as idembench gives each batch.
const lambdaContext = () => {
  const deadline = Date.now() + 30000;
  return { functionName: 'bench', awsRequestId: 'req', getRemainingTimeInMillis: () => Math.max(deadline - Date.now(), 0) };
};

async function invoke(name, event) {
  const s = sources[name];
  const context = lambdaContext();
  s.config.registerLambdaContext(context);
  const calls0 = calls;
  const handled0 = handled;
  const t0 = process.hrtime.bigint();
  const resp = await processPartialResponse(event, s.record, s.processor, { context });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ms, calls: calls - calls0, handled: handled - handled0, failures: resp.batchItemFailures.length };
}

for (let run = 0; run < batches.sqs.length; run++) {
  for (const name of ['sqs', 'kinesis']) {
    const event = batches[name][run];
    for (const phase of ['new', 'replay']) {
      const r = await invoke(name, event);
      if (run > 0) {
        console.log(JSON.stringify({ source: name, phase, run: run - 1, records: event.Records.length, ...r }));
      }
    }
  }
}
