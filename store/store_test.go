package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/solipsism/mesh/gameworld"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/solipsism/mesh/scope"
)

func obj(id, owner string, epoch uint64, props string) Object {
	var p map[string]json.RawMessage
	if err := json.Unmarshal([]byte(props), &p); err != nil {
		panic(err)
	}
	return Object{ID: id, Owner: owner, Epoch: epoch, Properties: gameworld.PropertiesOf(p)}
}

func sortedIDs(st State) []string {
	var ids []string
	for _, o := range st.Objects {
		ids = append(ids, o.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestStores: both stores keep what batches put, delete and set, across a
// reopen for the file.
func TestStores(t *testing.T) {
	dir := t.TempDir()
	stores := map[string]func() Store{
		"memory": func() Store { return &Memory{} },
		"bolt": func() Store {
			s, err := OpenBolt(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open()
			st, err := s.Load()
			if err != nil || st.Identifier != "" || len(st.Objects) != 0 {
				t.Fatalf("a new store: %+v, %v", st, err)
			}
			must := func(b Batch) {
				t.Helper()
				if err := s.Save(b); err != nil {
					t.Fatal(err)
				}
			}
			must(Batch{Identifier: "server-AAAAAAAA-AAAAAAAA", ResumeSecret: []byte("secret"), Put: []Object{
				obj("a", "server-AAAAAAAA-AAAAAAAA", 1, `{"x":1}`), obj("b", "client-B", 0, `{"persistent":true}`), obj("c", "o", 2, `{}`)}})
			must(Batch{Delete: []string{"c"}, Put: []Object{obj("a", "server-AAAAAAAA-AAAAAAAA", 2, `{"x":2}`)}, Meta: map[string][]byte{"rev": []byte("7")}})
			must(Batch{})
			if name == "bolt" {
				s.Close()
				s = open()
			}
			defer s.Close()
			st, err = s.Load()
			if err != nil {
				t.Fatal(err)
			}
			if st.Identifier != "server-AAAAAAAA-AAAAAAAA" || string(st.ResumeSecret) != "secret" || string(st.Meta["rev"]) != "7" {
				t.Fatalf("loaded %+v", st)
			}
			if ids := sortedIDs(st); !slices.Equal(ids, []string{"a", "b"}) {
				t.Fatalf("objects %v", ids)
			}
			for _, o := range st.Objects {
				if o.ID == "a" && (o.Epoch != 2 || string(o.Properties.Value("x")) != "2") {
					t.Fatalf("a is %+v", o)
				}
			}
		})
	}
}

// TestBoltRefuses: a file that is not a store, is damaged, or is held by
// another process is refused with a message naming it and saying what to
// do; the file is left as it was.
func TestBoltRefuses(t *testing.T) {
	t.Run("held by another process", func(t *testing.T) {
		dir := t.TempDir()
		s, err := OpenBolt(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// A second process: bbolt's lock is per open file description,
		// so a second open in this process is refused the same way.
		if _, err := OpenBolt(dir); err == nil || !strings.Contains(err.Error(), "in use by another process") {
			t.Fatalf("second open: %v", err)
		}
	})
	damaged := map[string]func(path string) error{
		"text":  func(path string) error { return os.WriteFile(path, []byte(strings.Repeat("hello\n", 2000)), 0o600) },
		"empty": func(path string) error { return os.WriteFile(path, nil, 0o600) },
		"truncated store": func(path string) error {
			s, err := OpenBolt(filepath.Dir(path))
			if err != nil {
				return err
			}
			s.Save(Batch{Put: []Object{obj("a", "o", 0, `{"x":1}`)}})
			s.Close()
			return os.Truncate(path, 1000)
		},
		"object not JSON": func(path string) error {
			s, err := OpenBolt(filepath.Dir(path))
			if err != nil {
				return err
			}
			defer s.Close()
			return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketObjects).Put([]byte("a"), []byte("{")) })
		},
	}
	for name, damage := range damaged {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := damage(path); err != nil {
				t.Fatal(err)
			}
			was, _ := os.ReadFile(path)
			_, err := OpenBolt(dir)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move "+path+" away") {
				t.Fatalf("err = %v", err)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, was) {
				t.Fatal("the file was changed")
			}
		})
	}
}

// TestBackupRoundTrip: Export then Import gives the same state, less the
// resume secret; malformed backups are refused.
func TestBackupRoundTrip(t *testing.T) {
	st := State{Identifier: "server-AAAAAAAA-AAAAAAAA", ResumeSecret: []byte("s"), Meta: map[string][]byte{"k": []byte("v")},
		Objects: []Object{obj("b", "o", 3, `{"y":[1,2]}`), obj("a", "o", 0, `{"x":"é"}`)}}
	st.Objects[1].Scopes = map[string]scope.Delta{"blocks": {Ver: 4, Full: true, Added: map[string]scope.Fields{"1,2,3": {"c": json.RawMessage(`"red"`)}}}}
	var buf bytes.Buffer
	if err := Export(&buf, st); err != nil {
		t.Fatal(err)
	}
	got, err := Import(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Identifier != st.Identifier || got.ResumeSecret != nil || string(got.Meta["k"]) != "v" || !slices.Equal(sortedIDs(got), []string{"a", "b"}) {
		t.Fatalf("round trip: %+v", got)
	}
	if string(got.Objects[1].Properties.Value("y")) != "[1,2]" || got.Objects[1].Epoch != 3 {
		t.Fatalf("object b: %+v", got.Objects[1])
	}
	if d := got.Objects[0].Scopes["blocks"]; !d.Full || d.Ver != 4 || string(d.Added["1,2,3"]["c"]) != `"red"` {
		t.Fatalf("object a's scope: %+v", d)
	}
	bad := map[string]string{
		"not JSON":                 `{`,
		"other format":             `{"format":"x","version":1,"objects":[]}`,
		"newer version":            `{"format":"solipsism-world","version":2,"objects":[]}`,
		"unknown field":            `{"format":"solipsism-world","version":1,"objects":[],"extra":1}`,
		"no id":                    `{"format":"solipsism-world","version":1,"objects":[{"owner":"o"}]}`,
		"no owner":                 `{"format":"solipsism-world","version":1,"objects":[{"id":"a"}]}`,
		"twice":                    `{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":"o"},{"id":"a","owner":"o"}]}`,
		"properties list":          `{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":"o","properties":[]}]}`,
		"two documents":            `{"format":"solipsism-world","version":1,"objects":[]} {}`,
		"identifier not a node's":  `{"format":"solipsism-world","version":1,"identifier":"server-X-Y/../x","objects":[]}`,
		"long owner":               `{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":"` + strings.Repeat("o", 257) + `"}]}`,
		"invalid UTF-8":            "{\"format\":\"solipsism-world\",\"version\":1,\"objects\":[{\"id\":\"a\xff\",\"owner\":\"o\"}]}",
		"a scope not a snapshot":   `{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":"o","properties":{},"scopes":{"b":{"ver":2,"removed":["x"]}}}]}`,
		"a scope not a delta":      `{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":"o","properties":{},"scopes":{"b":[]}}]}`,
		"invalid UTF-8 in a value": "{\"format\":\"solipsism-world\",\"version\":1,\"objects\":[{\"id\":\"a\",\"owner\":\"o\",\"properties\":{\"x\":\"\xc3\"}}]}",
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := Import(strings.NewReader(in)); !errors.Is(err, ErrBadBackup) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func FuzzImport(f *testing.F) {
	f.Add([]byte(`{"format":"solipsism-world","version":1,"identifier":"server-AAAAAAAA-BBBBBBBB","objects":[{"id":"a","owner":"o","epoch":2,"properties":{"x":1}}],"values":{"k":"v"}}`))
	f.Add([]byte(`{"format":"solipsism-world","version":1,"objects":null}`))
	f.Add([]byte(`{"format":"solipsism-world","version":1,"objects":[{"id":"a","owner":"o","properties":{},"scopes":{"b":{"ver":3,"full":true,"added":{"x":{"c":1}}}}}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Import(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What imports exports and imports again alike.
		var buf bytes.Buffer
		if err := Export(&buf, st); err != nil {
			t.Fatal(err)
		}
		again, err := Import(&buf)
		if err != nil || !slices.Equal(sortedIDs(again), sortedIDs(st)) {
			t.Fatalf("re-import: %v", err)
		}
	})
}

func FuzzDecodeObject(f *testing.F) {
	f.Add([]byte("a"), []byte(`{"owner":"o","epoch":1,"properties":{"x":1}}`))
	f.Add([]byte(""), []byte(`{"owner":""}`))
	f.Fuzz(func(t *testing.T, id, v []byte) {
		o, err := decodeObject(id, v)
		if err != nil {
			return
		}
		enc, err := encodeObject(o)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := decodeObject(id, enc); err != nil || back.Owner != o.Owner || back.Epoch != o.Epoch {
			t.Fatalf("round trip: %+v %v", back, err)
		}
	})
}

// TestWriterFullDisk: a store on a disk that fills up. The writer's
// writes fail (counted, and logged once), Queue never blocks, nothing
// queued is lost, and once space is freed the retry writes it all. The
// disk is a real tmpfs of 512 KiB; the test needs to mount one.
func TestWriterFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s); the full-disk test needs root", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	filler := filepath.Join(dir, "filler")
	s, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var failures atomic.Int64
	done := make(chan struct{}, 1000)
	w := NewWriter(s, WriterOptions{Retry: 20 * time.Millisecond, Written: func(puts, deletes int, err error) {
		if err != nil {
			failures.Add(1)
		}
		select {
		case done <- struct{}{}:
		default:
		}
	}})
	// Fill the disk, then queue more than fits.
	os.WriteFile(filler, make([]byte, 440<<10), 0o600)
	blob := `{"blob":"` + strings.Repeat("x", 1000) + `"}`
	start := time.Now()
	for i := range 100 {
		w.Queue(Batch{Put: []Object{obj(strings.Repeat("k", 10)+string(rune('A'+i%26))+string(rune('a'+i/26)), "o", 0, blob)}})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("queueing took %s: it must not wait for the disk", d)
	}
	deadline := time.After(10 * time.Second)
	for failures.Load() == 0 {
		select {
		case <-done:
		case <-deadline:
			t.Fatal("no write failed on a full disk")
		}
	}
	if w.Pending() == 0 {
		t.Fatal("nothing pending after a failed write")
	}
	os.Remove(filler)
	for end := time.Now().Add(10 * time.Second); w.Pending() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d changes still pending after space was freed", w.Pending())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if err != nil || len(st.Objects) != 100 {
		t.Fatalf("%d objects on disk, %v", len(st.Objects), err)
	}
}
