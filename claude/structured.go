package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
)

// Structured output: with [Options.JSONSchema] set, the CLI offers the model
// a "StructuredOutput" tool whose input schema is that schema, validates the
// model's call against it (asking the model again, up to five times, when it
// does not fit), and puts the accepted input in the result's
// structured_output ([ResultMessage.StructuredOutput]); the result's text is
// the same JSON. SchemaFor derives a schema from a Go type and
// DecodeStructured decodes the output back into it.

// ErrNoStructuredOutput is returned by [DecodeStructured] for a result
// without structured output: Options.JSONSchema was not set, or the turn
// failed (then the error also wraps the result's [ResultError]).
var ErrNoStructuredOutput = errors.New("claude: result has no structured output")

// StructuredOutputError reports structured output that does not fit the Go
// type it is decoded into.
type StructuredOutputError struct {
	Type  string // the Go type, e.g. "main.Person"
	Field string // the JSON path at fault, e.g. "address.city" or "tags[2]"; empty for the whole value
	Msg   string // what is wrong, e.g. "missing" or "got string, want integer"
}

func (e *StructuredOutputError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("claude: structured output does not fit %s: %s", e.Type, e.Msg)
	}
	return fmt.Sprintf("claude: structured output does not fit %s: field %q: %s", e.Type, e.Field, e.Msg)
}

// DecodeStructured decodes r's structured output into a T. It fails with
// an error matching [ErrNoStructuredOutput] when there is none, and with a
// [*StructuredOutputError] naming the field when the output does not fit T:
// a value of the wrong JSON type, or a field missing that SchemaFor would
// mark required. Fields of the output that T lacks are ignored.
func DecodeStructured[T any](r *ResultMessage) (T, error) {
	var v T
	t := reflect.TypeFor[T]()
	if r == nil {
		return v, fmt.Errorf("%w (nil result)", ErrNoStructuredOutput)
	}
	out := bytes.TrimSpace(r.StructuredOutput)
	if len(out) == 0 || string(out) == "null" {
		if err := r.Err(); err != nil {
			return v, fmt.Errorf("%w: %w", ErrNoStructuredOutput, err)
		}
		return v, fmt.Errorf("%w (was Options.JSONSchema set?)", ErrNoStructuredOutput)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return v, &StructuredOutputError{Type: t.String(), Msg: "not valid JSON: " + err.Error()}
	}
	if field, msg := checkValue(t, generic, ""); msg != "" {
		return v, &StructuredOutputError{Type: t.String(), Field: field, Msg: msg}
	}
	if err := json.Unmarshal(out, &v); err != nil {
		e := &StructuredOutputError{Type: t.String(), Msg: err.Error()}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			e.Field, e.Msg = te.Field, fmt.Sprintf("got %s, want %s", te.Value, te.Type)
		}
		return v, e
	}
	return v, nil
}

// checkValue checks a generically decoded JSON value v against Go type t.
// It returns the path and a description of the first misfit, or "" and "".
func checkValue(t reflect.Type, v any, path string) (field, msg string) {
	if v == nil {
		return "", "" // null decodes into anything (leaving it zero)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	misfit := func(want string) (string, string) {
		return path, fmt.Sprintf("got %s, want %s", jsonKind(v), want)
	}
	switch {
	case t == rawMessageType || t.Kind() == reflect.Interface:
		return "", ""
	case t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType):
		return "", "" // its own decoder judges (json.Unmarshal reports it)
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		if _, ok := v.(string); !ok {
			return misfit("string")
		}
		return "", ""
	}
	switch t.Kind() {
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return misfit("boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := v.(json.Number)
		if !ok {
			return misfit("integer")
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			if _, err := strconv.ParseUint(n.String(), 10, 64); err != nil {
				return path, fmt.Sprintf("got %s, want integer", n)
			}
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return misfit("number")
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return misfit("string")
		}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			if _, ok := v.(string); !ok {
				return misfit("string (base64)")
			}
			return "", ""
		}
		arr, ok := v.([]any)
		if !ok {
			return misfit("array")
		}
		for i, e := range arr {
			if f, m := checkValue(t.Elem(), e, path+"["+strconv.Itoa(i)+"]"); m != "" {
				return f, m
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return misfit("object")
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if f, m := checkValue(t.Elem(), obj[k], joinPath(path, k)); m != "" {
				return f, m
			}
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return misfit("object")
		}
		for _, f := range jsonFields(t) {
			fv, present := obj[f.name]
			if !present {
				if f.required {
					return joinPath(path, f.name), "missing"
				}
				continue
			}
			if f.asString {
				if _, ok := fv.(string); !ok && fv != nil {
					return joinPath(path, f.name), fmt.Sprintf("got %s, want string", jsonKind(fv))
				}
				continue
			}
			if fp, m := checkValue(f.typ, fv, joinPath(path, f.name)); m != "" {
				return fp, m
			}
		}
	}
	return "", ""
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonKind names the JSON type of a generically decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
