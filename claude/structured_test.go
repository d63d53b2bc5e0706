package claude_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/claude"
	"github.com/google/go-cmp/cmp"
)

type address struct {
	City string `json:"city" jsonschema:"the city's name"`
	Zip  string `json:"zip,omitempty"`
}

type Embedded struct {
	Shared string `json:"shared"`
	Name   string `json:"name"` // hidden by person.Name
}

type hidden struct {
	Inner int `json:"inner"`
}

type person struct {
	Name     string            `json:"name"`
	Age      int               `json:"age"`
	Height   float64           `json:"height,omitempty"`
	Admin    bool              `json:"admin"`
	Count    uint8             `json:"count,omitzero"`
	Tags     []string          `json:"tags"`
	Home     *address          `json:"home,omitempty"`
	Past     []address         `json:"past,omitempty"`
	Scores   map[string]int    `json:"scores,omitempty"`
	Born     time.Time         `json:"born"`
	Extra    json.RawMessage   `json:"extra,omitempty"`
	Anything any               `json:"anything,omitempty"`
	Blob     []byte            `json:"blob,omitempty"`
	ID       int64             `json:"id,string"`
	Labels   map[string]string `json:",omitempty"`
	Skipped  string            `json:"-"`
	//lint:ignore U1000 an unexported field the schema must leave out
	private string
	Embedded
	hidden
}

func TestSchemaFor(t *testing.T) {
	got, err := claude.SchemaFor[person]()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
		"type": "object",
		"properties": {
			"name": {"type": "string"},
			"age": {"type": "integer"},
			"height": {"type": "number"},
			"admin": {"type": "boolean"},
			"count": {"type": "integer", "minimum": 0},
			"tags": {"type": "array", "items": {"type": "string"}},
			"home": {"type": "object", "properties": {"city": {"type": "string", "description": "the city's name"}, "zip": {"type": "string"}}, "required": ["city"], "additionalProperties": false},
			"past": {"type": "array", "items": {"type": "object", "properties": {"city": {"type": "string", "description": "the city's name"}, "zip": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},
			"scores": {"type": "object", "additionalProperties": {"type": "integer"}},
			"born": {"type": "string", "format": "date-time"},
			"extra": {},
			"anything": {},
			"blob": {"type": "string"},
			"id": {"type": "string"},
			"Labels": {"type": "object", "additionalProperties": {"type": "string"}},
			"shared": {"type": "string"},
			"inner": {"type": "integer"}
		},
		"required": ["name", "age", "admin", "tags", "born", "id", "shared", "inner"],
		"additionalProperties": false
	}`
	if diff := cmp.Diff(jsonOf(t, []byte(want)), jsonOf(t, got)); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	// Properties keep the field order.
	if !strings.HasPrefix(string(got), `{"type":"object","properties":{"name":{"type":"string"},"age":`) {
		t.Errorf("schema starts %.80s", got)
	}

	type node struct {
		Children []node `json:"children"`
	}
	for name, f := range map[string]func() (json.RawMessage, error){
		"slice":     claude.SchemaFor[[]string],
		"string":    claude.SchemaFor[string],
		"chan":      claude.SchemaFor[struct{ C chan int }],
		"recursive": claude.SchemaFor[node],
		"int keys":  claude.SchemaFor[struct{ M map[int]string }],
	} {
		if s, err := f(); err == nil {
			t.Errorf("%s: SchemaFor = %s, want an error", name, s)
		}
	}
	if s, err := claude.SchemaFor[map[string]int](); err != nil || string(s) != `{"type":"object","additionalProperties":{"type":"integer"}}` {
		t.Errorf("map schema = %s, %v", s, err)
	}
}

func TestDecodeStructured(t *testing.T) {
	result := func(out string) *claude.ResultMessage {
		return &claude.ResultMessage{Subtype: "success", StructuredOutput: json.RawMessage(out)}
	}
	good := `{"name":"Ada","age":36,"admin":true,"tags":["x"],"born":"1815-12-10T00:00:00Z","id":"7","shared":"s","inner":1,
		"home":{"city":"London"},"scores":{"maths":100},"unknown":"ignored"}`
	p, err := claude.DecodeStructured[person](result(good))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "Ada" || p.Age != 36 || !p.Admin || p.Home == nil || p.Home.City != "London" || p.ID != 7 || p.Scores["maths"] != 100 ||
		p.Shared != "s" || p.Inner != 1 || p.Born.Year() != 1815 {
		t.Errorf("decoded %+v", p)
	}

	for _, tc := range []struct {
		out, field, msg string
	}{
		{`{"age":36,"admin":true,"tags":[],"born":"2000-01-01T00:00:00Z","id":"1","shared":"","inner":0}`, "name", "missing"},
		{strings.Replace(good, `"age":36`, `"age":"old"`, 1), "age", "got string, want integer"},
		{strings.Replace(good, `"age":36`, `"age":36.5`, 1), "age", "got 36.5, want integer"},
		{strings.Replace(good, `"city":"London"`, `"zip":"N1"`, 1), "home.city", "missing"},
		{strings.Replace(good, `"home":{"city":"London"}`, `"past":[{"city":"A"},{"city":3}]`, 1), "past[1].city", "got number, want string"},
		{strings.Replace(good, `"maths":100`, `"maths":"A+"`, 1), "scores.maths", "got string, want integer"},
		{strings.Replace(good, `"tags":["x"]`, `"tags":"x"`, 1), "tags", "got string, want array"},
		{strings.Replace(good, `"id":"7"`, `"id":7`, 1), "id", "got number, want string"},
		{`[1,2]`, "", "got array, want object"},
	} {
		_, err := claude.DecodeStructured[person](result(tc.out))
		var se *claude.StructuredOutputError
		if !errors.As(err, &se) || se.Field != tc.field || se.Msg != tc.msg || se.Type != "claude_test.person" {
			t.Errorf("%s: err = %v, want field %q: %s", tc.out, err, tc.field, tc.msg)
		}
	}
	// Errors encoding/json finds itself come back typed too.
	_, err = claude.DecodeStructured[person](result(strings.Replace(good, `"1815-12-10T00:00:00Z"`, `"yesterday"`, 1)))
	var se *claude.StructuredOutputError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "yesterday") {
		t.Errorf("bad time: %v", err)
	}

	// No output.
	for _, r := range []*claude.ResultMessage{nil, result(""), result("null")} {
		if _, err := claude.DecodeStructured[person](r); !errors.Is(err, claude.ErrNoStructuredOutput) {
			t.Errorf("DecodeStructured(%v) = %v, want ErrNoStructuredOutput", r, err)
		}
	}
	failed := &claude.ResultMessage{Subtype: "error_max_structured_output_retries", IsError: true,
		Errors: []string{"Failed to provide valid structured output after 5 attempts"}}
	_, err = claude.DecodeStructured[person](failed)
	var re *claude.ResultError
	if !errors.Is(err, claude.ErrNoStructuredOutput) || !errors.As(err, &re) || !strings.Contains(err.Error(), "5 attempts") {
		t.Errorf("failed result: %v", err)
	}
}
