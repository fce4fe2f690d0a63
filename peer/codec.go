package peer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"strconv"
	"unicode/utf8"

	"github.com/solipsism/mesh/gameworld"
)

// Message types of the wire protocol.
const (
	TypeWorldChange     = "worldChange"
	TypeRequestRefresh  = "requestRefresh"
	TypeRequestMetadata = "requestMetadata"
	// TypeMetadata is the documented answer to requestMetadata.
	TypeMetadata = "metadata"
	// TypeMetadataChange is the answer the 2016 JavaScript library sends.
	TypeMetadataChange  = "metadataChange"
	TypeRequestLessData = "requestLessData"
	TypeRequestMoreData = "requestMoreData"
)

// ErrInvalid is matched (errors.Is) by every decoding error.
var ErrInvalid = errors.New("invalid message")

// DecodeError is a message that could not be decoded. Code is the close code
// a link uses when it gives up on the peer because of it.
type DecodeError struct {
	Code   StatusCode
	Reason string
}

func (e *DecodeError) Error() string { return "invalid message: " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *DecodeError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &DecodeError{Code: StatusInvalidPayload, Reason: fmt.Sprintf(format, args...)}
}

// Message is a decoded [messageType, data] envelope. Data is nil when the
// message had no data element; a JSON null is kept as "null".
type Message struct {
	Type string
	Data json.RawMessage
}

func known(t string) bool {
	switch t {
	case TypeWorldChange, TypeScopeChange, TypeRequestRefresh, TypeRequestMetadata, TypeMetadata,
		TypeMetadataChange, TypeRequestLessData, TypeRequestMoreData,
		TypeDigest, TypeRequestRepair, TypeRepairing, TypeRepaired, TypeDeparted, TypeMessage:
		return true
	}
	return false
}

// Limits bound what a decoder accepts. The zero value means the defaults.
type Limits struct {
	// MaxRecordBytes bounds one change record, and a whole message of any
	// type but worldChange, in bytes; a larger one closes the link with
	// 1009. A worldChange may carry any number of records: it is decoded
	// as a stream. Zero means DefaultMaxRecordBytes.
	MaxRecordBytes int
	// MaxDepth is the deepest nesting of arrays and objects allowed inside a
	// property value. Zero means 32. JavaScript peers parse what we relay, so
	// pathological nesting is refused here rather than passed on.
	MaxDepth int
	// MaxIDLength bounds object ids and world identifiers in bytes. Zero
	// means 256.
	MaxIDLength int
	// MaxChain bounds the length of an identifierChain. Zero means 4096.
	MaxChain int
}

func (l Limits) withDefaults() Limits {
	if l.MaxRecordBytes <= 0 {
		l.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 32
	}
	if l.MaxIDLength <= 0 {
		l.MaxIDLength = 256
	}
	if l.MaxChain <= 0 {
		l.MaxChain = 4096
	}
	return l
}

// WorldChange is the data of a worldChange message.
type WorldChange struct {
	// Timestamp is the sender's clock in milliseconds since the Unix epoch.
	Timestamp int64
	Changes   []gameworld.Change
	// Refreshed is our extension: the frame ends the answer to a
	// requestRefresh. Peers that do not know it ignore the extra key.
	Refreshed bool
}

func (l Limits) checkID(name, v string) error {
	if v == "" {
		return invalid("%s is empty", name)
	}
	if len(v) > l.MaxIDLength {
		return invalid("%s is %d bytes long (limit %d)", name, len(v), l.MaxIDLength)
	}
	if !utf8.ValidString(v) {
		return invalid("%s is not valid UTF-8", name)
	}
	return nil
}

func decodeString(fields map[string]json.RawMessage, key string, dst *string, required bool) error {
	raw, ok := fields[key]
	if !ok || (!required && isNull(raw)) {
		if required {
			return invalid("no %s", key)
		}
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return invalid("%s is not a string", key)
	}
	return nil
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

// depth returns the deepest nesting of arrays and objects in valid JSON b.
func depth(b []byte) int {
	d, max := 0, 0
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			d++
			if d > max {
				max = d
			}
		case ']', '}':
			d--
		}
	}
	return max
}

// Metadata describes a peer world.
type Metadata struct {
	// Identifier is the peer world's identifier, used as owner of its objects.
	Identifier string
	// IdentifierChain holds Identifier and every world the peer proxies.
	IdentifierChain []string
	// Role is our extension: "client", "proxy" or "server". Empty if the peer
	// did not say.
	Role string
	// Interest is our extension: the regions the peer wants changes of
	// (metadata key "interest"). HasInterest false means everything, as
	// when the key is absent or null; true with no boxes means nothing.
	Interest    []Box
	HasInterest bool
	// ResumeTokens is our extension (metadata key "resumeTokens"): a node
	// hands each downstream peer a token per identifier it granted, and a
	// peer presents them to take its identifiers back from a connection
	// not yet gone. Peers that do not know the key ignore it.
	ResumeTokens map[string]string
	// Features is our extension (metadata key "features"): the protocol
	// extensions the peer speaks, such as FeatureOwnership. A peer that
	// does not list one is never sent what it would not understand.
	Features []string
	// Refused is our extension (metadata key "refused"): identifiers of the
	// peer's identifierChain that this node does not take from it (its
	// token does not grant them), so that the peer, a proxy, refuses the
	// worlds behind it that claim them instead of losing its whole link.
	Refused []string
	// Taken is our extension (metadata key "taken"), sent with Refused to
	// the same peers: identifiers of the peer's identifierChain that this
	// node does not take from it because another connection holds them
	// (and the peer presented no resume token for them).
	Taken []string
	// Rooms is our extension (metadata key "rooms"): the rooms the peer is
	// in, sorted and distinct. HasRooms false means all of them, as when
	// the key is absent or null; true with none means no room (objects
	// and messages of no room only).
	Rooms    []string
	HasRooms bool
	// Budget is our extension (metadata key "budget"): the bytes per
	// second of changes the peer wants at most; 0 (or absent) means no
	// preference. A node sends it at most that, or its own cap if lower,
	// nearer objects first (docs/protocol.md, "Priority and budgets").
	Budget int
}

// MaxRooms bounds the rooms of one metadata message; a node whose peers
// are in more announces all rooms.
const MaxRooms = 1024

// FeatureRefused is the feature of peers (our proxies) that take a
// "refused" list in metadata: a node refuses a world behind them that
// their token does not grant, alone, instead of closing their link.
const FeatureRefused = "refused"

// FeatureDigest is the feature of peers that take part in anti-entropy:
// they are sent digest, repairing and repaired messages and may send
// requestRepair (see digest.go). Others are never sent them.
const FeatureDigest = "digest"

// FeatureOwnership is the feature of peers that take part in ownership
// transfers: they are sent "transfer" records and "epoch" keys, and may
// send transfers themselves. Others see an owner change as a remove
// followed, in a later message, by an add.
const FeatureOwnership = "ownership"

// Has reports whether the peer announced the feature f.
func (md Metadata) Has(f string) bool { return slices.Contains(md.Features, f) }

// DecodeMetadata decodes the data of a metadata or metadataChange message.
// A missing identifierChain means [identifier]; a chain that lacks the
// identifier gets it prepended.
func (l Limits) DecodeMetadata(data json.RawMessage) (Metadata, error) {
	l = l.withDefaults()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return Metadata{}, invalid("metadata is not an object")
	}
	var md Metadata
	if err := decodeString(fields, "identifier", &md.Identifier, false); err != nil {
		return md, err
	}
	if err := decodeString(fields, "role", &md.Role, false); err != nil {
		return md, err
	}
	var err error
	if md.Interest, md.HasInterest, err = decodeInterest(fields["interest"]); err != nil {
		return md, err
	}
	if raw, ok := fields["resumeTokens"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &md.ResumeTokens) != nil || len(md.ResumeTokens) > l.MaxChain+1 {
			return md, invalid("resumeTokens is not an object of strings")
		}
		for id, tok := range md.ResumeTokens {
			if len(tok) > 128 || len(id) > 256 {
				return md, invalid("a resume token or its identifier is too long")
			}
		}
	}
	if raw, ok := fields["features"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &md.Features) != nil || len(md.Features) > 32 {
			return md, invalid("features is not an array of at most 32 strings")
		}
	}
	for _, f := range []struct {
		key string
		dst *[]string
	}{{"refused", &md.Refused}, {"taken", &md.Taken}} {
		raw, ok := fields[f.key]
		if !ok || isNull(raw) {
			continue
		}
		if json.Unmarshal(raw, f.dst) != nil || len(*f.dst) > l.MaxChain {
			return md, invalid("%s is not an array of at most %d identifiers", f.key, l.MaxChain)
		}
		for _, id := range *f.dst {
			if err := l.checkID(f.key+" entry", id); err != nil {
				return md, err
			}
		}
	}
	if raw, ok := fields["rooms"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &md.Rooms) != nil || len(md.Rooms) > MaxRooms {
			return md, invalid("rooms is not an array of at most %d names", MaxRooms)
		}
		for _, r := range md.Rooms {
			if err := l.checkID("room", r); err != nil {
				return md, err
			}
		}
		slices.Sort(md.Rooms)
		md.Rooms = slices.Compact(md.Rooms)
		md.HasRooms = true
	}
	if raw, ok := fields["budget"]; ok && !isNull(raw) {
		var b float64
		if json.Unmarshal(raw, &b) != nil || b < 0 || b > 1<<40 || b != float64(int64(b)) {
			return md, invalid("budget is not a whole number of bytes per second")
		}
		md.Budget = int(b)
	}
	if raw, ok := fields["identifierChain"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &md.IdentifierChain); err != nil {
			return md, invalid("identifierChain is not an array of strings")
		}
	}
	if md.Identifier == "" && len(md.IdentifierChain) > 0 {
		md.Identifier = md.IdentifierChain[0]
	}
	if err := l.checkID("identifier", md.Identifier); err != nil {
		return md, err
	}
	if len(md.IdentifierChain) > l.MaxChain {
		return md, invalid("identifierChain has %d entries (limit %d)", len(md.IdentifierChain), l.MaxChain)
	}
	seen := make(map[string]bool, len(md.IdentifierChain)+1)
	chain := make([]string, 0, len(md.IdentifierChain)+1)
	chain = append(chain, md.Identifier)
	seen[md.Identifier] = true
	for _, id := range md.IdentifierChain {
		if err := l.checkID("identifierChain entry", id); err != nil {
			return md, err
		}
		if !seen[id] {
			seen[id] = true
			chain = append(chain, id)
		}
	}
	md.IdentifierChain = chain
	return md, nil
}

// AppendMetadata appends a complete metadata message of the given type name
// (TypeMetadata or TypeMetadataChange).
func AppendMetadata(dst []byte, typeName string, md Metadata) []byte {
	dst = append(dst, `["`...)
	dst = append(dst, typeName...)
	dst = append(dst, `",{"identifier":`...)
	dst = appendString(dst, md.Identifier)
	dst = appendStrings(append(dst, `,"identifierChain":`...), md.IdentifierChain)
	if md.Role != "" {
		dst = append(dst, `,"role":`...)
		dst = appendString(dst, md.Role)
	}
	if md.HasInterest {
		dst = appendInterest(dst, md.Interest)
	}
	if md.HasRooms {
		rooms := md.Rooms
		if rooms == nil {
			rooms = []string{}
		}
		dst = appendStrings(append(dst, `,"rooms":`...), rooms)
	}
	if md.Budget > 0 {
		dst = strconv.AppendInt(append(dst, `,"budget":`...), int64(md.Budget), 10)
	}
	if len(md.Features) > 0 {
		dst = appendStrings(append(dst, `,"features":`...), md.Features)
	}
	if len(md.Refused) > 0 {
		dst = appendStrings(append(dst, `,"refused":`...), md.Refused)
	}
	if len(md.Taken) > 0 {
		dst = appendStrings(append(dst, `,"taken":`...), md.Taken)
	}
	if len(md.ResumeTokens) > 0 {
		dst = append(dst, `,"resumeTokens":{`...)
		ids := make([]string, 0, len(md.ResumeTokens))
		for id := range md.ResumeTokens {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for i, id := range ids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, id)
			dst = append(dst, ':')
			dst = appendString(dst, md.ResumeTokens[id])
		}
		dst = append(dst, '}')
	}
	return append(dst, "}]"...)
}

// appendStrings appends a JSON array of strings.
func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// AppendRequest appends a data-less request message such as requestRefresh.
func AppendRequest(dst []byte, typeName string) []byte {
	dst = append(dst, `["`...)
	dst = append(dst, typeName...)
	return append(dst, `",null]`...)
}

// AppendChange appends the wire encoding of one change record. owner is
// always present (the JavaScript library sends it on every record);
// properties are present on add and update. Property values are written as
// they are: they must be valid, compact JSON, as the decoder and
// relay.Node.Apply make them. An update of scopes alone, which only peers
// that take scopes are sent as it is, leaves out owner and properties: a
// block's change costs little more than the block.
func AppendChange(dst []byte, c gameworld.Change) []byte {
	scopesOnly := scopesOnly(&c)
	dst = append(dst, `{"type":"`...)
	dst = append(dst, c.Type.String()...)
	dst = append(dst, `","id":`...)
	dst = appendString(dst, c.ID)
	if scopesOnly {
		dst = appendScopes(dst, c.Scopes)
		return append(dst, '}')
	}
	dst = append(dst, `,"owner":`...)
	dst = appendString(dst, c.Owner)
	if c.Epoch > 0 && (c.Type == gameworld.Add || c.Type == gameworld.Transfer) {
		dst = append(dst, `,"epoch":`...)
		dst = strconv.AppendUint(dst, c.Epoch, 10)
	}
	if c.Answer && c.Type == gameworld.Transfer {
		dst = append(dst, `,"answer":true`...)
	}
	if c.Type != gameworld.Remove {
		dst = append(dst, `,"properties":`...)
		dst = appendProperties(dst, c.Properties)
		if len(c.Scopes) > 0 {
			dst = appendScopes(dst, c.Scopes)
		}
	}
	return append(dst, '}')
}

// appendProperties appends p as a JSON object, keys sorted so that equal
// properties encode alike.
func appendProperties(dst []byte, p gameworld.Properties) []byte {
	dst = append(dst, '{')
	first := true
	for k, v := range p.All() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = append(dst, v...)
	}
	return append(dst, '}')
}

// AppendWorldChangeHeader appends the start of a worldChange message; the
// encoded records follow, separated by commas, then the trailer.
func AppendWorldChangeHeader(dst []byte, timestampMillis int64) []byte {
	dst = append(dst, `["worldChange",{"timestamp":`...)
	dst = strconv.AppendInt(dst, timestampMillis, 10)
	return append(dst, `,"changes":[`...)
}

// AppendWorldChangeTrailer closes a worldChange message started with
// AppendWorldChangeHeader. refreshed marks the end of a refresh answer.
func AppendWorldChangeTrailer(dst []byte, refreshed bool) []byte {
	if refreshed {
		return append(dst, `],"refreshed":true}]`...)
	}
	return append(dst, "]}]"...)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	// Fast path for the common plain-ASCII identifier.
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s)
	return append(dst, b...)
}
