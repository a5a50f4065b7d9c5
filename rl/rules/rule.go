package rules

import (
	"math"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// rule reads one rule and checks it.
func (p parser) rule(n *yaml.Node) (Rule, error) {
	r := Rule{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return r, p.errf(n, "", "a rule is a mapping with id, weight and trigger")
	}
	r.ID = field(n, "id")
	if r.ID == "" {
		return r, p.errf(n, "", "rule without an id")
	}
	hasWeight := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "id", "description":
		case "weight":
			r.Weight, err = p.number(v, r.ID, -math.MaxFloat64, math.MaxFloat64)
			hasWeight = true
		case "trigger":
			r.Trigger = Trigger(v.Value)
			if !knownTriggers[r.Trigger] {
				err = p.errf(v, r.ID, "unknown trigger %q", v.Value)
			}
		case "pattern":
			r.Source = v.Value
			if r.Pattern, err = regexp.Compile(v.Value); err != nil {
				err = p.errf(v, r.ID, "bad pattern: %v", err)
			}
		case "k":
			var k64 int64
			if k64, err = strconv.ParseInt(v.Value, 10, 32); err != nil || k64 < 1 {
				err = p.errf(v, r.ID, "k %q: want an integer >= 1", v.Value)
			}
			r.K = int(k64)
		case "class":
			r.Class = Class(v.Value)
			if r.Class != ClassProgress && r.Class != ClassRegression && r.Class != ClassWaste && r.Class != ClassMasking {
				err = p.errf(v, r.ID, "unknown class %q (want progress, regression, waste or masking)", v.Value)
			}
		default:
			err = p.errf(k, r.ID, "unknown field %q (want id, weight, trigger, pattern, k, class or description)", k.Value)
		}
		if err != nil {
			return r, err
		}
	}
	return r, p.check(n, r, hasWeight)
}

// check enforces what a rule must say, and that only environment
// evidence earns a positive reward.
func (p parser) check(n *yaml.Node, r Rule, hasWeight bool) error {
	switch {
	case !hasWeight:
		return p.errf(n, r.ID, "no weight")
	case r.Trigger == "":
		return p.errf(n, r.ID, "no trigger")
	case (r.Trigger == CommandMatches || r.Trigger == ResultMatches) && r.Pattern == nil:
		return p.errf(n, r.ID, "trigger %s needs a pattern", r.Trigger)
	case r.Weight > 0 && !envTriggers[r.Trigger]:
		return p.errf(n, r.ID, "trigger %s reads what the model wrote: its weight must not be positive", r.Trigger)
	}
	return nil
}

func field(n *yaml.Node, key string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}
