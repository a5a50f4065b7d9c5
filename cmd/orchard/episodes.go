package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

func newEpisodesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "episodes",
		Short: "List and show recorded episodes",
	}
	cmd.AddCommand(newEpisodesListCmd(), newEpisodesShowCmd())
	return cmd
}

func newEpisodesListCmd() *cobra.Command {
	var sf storeFlags
	var asJSON bool
	var f recorder.Filter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List episodes, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openReadStore(cmd, &sf)
			if err != nil {
				return err
			}
			defer st.Close()
			var all []recorder.EpisodeSummary
			for {
				page, next, err := st.ListEpisodes(cmd.Context(), f)
				if err != nil {
					return fmt.Errorf("list episodes: %w", err)
				}
				all = append(all, page...)
				if next == "" || (f.Limit > 0 && len(all) >= f.Limit) {
					break
				}
				f.Cursor = next
			}
			if asJSON {
				return writeJSONLines(cmd.OutOrStdout(), all)
			}
			return printEpisodeTable(cmd.OutOrStdout(), all)
		},
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per line")
	cmd.Flags().StringVar(&f.TaskID, "task-id", "", "only episodes of this task id")
	cmd.Flags().StringVar(&f.GroupID, "group-id", "", "only episodes of this group id")
	aliasIDFlags(cmd.Flags())
	cmd.Flags().StringVar(&f.Status, "status", "", "only episodes with this status")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "at most this many episodes (0: all)")
	return cmd
}

func newEpisodesShowCmd() *cobra.Command {
	var sf storeFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show EPISODE",
		Short: "Show an episode's calls in arrival order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openReadStore(cmd, &sf)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := cmd.Context()
			// The store's errors name the episode already.
			ep, err := st.Episode(ctx, args[0])
			if err != nil {
				return err
			}
			calls, bad, err := recorder.CallsChecked(ctx, st, args[0])
			if err != nil {
				return fmt.Errorf("read calls: %w", err)
			}
			printQuarantined(cmd.ErrOrStderr(), bad)
			if asJSON {
				return writeJSONLines(cmd.OutOrStdout(), calls)
			}
			return printEpisode(cmd.OutOrStdout(), ep, calls)
		},
	}
	addStoreFlags(cmd, &sf)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one orchard.call/v1 record per line, with full request and response")
	return cmd
}

// writeJSONLines writes one JSON value per line. Records stored before
// bodies that are not UTF-8 were kept as base64 may hold invalid UTF-8 in
// a string; such a line is written with U+FFFD in its place, so that the
// output is always valid JSON.
func writeJSONLines[T any](w io.Writer, items []T) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		buf.Reset()
		if err := enc.Encode(it); err != nil {
			return err
		}
		line := buf.Bytes()
		if !utf8.Valid(line) {
			line = bytes.ToValidUTF8(line, []byte("\uFFFD"))
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// printQuarantined reports an episode's records that cannot be decoded.
func printQuarantined(w io.Writer, bad []recorder.Quarantined) {
	for _, q := range bad {
		fmt.Fprintf(w, "quarantined record %d of episode %s (call %s): %s\n", q.Position, q.EpisodeID, dash(q.CallID), q.Reason)
	}
}

func printEpisodeTable(w io.Writer, eps []recorder.EpisodeSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EPISODE\tSTATUS\tCALLS\tTASK\tGROUP\tREWARD\tLAST CALL")
	for _, e := range eps {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.ID, e.Status, e.Calls, dash(e.TaskID), dash(e.GroupID),
			reward(e.Reward), stamp(e.LastCallAt))
	}
	return tw.Flush()
}

func printEpisode(w io.Writer, ep *recorder.EpisodeSummary, calls []*recorder.Call) error {
	fmt.Fprintf(w, "episode %s  status %s  calls %d  task %s  group %s  reward %s\n",
		ep.ID, ep.Status, len(calls), dash(ep.TaskID), dash(ep.GroupID), reward(ep.Reward))
	fmt.Fprintf(w, "lineage %s\n", driftSummary(calls))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tCALL\tAPI\tMODEL\tSTREAM\tSTATUS\tEND\tTTFB\tTOTAL\tIN\tOUT\tTOKEN IDS\tLINEAGE")
	for _, c := range calls {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			c.Seq, c.CallID, c.API, dash(c.Model), c.Stream, c.Status, c.EndReason,
			ttfb(c), c.EndedAt.Sub(c.StartedAt).Round(time.Millisecond), usageIn(c), usageOut(c), tokenIDs(c), lineage(c))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func reward(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'g', 6, 64)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func ttfb(c *recorder.Call) string {
	if c.FirstByteAt == nil {
		return "-"
	}
	return c.FirstByteAt.Sub(c.StartedAt).Round(time.Millisecond).String()
}

// usageIn and usageOut read token counts from any API's usage object.
func usageIn(c *recorder.Call) string {
	return firstNumber(c.Usage, "prompt_tokens", "input_tokens")
}

func usageOut(c *recorder.Call) string {
	return firstNumber(c.Usage, "completion_tokens", "output_tokens")
}

func firstNumber(raw json.RawMessage, paths ...string) string {
	for _, p := range paths {
		if v := gjson.GetBytes(raw, p); v.Exists() {
			return v.String()
		}
	}
	return "-"
}

func tokenIDs(c *recorder.Call) string {
	if c.Tokens == nil {
		return "-"
	}
	return fmt.Sprintf("%d+%d", len(c.Tokens.PromptIDs), len(c.Tokens.CompletionIDs))
}

func lineage(c *recorder.Call) string {
	if c.Lineage == nil {
		return "-"
	}
	s := string(c.Lineage.Kind)
	if c.Lineage.ParentCallID != "" {
		s += " <- " + c.Lineage.ParentCallID
	}
	return s
}

// driftSummary counts the calls of each lineage kind, in a fixed order.
func driftSummary(calls []*recorder.Call) string {
	n := map[recorder.LineageKind]int{}
	for _, c := range calls {
		if c.Lineage != nil {
			n[c.Lineage.Kind]++
		}
	}
	var parts []string
	for _, k := range recorder.LineageKinds() {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
