package recorder

import "slices"

// API names the wire API of a recorded call (see [Call.API]).
//
// Decoding a record accepts any value: a record written by a newer proxy
// may name an API this build does not know, and it must still read. Code
// that acts on a record checks [API.Valid] or switches with a default
// case. No flag or query takes an API today; one that does should reject
// a value that is not Valid, naming the valid ones.
type API string

// EndReason says how the response of a recorded call ended (see
// [Call.EndReason]). Decoding accepts unknown values, as for [API].
type EndReason string

// LineageKind classifies how a call relates to an earlier call of its
// episode (see [Lineage.Kind]). Decoding accepts unknown values, as for
// [API]; the zero value means "not classified".
type LineageKind string

// apis, endReasons and lineageKinds are the known values, in the order of
// their constants.
var (
	apis = []API{APIChatCompletions, APICompletions, APIResponses, APIMessages,
		APICountTokens, APIEmbeddings, APIModels}
	endReasons = []EndReason{EndDone, EndEOF, EndClientGone, EndUpstreamError,
		EndIdleTimeout}
	lineageKinds = []LineageKind{LineageRoot, LineageExtend, LineageRetokenized,
		LineageTemplateRewrite, LineageEdited, LineageCompacted, LineageFork, LineageRetry}
)

// Valid reports whether a is one of the APIs this build records.
func (a API) Valid() bool { return slices.Contains(apis, a) }

// Valid reports whether r is one of the end reasons this build records.
func (r EndReason) Valid() bool { return slices.Contains(endReasons, r) }

// Valid reports whether k is one of the lineage kinds this build records.
func (k LineageKind) Valid() bool { return slices.Contains(lineageKinds, k) }

// LineageKinds returns the lineage kinds this build records, in the order
// of their constants.
func LineageKinds() []LineageKind { return slices.Clone(lineageKinds) }
