package claude

import (
	"strings"
	"testing"
)

func TestDecodeErrorOf(t *testing.T) {
	var d Decoder
	ok, _ := d.Decode([]byte(`{"type":"result","subtype":"success","usage":{"input_tokens":3,"output_tokens":4}}`))
	if err, _ := DecodeErrorOf(ok); err != nil {
		t.Fatalf("a well-formed result: %v", err)
	}
	bad, _ := d.Decode([]byte(`{"type":"result","subtype":"success","usage":"lots"}`))
	r, isResult := bad.(*ResultMessage)
	if !isResult || r.Usage != nil {
		t.Fatalf("tolerant decoding gave %#v, want a result without usage", bad)
	}
	err, recovered := DecodeErrorOf(bad)
	if err == nil || !recovered || err.Type != "result" || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("DecodeErrorOf = %v, %v; want the strict error about usage, recovered", err, recovered)
	}
	unk, _ := d.Decode([]byte(`{"type":"brand_new","x":1}`))
	if err, _ := DecodeErrorOf(unk); err != nil {
		t.Fatalf("an unknown type is not a decode error: %v", err)
	}
}
