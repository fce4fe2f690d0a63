package peer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/solipsism/mesh/gameworld"
)

// Messages are decoded as a stream, with github.com/go-json-experiment/json's
// jsontext tokenizer: the 2016 library sends its whole world in one
// worldChange, however big, so a message cannot be bounded in size. What is
// bounded is what the decoder holds: one change record (or one message of
// another type) at a time, plus the records of the chunk being decoded.

// Defaults for Limits.
const (
	DefaultMaxRecordBytes = 1 << 20
	// Records are handed to the handler in chunks of at most this many
	// records or bytes; a message smaller than one chunk is applied all or
	// nothing.
	chunkRecords = 512
	chunkBytes   = 256 << 10
	// readAhead is how far past the current record the tokenizer may read.
	readAhead = 16 << 10
)

var errTooBig = errors.New("value over the size limit")

// budget is the reader under the tokenizer: it stops reading at limit (so a
// record over the size limit is refused before it is buffered whole) and
// paces reading to the link's rate.
type budget struct {
	r     io.Reader
	read  int64
	limit int64
	// wait, if set, is called with the number of bytes read; it blocks to
	// keep the link within its rate.
	wait func(n int) error
	// chunk bounds one read, so that wait is never asked for more than
	// its burst.
	chunk int
}

func (b *budget) Read(p []byte) (int, error) {
	if b.read >= b.limit {
		return 0, errTooBig
	}
	if rest := b.limit - b.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	if b.chunk > 0 && len(p) > b.chunk {
		p = p[:b.chunk]
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	if n > 0 && b.wait != nil {
		if werr := b.wait(n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}

// streamDecoder reads one message at a time. Decoders are pooled: one
// exists only while a message is being read, so idle links hold none.
type streamDecoder struct {
	lim Limits
	dec *jsontext.Decoder
	b   budget
	// scratch unquotes strings with escapes.
	scratch []byte
	// names holds the owners seen lately, so that the objects of a world
	// share one copy of each (a world of 100,000 objects would otherwise
	// hold 100,000 copies of one string). Bounded by maxNames; pooled with
	// the decoder.
	names map[string]string
	// props collects a record's properties; key holds a name while its
	// value is read.
	props gameworld.PropertiesBuilder
	key   []byte
}

// maxNames bounds a decoder's shared names.
const maxNames = 1024

// name returns b as a string, the shared copy if there is one. Names of
// at most 64 bytes are shared.
func (d *streamDecoder) name(b []byte) string {
	if s, ok := d.names[string(b)]; ok { // (no allocation for the lookup)
		return s
	}
	s := string(b)
	if len(b) <= 64 {
		if d.names == nil || len(d.names) >= maxNames {
			d.names = make(map[string]string, 64)
		}
		d.names[s] = s
	}
	return s
}

// noInput parks pooled decoders; it is never read.
var noInput = bytes.NewReader(nil)

var decoderPool = sync.Pool{New: func() any { return &streamDecoder{dec: jsontext.NewDecoder(noInput)} }}

func getDecoder(lim Limits, r io.Reader, wait func(int) error, chunk int) *streamDecoder {
	d := decoderPool.Get().(*streamDecoder)
	d.lim = lim.withDefaults()
	d.b = budget{r: r, wait: wait, chunk: chunk}
	// Duplicate names: the last one wins, as in JavaScript. Invalid UTF-8 is
	// refused: a text frame must not carry it, and browsers drop the
	// connection on it.
	d.dec.Reset(&d.b, jsontext.AllowDuplicateNames(true))
	d.allow(d.lim.MaxRecordBytes)
	return d
}

func (d *streamDecoder) release() {
	big := d.b.read > 64<<10
	d.b = budget{}
	d.dec.Reset(noInput)
	if !big { // a decoder that buffered a large record keeps its buffer: let it go
		decoderPool.Put(d)
	}
}

// allow lets the tokenizer read n bytes past what it has consumed.
func (d *streamDecoder) allow(n int) {
	d.b.limit = d.dec.InputOffset() + int64(n) + readAhead
}

// fail maps a tokenizer or reader error to a DecodeError where it is the
// peer's fault, and passes transport errors through.
func (d *streamDecoder) fail(what string, err error) error {
	var de *DecodeError
	var se *jsontext.SyntacticError
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, errTooBig):
		return &DecodeError{Code: StatusMessageTooBig, Reason: fmt.Sprintf("%s over %d bytes", what, d.lim.MaxRecordBytes)}
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("%s: not JSON: %v", what, err)
	}
	return err
}

func (d *streamDecoder) token(what string) (jsontext.Token, error) {
	t, err := d.dec.ReadToken()
	if err != nil {
		return t, d.fail(what, err)
	}
	return t, nil
}

func (d *streamDecoder) value(what string) (jsontext.Value, error) {
	d.allow(d.lim.MaxRecordBytes)
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, d.fail(what, err)
	}
	return v, nil
}

// message reads the envelope of one message. For a worldChange whose data
// is to be streamed (onChanges != nil), the records go to onChanges in
// chunks and Message.Data stays nil; every other message, and every
// worldChange when onChanges is nil, is returned whole.
func (d *streamDecoder) message(onChanges func(WorldChange) error) (Message, error) {
	var m Message
	if d.dec.PeekKind() != '[' {
		if _, err := d.value("message"); err != nil {
			return m, invalid("not JSON")
		}
		return m, invalid("not a [messageType, data] array")
	}
	if _, err := d.token("message"); err != nil {
		return m, err
	}
	if d.dec.PeekKind() != '"' {
		if d.dec.PeekKind() == ']' {
			return m, invalid("array has 0 elements, want 2")
		}
		return m, invalid("message type is not a string")
	}
	t, err := d.token("message type")
	if err != nil {
		return m, err
	}
	m.Type = t.String()
	var final *WorldChange
	switch {
	case d.dec.PeekKind() == ']':
		switch m.Type {
		case TypeRequestRefresh, TypeRequestMetadata, TypeRequestLessData, TypeRequestMoreData:
		default:
			if known(m.Type) {
				return m, invalid("%s message without data", m.Type)
			}
		}
	case m.Type == TypeWorldChange && onChanges != nil:
		if final, err = d.worldChange(onChanges); err != nil {
			return m, err
		}
	case m.Type == TypeScopeChange && onChanges != nil:
		if final, err = d.scopeChange(onChanges); err != nil {
			return m, err
		}
	default:
		v, err := d.value(m.Type + " data")
		if err != nil {
			return m, err
		}
		m.Data = bytes.Clone(v)
	}
	if d.dec.PeekKind() != ']' {
		return m, invalid("array has more than 2 elements")
	}
	if _, err := d.token("message"); err != nil {
		return m, err
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return m, invalid("data after the message")
	}
	if final != nil {
		// Only now, with the whole message known to be well formed: a
		// message that fits in one chunk is applied all or nothing.
		return m, onChanges(*final)
	}
	return m, nil
}

// scopeChange streams the data of a scopeChange (an object of object ids
// to what a record's "scopes" holds) to onChanges as updates of scopes
// alone, chunked as worldChange does; it returns the last chunk.
func (d *streamDecoder) scopeChange(onChanges func(WorldChange) error) (*WorldChange, error) {
	if d.dec.PeekKind() != '{' {
		return nil, invalid("scopeChange data is not an object")
	}
	if _, err := d.token("scopeChange"); err != nil {
		return nil, err
	}
	var wc WorldChange
	size := 0
	// seen refuses an object twice within a chunk (JSON readers keep one
	// of two equal keys); it goes with each chunk, so that one message,
	// however long, holds at most a chunk's ids.
	seen := map[string]struct{}{}
	for i := 0; d.dec.PeekKind() != '}'; i++ {
		start := d.dec.InputOffset()
		d.allow(d.lim.MaxRecordBytes)
		id, err := d.str("scopeChange")
		if err != nil {
			return nil, err
		}
		c := gameworld.Change{Type: gameworld.Update, ID: string(id)}
		if _, dup := seen[c.ID]; dup {
			return nil, invalid("scope change %d: object %q appears twice", i, c.ID)
		}
		seen[c.ID] = struct{}{}
		if err := d.lim.checkID("id", c.ID); err != nil {
			return nil, invalid("scope change %d: %v", i, err)
		}
		v, err := d.value("scopes")
		if err != nil {
			return nil, err
		}
		if c.Scopes, err = d.lim.decodeScopes(v); err != nil {
			return nil, invalid("scope change %d (%s): %v", i, c.ID, err)
		}
		if len(c.Scopes) == 0 {
			return nil, invalid("scope change %d (%s) changes no scope", i, c.ID)
		}
		n := int(d.dec.InputOffset() - start)
		if n > d.lim.MaxRecordBytes {
			return nil, &DecodeError{Code: StatusMessageTooBig, Reason: fmt.Sprintf("scope change %d is %d bytes (limit %d)", i, n, d.lim.MaxRecordBytes)}
		}
		wc.Changes = append(wc.Changes, c)
		if size += n; len(wc.Changes) >= chunkRecords || size >= chunkBytes {
			if err := onChanges(WorldChange{Changes: wc.Changes}); err != nil {
				return nil, err
			}
			wc.Changes, size = nil, 0
			clear(seen)
		}
	}
	if _, err := d.token("scopeChange"); err != nil {
		return nil, err
	}
	return &wc, nil
}

// worldChange streams the data of a worldChange to onChanges, all chunks but
// the last; it returns the last, which carries Timestamp and Refreshed.
func (d *streamDecoder) worldChange(onChanges func(WorldChange) error) (*WorldChange, error) {
	if d.dec.PeekKind() != '{' {
		return nil, invalid("worldChange data is not an object")
	}
	if _, err := d.token("worldChange"); err != nil {
		return nil, err
	}
	var wc WorldChange
	sawChanges := false
	size := 0
	for d.dec.PeekKind() != '}' {
		d.allow(d.lim.MaxRecordBytes)
		name, err := d.token("worldChange")
		if err != nil {
			return nil, err
		}
		key := name.String()
		switch key {
		case "timestamp":
			v, err := d.value("timestamp")
			if err != nil {
				return nil, err
			}
			if ts, err := parseTimestamp(v); err != nil {
				return nil, err
			} else {
				wc.Timestamp = ts
			}
		case "refreshed":
			v, err := d.value("refreshed")
			if err != nil {
				return nil, err
			}
			wc.Refreshed = string(v) == "true"
		case "changes":
			if d.dec.PeekKind() != '[' {
				return nil, invalid("changes is not an array")
			}
			if _, err := d.token("changes"); err != nil {
				return nil, err
			}
			for i := 0; d.dec.PeekKind() != ']'; i++ {
				start := d.dec.InputOffset()
				d.allow(d.lim.MaxRecordBytes)
				c, err := d.change()
				if err != nil {
					var de *DecodeError
					if errors.As(err, &de) {
						return nil, &DecodeError{Code: de.Code, Reason: fmt.Sprintf("change %d: %s", i, de.Reason)}
					}
					return nil, err
				}
				n := int(d.dec.InputOffset() - start)
				if n > d.lim.MaxRecordBytes {
					return nil, &DecodeError{Code: StatusMessageTooBig, Reason: fmt.Sprintf("change %d is %d bytes (limit %d)", i, n, d.lim.MaxRecordBytes)}
				}
				wc.Changes = append(wc.Changes, c)
				if size += n; len(wc.Changes) >= chunkRecords || size >= chunkBytes {
					if err := onChanges(WorldChange{Timestamp: wc.Timestamp, Changes: wc.Changes}); err != nil {
						return nil, err
					}
					wc.Changes, size = nil, 0
				}
			}
			if _, err := d.token("changes"); err != nil {
				return nil, err
			}
			sawChanges = true
		default:
			// Open like HTTP headers: keys we do not know are skipped.
			if _, err := d.value(key); err != nil {
				return nil, err
			}
		}
	}
	if _, err := d.token("worldChange"); err != nil {
		return nil, err
	}
	if !sawChanges {
		return nil, invalid("changes is not an array")
	}
	return &wc, nil
}

func parseTimestamp(v jsontext.Value) (int64, error) {
	if v.Kind() == 'n' {
		return 0, nil
	}
	if v.Kind() != '0' {
		return 0, invalid("timestamp is not a number")
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, invalid("timestamp is not a number")
	}
	return int64(f), nil
}

// str reads a JSON string and returns its unquoted bytes, valid until the
// next read. Strings without escapes, nearly all, are not copied.
func (d *streamDecoder) str(what string) ([]byte, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, d.fail(what, err)
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], nil
	}
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], v)
	if err != nil {
		return nil, invalid("%s: %v", what, err)
	}
	return d.scratch, nil
}

// stringField reads the value of the field key, which must be a string (or
// null, if nullable: then it returns nil).
func (d *streamDecoder) stringField(key string, nullable bool) ([]byte, error) {
	switch k := d.dec.PeekKind(); {
	case k == 'n' && nullable:
		_, err := d.token(key)
		return nil, err
	case k != '"':
		if _, err := d.value(key); err != nil {
			return nil, err
		}
		return nil, invalid("%s is not a string", key)
	}
	return d.str(key)
}

// change reads one change record.
func (d *streamDecoder) change() (gameworld.Change, error) {
	var c gameworld.Change
	if d.dec.PeekKind() != '{' {
		if _, err := d.value("change"); err != nil {
			return c, err
		}
		return c, invalid("not an object")
	}
	if _, err := d.token("change"); err != nil {
		return c, err
	}
	var hasType, hasID bool
	for d.dec.PeekKind() != '}' {
		name, err := d.str("change")
		if err != nil {
			return c, err
		}
		switch string(name) { // compared without a copy
		case "type":
			v, err := d.stringField("type", false)
			if err != nil {
				return c, err
			}
			t, ok := gameworld.ParseChangeType(string(v))
			if !ok {
				return c, invalid("unknown change type %q", v)
			}
			c.Type, hasType = t, true
		case "id":
			v, err := d.stringField("id", false)
			if err != nil {
				return c, err
			}
			c.ID, hasID = string(v), true
		case "owner":
			v, err := d.stringField("owner", true)
			if err != nil {
				return c, err
			}
			c.Owner = d.name(v)
		case "epoch":
			v, err := d.value("epoch")
			if err != nil {
				return c, err
			}
			if string(v) == "null" {
				break
			}
			e, perr := strconv.ParseUint(string(v), 10, 64)
			if perr != nil {
				return c, invalid("epoch is not a whole number")
			}
			c.Epoch = e
		case "answer":
			v, err := d.value("answer")
			if err != nil {
				return c, err
			}
			switch string(v) {
			case "true":
				c.Answer = true
			case "false", "null":
			default:
				return c, invalid("answer is not a boolean")
			}
		case "properties":
			switch d.dec.PeekKind() {
			case 'n':
				if _, err := d.token("properties"); err != nil {
					return c, err
				}
			case '{':
				if c.Properties, err = d.properties(); err != nil {
					return c, err
				}
			default:
				if _, err := d.value("properties"); err != nil {
					return c, err
				}
				return c, invalid("properties is not an object")
			}
		case "scopes":
			v, err := d.value("scopes")
			if err != nil {
				return c, err
			}
			if c.Scopes, err = d.lim.decodeScopes(v); err != nil {
				return c, err
			}
		default:
			if err := d.dec.SkipValue(); err != nil {
				return c, d.fail("change", err)
			}
		}
	}
	if _, err := d.token("change"); err != nil {
		return c, err
	}
	if !hasType {
		return c, invalid("no type")
	}
	if c.Type == gameworld.Remove {
		c.Scopes = nil // (a remove takes the scopes along)
	}
	if !hasID {
		return c, invalid("no id")
	}
	if err := d.lim.checkID("id", c.ID); err != nil {
		return c, err
	}
	if c.Owner != "" {
		if err := d.lim.checkID("owner", c.Owner); err != nil {
			return c, err
		}
	}
	return c, nil
}

// properties reads a properties object, keeping each value's raw JSON,
// compacted: it is relayed as it is.
func (d *streamDecoder) properties() (gameworld.Properties, error) {
	if _, err := d.token("properties"); err != nil {
		return gameworld.Properties{}, err
	}
	pb := &d.props
	defer pb.Build() // (resets it, whatever happens)
	for d.dec.PeekKind() != '}' {
		name, err := d.str("properties")
		if err != nil {
			return gameworld.Properties{}, err
		}
		d.key = append(d.key[:0], name...) // the bytes are void after the next read
		// The record's own size limit covers its values: no allow() here.
		v, err := d.dec.ReadValue()
		if err != nil {
			return gameworld.Properties{}, d.fail("property", err)
		}
		if depth(v) > d.lim.MaxDepth {
			return gameworld.Properties{}, invalid("properties nested %d deep (limit %d)", depth(v), d.lim.MaxDepth)
		}
		if k := v.Kind(); k == '{' || k == '[' {
			raw := jsontext.Value(bytes.Clone(v))
			if err := raw.Compact(); err != nil {
				return gameworld.Properties{}, invalid("property %q: %v", d.key, err)
			}
			v = raw
		}
		pb.AddBytes(d.key, v)
	}
	if _, err := d.token("properties"); err != nil {
		return gameworld.Properties{}, err
	}
	return pb.Build(), nil
}

// ReadMessage reads one message from r, the payload of one transport
// message. The records of a worldChange are handed to onChanges in chunks
// as they are decoded (at most a few hundred records or KiB each), the last
// chunk carrying Timestamp and Refreshed, and the returned Message has nil
// Data; a worldChange that fits in one chunk reaches onChanges only once it
// is known to be well formed as a whole. Any other message is returned
// whole, bounded by MaxRecordBytes. wait, if not nil, is called with the
// number of bytes read (at most chunk at a time, if chunk > 0), to pace the
// reading; its error ends the read.
func (l Limits) ReadMessage(r io.Reader, wait func(n int) error, chunk int, onChanges func(WorldChange) error) (Message, error) {
	d := getDecoder(l, r, wait, chunk)
	defer d.release()
	return d.message(onChanges)
}

// DecodeMessage decodes the envelope of one message: a JSON array of the
// message type and, optionally for requests, its data.
func DecodeMessage(b []byte) (Message, error) {
	d := getDecoder(Limits{MaxRecordBytes: len(b) + 1}, bytes.NewReader(b), nil, 0)
	defer d.release()
	return d.message(nil)
}

// DecodeWorldChange decodes and validates the data of a worldChange message
// as a whole. Either every record is valid or an error is returned.
func (l Limits) DecodeWorldChange(data []byte) (WorldChange, error) {
	d := getDecoder(l, bytes.NewReader(data), nil, 0)
	defer d.release()
	var all WorldChange
	collect := func(wc WorldChange) error {
		all.Changes = append(all.Changes, wc.Changes...)
		return nil
	}
	final, err := d.worldChange(collect)
	if err != nil {
		return WorldChange{}, err
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return WorldChange{}, invalid("data after the worldChange")
	}
	all.Changes = append(all.Changes, final.Changes...)
	all.Timestamp, all.Refreshed = final.Timestamp, final.Refreshed
	if all.Changes == nil {
		all.Changes = []gameworld.Change{}
	}
	return all, nil
}
