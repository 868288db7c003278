package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, with FTS5
)

// indexVersion is stored in the index; an index of another version (or of
// another corpus) is rebuilt.
const indexVersion = "emailsearch-index-1"

const schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE emails (
	id         INTEGER PRIMARY KEY,
	message_id TEXT NOT NULL UNIQUE,
	file       TEXT NOT NULL,
	from_addr  TEXT NOT NULL,
	from_name  TEXT NOT NULL,
	to_addrs   TEXT NOT NULL, -- space-separated
	subject    TEXT NOT NULL,
	sent_at    INTEGER NOT NULL, -- Unix seconds
	body       TEXT NOT NULL
);
CREATE INDEX emails_sent_at ON emails (sent_at);
CREATE VIRTUAL TABLE emails_fts USING fts5 (subject, body, content='emails', content_rowid='id');
`

// Inbox is the search index of a corpus: a read-only SQLite database with
// an FTS5 table over subjects and bodies. It is safe for concurrent use.
type Inbox struct {
	db *sql.DB
}

// OpenInbox opens the index at cachePath, building it from the corpus in
// corpusDir first if it is missing, of another version, or of another
// corpus (see Fingerprint). The build writes a temporary file next to
// cachePath and renames it into place, so a crashed or concurrent build
// never leaves a partial index behind. built reports whether it built.
func OpenInbox(ctx context.Context, corpusDir, cachePath string) (inbox *Inbox, built bool, err error) {
	fp, err := Fingerprint(corpusDir)
	if err != nil {
		return nil, false, err
	}
	if inbox, err := openIndex(cachePath, fp); err == nil {
		return inbox, false, nil
	}
	if err := BuildIndex(ctx, corpusDir, fp, cachePath); err != nil {
		return nil, false, err
	}
	inbox, err = openIndex(cachePath, fp)
	if err != nil {
		return nil, false, fmt.Errorf("emailsearch: open the index just built: %w", err)
	}
	return inbox, true, nil
}

// openIndex opens an existing index read-only and checks its version and
// corpus fingerprint.
func openIndex(path, fingerprint string) (*Inbox, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	var version, fp string
	err = db.QueryRow(`SELECT (SELECT value FROM meta WHERE key = 'version'), (SELECT value FROM meta WHERE key = 'fingerprint')`).Scan(&version, &fp)
	if err == nil && (version != indexVersion || fp != fingerprint) {
		err = fmt.Errorf("emailsearch: index %s is stale (version %q, corpus %.12s)", path, version, fp)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Inbox{db: db}, nil
}

// BuildIndex parses the corpus in corpusDir and writes its index to path,
// through a temporary file renamed into place. fingerprint is recorded for
// OpenInbox's staleness check.
func BuildIndex(ctx context.Context, corpusDir, fingerprint, path string) (err error) {
	emails, _, err := LoadCorpus(corpusDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("emailsearch: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("emailsearch: %w", err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer func() {
		if err != nil {
			os.Remove(tmpPath)
		}
	}()
	db, err := sql.Open("sqlite", "file:"+url.PathEscape(tmpPath)+"?_pragma=journal_mode(off)&_pragma=synchronous(off)")
	if err != nil {
		return fmt.Errorf("emailsearch: build index: %w", err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("emailsearch: build index: %w", cerr)
		}
	}()
	db.SetMaxOpenConns(1)
	if err := fillIndex(ctx, db, emails, fingerprint); err != nil {
		return fmt.Errorf("emailsearch: build index %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("emailsearch: build index: %w", err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return fmt.Errorf("emailsearch: %w", err)
	}
	return nil
}

func fillIndex(ctx context.Context, db *sql.DB, emails []Email, fingerprint string) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO emails (message_id, file, from_addr, from_name, to_addrs, subject, sent_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, e := range emails {
		if _, err := stmt.ExecContext(ctx, e.MessageID, e.File, e.FromAddr, e.FromName, strings.Join(e.To, " "),
			e.Subject, e.Date.Unix(), e.Body); err != nil {
			return fmt.Errorf("insert %s: %w", e.File, err)
		}
	}
	for _, q := range []string{
		`INSERT INTO emails_fts (emails_fts) VALUES ('rebuild')`,
		`INSERT INTO emails_fts (emails_fts) VALUES ('optimize')`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for k, v := range map[string]string{"version": indexVersion, "fingerprint": fingerprint} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)`, k, v); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Close closes the index.
func (in *Inbox) Close() error { return in.db.Close() }

// SearchQuery is a search of the inbox: every keyword must occur in the
// subject or body (FTS5, case-insensitive, whole words), From and To match
// part of the sender's and recipients' addresses or the sender's name, and
// the dates (YYYY-MM-DD, UTC) bound when the mail was sent: SentAfter from
// the start of that day, SentBefore up to the start of that day.
type SearchQuery struct {
	Keywords              []string
	From, To              string
	SentAfter, SentBefore string
	Limit                 int // at most this many results; 0 means 10
	// AnyWord ranks like a search engine: a mail matches if it has any of
	// the keywords' words (an FTS5 OR), best bm25 first, instead of all of
	// them (AND). A keyword with a few miscopied words still finds its
	// mail. Compact mode sets it.
	AnyWord bool
}

// SearchResult is one mail a search found.
type SearchResult struct {
	MessageID string `json:"message_id"`
	From      string `json:"from"`
	Subject   string `json:"subject"`
	Date      string `json:"date"`
	Snippet   string `json:"snippet"`
	Row       int64  `json:"-"` // the mail's row in the index: its short id in compact mode
}

// ErrBadQuery is wrapped by the errors of Search for queries the model got
// wrong (no criteria, a malformed date).
var ErrBadQuery = errors.New("emailsearch: bad query")

// dateLayout is how dates are shown to the model and parsed from it.
const dateLayout = "2006-01-02"

// Search returns the mails that match q, best match first (bm25), with a
// snippet of the body around the keywords.
func (in *Inbox) Search(ctx context.Context, q SearchQuery) ([]SearchResult, error) {
	var where []string
	var args []any
	var terms []string
	for _, k := range q.Keywords {
		for _, w := range strings.Fields(k) {
			if !strings.ContainsFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
				continue // punctuation alone: FTS5 would find no token in it
			}
			terms = append(terms, ftsQuote(w))
		}
	}
	if len(terms) > 0 {
		op := " AND "
		if q.AnyWord {
			op = " OR "
		}
		where = append(where, "emails_fts MATCH ?")
		args = append(args, strings.Join(terms, op))
	}
	if q.From != "" {
		where = append(where, "(e.from_addr LIKE ? OR e.from_name LIKE ?)")
		args = append(args, "%"+q.From+"%", "%"+q.From+"%")
	}
	if q.To != "" {
		where = append(where, "e.to_addrs LIKE ?")
		args = append(args, "%"+q.To+"%")
	}
	for _, b := range []struct {
		value, op string
	}{{q.SentAfter, ">="}, {q.SentBefore, "<"}} {
		if b.value == "" {
			continue
		}
		d, err := time.Parse(dateLayout, b.value)
		if err != nil {
			return nil, fmt.Errorf("%w: date %q is not YYYY-MM-DD", ErrBadQuery, b.value)
		}
		where = append(where, "e.sent_at "+b.op+" ?")
		args = append(args, d.Unix())
	}
	if len(where) == 0 {
		return nil, fmt.Errorf("%w: give keywords or at least one filter", ErrBadQuery)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	var query string
	if len(terms) > 0 {
		query = `SELECT e.id, e.message_id, e.from_addr, e.from_name, e.subject, e.sent_at,
			snippet(emails_fts, 1, '', '', ' ... ', 16)
			FROM emails_fts JOIN emails e ON e.id = emails_fts.rowid
			WHERE ` + strings.Join(where, " AND ") + ` ORDER BY bm25(emails_fts), e.id LIMIT ?`
	} else {
		query = `SELECT e.id, e.message_id, e.from_addr, e.from_name, e.subject, e.sent_at, substr(e.body, 1, 120)
			FROM emails e WHERE ` + strings.Join(where, " AND ") + ` ORDER BY e.sent_at, e.id LIMIT ?`
	}
	rows, err := in.db.QueryContext(ctx, query, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("emailsearch: search: %w", err)
	}
	defer rows.Close()
	var out []SearchResult
	for rows.Next() {
		var r SearchResult
		var e Email
		var sent int64
		if err := rows.Scan(&r.Row, &r.MessageID, &e.FromAddr, &e.FromName, &r.Subject, &sent, &r.Snippet); err != nil {
			return nil, fmt.Errorf("emailsearch: search: %w", err)
		}
		r.From, r.Date, r.Snippet = e.From(), formatDate(sent), cleanText(r.Snippet)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("emailsearch: search: %w", err)
	}
	return out, nil
}

// ftsQuote quotes one word of a keyword as an FTS5 string (a phrase of the
// tokens in it): inside double quotes FTS5 reads every character as text
// but a doubled quote, so no user text can be taken for query syntax (NOT,
// NEAR, column filters, parentheses, a leading '-' or '^').
func ftsQuote(w string) string { return `"` + strings.ReplaceAll(w, `"`, `""`) + `"` }

// formatDate shows a send time as the tools do: "2002-08-22 11:36 UTC".
func formatDate(unix int64) string { return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04 UTC") }

// ErrNoEmail is wrapped by the error of Read for an unknown Message-ID.
var ErrNoEmail = errors.New("emailsearch: no email with that message_id")

// Read returns the mail with the given Message-ID (angle brackets
// optional).
func (in *Inbox) Read(ctx context.Context, messageID string) (Email, error) {
	id := strings.Trim(strings.TrimSpace(messageID), "<>")
	return in.read(ctx, "message_id = ?", id, messageID)
}

// ReadRow returns the mail in the given row of the index (Email.Row), the
// short id compact mode shows the model.
func (in *Inbox) ReadRow(ctx context.Context, row int64) (Email, error) {
	return in.read(ctx, "id = ?", row, strconv.FormatInt(row, 10))
}

// read returns the one mail that matches where (with one argument); name
// is how errors refer to it.
func (in *Inbox) read(ctx context.Context, where string, arg any, name string) (Email, error) {
	var e Email
	var to string
	var sent int64
	err := in.db.QueryRowContext(ctx, `SELECT id, message_id, file, from_addr, from_name, to_addrs, subject, sent_at, body
		FROM emails WHERE `+where, arg).Scan(&e.Row, &e.MessageID, &e.File, &e.FromAddr, &e.FromName, &to, &e.Subject, &sent, &e.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return Email{}, fmt.Errorf("%w: %q", ErrNoEmail, name)
	} else if err != nil {
		return Email{}, fmt.Errorf("emailsearch: read %q: %w", name, err)
	}
	e.To, e.Date = strings.Fields(to), time.Unix(sent, 0).UTC()
	return e, nil
}

// headers returns every mail's headers (no bodies), in index order, for
// question generation.
func (in *Inbox) headers(ctx context.Context) ([]Email, error) {
	rows, err := in.db.QueryContext(ctx, `SELECT id, message_id, file, from_addr, from_name, subject, sent_at FROM emails ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("emailsearch: list emails: %w", err)
	}
	defer rows.Close()
	var out []Email
	for rows.Next() {
		var e Email
		var sent int64
		if err := rows.Scan(&e.Row, &e.MessageID, &e.File, &e.FromAddr, &e.FromName, &e.Subject, &sent); err != nil {
			return nil, fmt.Errorf("emailsearch: list emails: %w", err)
		}
		e.Date = time.Unix(sent, 0).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
