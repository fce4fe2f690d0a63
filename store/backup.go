package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/solipsism/mesh/gameworld"
)

// Backup format: one JSON document (docs/operations.md).
const (
	BackupFormat  = "solipsism-world"
	BackupVersion = 1
)

// backup is the JSON document of a backup.
type backup struct {
	Format     string            `json:"format"`
	Version    int               `json:"version"`
	Identifier string            `json:"identifier,omitempty"`
	Values     map[string]string `json:"values,omitempty"`
	Objects    []Object          `json:"objects,omitempty"`
}

// Export writes st as a backup: the node's identifier, its durable
// objects (sorted by id) and its named values. The resume secret is left
// out: a backup is not a credential.
func Export(w io.Writer, st State) error {
	b := backup{Format: BackupFormat, Version: BackupVersion, Identifier: st.Identifier, Objects: slices.Clone(st.Objects)}
	if b.Objects == nil {
		b.Objects = []Object{}
	}
	slices.SortFunc(b.Objects, func(x, y Object) int { return strings.Compare(x.ID, y.ID) })
	for k, v := range st.Meta {
		if b.Values == nil {
			b.Values = map[string]string{}
		}
		b.Values[k] = string(v)
	}
	// One object a line: readable, and property values stay as compact
	// as the node holds them (an indenting encoder would re-indent them).
	objs := b.Objects
	b.Objects = nil
	head, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("store: writing the backup: %w", err)
	}
	bw := bufio.NewWriter(w)
	bw.Write(head[:len(head)-1]) // without its closing brace
	bw.WriteString(`,"objects":[`)
	for i, o := range objs {
		line, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("store: writing the backup: object %q: %w", o.ID, err)
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n ")
		bw.Write(line)
	}
	bw.WriteString("\n]}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store: writing the backup: %w", err)
	}
	return nil
}

// ErrBadBackup is wrapped by the errors of a backup that cannot be
// imported.
var ErrBadBackup = errors.New("not a usable backup")

// MaxBackupBytes bounds what Import reads.
const MaxBackupBytes = 4 << 30

// Import reads a backup written by Export. Anything malformed refuses the
// whole backup: an import is all or nothing.
func Import(r io.Reader) (State, error) {
	// encoding/json would turn invalid UTF-8 into U+FFFD: a backup that is
	// not text is refused, not imported changed.
	raw, err := io.ReadAll(io.LimitReader(r, MaxBackupBytes))
	if err != nil {
		return State{}, fmt.Errorf("store: reading the backup: %w", err)
	}
	if !utf8.Valid(raw) {
		i := 0
		for i < len(raw) {
			c, size := utf8.DecodeRune(raw[i:])
			if c == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		return State{}, fmt.Errorf("store: %w: invalid UTF-8 at byte %d", ErrBadBackup, i)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var b backup
	if err := dec.Decode(&b); err != nil {
		return State{}, fmt.Errorf("store: %w: %v", ErrBadBackup, err)
	}
	if dec.More() {
		return State{}, fmt.Errorf("store: %w: more than one JSON document", ErrBadBackup)
	}
	switch {
	case b.Format != BackupFormat:
		return State{}, fmt.Errorf("store: %w: format is %q, want %q", ErrBadBackup, b.Format, BackupFormat)
	case b.Version != BackupVersion:
		return State{}, fmt.Errorf("store: %w: version %d, this node reads version %d", ErrBadBackup, b.Version, BackupVersion)
	}
	if b.Identifier != "" && !gameworld.IsIdentifier(b.Identifier) {
		// The node takes it as its own: the form nodes make.
		return State{}, fmt.Errorf("store: %w: identifier %q is not of the form prefix-XXXXXXXX-XXXXXXXX", ErrBadBackup, b.Identifier)
	}
	seen := make(map[string]bool, len(b.Objects))
	for i, o := range b.Objects {
		switch {
		case o.ID == "" || len(o.ID) > 256:
			return State{}, fmt.Errorf("store: %w: object %d has no id, or one over 256 bytes", ErrBadBackup, i)
		case seen[o.ID]:
			return State{}, fmt.Errorf("store: %w: object %q appears twice", ErrBadBackup, o.ID)
		case o.Owner == "":
			return State{}, fmt.Errorf("store: %w: object %q has no owner", ErrBadBackup, o.ID)
		case len(o.Owner) > 256:
			// The bound every peer's identifier has on the wire.
			return State{}, fmt.Errorf("store: %w: object %q has an owner over 256 bytes", ErrBadBackup, o.ID)
		}
		seen[o.ID] = true
		var props gameworld.PropertiesBuilder
		var c bytes.Buffer
		for k, v := range o.Properties.All() {
			// Relayed as they are, so compact, as the node makes them.
			c.Reset()
			if err := json.Compact(&c, v); err != nil {
				return State{}, fmt.Errorf("store: %w: object %q, property %q: %v", ErrBadBackup, o.ID, k, err)
			}
			props.Add(k, c.Bytes())
		}
		b.Objects[i].Properties = props.Build()
		for name, d := range o.Scopes {
			// (Decoded and checked by scope.Delta's UnmarshalJSON.)
			if !d.Full || name == "" {
				return State{}, fmt.Errorf("store: %w: object %q, scope %q: not a snapshot", ErrBadBackup, o.ID, name)
			}
		}
	}
	st := State{Identifier: b.Identifier, Objects: b.Objects}
	for k, v := range b.Values {
		if st.Meta == nil {
			st.Meta = map[string][]byte{}
		}
		st.Meta[k] = []byte(v)
	}
	return st, nil
}
