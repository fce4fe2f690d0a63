package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/solipsism/mesh/gameworld"
	"github.com/solipsism/mesh/scope"
)

// FileName is the name of the store's file in a data directory.
const FileName = "world.db"

// format marks a file as this store's, of this layout.
const format = "solipsism-store 1"

// Buckets and keys of the file.
var (
	bucketMeta    = []byte("meta")
	bucketObjects = []byte("objects")
	bucketValues  = []byte("values")
	keyFormat     = []byte("format")
	keyIdentifier = []byte("identifier")
	keySecret     = []byte("resume-secret")
)

// Bolt is a Store in a bbolt file.
type Bolt struct {
	db   *bolt.DB
	path string
}

// ErrCorrupt is wrapped by the errors of a data file that is not a
// readable store of this format.
var ErrCorrupt = errors.New("not a readable solipsism store")

// recover says what to do with a file that cannot be used.
func recoverHint(path string) string {
	return fmt.Sprintf("move %s away (the node then starts with an empty world), or restore a backup with 'solipsism-node import --data-dir %s'", path, filepath.Dir(path))
}

// OpenBolt opens (creating if need be) the store in dir. A file another
// process holds, a corrupt file or a file of another kind is refused with
// an error that names it and says how to recover; nothing is changed.
func OpenBolt(dir string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: creating the data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// bbolt makes a new database of an empty file: a file truncated to
	// nothing would quietly become a new node with an empty world.
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		return nil, fmt.Errorf("store: %s is empty (0 bytes), so %w; %s", path, ErrCorrupt, recoverHint(path))
	}
	db, err := openFile(path)
	if err != nil {
		return nil, err
	}
	s := &Bolt{db: db, path: path}
	if err := s.check(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func openFile(path string) (db *bolt.DB, err error) {
	defer func() {
		// bbolt panics on some damaged files rather than failing.
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("store: %s is %w (%v); %s", path, ErrCorrupt, r, recoverHint(path))
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("store: %s is in use by another process (is another node running on this data directory? give each node its own --data-dir)", path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, fmt.Errorf("store: %s is %w (%v); %s", path, ErrCorrupt, err, recoverHint(path))
	case err != nil:
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	return db, nil
}

// check makes a new file this store's, and refuses one of another kind
// or layout, or one whose pages are damaged.
func (s *Bolt) check() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: %s is %w (%v); %s", s.path, ErrCorrupt, r, recoverHint(s.path))
		}
	}()
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("store: %s is a bbolt file of another program, %w; %s", s.path, ErrCorrupt, recoverHint(s.path))
			}
			var err error
			if meta, err = tx.CreateBucket(bucketMeta); err != nil {
				return err
			}
			if err := meta.Put(keyFormat, []byte(format)); err != nil {
				return err
			}
		}
		if got := string(meta.Get(keyFormat)); got != format {
			return fmt.Errorf("store: %s holds %q, not %q: %w; %s", s.path, got, format, ErrCorrupt, recoverHint(s.path))
		}
		for _, b := range [][]byte{bucketObjects, bucketValues} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		// Every object must decode: a damaged record refuses the file
		// rather than starting with part of a world.
		return tx.Bucket(bucketObjects).ForEach(func(k, v []byte) error {
			if _, err := decodeObject(k, v); err != nil {
				return fmt.Errorf("store: %s: %w: %v; %s", s.path, ErrCorrupt, err, recoverHint(s.path))
			}
			return nil
		})
	})
}

// Path returns the store's file.
func (s *Bolt) Path() string { return s.path }

// Load implements Store.
func (s *Bolt) Load() (State, error) {
	var st State
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		st.Identifier = string(meta.Get(keyIdentifier))
		if v := meta.Get(keySecret); v != nil {
			st.ResumeSecret = append([]byte(nil), v...)
		}
		objs := tx.Bucket(bucketObjects)
		st.Objects = make([]Object, 0, objs.Stats().KeyN)
		if err := objs.ForEach(func(k, v []byte) error {
			o, err := decodeObject(k, v)
			if err != nil {
				return fmt.Errorf("store: %s: %w: %v; %s", s.path, ErrCorrupt, err, recoverHint(s.path))
			}
			st.Objects = append(st.Objects, o)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketValues).ForEach(func(k, v []byte) error {
			if st.Meta == nil {
				st.Meta = map[string][]byte{}
			}
			st.Meta[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	return st, err
}

// Save implements Store: one transaction, one fsync.
func (s *Bolt) Save(b Batch) error {
	if b.Empty() {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if b.Identifier != "" {
			if err := meta.Put(keyIdentifier, []byte(b.Identifier)); err != nil {
				return err
			}
		}
		if b.ResumeSecret != nil {
			if err := meta.Put(keySecret, b.ResumeSecret); err != nil {
				return err
			}
		}
		objs := tx.Bucket(bucketObjects)
		for _, o := range b.Put {
			v, err := encodeObject(o)
			if err != nil {
				return err
			}
			if err := objs.Put([]byte(o.ID), v); err != nil {
				return err
			}
		}
		for _, id := range b.Delete {
			if err := objs.Delete([]byte(id)); err != nil {
				return err
			}
		}
		vals := tx.Bucket(bucketValues)
		for k, v := range b.Meta {
			if err := vals.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: writing %s: %w", s.path, err)
	}
	return nil
}

// Close implements Store.
func (s *Bolt) Close() error { return s.db.Close() }

// record is an object as the file holds it, under its id.
type record struct {
	Owner      string                 `json:"owner"`
	Epoch      uint64                 `json:"epoch,omitempty"`
	Properties gameworld.Properties   `json:"properties"`
	Scopes     map[string]scope.Delta `json:"scopes,omitempty"`
}

func encodeObject(o Object) ([]byte, error) {
	return json.Marshal(record{Owner: o.Owner, Epoch: o.Epoch, Properties: o.Properties, Scopes: o.Scopes})
}

func decodeObject(id, v []byte) (Object, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return Object{}, fmt.Errorf("object %q: %w", id, err)
	}
	if len(id) == 0 || r.Owner == "" {
		return Object{}, fmt.Errorf("object %q: no id or owner", id)
	}
	return Object{ID: string(id), Owner: r.Owner, Epoch: r.Epoch, Properties: r.Properties, Scopes: r.Scopes}, nil
}
