package ruler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/atomicfile"
)

// cache keeps valid judge answers on disk, one JSON file per request, named
// by the SHA-256 of everything that shapes the answer: the endpoint, the
// model, the messages, the schema and the sampling settings. Scoring the
// same group again with the same judge costs nothing.
type cache struct{ dir string }

// defaultCacheDir is where answers go unless Options.CacheDir says.
func defaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("ruler: no cache directory (set Options.CacheDir or NoCache): %w", err)
	}
	return filepath.Join(d, "art", "ruler"), nil
}

func cacheKey(j Judge, msgs []art.Message, schema json.RawMessage) string {
	b, _ := json.Marshal(struct {
		BaseURL, Model string
		Messages       []art.Message
		Schema         json.RawMessage
		Temperature    *float64
		MaxTokens      int
		Extra          map[string]any
	}{j.BaseURL, j.Model, msgs, schema, j.Temperature, j.MaxTokens, j.ExtraBody})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (c cache) path(key string) string { return filepath.Join(c.dir, key[:2], key+".json") }

// get returns a stored answer; a missing or unreadable entry is a miss.
func (c cache) get(key string) (Answer, bool) {
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return Answer{}, false
	}
	var a Answer
	if json.Unmarshal(b, &a) != nil || a.Content == "" {
		return Answer{}, false
	}
	return a, true
}

// put stores an answer atomically (a crash never leaves half an entry).
func (c cache) put(key string, a Answer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	p := c.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, b, 0o644)
}
