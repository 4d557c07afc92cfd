package idemkitcli

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"
)

// finding is one result of check: a problem (with its fix) or advice.
type finding struct {
	ok      bool   // nothing to do
	problem bool   // exit 6 unless fixed; otherwise advice
	what    string // what was checked and found
	fix     string // the exact fix, when there is one
}

// libraryActions are the DynamoDB actions the library needs on the table
// (dynamostore's doc: GetItem only for the fallback read).
var libraryActions = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:GetItem"}

func (c *Command) check(ctx context.Context, args []string) error {
	fs := c.newFlags("check", "check --table T [layout flags] | --redis URL | --redis-cluster ADDRS | --postgres URL\n\n"+
		"Verifies a table before use: key schema and types, TTL on the expiry attribute, billing mode,\n"+
		"point-in-time recovery; prints the IAM policy the function's role needs. On Redis: the eviction policy\n"+
		"(on a Redis Cluster, the cluster's state and the eviction policy of every primary). On PostgreSQL: the\n"+
		"table's columns and types, its primary key and expiry index, and the expired records the sweep would delete.\n"+
		"Exit 6 when something must be fixed; each problem is printed with its fix.")
	var s storeFlags
	s.register(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	r, err := c.open(ctx, &s)
	if err != nil {
		return err
	}
	defer func() { _ = r.close() }()
	var findings []finding
	switch st := r.(type) {
	case *dynamoRecords:
		findings, err = c.checkDynamo(ctx, st)
	case *redisRecords:
		findings, err = checkRedis(ctx, st)
	case *pgRecords:
		findings, err = checkPostgres(ctx, st, c.now())
	}
	if err != nil {
		return err
	}
	problems := 0
	fmt.Fprintf(c.Stdout, "checking %s\n", r.name())
	for _, f := range findings {
		mark := "ok  "
		switch {
		case f.ok:
		case f.problem:
			mark = "FAIL"
			problems++
		default:
			mark = "note"
		}
		fmt.Fprintf(c.Stdout, "%s %s\n", mark, f.what)
		if f.fix != "" {
			fmt.Fprintf(c.Stdout, "     fix: %s\n", f.fix)
		}
	}
	if problems > 0 {
		return &exitError{code: ExitCheck, err: fmt.Errorf("%s: %d problem(s) to fix, see above", r.name(), problems)}
	}
	return nil
}

func (c *Command) checkDynamo(ctx context.Context, d *dynamoRecords) ([]finding, error) {
	o := d.Options()
	table := d.table
	out, err := d.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return nil, storeError(d, err)
	}
	t := out.Table
	var fs []finding

	// Key schema and types.
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, ad := range t.AttributeDefinitions {
		attrTypes[awsString(ad.AttributeName)] = ad.AttributeType
	}
	var hash, rng string
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case "HASH":
			hash = awsString(k.AttributeName)
		case "RANGE":
			rng = awsString(k.AttributeName)
		}
	}
	want := fmt.Sprintf("partition key %s (S)", o.KeyAttr)
	if o.SortKeyAttr != "" {
		want += fmt.Sprintf(", sort key %s (S)", o.SortKeyAttr)
	}
	have := fmt.Sprintf("partition key %s (%s)", hash, attrTypes[hash])
	if rng != "" {
		have += fmt.Sprintf(", sort key %s (%s)", rng, attrTypes[rng])
	}
	keyOK := hash == o.KeyAttr && attrTypes[hash] == "S" && rng == o.SortKeyAttr && (rng == "" || attrTypes[rng] == "S")
	if keyOK {
		fs = append(fs, finding{ok: true, what: "key schema: " + have})
	} else {
		fix := fmt.Sprintf("a key schema cannot be changed: if the layout flags are wrong, pass the table's own (--key-attr %s", hash)
		if rng != "" {
			fix += " --sort-key-attr " + rng
		}
		fix += ") and give dynamostore the same Options; else create a table with " + want
		if attrTypes[hash] != "S" || (rng != "" && attrTypes[rng] != "S") {
			fix = "key attributes must be of type S: create a table with " + want
		}
		fs = append(fs, finding{problem: true, what: fmt.Sprintf("key schema: the table has %s, the layout wants %s", have, want), fix: fix})
	}

	// TTL on the expiry attribute.
	ttl, err := d.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return nil, storeError(d, err)
	}
	enableTTL := fmt.Sprintf("aws dynamodb update-time-to-live --table-name %s --time-to-live-specification Enabled=true,AttributeName=%s", table, o.ExpirationAttr)
	switch desc := ttl.TimeToLiveDescription; {
	case desc == nil || desc.TimeToLiveStatus == types.TimeToLiveStatusDisabled || desc.TimeToLiveStatus == types.TimeToLiveStatusDisabling:
		fs = append(fs, finding{problem: true, what: "TTL is not enabled: expired records are never deleted and the table grows forever", fix: enableTTL})
	case awsString(desc.AttributeName) != o.ExpirationAttr:
		fs = append(fs, finding{problem: true,
			what: fmt.Sprintf("TTL is on %q, but records expire by %q: they are never deleted", awsString(desc.AttributeName), o.ExpirationAttr),
			fix: fmt.Sprintf("if the records use %[1]q, pass --expiration-attr %[1]s (and set dynamostore Options.ExpirationAttr); else disable TTL "+
				"(aws dynamodb update-time-to-live --table-name %[2]s --time-to-live-specification Enabled=false,AttributeName=%[1]s), then: %[3]s",
				awsString(desc.AttributeName), table, enableTTL)})
	default:
		fs = append(fs, finding{ok: true, what: fmt.Sprintf("TTL %s on %s", strings.ToLower(string(desc.TimeToLiveStatus)), o.ExpirationAttr)})
	}

	// Billing mode: advice, not a failure.
	mode := types.BillingModeProvisioned
	if t.BillingModeSummary != nil {
		mode = t.BillingModeSummary.BillingMode
	}
	if mode == types.BillingModePayPerRequest {
		fs = append(fs, finding{ok: true, what: "billing mode PAY_PER_REQUEST (on demand)"})
	} else {
		fs = append(fs, finding{what: "billing mode PROVISIONED: every invocation writes twice; throttling shows as store_error (503 / retried messages)",
			fix: fmt.Sprintf("size the write capacity for twice the peak invocation rate, or: aws dynamodb update-table --table-name %s --billing-mode PAY_PER_REQUEST", table)})
	}

	// Point-in-time recovery: advice.
	pitr, err := d.client.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: &table})
	switch {
	case err != nil:
		fs = append(fs, finding{what: "point-in-time recovery: cannot tell (" + storeError(d, err).Error() + ")"})
	case pitr.ContinuousBackupsDescription != nil && pitr.ContinuousBackupsDescription.PointInTimeRecoveryDescription != nil &&
		pitr.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled:
		fs = append(fs, finding{ok: true, what: "point-in-time recovery enabled"})
	default:
		fs = append(fs, finding{what: "point-in-time recovery disabled: a deleted or damaged table loses which keys already ran",
			fix: fmt.Sprintf("aws dynamodb update-continuous-backups --table-name %s --point-in-time-recovery-specification PointInTimeRecoveryEnabled=true", table)})
	}

	arn := aws.ToString(t.TableArn)
	if arn == "" {
		arn = "arn:aws:dynamodb:REGION:ACCOUNT:table/" + table
	}
	fs = append(fs, finding{ok: true, what: "IAM: the function's role needs this statement (the idemkit command itself also needs " +
		"dynamodb:Scan, dynamodb:Query and dynamodb:Describe*):\n" + policy(arn)})
	return fs, nil
}

// policy is an IAM policy statement granting the library's actions on arn.
func policy(arn string) string {
	quoted := make([]string, len(libraryActions))
	for i, a := range libraryActions {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`{
  "Version": "2012-10-17",
  "Statement": [{
    "Effect": "Allow",
    "Action": [%s],
    "Resource": %q
  }]
}`, strings.Join(quoted, ", "), arn)
}

func checkRedis(ctx context.Context, r *redisRecords) ([]finding, error) {
	if r.cluster != nil {
		return checkRedisCluster(ctx, r)
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", r.name(), err)
	}
	fs := []finding{{ok: true, what: "server answers"}}
	p := readPolicy(ctx, r.client)
	switch {
	case p.err != nil || p.policy == "":
		fs = append(fs, finding{what: "eviction policy: cannot read it (CONFIG is disabled on many managed services)", fix: noEvictionAdvice})
	case p.policy == "noeviction":
		fs = append(fs, finding{ok: true, what: "maxmemory-policy noeviction"})
	default:
		fs = append(fs, finding{problem: true,
			what: fmt.Sprintf("maxmemory-policy %s: %s", p.policy, evictionHarm),
			fix:  "redis-cli CONFIG SET maxmemory-policy noeviction (and set it in redis.conf or the service's parameter group)"})
	}
	return fs, nil
}

const (
	evictionHarm     = "under memory pressure Redis evicts records, and evicted keys run again"
	noEvictionAdvice = "make sure maxmemory-policy is noeviction: every record has a TTL, so even volatile-* policies evict live records"
)

// nodePolicy is the eviction policy of one server.
type nodePolicy struct {
	addr   string
	policy string // "" when it cannot be read
	err    error
}

// rank orders policies from good to bad: noeviction, unknown, evicting.
func (p nodePolicy) rank() int {
	switch {
	case p.policy == "noeviction":
		return 0
	case p.err != nil || p.policy == "":
		return 1
	}
	return 2
}

func readPolicy(ctx context.Context, client redis.Cmdable) nodePolicy {
	cfg, err := client.ConfigGet(ctx, "maxmemory-policy").Result()
	return nodePolicy{policy: cfg["maxmemory-policy"], err: err}
}

// checkRedisCluster checks the cluster's state, then the eviction policy of
// every primary (replicas follow their primary's deletions and, by default,
// ignore maxmemory). One finding lists every primary's policy; its mark is
// the worst of them.
func checkRedisCluster(ctx context.Context, r *redisRecords) ([]finding, error) {
	info, err := r.cluster.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.name(), err)
	}
	var fs []finding
	state := clusterInfoField(info, "cluster_state")
	slots := clusterInfoField(info, "cluster_slots_ok")
	if state == "ok" {
		fs = append(fs, finding{ok: true, what: fmt.Sprintf("cluster state ok, %s of 16384 slots served", slots)})
	} else {
		fs = append(fs, finding{problem: true,
			what: fmt.Sprintf("cluster state %q (%s of 16384 slots served): claims of keys in the other slots fail with CLUSTERDOWN", state, slots),
			fix:  "redis-cli --cluster check HOST:PORT shows what is wrong; redis-cli --cluster fix HOST:PORT assigns the missing slots"})
	}

	var mu sync.Mutex
	var nodes []nodePolicy
	err = r.cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		p := readPolicy(ctx, node)
		p.addr = node.Options().Addr
		if perr := node.Ping(ctx).Err(); perr != nil {
			return fmt.Errorf("primary %s: %w", p.addr, perr)
		}
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.name(), err)
	}
	slices.SortFunc(nodes, func(a, b nodePolicy) int { return cmp.Compare(a.addr, b.addr) })
	worst := slices.MaxFunc(nodes, func(a, b nodePolicy) int { return cmp.Compare(a.rank(), b.rank()) })
	var lines, bad []string
	unknown := 0
	for _, n := range nodes {
		policy := n.policy
		if n.rank() == 1 {
			unknown++
			policy = "cannot read it (CONFIG is disabled on many managed services)"
		}
		lines = append(lines, fmt.Sprintf("\n       primary %s: %s", n.addr, policy))
		if n.rank() == 2 {
			host, port, _ := net.SplitHostPort(n.addr)
			bad = append(bad, fmt.Sprintf("redis-cli -h %s -p %s CONFIG SET maxmemory-policy noeviction", host, port))
		}
	}
	each := strings.Join(lines, "")
	f := finding{}
	switch worst.rank() {
	case 0:
		f = finding{ok: true, what: fmt.Sprintf("maxmemory-policy noeviction on all %d primaries:%s", len(nodes), each)}
	case 1:
		f = finding{what: fmt.Sprintf("eviction policy: cannot read it on %d of %d primaries:%s", unknown, len(nodes), each), fix: noEvictionAdvice}
	default:
		f = finding{problem: true,
			what: fmt.Sprintf("maxmemory-policy %s on primary %s (%d of %d primaries evict): %s:%s", worst.policy, worst.addr, len(bad), len(nodes), evictionHarm, each),
			fix:  strings.Join(bad, "; ") + " (and set it in each node's redis.conf or the service's parameter group)"}
	}
	return append(fs, f), nil
}

// clusterInfoField returns a field of CLUSTER INFO's reply.
func clusterInfoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}
