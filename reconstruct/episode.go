package reconstruct

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/orchard-rl/orchard/recorder"
)

// Output formats (--format).
const (
	FormatTurns        = "turns"        // orchard.turn/v1, one line per call
	FormatTrajectories = "trajectories" // orchard.trajectory/v1, one line per segment
	FormatSFT          = "sft"          // messages + tools
	FormatVerl         = "verl"         // verl MultiTurnSFTDataset fields
	FormatTRL          = "trl"          // TRL SFTTrainer conversational (+ tokenized) fields
	FormatOpenRLHF     = "openrlhf"     // OpenRLHF SFTDataset multiturn fields
)

// Formats lists the output formats.
var Formats = []string{FormatTurns, FormatTrajectories, FormatSFT, FormatVerl, FormatTRL, FormatOpenRLHF}

// newEpisode reconstructs an episode from its calls: reads each call,
// threads them into segments and handles token drift by onDrift.
func newEpisode(info recorder.EpisodeSummary, calls []*recorder.Call, onDrift string, st *Stats) *episode {
	calls = slices.Clone(calls)
	slices.SortStableFunc(calls, func(a, b *recorder.Call) int { return cmp.Compare(a.Seq, b.Seq) })
	e := &episode{info: info, calls: make([]*callState, len(calls))}
	for i, c := range calls {
		e.calls[i] = newCallState(c)
		st.Bytes += int64(len(c.Request) + len(c.Response))
		if r := e.calls[i].reason; r != "" {
			st.Unusable[r]++
		}
	}
	st.Calls += len(calls)
	segs, ops := thread(e.calls)
	st.threadOps += ops
	e.segs = applyDrift(e.calls, segs, onDrift, st.Drift)
	numberSegments(e.segs)
	for _, s := range e.segs {
		for k, ci := range s.calls {
			if e.calls[ci].seg == s {
				e.calls[ci].turn = k
			}
		}
	}
	return e
}

// numberSegments numbers segments in order of their first call.
func numberSegments(segs []*segment) {
	slices.SortStableFunc(segs, func(a, b *segment) int { return cmp.Compare(a.firstOrder, b.firstOrder) })
	for i, s := range segs {
		s.id = i
	}
}

// encode appends the episode's lines in format to buf.
func (e *episode) encode(opts *Options, buf *bytes.Buffer, st *Stats) error {
	format := opts.Format
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if format == FormatTurns {
		pc := promptCache{}
		var line bytes.Buffer
		lineEnc := json.NewEncoder(&line)
		lineEnc.SetEscapeHTML(false)
		for _, cs := range e.calls {
			if cs.reason == "unsupported_api" {
				continue
			}
			t, prompt := e.turn(cs, pc)
			if opts.Annotator != nil {
				if err := opts.Annotator.AnnotateTurn(t); err != nil {
					return fmt.Errorf("annotate call %s: %w", cs.call.CallID, err)
				}
			}
			if prompt == nil {
				if err := enc.Encode(t); err != nil {
					return err
				}
				st.Samples++
				continue
			}
			line.Reset()
			if err := lineEnc.Encode(t); err != nil {
				return err
			}
			out, ok := spliceField(line.Bytes(), "prompt", prompt)
			if !ok {
				return fmt.Errorf("call %s: no prompt member in its turn line", cs.call.CallID)
			}
			buf.Write(out)
			st.Samples++
		}
		return nil
	}
	for _, s := range e.segs {
		if s.dropped {
			st.DroppedSegments++
			continue
		}
		t, err := e.trajectory(s)
		if err != nil {
			// a request that decodes as JSON but not as its API: reported, not fatal
			st.BadSegments++
			continue
		}
		if opts.Annotator != nil {
			if err := opts.Annotator.AnnotateTrajectory(t); err != nil {
				return fmt.Errorf("annotate segment %d of episode %s: %w", s.id, e.info.ID, err)
			}
		}
		if opts.Check {
			e.check(s, t, st)
		}
		if err := enc.Encode(adapt(format, t)); err != nil {
			return err
		}
		st.Samples++
	}
	return nil
}

// turn builds the orchard.turn/v1 record of one call. When pc converts
// the prompt, prompt is its JSON and t.Prompt is nil.
func (e *episode) turn(cs *callState, pc promptCache) (t *Turn, prompt []byte) {
	c := cs.call
	t = &Turn{
		Schema: TurnSchema, EpisodeID: e.info.ID, TaskID: strOrNil(e.info.TaskID), GroupID: strOrNil(e.info.GroupID),
		CallID: c.CallID, Seq: c.Seq, Turn: -1, API: c.API, Model: c.Model, Usage: c.Usage,
		Outcome: TurnOutcome{EpisodeStatus: e.info.Status, EpisodeReward: e.info.Reward, HTTPStatus: c.Status,
			EndReason: c.EndReason, Error: c.Error, Unusable: cs.reason},
		Lineage: TurnLineage{Kind: cs.kind},
	}
	if t.Lineage.Kind == "" {
		t.Lineage.Kind = "none" // unusable calls are in no thread
	}
	if cs.parent >= 0 {
		t.Lineage.ParentCallID = e.calls[cs.parent].call.CallID
	}
	if cs.retriedBy >= 0 {
		t.Lineage.RetriedBy = e.calls[cs.retriedBy].call.CallID
	}
	if s := cs.seg; s != nil && !s.dropped && cs.turn >= 0 {
		id := s.id
		t.Segment, t.Turn = &id, cs.turn
	}
	if p, tools, ok := pc.promptJSON(cs); ok {
		prompt, t.Tools = p, tools
	} else if conv, err := DecodeRequest(c.API, c.Request); err == nil {
		var in []viewMsg
		if conv.System != nil {
			in = append(in, viewMsg{msg: conv.System, call: -1})
		}
		for i := range conv.Messages {
			in = append(in, viewMsg{msg: &conv.Messages[i], call: -1})
		}
		t.Prompt, _ = chatView(c.API, in)
		t.Tools = chatTools(c.API, conv.Tools)
	}
	if t.Prompt == nil && prompt == nil {
		t.Prompt = []ChatMessage{}
	}
	if len(cs.comp) > 0 {
		in := make([]viewMsg, len(cs.comp))
		for i := range cs.comp {
			in[i] = viewMsg{msg: &cs.comp[i], call: 0}
		}
		view, _ := chatView(c.API, in)
		t.Completion = &view[0]
	}
	if tk := c.Tokens; tk != nil {
		t.Tokens = &TurnTokens{PromptIDs: tk.PromptIDs, CompletionIDs: tk.CompletionIDs, Logprobs: tk.Logprobs}
	}
	return t, prompt
}
