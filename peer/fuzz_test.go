package peer

import (
	"bytes"
	"encoding/json"
	"github.com/solipsism/mesh/gameworld"
	"slices"
	"testing"
)

func FuzzDecode(f *testing.F) {
	seeds := []string{
		`["worldChange",{"timestamp":1468275353,"changes":[{"type":"add","id":"2345y789-2345y789","owner":"server-2345y789-2345y789","properties":{"position":[1,2,3]}},{"type":"update","id":"2345y789-2345y789","properties":{"position":[1,2,3]}},{"type":"remove","id":"2345y789-2345y789"}]}]`,
		`["requestRefresh"]`,
		`["requestRefresh",null]`,
		`["requestMetadata",null]`,
		`["metadata",{"identifier":"2345y789-2345y789","identifierChain":["2345y789-2345y789"]}]`,
		`["metadataChange",{"identifier":"a","identifierChain":["a","b"],"role":"proxy"}]`,
		`["requestLessData"]`,
		`["requestMoreData"]`,
		`["worldChange",{"changes":[],"refreshed":true}]`,
		`["worldChange",{"changes":[{"type":"add","id":"a","properties":{"a":[[[[{"b":"]]]"}]]]]}}]}]`,
		`["worldChange",{"changes":[{"type":"transfer","id":"a","owner":"b","epoch":3,"properties":{"x":1}},{"type":"transfer","id":"a","owner":null},{"type":"add","id":"c","epoch":18446744073709551615}]}]`,
		`["worldChange",{"changes":[{"type":"transfer","id":"a","epoch":-1}]}]`,
		`["worldChange",{"changes":[{"type":"transfer","id":"a","owner":"b","epoch":2,"answer":true},{"type":"transfer","id":"a","answer":"yes"}]}]`,
		`["metadataChange",{"identifier":"a","features":["ownership"],"resumeTokens":{"a":"t"}}]`,
		`["metadataChange",{"identifier":"a","refused":["bot-AAAAAAAA-BBBBBBBB"]}]`,
		`["metadataChange",{"identifier":"a","refused":[""]}]`,
		`["metadataChange",{"identifier":"a","taken":["client-AAAAAAAA-BBBBBBBB"]}]`,
		`["metadataChange",{"identifier":"a","rooms":["lobby","lobby","b"]}]`,
		`["metadataChange",{"identifier":"a","rooms":[""]}]`,
		`["metadataChange",{"identifier":"a","budget":20000}]`,
		`["message",{"type":"chat","data":{"text":"hello"},"room":"lobby"}]`,
		`["worldChange",{"changes":[{"type":"update","id":"g","scopes":{"blocks":{"ver":2,"base":1,"added":{"1,2,3":{"c":"red"}},"modified":{"0,0,0":{"c":1}},"removed":["4,4,4"]}}}]}]`,
		`["worldChange",{"changes":[{"type":"add","id":"g","properties":{},"scopes":{"blocks":{"ver":7,"full":true,"added":{"a":{}}},"b":null}}]}]`,
		`["worldChange",{"changes":[{"type":"update","id":"g","scopes":{"blocks":{"ver":1,"base":2}}}]}]`,
		`["worldChange",{"changes":[{"type":"remove","id":"g","scopes":{"blocks":{"ver":1}}}]}]`,
		`["scopeChange",{"g":{"blocks":{"ver":2,"modified":{"0,0,0":{"c":"blue"}}}},"h":{"t":{"ver":0,"removed":["a"]}}}]`,
		`["scopeChange",{"g":{"b":{"ver":2}},"g":{"b":{"ver":3}}}]`,
		`["scopeChange",{}]`,
		`[1]`, `{}`, `"`, `[[[[`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	var lim Limits
	small := Limits{MaxRecordBytes: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The streaming path, as links use it, with a small record limit
		// so that the bounds are exercised: it must agree with the whole-
		// message path on which messages are well formed.
		streamed := 0
		sm, serr := small.ReadMessage(bytes.NewReader(b), nil, 7, func(wc WorldChange) error {
			streamed += len(wc.Changes)
			return nil
		})
		m, err := DecodeMessage(b)
		if serr == nil && err != nil {
			t.Fatalf("stream accepted what DecodeMessage refuses (%v): %q", err, b)
		}
		if serr == nil && sm.Type != m.Type {
			t.Fatalf("stream read type %q, DecodeMessage %q", sm.Type, m.Type)
		}
		if err != nil {
			return
		}
		switch m.Type {
		case TypeWorldChange:
			wc, err := lim.DecodeWorldChange(m.Data)
			if err != nil {
				return
			}
			// Whatever decodes must encode to something that decodes the same.
			buf := AppendWorldChangeHeader(nil, wc.Timestamp)
			for i, c := range wc.Changes {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = AppendChange(buf, c)
			}
			buf = AppendWorldChangeTrailer(buf, wc.Refreshed)
			m2, err := DecodeMessage(buf)
			if err != nil {
				t.Fatalf("re-encoded message does not decode: %v\n%s", err, buf)
			}
			wc2, err := lim.DecodeWorldChange(m2.Data)
			if err != nil || len(wc2.Changes) != len(wc.Changes) {
				t.Fatalf("re-encoded changes do not decode: %v\n%s", err, buf)
			}
			for i := range wc.Changes {
				a, b := wc.Changes[i], wc2.Changes[i]
				scopesOnly := a.Type == gameworld.Update && len(a.Scopes) > 0 && a.Properties.Len() == 0
				if a.Type != b.Type || a.ID != b.ID || (a.Owner != b.Owner && !scopesOnly) || a.Properties.Len() != b.Properties.Len() || len(a.Scopes) != len(b.Scopes) {
					t.Fatalf("change %d differs after round trip: %+v vs %+v", i, a, b)
				}
				for name, d := range a.Scopes {
					x, _ := json.Marshal(d)
					y, _ := json.Marshal(b.Scopes[name])
					if string(x) != string(y) {
						t.Fatalf("scope %q differs: %s vs %s", name, x, y)
					}
				}
				for k, v := range a.Properties.All() {
					var x, y any
					json.Unmarshal(v, &x)
					json.Unmarshal(b.Properties.Value(k), &y)
					if xs, _ := json.Marshal(x); string(xs) != func() string { ys, _ := json.Marshal(y); return string(ys) }() {
						t.Fatalf("property %q differs: %s vs %s", k, v, b.Properties.Value(k))
					}
				}
			}
		case TypeMetadata, TypeMetadataChange:
			md, err := lim.DecodeMetadata(m.Data)
			if err != nil {
				return
			}
			if md.Identifier == "" || len(md.IdentifierChain) == 0 || md.IdentifierChain[0] != md.Identifier {
				t.Fatalf("metadata invariant broken: %+v", md)
			}
			m2, err := DecodeMessage(AppendMetadata(nil, m.Type, md))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lim.DecodeMetadata(m2.Data); err != nil {
				t.Fatalf("re-encoded metadata does not decode: %v", err)
			}
		}
	})
}

// FuzzDigest: what the anti-entropy decoders accept encodes to what they
// decode the same.
func FuzzDigest(f *testing.F) {
	for _, s := range []string{
		`{"count":3,"buckets":["00000000000000ff","0123456789abcdef"]}`,
		`{"count":0,"buckets":[]}`,
		`{"of":4,"buckets":[0,3]}`,
		`{"of":4,"buckets":[3,0]}`,
		`{"of":0}`,
		`{"count":-1,"buckets":["x"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := DecodeDigest(b); err == nil {
			m, err := DecodeMessage(AppendDigest(nil, d))
			if err != nil || m.Type != TypeDigest {
				t.Fatalf("re-encoded digest: %v", err)
			}
			d2, err := DecodeDigest(m.Data)
			if err != nil || d2.Count != d.Count || len(d2.Buckets) != len(d.Buckets) {
				t.Fatalf("digest round trip: %+v %+v %v", d, d2, err)
			}
			for i := range d.Buckets {
				if d.Buckets[i] != d2.Buckets[i] {
					t.Fatalf("bucket %d: %x != %x", i, d.Buckets[i], d2.Buckets[i])
				}
			}
		}
		if r, err := DecodeRepair(b); err == nil {
			m, err := DecodeMessage(AppendRepair(nil, TypeRequestRepair, r))
			if err != nil || m.Type != TypeRequestRepair {
				t.Fatalf("re-encoded repair: %v", err)
			}
			r2, err := DecodeRepair(m.Data)
			if err != nil || r2.Of != r.Of || len(r2.Buckets) != len(r.Buckets) {
				t.Fatalf("repair round trip: %+v %+v %v", r, r2, err)
			}
		}
	})
}

func FuzzDeparted(f *testing.F) {
	for _, s := range []string{
		`{"worlds":["client-AAAAAAAA-BBBBBBBB"],"heir":"server-8f3KQ2ab-Lm0c9Xz1"}`,
		`{"worlds":[],"heir":"s"}`,
		`{"worlds":["a","a"],"heir":"s"}`,
		`{"worlds":["a"]}`,
		`{"worlds":["\u00e9t\u00e9"],"heir":"\ud800"}`,
		`{"worlds":"a","heir":1}`,
	} {
		f.Add([]byte(s))
	}
	var lim Limits
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := lim.DecodeDeparted(b)
		if err != nil {
			return
		}
		m, err := DecodeMessage(AppendDeparted(nil, d))
		if err != nil || m.Type != TypeDeparted {
			t.Fatalf("re-encoded departed: %v", err)
		}
		d2, err := lim.DecodeDeparted(m.Data)
		if err != nil || !slices.Equal(d.Worlds, d2.Worlds) || d.Heir != d2.Heir {
			t.Fatalf("departed round trip: %+v %+v %v", d, d2, err)
		}
	})
}

func FuzzAppMessage(f *testing.F) {
	for _, v := range messageVectors {
		m, _ := DecodeMessage([]byte(v.wire))
		f.Add([]byte(m.Data))
	}
	for _, s := range []string{`{"type":"x","room":"a","world":"b"}`, `{"type":"x","at":[1e400,0,0]}`, `{"type":"\ud800"}`, `{"type":"x","data":[[[[]]]]}`} {
		f.Add([]byte(s))
	}
	var lim Limits
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := lim.DecodeAppMessage(b)
		if err != nil {
			return
		}
		env, err := DecodeMessage(AppendAppMessage(nil, m))
		if err != nil || env.Type != TypeMessage {
			t.Fatalf("re-encoded message: %v", err)
		}
		m2, err := lim.DecodeAppMessage(env.Data)
		if err != nil || m2.From != m.From || m2.Type != m.Type || m2.Room != m.Room || m2.World != m.World || m2.At != m.At || m2.HasAt != m.HasAt {
			t.Fatalf("message round trip: %+v %+v %v", m, m2, err)
		}
	})
}
