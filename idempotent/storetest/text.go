package storetest

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idempotent/storage"
)

// textPrefixes are prefixes the engine accepts (valid UTF-8 without NUL, see
// Text in package storage): multibyte characters, characters that are
// special to some query language, encoding or key syntax, and groups that
// differ only where a store that normalized Unicode, folded case or trimmed
// spaces would merge them. What the engine can send, every store must hold,
// byte for byte and distinct.
var textPrefixes = []string{
	"zahlungen-€", "支払い", "💳🧾", // 3-byte and 4-byte characters, one outside the BMP
	"caf\u00e9", "cafe\u0301", // one word in NFC and in NFD
	"\u212b", "\u00c5", "\ufb03", "ffi", // canonically and compatibly equivalent to each other
	"Orders", "orders", "ORDERS", "straße", "STRASSE",
	"p", "p ", " p", "p\t", "p\u00a0",
	"a#b", "a#", "#", // the separator inside the prefix
	`"quoted" 'single' \back\slash`, "%_*?[]{}(),;:|", "NULL", "{}", "$1", "{tag}",
	"\x01\x1f\x7f\n\r",                   // control characters other than NUL
	"\u2028\u2029\ufeff\ufffd\U0010ffff", // JSON-escaped, BOM, replacement character, the last code point
}

// textStepNames are step names the engine accepts, chosen as textPrefixes
// are, with the longest of several widths.
var textStepNames = []string{
	"扣款", "💳", "caf\u00e9", "cafe\u0301", "\ufb03", "ffi",
	"Charge", "charge", "s", "s ", " s", "s\u00a0",
	"a,b", "{x}", `"q"`, `\`, "NULL", "null", "#", "step#1", "$1",
	"\x01\t\n\x7f", "\u2028\ufeff\ufffd\U0010ffff",
	strings.Repeat("🧾", storage.MaxStepNameBytes/4),
	strings.Repeat("é", storage.MaxStepNameBytes/2),
	strings.Repeat("€", storage.MaxStepNameBytes/3) + strings.Repeat("x", storage.MaxStepNameBytes%3),
	strings.Repeat("s", storage.MaxStepNameBytes),
}

// longestIDs returns IDs of exactly storage.MaxIDBytes whose prefixes are
// multibyte text of each width, ending with hex.
func longestIDs(hex string) []string {
	n := storage.MaxIDBytes - 1 - len(hex) // the prefix's bytes
	return []string{
		strings.Repeat("é", n/2) + strings.Repeat("p", n%2) + "#" + hex,
		strings.Repeat("€", n/3) + strings.Repeat("p", n%3) + "#" + hex,
		strings.Repeat("🧾", n/4) + strings.Repeat("p", n%4) + "#" + hex,
	}
}

// wantText fails the case if s is not text the engine could send: the
// suite's own lists must stay within the rule they check.
func (c *checker) wantText(what, s string, limit int) {
	c.Helper()
	if s == "" || len(s) > limit || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		c.fatalf("storetest: %s %q is not text the engine sends (1 to %d bytes of UTF-8 without NUL)", what, s, limit)
	}
}

func textCases() []testCase {
	return []testCase{
		{"TextOfEveryValidID", base, func(c *checker) {
			// One key under every prefix: the IDs differ only in their
			// prefixes, so a store that merged two would refuse one claim
			// with the other's record.
			hex := randomHex(32)
			recs := make([]storage.Record, 0, len(textPrefixes)+3)
			for _, p := range textPrefixes {
				c.wantText("prefix", p, storage.MaxIDBytes-1-len(hex))
				a := c.inProgress(time.Minute)
				a.ID = p + "#" + hex
				recs = append(recs, a)
			}
			for _, id := range longestIDs(hex) {
				c.wantText("ID", id, storage.MaxIDBytes)
				if len(id) != storage.MaxIDBytes {
					c.fatalf("storetest: ID of %d bytes, want storage.MaxIDBytes (%d)", len(id), storage.MaxIDBytes)
				}
				a := c.inProgress(time.Minute)
				a.ID = id
				recs = append(recs, a)
			}
			for _, a := range recs {
				if res := c.claim(a, c.now); !res.Claimed {
					c.fatalf("Claim(%q): refused (stored ID %q), want claimed: the store does not keep distinct IDs distinct", a.ID, idOf(res.Existing))
				}
			}
			for _, a := range recs {
				// Each record answers with its own ID and lease.
				c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			}
			// Release finds a record by its own ID, and only it.
			for i, a := range recs[:5] {
				if err := c.store.Release(c.ctx(), a.ID, a.Lease); err != nil {
					c.fatalf("Release(%q): %v", a.ID, err)
				}
				recs[i] = rival(a, c.now.Add(time.Minute))
				c.mustClaim(recs[i], c.now)
			}
			for i, a := range recs {
				done := completed(a, []byte(fmt.Sprintf("p-text-%d", i)), c.now.Add(time.Hour))
				c.mustComplete(done)
				recs[i] = done
			}
			for _, done := range recs {
				c.sameRecord(c.mustRefuse(rival(done, c.now.Add(time.Minute)), c.now), done)
			}
		}},
		{"TextOfEveryValidIDInClaimMany", claimManyStore, func(c *checker) {
			// The IDs of TextOfEveryValidID in one ClaimMany call: each is
			// claimed, and each record answers with its own ID and lease.
			hex := randomHex(32)
			var recs []storage.Record
			for _, id := range longestIDs(hex) {
				a := c.inProgress(time.Minute)
				a.ID = id
				recs = append(recs, a)
			}
			for _, p := range textPrefixes {
				a := c.inProgress(time.Minute)
				a.ID = p + "#" + hex
				recs = append(recs, a)
			}
			rivals := make([]storage.Record, len(recs))
			for i, o := range c.claimMany(recs, c.now) {
				if o.Err != nil || !o.Result.Claimed {
					c.fatalf("ClaimMany: %q: %+v, error %v; want claimed: the store does not keep distinct IDs distinct", recs[i].ID, o.Result, o.Err)
				}
				rivals[i] = rival(recs[i], c.now.Add(time.Minute))
			}
			for i, o := range c.claimMany(rivals, c.now) {
				if o.Err != nil || o.Result.Existing == nil {
					c.fatalf("ClaimMany of rivals: %q: %+v, error %v; want refused", recs[i].ID, o.Result, o.Err)
				}
				c.sameRecord(o.Result.Existing, recs[i])
			}
		}},
		{"TextOfEveryValidStepName", stepStore, func(c *checker) {
			// Every step name the engine can send is held byte for byte and
			// in order, and names that differ only where a normalizing,
			// case-folding or trimming store would merge them stay distinct.
			a := c.inProgress(time.Second)
			a.ID = "zahlungen-€#" + randomHex(32)
			c.mustClaim(a, c.now)
			for i, name := range textStepNames {
				c.wantText("step name", name, storage.MaxStepNameBytes)
				step := storage.Step{Name: name, Data: []byte{'"', byte(i), 0, 0xff}}
				c.mustAppend(a, step)
				a.Steps = append(a.Steps, step)
			}
			c.sameRecord(c.mustRefuse(rival(a, c.now.Add(time.Minute)), c.now), a)
			later := c.now.Add(2 * time.Second)
			c.wantSteps(c.mustClaim(rival(a, later.Add(time.Second)), later), a.Steps, "takeover for the same payload")
		}},
	}
}

// idOf returns the ID of rec, or "" for none.
func idOf(rec *storage.Record) string {
	if rec == nil {
		return ""
	}
	return rec.ID
}
