package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

const cookieName = "art_dashboard"

// cookieValue is what the auth cookie holds: an HMAC of a fixed label keyed
// by the API key. It proves knowledge of the key without storing it in the
// browser, and stays valid across restarts with the same key.
func cookieValue(key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("art dashboard cookie v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// authorized checks the API key when one is configured: the Bearer header,
// the cookie, or ?key= (which sets the cookie and redirects to the same URL
// without the key). It answers 401 itself when none is right.
func (d *Dashboard) authorized(w http.ResponseWriter, r *http.Request) bool {
	if d.cfg.APIKey == "" {
		return true
	}
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && d.sameKey(strings.TrimSpace(h)) {
		return true
	}
	if c, err := r.Cookie(cookieName); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(d.cookie)) == 1 {
		return true
	}
	q := r.URL.Query()
	if key := q.Get("key"); key != "" && d.sameKey(key) {
		// Lax, not Strict: a link to the dashboard followed from a chat or
		// a mail is a navigation from another site, which a Strict cookie
		// is not sent with (a 401 until the key is given again). Every
		// route is a read (GET), and Lax still keeps the cookie off other
		// sites' requests for scripts, frames and fetches.
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: d.cookie, Path: strings.TrimSuffix(d.cfg.BasePath, "/"),
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
		})
		q.Del("key")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	msg := "this dashboard needs the server's API key: open " + d.cfg.BasePath + "?key=YOUR_API_KEY once (a cookie keeps you signed in)"
	if strings.HasPrefix(r.URL.Path, d.cfg.BasePath+"api/") {
		writeError(w, http.StatusUnauthorized, msg)
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(msg + "\n"))
	return false
}

// sameKey compares key with the configured one in constant time (through
// hashes, so the length does not leak either).
func (d *Dashboard) sameKey(key string) bool {
	a, b := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(d.cfg.APIKey))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
