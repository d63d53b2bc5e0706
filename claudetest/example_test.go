package claudetest_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"

	"github.com/claudectl/claudectl/claudetest"
)

// The fake needs no CLI: any Messages API client can talk to it.
func Example() {
	srv := claudetest.NewServer(claudetest.Script(
		claudetest.Reply(claudetest.Text("hello")),
	))
	defer srv.Close()

	body := `{"model":"claude-test","max_tokens":100,"stream":true,
		"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			fmt.Println(line)
		}
	}
	http.DefaultClient.CloseIdleConnections()

	fmt.Println(srv.Requests()[0].LastUserText())
	// Output:
	// {"type":"message_start","message":{"id":"msg_claudetest_000001","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}
	// {"type": "ping"}
	// {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
	// {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}
	// {"type":"content_block_stop","index":0}
	// {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2}}
	// {"type":"message_stop"}
	// hi
}

// A Responder can pick the reply from the request.
func ExampleResponderFunc() {
	echo := claudetest.ResponderFunc(func(r *claudetest.Request) claudetest.Turn {
		if strings.Contains(r.LastUserText(), "fail") {
			return claudetest.Error(529, "", "")
		}
		return claudetest.Reply(claudetest.Text("you said: " + r.LastUserText()))
	})
	srv := claudetest.NewServer(echo)
	defer srv.Close()

	for _, prompt := range []string{"ping", "please fail"} {
		body := fmt.Sprintf(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":%q}]}`, prompt)
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		var sb strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			sb.WriteString(sc.Text())
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, sb.String())
	}
	http.DefaultClient.CloseIdleConnections()
	// Output:
	// 200 {"id":"msg_claudetest_000001","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"you said: ping"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":4}}
	// 529 {"type":"error","error":{"type":"overloaded_error","message":"claudetest: scripted 529 overloaded_error"},"request_id":"req_claudetest_000002"}
}
