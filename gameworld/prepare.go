package gameworld

// Preparing an update ahead of Apply. Working out what an update changes
// (which values differ, the merged set, its hash and size) reads only the
// object and the change, so a caller whose own lock is held around Apply
// (a relay node's, for every incoming message) may do it before taking
// that lock, while other changes apply: Apply then finds it done, as long
// as the object is still at the version it was worked out against. The
// object's version grows with every change to its properties or owner, so
// what was prepared is either exactly what Apply would work out or is
// worked out again.

// prepared is an update of o worked out at o's version.
type prepared struct {
	o       *Object
	version uint64
	// delta holds the values that differ (empty: none does); merged is
	// o's properties with them; hash is merged's hash and grown how many
	// bytes merged has beyond o's properties.
	delta, merged Properties
	hash          uint64
	grown         int64
}

// Prepare works out c's change to the properties of the object it
// updates, ahead of Apply: c must be an Update, or an Add of an id that
// exists with the same owner (an update too), of no scopes. check, if not
// nil, is called first with c and the object as it is, which it must only
// read; if it refuses, nothing is prepared. Prepare reports whether it
// prepared c. It is safe to call alongside every other method; the world
// does not change.
func (w *World) Prepare(c *Change, check func(c Change, existing *Object) error) bool {
	if len(c.Scopes) > 0 || (c.Type != Update && c.Type != Add) {
		return false
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	o := w.objs[c.ID]
	if o == nil || (c.Type == Add && c.Owner != o.Owner) {
		return false
	}
	if check != nil && check(*c, o) != nil {
		return false
	}
	c.prep = diff(o, c.Properties)
	return true
}

// PreparedFor reports whether c was prepared (Prepare) against o as it is
// now, so that what Prepare's check decided still holds.
func (c *Change) PreparedFor(o *Object) bool {
	return c.prep != nil && o != nil && c.prep.o == o && c.prep.version == o.Version
}

// diff works out what props change of o.
func diff(o *Object, props Properties) *prepared {
	d := &prepared{o: o, version: o.Version, delta: props, hash: o.props}
	same := 0
	for k, v := range props.All() {
		if old, ok := o.Properties.Get(k); ok && string(old) == string(v) {
			same++
		}
	}
	if same > 0 {
		var b PropertiesBuilder
		for k, v := range props.All() {
			if old, ok := o.Properties.Get(k); !ok || string(old) != string(v) {
				b.Add(k, v)
			}
		}
		d.delta = Properties{}
		if b.Len() > 0 {
			d.delta = b.Build()
		}
	}
	if d.delta.Empty() {
		return d
	}
	for k, v := range d.delta.All() {
		if old, ok := o.Properties.Get(k); ok {
			d.grown -= int64(len(k) + len(old))
			d.hash -= PropertyHash(k, old)
		}
		d.grown += int64(len(k) + len(v))
		d.hash += PropertyHash(k, v)
	}
	d.merged = o.Properties.Merge(d.delta)
	return d
}
