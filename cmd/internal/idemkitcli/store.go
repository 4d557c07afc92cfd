package idemkitcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/idempotent/dynamostore"
	"github.com/idemkit/idemkit/idempotent/redisstore"
	"github.com/idemkit/idemkit/idempotent/storage"
)

// storeFlags select and configure the store: a DynamoDB table (with the
// layout options of dynamostore.Options), a Redis server, a Redis Cluster or
// a PostgreSQL table.
type storeFlags struct {
	table        string
	redisURL     string
	redisCluster string
	redisPrefix  string
	layout       dynamostore.Options
	pg           pgFlags // postgres.go
}

// storeUsage names the store flags, for the commands' usage lines.
const storeUsage = "--table T | --redis URL | --redis-cluster ADDRS | --postgres URL"

func (s *storeFlags) register(fs *flag.FlagSet) {
	d := dynamostore.Options{}
	s.layout = d
	fs.StringVar(&s.table, "table", "", "DynamoDB `table` name (region, endpoint and credentials from the usual AWS environment)")
	fs.StringVar(&s.redisURL, "redis", "", "one Redis server's `URL` (redis://[user:password@]host:port[/db], rediss:// for TLS), instead of --table; "+
		"a node of a Redis Cluster stands for its whole cluster (as --redis-cluster)")
	fs.StringVar(&s.redisCluster, "redis-cluster", "", "a Redis Cluster, by the `addresses` of some of its nodes: host:port,host:port,... or "+
		"go-redis's cluster URL redis://[user:password@]host:port?addr=host2:port2&addr=host3:port3 (rediss:// for TLS); "+
		"records are read and deleted on the primary that holds their slot, list and check visit every primary")
	fs.StringVar(&s.redisPrefix, "redis-key-prefix", redisstore.DefaultKeyPrefix, "redisstore Options.KeyPrefix")
	s.pg.register(fs)
	o := &s.layout
	fs.StringVar(&o.KeyAttr, "key-attr", "", `dynamostore Options.KeyAttr: the partition key (default "id")`)
	fs.StringVar(&o.SortKeyAttr, "sort-key-attr", "", "dynamostore Options.SortKeyAttr: the sort key of the composite key layout")
	fs.StringVar(&o.StaticPartitionKey, "static-partition-key", "", `dynamostore Options.StaticPartitionKey (composite layout; default "idempotency#" + AWS_LAMBDA_FUNCTION_NAME, or "idempotency#idemkit")`)
	fs.StringVar(&o.StatusAttr, "status-attr", "", `dynamostore Options.StatusAttr (default "status")`)
	fs.StringVar(&o.ExpirationAttr, "expiration-attr", "", `dynamostore Options.ExpirationAttr, the TTL attribute (default "expiration")`)
	fs.StringVar(&o.InProgressExpirationAttr, "in-progress-expiration-attr", "", `dynamostore Options.InProgressExpirationAttr (default "in_progress_expiration")`)
	fs.StringVar(&o.LeaseAttr, "lease-attr", "", `dynamostore Options.LeaseAttr (default "lease")`)
	fs.StringVar(&o.ValidationAttr, "validation-attr", "", `dynamostore Options.ValidationAttr (default "validation")`)
	fs.StringVar(&o.DataAttr, "data-attr", "", `dynamostore Options.DataAttr (default "data")`)
	fs.StringVar(&o.VersionAttr, "version-attr", "", `dynamostore Options.VersionAttr (default "version")`)
	fs.StringVar(&o.StepsAttr, "steps-attr", "", `dynamostore Options.StepsAttr: the finished steps of an INPROGRESS record (default "steps")`)
	fs.StringVar(&o.SuspendedAttr, "suspended-attr", "", `dynamostore Options.SuspendedAttr: marks an INPROGRESS record suspended after a handler error (default "suspended")`)
	fs.StringVar(&o.TraceAttr, "trace-attr", "", `dynamostore Options.TraceAttr: the trace context of the call that completed a record (default "trace")`)
}

// records is a store the commands read, delete and list records of (the
// storage.AdminStore capability every store of the module has), and name
// in their messages.
type records interface {
	storage.AdminStore
	// name says which store this is, for messages.
	name() string
	// close releases the store's connections.
	close() error
}

type dynamoRecords struct {
	*dynamostore.Store
	client   *dynamodb.Client
	table    string
	region   string
	endpoint string
}

func (d *dynamoRecords) name() string {
	where := "region " + d.region
	if d.endpoint != "" {
		where = d.endpoint
	}
	return fmt.Sprintf("DynamoDB table %s (%s)", d.table, where)
}

func (d *dynamoRecords) close() error { return nil }

// redisRecords is a Redis server, or a Redis Cluster when cluster is set.
type redisRecords struct {
	*redisstore.Store
	client  redis.UniversalClient
	cluster *redis.ClusterClient // nil: one server
	addr    string               // the server's address, or the cluster's seed addresses
}

func (r *redisRecords) name() string {
	if r.cluster != nil {
		return "Redis Cluster at " + r.addr
	}
	return "Redis at " + r.addr
}

func (r *redisRecords) close() error { return r.client.Close() }

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

// open connects to the store the flags select. The caller closes it.
func (s *storeFlags) open(ctx context.Context) (records, error) {
	named := 0
	for _, set := range []bool{s.table != "", s.redisURL != "", s.redisCluster != "", s.pg.url != ""} {
		if set {
			named++
		}
	}
	switch {
	case named > 1:
		return nil, fmt.Errorf("%w: give only one of --table, --redis, --redis-cluster and --postgres", errUsage)
	case s.pg.url != "":
		return s.pg.open(ctx)
	case s.redisURL != "":
		opts, err := redis.ParseURL(s.redisURL)
		if err != nil {
			return nil, fmt.Errorf("%w: --redis: %w", errUsage, err)
		}
		// Asked on database 0: a cluster node refuses SELECT.
		probeOpts := *opts
		probeOpts.DB = 0
		probe := redis.NewClient(&probeOpts)
		clustered, err := isClusterNode(ctx, probe)
		_ = probe.Close()
		if err != nil {
			return nil, storeError(&redisRecords{addr: opts.Addr}, err)
		}
		if !clustered {
			return s.redis(redis.NewClient(opts), nil, opts.Addr), nil
		}
		// A node of a Redis Cluster holds only its own slots' records: the
		// commands need the whole cluster, which the node leads to.
		if opts.DB != 0 {
			return nil, fmt.Errorf("%w: --redis: %s is a node of a Redis Cluster, which has database 0 only (the URL names database %d)", errUsage, opts.Addr, opts.DB)
		}
		cluster := redis.NewClusterClient(clusterOptions(opts))
		return s.redis(cluster, cluster, opts.Addr), nil
	case s.redisCluster != "":
		opts, err := parseCluster(s.redisCluster)
		if err != nil {
			return nil, fmt.Errorf("%w: --redis-cluster: %w", errUsage, err)
		}
		cluster := redis.NewClusterClient(opts)
		return s.redis(cluster, cluster, strings.Join(opts.Addrs, ",")), nil
	case s.table != "":
		client, region, endpoint, err := dynamoClient(ctx)
		if err != nil {
			return nil, err
		}
		layout := s.layout
		store, err := newDynamoStore(client, s.table, layout)
		if err != nil {
			return nil, err
		}
		return &dynamoRecords{Store: store, client: client, table: s.table, region: region, endpoint: endpoint}, nil
	default:
		return nil, fmt.Errorf("%w: name the store: --table NAME (DynamoDB), --redis URL, --redis-cluster ADDRS or --postgres URL", errUsage)
	}
}

func (s *storeFlags) redis(client redis.UniversalClient, cluster *redis.ClusterClient, addr string) *redisRecords {
	prefix := s.redisPrefix
	return &redisRecords{Store: redisstore.New(client, func(o *redisstore.Options) { o.KeyPrefix = prefix }),
		client: client, cluster: cluster, addr: addr}
}

// isClusterNode reports whether the server client talks to is a node of a
// Redis Cluster (INFO cluster says cluster_enabled:1). A server that refuses
// INFO (some managed services rename it) is taken for a single server.
func isClusterNode(ctx context.Context, client redis.UniversalClient) (bool, error) {
	info, err := client.Info(ctx, "cluster").Result()
	var replyErr redis.Error
	switch {
	case errors.As(err, &replyErr):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, line := range strings.Split(info, "\n") {
		if strings.TrimSpace(line) == "cluster_enabled:1" {
			return true, nil
		}
	}
	return false, nil
}

// clusterOptions turns one node's connection options into a cluster
// client's, seeded with that node.
func clusterOptions(o *redis.Options) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs: []string{o.Addr}, ClientName: o.ClientName, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
	}
}

// parseCluster reads --redis-cluster: go-redis's cluster URL
// (redis.ParseClusterURL), or host:port addresses separated by commas.
func parseCluster(v string) (*redis.ClusterOptions, error) {
	if strings.Contains(v, "://") {
		return redis.ParseClusterURL(v)
	}
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("%q is not host:port (give host:port,host:port,... or a redis:// URL)", a)
		}
		addrs = append(addrs, a)
	}
	return &redis.ClusterOptions{Addrs: addrs}, nil
}

// newDynamoStore builds the store, turning dynamostore.New's panic on a bad
// layout (two attributes with one name) into a usage error.
func newDynamoStore(client *dynamodb.Client, table string, layout dynamostore.Options) (store *dynamostore.Store, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", errUsage, v)
		}
	}()
	return dynamostore.New(client, table, func(o *dynamostore.Options) {
		// An empty flag keeps dynamostore's default (New normalizes it).
		*o = mergeLayout(*o, layout)
	}), nil
}

// mergeLayout overrides def with the non-empty fields of set.
func mergeLayout(def, set dynamostore.Options) dynamostore.Options {
	for _, f := range []struct{ dst, src *string }{
		{&def.KeyAttr, &set.KeyAttr}, {&def.SortKeyAttr, &set.SortKeyAttr}, {&def.StaticPartitionKey, &set.StaticPartitionKey},
		{&def.StatusAttr, &set.StatusAttr}, {&def.ExpirationAttr, &set.ExpirationAttr},
		{&def.InProgressExpirationAttr, &set.InProgressExpirationAttr}, {&def.LeaseAttr, &set.LeaseAttr},
		{&def.ValidationAttr, &set.ValidationAttr}, {&def.DataAttr, &set.DataAttr}, {&def.VersionAttr, &set.VersionAttr},
		{&def.StepsAttr, &set.StepsAttr}, {&def.SuspendedAttr, &set.SuspendedAttr}, {&def.TraceAttr, &set.TraceAttr},
	} {
		if *f.src != "" {
			*f.dst = *f.src
		}
	}
	return def
}

// dynamoClient builds a client from the usual AWS environment (AWS_REGION,
// AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ...). Only when an endpoint
// override is in use (DynamoDB Local, LocalStack) does it skip the response
// checksum check: DynamoDB Local's error responses lack the CRC32 header the
// SDK checks, while against AWS the check stays on.
func dynamoClient(ctx context.Context) (*dynamodb.Client, string, string, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, "", "", fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, "", "", errors.New("no AWS region: set AWS_REGION (or a region in your AWS profile)")
	}
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		endpoint = ""
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.DisableValidateResponseChecksum = true
		}
	})
	return client, cfg.Region, endpoint, nil
}

// storeError turns a store's error into one line that says what to do.
func storeError(r records, err error) error {
	if perr, ok := pgError(r, err); ok {
		return perr
	}
	var ae smithy.APIError
	var rnf *types.ResourceNotFoundException
	msg := err.Error()
	switch {
	case errors.As(err, &rnf):
		return fmt.Errorf("%s: the table does not exist (check --table, AWS_REGION and the account of your credentials)", r.name())
	case strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "get identity") ||
		strings.Contains(msg, "no EC2 IMDS role found") || strings.Contains(msg, "failed to refresh cached credentials"):
		return fmt.Errorf("%s: no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", r.name())
	case errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && strings.Contains(ae.ErrorMessage(), "key"):
		return fmt.Errorf("%s: the table's key schema does not match the layout (%s): run `idemkit check` with the same flags", r.name(), ae.ErrorMessage())
	case errors.As(err, &ae):
		return fmt.Errorf("%s: %s: %s", r.name(), ae.ErrorCode(), ae.ErrorMessage())
	}
	return fmt.Errorf("%s: %w", r.name(), err)
}

// rawOf returns the id and the stored form of a corrupt record, for
// showing.
func rawOf(err error) (id string, raw map[string]string) {
	var ce *storage.CorruptRecordError
	if errors.As(err, &ce) {
		return ce.ID, ce.Fields
	}
	return "", nil
}

// awsString is aws.ToString, named for the reader.
func awsString(p *string) string { return aws.ToString(p) }
