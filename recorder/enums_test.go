package recorder

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestValidCoversConstants: every constant is valid, and the lists behind
// Valid and Parse hold nothing else.
func TestValidCoversConstants(t *testing.T) {
	t.Parallel()
	for _, a := range []API{APIChatCompletions, APICompletions, APIResponses, APIMessages, APICountTokens, APIEmbeddings, APIModels} {
		if !a.Valid() {
			t.Errorf("%q.Valid() = false, want true", a)
		}
	}
	for _, r := range []EndReason{EndDone, EndEOF, EndClientGone, EndUpstreamError, EndIdleTimeout} {
		if !r.Valid() {
			t.Errorf("%q.Valid() = false, want true", r)
		}
	}
	if got := LineageKinds(); len(got) != 8 || got[0] != LineageRoot || got[7] != LineageRetry {
		t.Errorf("LineageKinds() = %v, want the 8 kinds from root to retry", got)
	}
	for _, k := range LineageKinds() {
		if !k.Valid() {
			t.Errorf("%q.Valid() = false, want true", k)
		}
	}
	if len(apis) != 7 || len(endReasons) != 5 {
		t.Errorf("%d apis, %d end reasons; want 7, 5", len(apis), len(endReasons))
	}
	if API("").Valid() || EndReason("DONE").Valid() || LineageKind("").Valid() {
		t.Error("an unknown value is valid")
	}
}

// TestDecodeKeepsUnknownEnums: a record naming an API, end reason or
// lineage kind this build does not know still reads, with the value kept,
// so that records from a newer proxy stay readable.
func TestDecodeKeepsUnknownEnums(t *testing.T) {
	t.Parallel()
	c := &Call{Schema: CallSchema, EpisodeID: "e", CallID: "c1", API: "images", EndReason: "shed",
		Lineage: &Lineage{Kind: "merge"}}
	var s storedEpisode
	s.write(t, NewEpisodeEncoder(true), c)
	got := s.read(t)
	if len(got) != 1 || got[0].API != "images" || got[0].EndReason != "shed" || got[0].Lineage.Kind != "merge" {
		t.Fatalf("read = %+v, want the unknown values kept", got)
	}
	b, err := json.Marshal(got[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"api":"images"`, `"end_reason":"shed"`, `"kind":"merge"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Marshal = %s, want it to contain %s", b, want)
		}
	}
}
