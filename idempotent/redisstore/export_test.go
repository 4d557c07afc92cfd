package redisstore

// Test seams: the decoder, the size measure and the key expiry, which unit
// tests exercise without a server.
var (
	DecodeHash    = decodeHash
	CompletedSize = completedSize
	KeyExpiryMs   = keyExpiryMs
)

// ScriptHashes returns the SHA1 of every script, in the order claim,
// complete, release.
func ScriptHashes() []string {
	hashes := make([]string, len(scripts))
	for i, sc := range scripts {
		hashes[i] = sc.Hash()
	}
	return hashes
}
