package peer

import "sync/atomic"

// MessageKind indexes per-type message counters.
type MessageKind int

// Message kinds counted by Stats.
const (
	KindWorldChange MessageKind = iota
	KindRequestRefresh
	KindRequestMetadata
	KindMetadata
	KindRequestLessData
	KindRequestMoreData
	KindDigest // digest, requestRepair, repairing, repaired
	KindDeparted
	KindMessage
	KindUnknown
	NumKinds
)

var kindNames = [NumKinds]string{"worldChange", "requestRefresh", "requestMetadata", "metadata", "requestLessData", "requestMoreData", "digest", "departed", "message", "unknown"}

// String returns the kind's name, as used in metric labels.
func (k MessageKind) String() string { return kindNames[k] }

func kindOf(t string) MessageKind {
	switch t {
	case TypeWorldChange, TypeScopeChange:
		return KindWorldChange
	case TypeRequestRefresh:
		return KindRequestRefresh
	case TypeRequestMetadata:
		return KindRequestMetadata
	case TypeMetadata, TypeMetadataChange:
		return KindMetadata
	case TypeRequestLessData:
		return KindRequestLessData
	case TypeRequestMoreData:
		return KindRequestMoreData
	case TypeDigest, TypeRequestRepair, TypeRepairing, TypeRepaired:
		return KindDigest
	case TypeDeparted:
		return KindDeparted
	case TypeMessage:
		return KindMessage
	}
	return KindUnknown
}

// kindOfMessage returns the kind of an encoded message, from its type.
func kindOfMessage(msg []byte) MessageKind {
	if len(msg) < 2 || msg[0] != '[' || msg[1] != '"' {
		return KindUnknown
	}
	for i := 2; i < len(msg); i++ {
		if msg[i] == '"' {
			return kindOf(string(msg[2:i]))
		}
	}
	return KindUnknown
}

// Stats are a link's counters. They are updated atomically and may be read
// at any time.
type Stats struct {
	MessagesIn  [NumKinds]atomic.Uint64
	MessagesOut [NumKinds]atomic.Uint64
	RecordsIn   atomic.Uint64
	RecordsOut  atomic.Uint64
	BytesIn     atomic.Uint64
	BytesOut    atomic.Uint64
	// Refused counts change records refused by ownership rules.
	Refused atomic.Uint64
	// Ignored counts change records that changed nothing (unknown ids).
	Ignored atomic.Uint64
	// MessagesDropped counts ephemeral messages not sent to the peer
	// because too many waited for it (SendAppMessage).
	MessagesDropped atomic.Uint64
}
