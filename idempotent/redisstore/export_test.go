package redisstore

// Test seams: the decoder, the size measure, the key expiry and the steps
// encoding, which unit tests exercise without a server.
var (
	DecodeHash    = decodeHash
	CompletedSize = completedSize
	KeyExpiryMs   = keyExpiryMs
	EncodeStep    = encodeStep
	DecodeSteps   = decodeSteps
)

// ScriptHashes returns the SHA1 of every script, in the order claim,
// complete, release, append step, suspend.
func ScriptHashes() []string {
	hashes := make([]string, len(scripts))
	for i, sc := range scripts {
		hashes[i] = sc.Hash()
	}
	return hashes
}
