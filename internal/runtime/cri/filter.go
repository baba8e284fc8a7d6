package cri

import "strings"

// hasPrefix reports whether id matches a filter's ID (empty matches all; a prefix matches,
// as crictl's truncated IDs).
func hasPrefix(id, filter string) bool { return filter == "" || strings.HasPrefix(id, filter) }

// matchLabels reports whether labels contain every pair of the selector.
func matchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func compareStrings(a, b string) int { return strings.Compare(a, b) }

// isNumber reports whether s is a non-empty string of decimal digits.
func isNumber(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
