// The Powertools for AWS Lambda (TypeScript) side of idemkit's throughput comparison: the same event, table
// layout, expiry, concurrency and phases as the Go driver (`idembench drive`), printing the same JSON lines.
//
//   node bench/powertools/bench.mjs --table T --n 4000 --c 16 --warmup 500 --phases new,replay \
//     --event bench/testdata/payment-event.json --server-pid PID [--capacity] [--pad N]
//
// --capacity asks for ReturnConsumedCapacity=TOTAL on every DynamoDB call (a middleware on the client, as the Go
// driver's on its SDK stack; the pinned package is unchanged) and prints the reported units per operation.
// --pad N adds a receipt of N characters to every response, as the Go driver's -pad.
//
// The endpoint comes from AWS_ENDPOINT_URL_DYNAMODB (credentials test/test), as for the Go side.
import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotencyConfig, IdempotencyAlreadyInProgressError, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

const { values: opt } = parseArgs({
  options: {
    table: { type: 'string' },
    n: { type: 'string', default: '2000' },
    c: { type: 'string', default: '16' },
    warmup: { type: 'string', default: '500' },
    phases: { type: 'string', default: 'new,replay' },
    event: { type: 'string', default: 'bench/testdata/payment-event.json' },
    'server-pid': { type: 'string', default: '0' },
    capacity: { type: 'boolean', default: false },
    pad: { type: 'string', default: '0' },
  },
});
const endpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB;
if (!opt.table || !endpoint) {
  console.error('bench.mjs: --table and AWS_ENDPOINT_URL_DYNAMODB are required');
  process.exit(2);
}
const n = Number(opt.n);
const conc = Number(opt.c);
const warmup = Number(opt.warmup);
const serverPid = Number(opt['server-pid']);
const template = JSON.parse(readFileSync(opt.event, 'utf8'));

// One client with keep-alive and enough sockets for the concurrency; every call and every attempt counted.
const client = new DynamoDBClient({
  endpoint,
  region: process.env.AWS_REGION || 'us-east-1',
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  requestHandler: { httpAgent: new Agent({ keepAlive: true, maxSockets: Math.max(conc, 16) * 2 }) },
});
const counts = { ops: 0, attempts: 0 };
client.middlewareStack.add((next) => async (args) => { counts.ops++; return next(args); },
  { step: 'initialize', name: 'idembenchCountOps' });
client.middlewareStack.add((next) => async (args) => { counts.attempts++; return next(args); },
  { step: 'finalizeRequest', priority: 'low', name: 'idembenchCountAttempts' });

// With --capacity: ReturnConsumedCapacity=TOTAL on a copy of every command's input, and the units each response
// reports, per operation. A failed conditional write reports none (its error has no ConsumedCapacity): counted.
let capacity = {};
if (opt.capacity) {
  client.middlewareStack.add((next, context) => async (args) => {
    const op = (context.commandName || 'unknown').replace(/Command$/, '');
    const c = (capacity[op] ??= { calls: 0, reported: 0, conditional_failed: 0, units: 0, min: 0, max: 0 });
    c.calls++;
    try {
      const out = await next({ ...args, input: { ...args.input, ReturnConsumedCapacity: 'TOTAL' } });
      const u = out.output?.ConsumedCapacity?.CapacityUnits;
      if (typeof u === 'number') {
        if (c.reported === 0 || u < c.min) c.min = u;
        if (c.reported === 0 || u > c.max) c.max = u;
        c.reported++;
        c.units += u;
      }
      return out;
    } catch (err) {
      if (err?.name === 'ConditionalCheckFailedException') c.conditional_failed++;
      throw err;
    }
  }, { step: 'initialize', name: 'idembenchConsumedCapacity' });
}

const persistenceStore = new DynamoDBPersistenceLayer({
  tableName: opt.table,
  awsSdkV3Client: client,
  keyAttr: 'id',
  expiryAttr: 'expiration',
  inProgressExpiryAttr: 'in_progress_expiration',
  statusAttr: 'status',
  dataAttr: 'data',
  validationKeyAttr: 'validation',
});
const config = new IdempotencyConfig({ eventKeyJmesPath: 'idempotencyKey', expiresAfterSeconds: 3600 });

// The handler: no side effect, a small response, as chargeHandler in bench/event.go (paddedCharge with --pad).
let handlerRuns = 0;
const receipt = 'x'.repeat(Number(opt.pad));
const charge = async (event) => {
  handlerRuns++;
  const r = { paymentId: `pay_${event.idempotencyKey}`, status: 'captured', amount: event.amount, currency: event.currency };
  if (receipt) r.receipt = receipt;
  return r;
};
// keyPrefix 'bench': the record keys start as idemkit's do (WithPrefix("bench")), and as they would under a function
// named bench (Powertools' default prefix is AWS_LAMBDA_FUNCTION_NAME, unset here).
const handler = makeIdempotent(charge, { persistenceStore, config, keyPrefix: 'bench' });

// A Lambda context with a 30 s deadline, as the Go driver gives each invocation.
const lambdaContext = (deadline) => ({
  functionName: 'bench', awsRequestId: 'req', getRemainingTimeInMillis: () => Math.max(deadline - Date.now(), 0),
});

const outcomes = {};
let errors = 0;
let firstError;
async function runPhase(keys) {
  const lat = new Float64Array(keys.length);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= keys.length) return;
      const event = { ...template, idempotencyKey: keys[i] };
      const t0 = process.hrtime.bigint();
      try {
        await handler(event, lambdaContext(Date.now() + 30000));
        outcomes.ok = (outcomes.ok || 0) + 1;
      } catch (err) {
        if (err instanceof IdempotencyAlreadyInProgressError) {
          outcomes.in_progress = (outcomes.in_progress || 0) + 1;
        } else {
          errors++;
          firstError ??= String(err);
        }
      }
      lat[i] = Number(process.hrtime.bigint() - t0) / 1000;
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  return lat;
}

function summarize(lat) {
  const s = Float64Array.from(lat).sort();
  const q = (p) => s[Math.min(Math.max(Math.ceil(p * s.length) - 1, 0), s.length - 1)];
  return { n: s.length, p50_us: q(0.5), p90_us: q(0.9), p99_us: q(0.99), max_us: q(1) };
}

function serverCPU() {
  if (serverPid <= 0) return -1;
  try {
    const stat = readFileSync(`/proc/${serverPid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, in USER_HZ ticks
  } catch {
    return -1;
  }
}

const run = `p${Math.random().toString(16).slice(2, 14)}`;
const keys = (phase, count) => Array.from({ length: count }, (_, i) => `${run}-${phase}-${i}`);

const warm = keys('warmup', warmup);
await runPhase(warm);
await runPhase(warm);

let fresh;
for (const phase of opt.phases.split(',')) {
  let ks;
  if (phase === 'new') ks = fresh = keys('new', n);
  else if (phase === 'replay') ks = fresh;
  else throw new Error(`bench.mjs: unsupported phase ${phase}`);
  for (const k of Object.keys(outcomes)) delete outcomes[k];
  errors = 0;
  firstError = undefined;
  capacity = {};
  const runs0 = handlerRuns;
  const ops0 = counts.ops;
  const att0 = counts.attempts;
  const srv0 = serverCPU();
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const lat = await runPhase(ks);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const srv1 = serverCPU();
  // A successful invocation either ran the handler (executed) or returned the stored response (replayed).
  const named = { ...outcomes };
  const executed = handlerRuns - runs0;
  delete named.ok;
  if (executed) named.executed = executed;
  if ((outcomes.ok || 0) > executed) named.replayed = outcomes.ok - executed;
  console.log(JSON.stringify({
    impl: 'powertools', phase, concurrency: conc, n: ks.length, seconds,
    latency: summarize(lat),
    ops: counts.ops - ops0, attempts: counts.attempts - att0,
    cpu_user_s: cpu.user / 1e6, cpu_sys_s: cpu.system / 1e6,
    server_cpu_s: srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1,
    outcomes: named, errors, first_error: firstError,
    ...(opt.capacity ? { capacity } : {}),
  }));
}
