package reconstruct

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/orchard-rl/orchard/recorder"
)

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

// encode returns the episode's rows in opts.Format, counting them in st.
func (e *episode) encode(opts *Options, st *Stats) ([]outRow, error) {
	if opts.Format == FormatTurns {
		return e.encodeTurns(opts, st)
	}
	var rows []outRow
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
				return nil, fmt.Errorf("annotate segment %d of episode %s: %w", s.id, e.info.ID, err)
			}
		}
		if opts.Check {
			e.check(s, t, st)
		}
		samples, reason := []sample{{value: t, ids: t.Tokens != nil}}, ""
		if opts.Format != FormatTrajectories {
			samples, reason = adapt(opts.Format, t, e.index)
		}
		if reason != "" {
			st.Dropped[reason]++
		}
		for _, smp := range samples {
			if err := e.addRow(&rows, smp, opts, st); err != nil {
				return nil, err
			}
		}
	}
	return rows, nil
}

// addRow encodes one sample and counts it, or drops it for
// --require-tokens.
func (e *episode) addRow(rows *[]outRow, smp sample, opts *Options, st *Stats) error {
	if opts.RequireTokens && !smp.ids {
		st.Dropped[DropNoTokenIDs]++
		return nil
	}
	r := outRow{value: smp.value, ids: smp.ids}
	if opts.Encoding != EncodingParquet {
		line, err := encodeLine(smp.value, opts.ToolsAs == ToolsAsObjects && opts.Format != FormatTrajectories)
		if err != nil {
			return fmt.Errorf("encode sample of episode %s: %w", e.info.ID, err)
		}
		r.line, r.value = line, nil
	}
	*rows = append(*rows, r)
	st.countSample(smp.ids)
	return nil
}

func (s *Stats) countSample(ids bool) {
	s.Samples++
	if ids {
		s.WithIDs++
	} else {
		s.WithoutIDs++
	}
}

// encodeTurns returns one orchard.turn/v1 line per call.
func (e *episode) encodeTurns(opts *Options, st *Stats) ([]outRow, error) {
	pc := promptCache{}
	var rows []outRow
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	for _, cs := range e.calls {
		if cs.reason == "unsupported_api" {
			continue
		}
		t, prompt := e.turn(cs, pc)
		if opts.Annotator != nil {
			if err := opts.Annotator.AnnotateTurn(t); err != nil {
				return nil, fmt.Errorf("annotate call %s: %w", cs.call.CallID, err)
			}
		}
		ids := t.Tokens != nil
		if opts.RequireTokens && !ids {
			st.Dropped[DropNoTokenIDs]++
			continue
		}
		line.Reset()
		if err := enc.Encode(t); err != nil {
			return nil, err
		}
		out := slices.Clone(line.Bytes())
		if prompt != nil {
			var ok bool
			if out, ok = spliceField(out, "prompt", prompt); !ok {
				return nil, fmt.Errorf("call %s: no prompt member in its turn line", cs.call.CallID)
			}
		}
		rows = append(rows, outRow{line: out, ids: ids})
		st.countSample(ids)
	}
	return rows, nil
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
