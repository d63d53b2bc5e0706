package claude

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// SchemaFor returns a JSON Schema describing how encoding/json encodes a T,
// for [Options.JSONSchema]. T must encode to a JSON object: a struct or a
// map with string keys.
//
// Go types map to schemas this way:
//
//   - bool: boolean; signed integers: integer; unsigned integers: integer
//     with minimum 0; floats: number; string: string; []byte: string.
//   - slices and arrays: array with items.
//   - maps with string (or encoding.TextMarshaler) keys: object with
//     additionalProperties.
//   - structs: object with properties in field order, additionalProperties
//     false, and every field required unless its json tag has omitempty or
//     omitzero. Fields are named and skipped as encoding/json does ("-",
//     unexported); embedded structs without a json name are flattened, a
//     field of the outer struct winning over an embedded one. A
//     `jsonschema:"..."` tag is the field's description (the MCP SDK's
//     convention), which the model sees.
//   - pointers: the schema of the element.
//   - time.Time: string with format date-time; other encoding.TextMarshaler
//     types: string; json.RawMessage, interfaces and other json.Marshaler
//     types: any value.
//
// Channels, functions, complex numbers and recursive types are errors.
func SchemaFor[T any]() (json.RawMessage, error) {
	t := reflect.TypeFor[T]()
	s, err := schemaOf(t, map[reflect.Type]bool{})
	if err != nil {
		return nil, fmt.Errorf("claude: SchemaFor[%s]: %w", t, err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("claude: SchemaFor[%s]: structured output must be a JSON object; use a struct", t)
	}
	return json.Marshal(s)
}

// jsonSchema is the subset of JSON Schema that SchemaFor writes.
type jsonSchema struct {
	Type                 string       `json:"type,omitempty"`
	Description          string       `json:"description,omitempty"`
	Format               string       `json:"format,omitempty"`
	Minimum              *int         `json:"minimum,omitempty"`
	Items                *jsonSchema  `json:"items,omitempty"`
	Properties           *schemaProps `json:"properties,omitempty"`
	Required             []string     `json:"required,omitempty"`
	AdditionalProperties any          `json:"additionalProperties,omitempty"` // *jsonSchema or false
}

// schemaProps are an object's properties, kept in field order.
type schemaProps struct {
	names   []string
	schemas []*jsonSchema
}

func (p *schemaProps) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, name := range p.names {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		v, err := json.Marshal(p.schemas[i])
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	jsonMarshalerType   = reflect.TypeFor[json.Marshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// schemaOf returns the schema of t; inProgress holds the struct types being
// described, to catch recursion.
func schemaOf(t reflect.Type, inProgress map[reflect.Type]bool) (*jsonSchema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return &jsonSchema{Type: "string", Format: "date-time"}, nil
	case t == rawMessageType || t.Kind() == reflect.Interface:
		return &jsonSchema{}, nil
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		return &jsonSchema{}, nil
	case t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		return &jsonSchema{Type: "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &jsonSchema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &jsonSchema{Type: "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &jsonSchema{Type: "integer", Minimum: new(0)}, nil
	case reflect.Float32, reflect.Float64:
		return &jsonSchema{Type: "number"}, nil
	case reflect.String:
		return &jsonSchema{Type: "string"}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return &jsonSchema{Type: "string"}, nil // base64, as encoding/json writes it
		}
		items, err := schemaOf(t.Elem(), inProgress)
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Type: "array", Items: items}, nil
	case reflect.Map:
		if !isStringKey(t.Key()) {
			return nil, fmt.Errorf("map key type %s: JSON object keys are strings", t.Key())
		}
		elem, err := schemaOf(t.Elem(), inProgress)
		if err != nil {
			return nil, err
		}
		return &jsonSchema{Type: "object", AdditionalProperties: elem}, nil
	case reflect.Struct:
		if inProgress[t] {
			return nil, fmt.Errorf("recursive type %s", t)
		}
		inProgress[t] = true
		defer delete(inProgress, t)
		s := &jsonSchema{Type: "object", Properties: &schemaProps{}, AdditionalProperties: false}
		for _, f := range jsonFields(t) {
			fs, err := schemaOf(f.typ, inProgress)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.name, err)
			}
			if f.asString && (fs.Type == "integer" || fs.Type == "number" || fs.Type == "boolean") {
				fs = &jsonSchema{Type: "string"}
			}
			if f.description != "" {
				c := *fs
				c.Description = f.description
				fs = &c
			}
			s.Properties.names = append(s.Properties.names, f.name)
			s.Properties.schemas = append(s.Properties.schemas, fs)
			if f.required {
				s.Required = append(s.Required, f.name)
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("type %s has no JSON schema", t)
}

func isStringKey(k reflect.Type) bool {
	return k.Kind() == reflect.String || k.Implements(textMarshalerType) || reflect.PointerTo(k).Implements(textMarshalerType)
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name        string
	index       []int
	typ         reflect.Type
	required    bool // no omitempty or omitzero
	asString    bool // the ",string" option
	description string
}

// jsonFields lists the fields encoding/json encodes for struct type t, in
// order, flattening embedded structs that have no json name.
func jsonFields(t reflect.Type) []jsonField {
	var direct, embedded []jsonField
	taken := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && (f.IsExported() || f.Type.Kind() != reflect.Pointer) {
				for _, ef := range jsonFields(ft) {
					ef.index = append([]int{i}, ef.index...)
					embedded = append(embedded, ef)
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		jf := jsonField{name: name, index: []int{i}, typ: f.Type, required: true, description: f.Tag.Get("jsonschema")}
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty", "omitzero":
				jf.required = false
			case "string":
				jf.asString = true
			}
		}
		direct = append(direct, jf)
		taken[name] = true
	}
	out := direct
	for _, ef := range embedded {
		if !taken[ef.name] {
			taken[ef.name] = true
			out = append(out, ef)
		}
	}
	return out
}
