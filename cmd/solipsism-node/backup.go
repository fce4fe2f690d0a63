package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/solipsism/mesh/schema"
	"github.com/solipsism/mesh/store"
)

// runBackup serves the export and import commands: a node's store as the
// JSON backup of docs/operations.md, on standard output or from standard
// input (or --file). The node must not be running on the directory.
func runBackup(cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("solipsism-node "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "solipsism-data", "the node's data directory")
	file := fs.String("file", "", "the backup file (default: standard output for export, standard input for import)")
	replace := fs.Bool("replace", false, "import: replace what the store holds (default: refuse a store that holds objects)")
	schemas := fs.String("schemas", "", "import: refuse a backup with an object that breaks these property schemas (the node's --schemas)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: solipsism-node %s [--data-dir D] [--file F]", cmd)
		if cmd == "import" {
			fmt.Fprint(stderr, " [--replace] [--schemas F]")
		}
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", cmd, fs.Arg(0))
	}
	s, err := store.OpenBolt(*dir)
	if err != nil {
		return err
	}
	defer s.Close()
	if cmd == "export" {
		st, err := s.Load()
		if err != nil {
			return err
		}
		out := stdout
		if *file != "" {
			f, err := os.Create(*file)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			defer f.Close()
			out = f
		}
		if err := store.Export(out, st); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "exported %d objects of %s\n", len(st.Objects), s.Path())
		return nil
	}
	in := stdin
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		in = f
	}
	backup, err := store.Import(in)
	if err != nil {
		return fmt.Errorf("import: %w (nothing was changed)", err)
	}
	if *schemas != "" {
		set, err := schema.Load(*schemas)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		var bad []string
		for _, o := range backup.Objects {
			if err := set.CheckProperties(o.Properties); err != nil {
				bad = append(bad, fmt.Sprintf("object %s: %v", o.ID, err))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("import: %d objects break the property schemas (nothing was changed): %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
		}
	}
	cur, err := s.Load()
	if err != nil {
		return err
	}
	if len(cur.Objects) > 0 && !*replace {
		return errors.New("import: " + s.Path() + " holds " + strconv.Itoa(len(cur.Objects)) + " objects; add --replace to replace them (nothing was changed)")
	}
	b := store.Batch{Identifier: backup.Identifier, Put: backup.Objects, Meta: backup.Meta}
	keep := make(map[string]bool, len(backup.Objects))
	for _, o := range backup.Objects {
		keep[o.ID] = true
	}
	for _, o := range cur.Objects {
		if !keep[o.ID] {
			b.Delete = append(b.Delete, o.ID)
		}
	}
	if err := s.Save(b); err != nil {
		return fmt.Errorf("import: %w (nothing was changed)", err)
	}
	fmt.Fprintf(stderr, "imported %d objects into %s\n", len(backup.Objects), s.Path())
	return nil
}
