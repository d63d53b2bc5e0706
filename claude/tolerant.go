package claude

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// decodeTolerant is the slow path taken when a known message fails strict
// decoding. It decodes the line generically, coerces each value towards the
// Go field it lands in (a number sent as a string, a boolean sent as "true",
// a number where a string is expected) and drops values that cannot fit, so
// that they keep their zero value instead of failing the whole message.
func decodeTolerant(line []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return err
	}
	fixed, ok := coerce(generic, reflect.TypeOf(dst))
	if !ok {
		return errNotJSONObject
	}
	b, err := json.Marshal(fixed)
	if err != nil {
		return err
	}
	reflect.ValueOf(dst).Elem().SetZero() // forget what the strict pass left
	return json.Unmarshal(b, dst)
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// coerce returns v adjusted to decode into a value of type t, and false when
// it cannot be made to fit (the caller then drops it).
func coerce(v any, t reflect.Type) (any, bool) {
	if v == nil {
		return nil, true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface {
		return v, true
	}
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x, true
		case json.Number:
			return x.String(), true
		case bool:
			return strconv.FormatBool(x), true
		}
		return nil, false
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			return x, true
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			return b, err == nil
		case json.Number:
			f, err := x.Float64()
			return f != 0, err == nil
		}
		return nil, false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var s string
		switch x := v.(type) {
		case json.Number:
			s = x.String()
		case string:
			s = strings.TrimSpace(x)
		default:
			return nil, false
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if t.Kind() >= reflect.Uint && n < 0 {
				return nil, false
			}
			return n, true
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, false
		}
		return int64(f), true
	case reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case json.Number:
			return x, true
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			return f, err == nil
		}
		return nil, false
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return nil, false
		}
		out := make([]any, 0, len(arr))
		for _, e := range arr {
			if c, ok := coerce(e, t.Elem()); ok {
				out = append(out, c)
			}
		}
		return out, true
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		for k, e := range obj {
			if c, ok := coerce(e, t.Elem()); ok {
				obj[k] = c
			} else {
				delete(obj, k)
			}
		}
		return obj, true
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		coerceFields(obj, t)
		return obj, true
	}
	return v, true
}

// coerceFields coerces the members of obj that name fields of struct type t,
// including fields promoted from embedded structs.
func coerceFields(obj map[string]any, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			coerceFields(obj, f.Type)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		val, present := obj[name]
		if !present {
			continue
		}
		if c, ok := coerce(val, f.Type); ok {
			obj[name] = c
		} else {
			delete(obj, name)
		}
	}
}
