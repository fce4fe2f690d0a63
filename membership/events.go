package membership

// Events is told of other members coming and going. See the package doc
// for its concurrency contract.
type Events interface {
	// MemberUp tells of a member that joined, or whose identifier or URL
	// changed (it replaces what was told before).
	MemberUp(Member)
	// MemberDown tells of a member gone: left on purpose if m.Leaving,
	// failed otherwise.
	MemberDown(m Member)
}
