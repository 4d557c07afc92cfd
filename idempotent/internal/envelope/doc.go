// Package envelope is the encoding of a record's Data: a tag byte saying how
// the response that follows is stored (as it is, DEFLATE-compressed, or not at
// all). The engine writes it (Encode); storage.Record.Response reads it
// (Decode), for the engine and for tools such as the idemkit command.
package envelope
