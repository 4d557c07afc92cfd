// Package boot holds the start-up steps the sample functions' main packages
// share: JSON logging on stdout, required environment variables checked
// before the first invocation, and one DynamoDB client built from the SDK's
// default configuration. It does nothing on the network: a cold start only
// reads the environment.
package boot
