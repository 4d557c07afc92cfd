// Package envelope is the encoding of a record's Data: a tag byte saying how
// the response that follows is stored (as it is, DEFLATE-compressed, or not at
// all). The engine writes it; the idemkit command reads it.
package envelope
