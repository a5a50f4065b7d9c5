package reconstruct

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Output encodings (Options.Encoding).
const (
	EncodingJSONL   = "jsonl"   // one JSON object per line
	EncodingParquet = "parquet" // one parquet file, one row per sample
)

// ErrMixedRows is returned when a parquet output would hold rows of two
// shapes (TRL's tokenized and prompt-completion rows): a parquet file has
// one schema, and TRL takes a dataset with an input_ids column as
// tokenized throughout.
var ErrMixedRows = errors.New("rows with and without token ids need different columns (use --split-by-tokens or --require-tokens)")

// outRow is one encoded sample: its JSON line, or its value for parquet.
type outRow struct {
	line  []byte
	value any
	ids   bool
}

// rowSink receives the rows of one output file in order.
type rowSink interface {
	write(r *outRow) error
	close() error
}

type jsonlSink struct{ w io.Writer }

func (s jsonlSink) write(r *outRow) error {
	if _, err := s.w.Write(r.line); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func (s jsonlSink) close() error { return nil }

// parquetSink writes rows of one Go type to a parquet file; the schema is
// the type's (struct tags in format.go and rlformat.go).
type parquetSink struct {
	w   io.Writer
	typ reflect.Type // schema of an empty file
	//lint:ignore SA1019 the row type is known only at run time; parquet.GenericWriter needs it at compile time
	pw *parquet.Writer
}

func (s *parquetSink) open(t reflect.Type) {
	s.typ = t
	s.pw = parquet.NewWriter(s.w, parquet.SchemaOf(reflect.New(t).Elem().Interface()), parquet.Compression(&parquet.Snappy))
}

func (s *parquetSink) write(r *outRow) error {
	t := reflect.TypeOf(r.value)
	if s.pw == nil {
		s.open(t)
	} else if t != s.typ {
		return ErrMixedRows
	}
	if err := s.pw.Write(r.value); err != nil {
		return fmt.Errorf("write parquet row: %w", err)
	}
	return nil
}

func (s *parquetSink) close() error {
	if s.pw == nil {
		s.open(s.typ)
	}
	if err := s.pw.Close(); err != nil {
		return fmt.Errorf("write parquet footer: %w", err)
	}
	return nil
}

// emptyRow is the row type of an output that gets no rows.
func emptyRow(format string, ids bool) reflect.Type {
	rows := map[string]any{FormatSFT: SFTSample{}, FormatVerl: VerlSample{}, FormatVerlPrompts: VerlPromptSample{},
		FormatVerlAgent: VerlAgentSample{}, FormatOpenRLHF: OpenRLHFSample{}, FormatOpenRLHFRL: OpenRLHFRLSample{},
		FormatSlime: SlimeSample{}, FormatTokens: TokensSample{}, FormatTRL: TRLPromptSample{}}
	if format == FormatTRL && ids {
		return reflect.TypeFor[TRLTokenSample]()
	}
	return reflect.TypeOf(rows[format])
}

func newSink(opts *Options, w io.Writer, ids bool) rowSink {
	if opts.Encoding == EncodingParquet {
		return &parquetSink{w: w, typ: emptyRow(opts.Format, ids)}
	}
	return jsonlSink{w}
}

// encodeLine writes v as one JSON line; with objects, the JSON text of
// tools and tool-call arguments becomes JSON values.
func encodeLine(v any, objects bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if !objects {
		return b.Bytes(), nil
	}
	return objectify(b.Bytes())
}

// messageLists are the members of trainer rows that hold messages.
var messageLists = []string{"messages", "prompt", "completion", "input", "output"}

// objectify rewrites a trainer row's tools and tool-call arguments from
// JSON text to the JSON values they hold (arguments only when they are a
// JSON object, as the model may generate anything).
func objectify(line []byte) ([]byte, error) {
	var err error
	for _, path := range []string{"tools", "extra_info.tools"} {
		if v := gjson.GetBytes(line, path); v.Type == gjson.String {
			if line, err = sjson.SetRawBytes(line, path, []byte(v.Str)); err != nil {
				return nil, err
			}
		}
	}
	for _, key := range messageLists {
		for i, m := range gjson.GetBytes(line, key).Array() {
			for j, tc := range m.Get("tool_calls").Array() {
				args := tc.Get("function.arguments").Str
				if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
					continue
				}
				path := key + "." + strconv.Itoa(i) + ".tool_calls." + strconv.Itoa(j) + ".function.arguments"
				if line, err = sjson.SetRawBytes(line, path, []byte(args)); err != nil {
					return nil, err
				}
			}
		}
	}
	return line, nil
}
