package door

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestBodyModel: the top-level "model" string, else "name"; everything
// else is one of the two 400s.
func TestBodyModel(t *testing.T) {
	for _, tt := range []struct {
		name, body, want string
		err              error
	}{
		{"openai chat", `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"stream":true}`, "qwen", nil},
		{"model after a long value", `{"messages":[{"content":"a \"model\": \"x\" {[}]"}],"model":"qwen"}`, "qwen", nil},
		{"spaces everywhere", " \n{ \"model\" :\t\"qwen\" , \"x\" : [ 1 , 2 ] }\r\n", "qwen", nil},
		{"nested model ignored", `{"options":{"model":"x"},"model":"qwen"}`, "qwen", nil},
		{"escaped value", `{"model":"qw\u0065n\/7b"}`, "qwen/7b", nil},
		{"escaped key", `{"mod\u0065l":"qwen"}`, "qwen", nil},
		{"last of repeated keys", `{"model":"a","model":"b"}`, "b", nil},
		{"ollama show by name", `{"name":"llama3"}`, "llama3", nil},
		{"model wins over name", `{"name":"a","model":"b"}`, "b", nil},
		{"numbers and literals", `{"a":-1.5e3,"b":true,"c":null,"model":"m","d":false}`, "m", nil},
		{"no model", `{"prompt":"hi"}`, "", errNoModel},
		{"model not a string", `{"model":7,"name":"x"}`, "", errNoModel},
		{"model null", `{"model":null}`, "", errNoModel},
		{"model empty", `{"model":""}`, "", errNoModel},
		{"name not a string", `{"name":["x"]}`, "", errNoModel},
		{"empty object", `{}`, "", errNoModel},
		{"an array", `[{"model":"m"}]`, "", errNoModel},
		{"a string", `"model"`, "", errNoModel},
		{"not JSON", `model=qwen`, "", errNotJSON},
		{"truncated", `{"model":"qwen"`, "", errNotJSON},
		{"trailing garbage", `{"model":"qwen"}x`, "", errNotJSON},
		{"only spaces", "  ", "", errNotJSON},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := bodyModel([]byte(tt.body))
			if !errors.Is(err, tt.err) || n.model != tt.want {
				t.Fatalf("bodyModel = %q, %v; want %q, %v", n.model, err, tt.want, tt.err)
			}
		})
	}
}

// TestRewrite: the alias's string is replaced in place; every other byte
// of the body stays.
func TestRewrite(t *testing.T) {
	body := []byte(`{ "messages":[{"content":"qwen"}], "model" : "q\u0077en" ,"stream":true}`)
	n, err := bodyModel(body)
	if err != nil || n.model != "qwen" {
		t.Fatal(n, err)
	}
	got := string(rewrite(body, n, []byte(`"qwen2.5-7b-instruct"`)))
	if want := `{ "messages":[{"content":"qwen"}], "model" : "qwen2.5-7b-instruct" ,"stream":true}`; got != want {
		t.Fatalf("rewrite = %s\nwant      %s", got, want)
	}
}

// FuzzBodyModel: bodyModel agrees with encoding/json on any input: what is
// valid, and which string the top-level "model" (else "name") holds.
func FuzzBodyModel(f *testing.F) {
	for _, s := range []string{`{"model":"m"}`, `{"name":"n","x":[{"model":1}]}`, `{"model":"a\"b","model":"c"}`, `[1]`, `{"a":{"b":"}"}}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := bodyModel(body)
		var top map[string]json.RawMessage
		if jerr := json.Unmarshal(body, &top); jerr != nil {
			if json.Valid(body) != !errors.Is(err, errNotJSON) {
				t.Fatalf("%q: validity disagrees: %v / %v", body, err, jerr)
			}
			if err == nil {
				t.Fatalf("%q: a model %q in what is not a JSON object", body, n.model)
			}
			return
		}
		want := ""
		if raw, ok := top["model"]; ok {
			_ = json.Unmarshal(raw, &want)
		} else if raw, ok := top["name"]; ok {
			_ = json.Unmarshal(raw, &want)
		}
		if n.model != want || (want == "") != (err != nil) {
			t.Fatalf("%q: bodyModel %q %v, encoding/json %q", body, n.model, err, want)
		}
		if err == nil {
			var s string
			if json.Unmarshal(body[n.start:n.end], &s) != nil || s != want {
				t.Fatalf("%q: span %d..%d is not the model's string", body, n.start, n.end)
			}
		}
	})
}
