// Package schemacheck validates JSON documents against the subset of JSON
// Schema that structured outputs support. It is the tests' oracle for
// engine/grammar: written separately from the grammar, over decoded values
// (encoding/json) rather than bytes, so the two can disagree.
package schemacheck

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Validate checks the JSON text doc against schema (a JSON Schema text).
func Validate(schema, doc []byte) error {
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	var d any
	if err := json.Unmarshal(doc, &d); err != nil {
		return fmt.Errorf("document: %w", err)
	}
	return validate(s, s, d, "$")
}

func validate(root, s map[string]any, doc any, at string) error {
	if ref, ok := s["$ref"].(string); ok {
		var def map[string]any
		if ref == "#" {
			def = root
		} else {
			name := strings.TrimPrefix(ref, "#/$defs/")
			def, _ = root["$defs"].(map[string]any)[name].(map[string]any)
		}
		if def == nil {
			return fmt.Errorf("%s: unknown $ref %s", at, ref)
		}
		return validate(root, def, doc, at)
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		for _, alt := range anyOf {
			if validate(root, alt.(map[string]any), doc, at) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: %v matches no anyOf alternative", at, doc)
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, doc) {
		return fmt.Errorf("%s: %v is not the const %v", at, doc, c)
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return jsonEqual(e, doc) }) {
		return fmt.Errorf("%s: %v is not in the enum %v", at, doc, enum)
	}
	if typ, ok := s["type"]; ok {
		types := []any{typ}
		if list, ok := typ.([]any); ok {
			types = list
		}
		if !slices.ContainsFunc(types, func(t any) bool { return hasType(doc, t.(string)) }) {
			return fmt.Errorf("%s: %v is not of type %v", at, doc, typ)
		}
	}
	num := func(k string) (float64, bool) { f, ok := s[k].(float64); return f, ok }
	switch v := doc.(type) {
	case float64:
		if m, ok := num("minimum"); ok && v < m {
			return fmt.Errorf("%s: %v < minimum %v", at, v, m)
		}
		if m, ok := num("maximum"); ok && v > m {
			return fmt.Errorf("%s: %v > maximum %v", at, v, m)
		}
		if m, ok := num("exclusiveMinimum"); ok && v <= m {
			return fmt.Errorf("%s: %v <= exclusiveMinimum %v", at, v, m)
		}
		if m, ok := num("exclusiveMaximum"); ok && v >= m {
			return fmt.Errorf("%s: %v >= exclusiveMaximum %v", at, v, m)
		}
	case string:
		n := utf8.RuneCountInString(v)
		if m, ok := num("minLength"); ok && float64(n) < m {
			return fmt.Errorf("%s: %q shorter than %v", at, v, m)
		}
		if m, ok := num("maxLength"); ok && float64(n) > m {
			return fmt.Errorf("%s: %q longer than %v", at, v, m)
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(v) {
			return fmt.Errorf("%s: %q does not match %s", at, v, p)
		}
	case []any:
		if m, ok := num("minItems"); ok && float64(len(v)) < m {
			return fmt.Errorf("%s: %d items < minItems %v", at, len(v), m)
		}
		if m, ok := num("maxItems"); ok && float64(len(v)) > m {
			return fmt.Errorf("%s: %d items > maxItems %v", at, len(v), m)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range v {
				if err := validate(root, items, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for k, x := range v {
			p, ok := props[k].(map[string]any)
			if !ok {
				return fmt.Errorf("%s: unexpected property %q", at, k)
			}
			if err := validate(root, p, x, at+"."+k); err != nil {
				return err
			}
		}
		req, _ := s["required"].([]any)
		for _, k := range req {
			if _, ok := v[k.(string)]; !ok {
				return fmt.Errorf("%s: missing required %q", at, k)
			}
		}
	}
	return nil
}

func hasType(doc any, t string) bool {
	switch v := doc.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	case float64:
		return t == "number" || t == "integer" && v == math.Trunc(v)
	}
	return false
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
