package alloverse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Frames a client sends, each one JSON document:
//
//	{"cmd":"intent","intent":{"ack_state_rev":N, ...}}
//	["interaction","request",FROM,"place",REQUEST_ID,BODY]
//
// and the bridge answers requests with
//
//	["interaction","response","place",FROM,REQUEST_ID,BODY]

// ErrBadFrame is wrapped by every error DecodeFrame returns.
var ErrBadFrame = errors.New("alloverse: bad frame")

// Frame is one decoded client frame: an intent or an interaction.
type Frame struct {
	// Intent is set for an intent frame; AckOK tells whether it carried a
	// usable acknowledgement (an integer revision from 0 to MaxRevision).
	Intent bool
	Ack    uint64
	AckOK  bool
	// Interaction is set for an interaction frame.
	Interaction *Interaction
}

// Interaction is an interaction request or response.
type Interaction struct {
	Type      string // "request", "response", "oneway"...
	From, To  string
	RequestID string
	Body      []json.RawMessage
}

// DecodeFrame decodes a client frame. Frames that are valid JSON but of
// no kind the bridge serves decode to a zero Frame, to be ignored.
func DecodeFrame(b []byte) (Frame, error) {
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return Frame{}, fmt.Errorf("%w: not JSON", ErrBadFrame)
	}
	switch b[0] {
	case '{':
		var m struct {
			Cmd    string `json:"cmd"`
			Intent *struct {
				Ack json.RawMessage `json:"ack_state_rev"`
			} `json:"intent"`
		}
		if json.Unmarshal(b, &m) != nil || m.Cmd != "intent" || m.Intent == nil {
			return Frame{}, nil
		}
		f := Frame{Intent: true}
		f.Ack, f.AckOK = parseRevision(m.Intent.Ack)
		return f, nil
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(b, &parts); err != nil || len(parts) == 0 {
			return Frame{}, nil
		}
		var kind string
		if json.Unmarshal(parts[0], &kind) != nil || kind != "interaction" {
			return Frame{}, nil
		}
		in, err := decodeInteraction(parts[1:])
		if err != nil {
			return Frame{}, err
		}
		return Frame{Interaction: in}, nil
	}
	return Frame{}, nil
}

// decodeInteraction decodes [TYPE, FROM, TO, REQUEST_ID, BODY].
func decodeInteraction(parts []json.RawMessage) (*Interaction, error) {
	if len(parts) != 5 {
		return nil, fmt.Errorf("%w: an interaction has 6 elements, not %d", ErrBadFrame, len(parts)+1)
	}
	var in Interaction
	for i, dst := range []*string{&in.Type, &in.From, &in.To, &in.RequestID} {
		if err := json.Unmarshal(parts[i], dst); err != nil {
			return nil, fmt.Errorf("%w: interaction element %d is not a string", ErrBadFrame, i+1)
		}
	}
	if err := json.Unmarshal(parts[4], &in.Body); err != nil || len(in.Body) == 0 {
		return nil, fmt.Errorf("%w: an interaction body is a non-empty list", ErrBadFrame)
	}
	return &in, nil
}

// parseRevision accepts an integer JSON number from 0 to MaxRevision
// (1234 or 1.234e3, never 1.5, -1, "7" or 1e400).
func parseRevision(raw json.RawMessage) (uint64, bool) {
	if len(raw) == 0 || raw[0] == '"' || raw[0] == '-' {
		return 0, false
	}
	if n, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
		return n, n <= MaxRevision
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < 0 || f > float64(MaxRevision) || f != float64(uint64(f)) {
		return 0, false
	}
	return uint64(f), true
}

// encodeIntent encodes an intent acknowledging rev.
func encodeIntent(rev uint64) []byte {
	b := []byte(`{"cmd":"intent","intent":{"ack_state_rev":`)
	b = strconv.AppendUint(b, rev, 10)
	return append(b, "}}"...)
}

// encodeInteraction encodes an interaction frame.
func encodeInteraction(typ, from, to, requestID string, body any) ([]byte, error) {
	return json.Marshal([]any{"interaction", typ, from, to, requestID, body})
}
