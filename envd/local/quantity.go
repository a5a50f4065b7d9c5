package local

import "k8s.io/apimachinery/pkg/api/resource"

// parseQuantity reads a byte count in Kubernetes quantity syntax.
func parseQuantity(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

// parseMilli reads a CPU count ("0.5", "500m", "2") as thousandths.
func parseMilli(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	return q.MilliValue(), nil
}
