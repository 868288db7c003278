package apierr

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Ensure the message an endpoint returns with a 400 reaches the caller,
// and the error stays an *openai.Error.
func TestWithMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"temperature must be a number >= 0, got -1","type":"invalid_request_error","param":"temperature","code":null}}`)
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err == nil {
		t.Fatal("no error from a 400")
	}
	got := WithMessage(err)
	var e *openai.Error
	if !strings.Contains(got.Error(), "400 Bad Request: temperature must be a number >= 0, got -1") || !errors.As(got, &e) {
		t.Fatalf("WithMessage: %q (an *openai.Error: %v); want the status and the server's message", got, errors.As(got, &e))
	}
	if plain := errors.New("x"); WithMessage(plain) != plain {
		t.Error("WithMessage changed an error that is not the API's")
	}
}
