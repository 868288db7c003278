package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxBodyBytes bounds the body kept of each mail; longer bodies (mostly
// spam with attachments) are cut.
const MaxBodyBytes = 16 << 10

// Email is one parsed mail of the corpus.
type Email struct {
	MessageID string    // the Message-ID header without its angle brackets
	File      string    // path within the corpus, e.g. "easy-ham-1/00001.7c53....txt"
	FromAddr  string    // lower-case address of the sender
	FromName  string    // display name of the sender, "" if none
	To        []string  // lower-case addresses of To and Cc
	Subject   string    // decoded (RFC 2047), whitespace collapsed
	Date      time.Time // in UTC
	Body      string    // the text/plain body (first text part of a multipart mail), valid UTF-8
	Row       int64     // the mail's row in the index (set by Inbox methods, 0 for a parsed mail)
}

// From returns the sender as a mail header writes it.
func (e *Email) From() string {
	if e.FromName == "" {
		return e.FromAddr
	}
	return (&mail.Address{Name: e.FromName, Address: e.FromAddr}).String()
}

// ErrSkip is wrapped by the error of ParseEmail for a mail that lacks what
// the index needs (a Message-ID, a sender address, a date).
var ErrSkip = errors.New("emailsearch: mail lacks a required header")

var wordDecoder = &mime.WordDecoder{
	// Charsets other than UTF-8, ASCII and Latin-1 are kept as raw bytes
	// (made valid UTF-8 later) rather than failing the header.
	CharsetReader: func(charset string, input io.Reader) (io.Reader, error) { return input, nil },
}

// ParseEmail parses one raw mail of the corpus. The corpus keeps each mail
// as mbox wrote it, so a leading "From " envelope line is dropped first.
func ParseEmail(raw []byte, file string) (Email, error) {
	if bytes.HasPrefix(raw, []byte("From ")) {
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			raw = raw[i+1:]
		}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Email{}, fmt.Errorf("emailsearch: %s: %w", file, err)
	}
	h := msg.Header
	e := Email{File: file, MessageID: strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>")}
	if e.MessageID == "" || strings.ContainsAny(e.MessageID, " \t\r\n") {
		return Email{}, fmt.Errorf("%w: %s: no usable Message-ID", ErrSkip, file)
	}
	from, err := parseAddress(h.Get("From"))
	if err != nil {
		return Email{}, fmt.Errorf("%w: %s: From: %v", ErrSkip, file, err)
	}
	e.FromAddr, e.FromName = strings.ToLower(from.Address), cleanText(from.Name)
	if e.Date, err = mail.ParseDate(h.Get("Date")); err != nil {
		return Email{}, fmt.Errorf("%w: %s: Date: %v", ErrSkip, file, err)
	}
	e.Date = e.Date.UTC()
	for _, key := range []string{"To", "Cc"} {
		if v := h.Get(key); v != "" {
			if list, err := mail.ParseAddressList(v); err == nil {
				for _, a := range list {
					e.To = append(e.To, strings.ToLower(a.Address))
				}
			}
		}
	}
	subject, err := wordDecoder.DecodeHeader(h.Get("Subject"))
	if err != nil {
		subject = h.Get("Subject")
	}
	e.Subject = cleanText(subject)
	body, err := textBody(h.Get("Content-Type"), h.Get("Content-Transfer-Encoding"), msg.Body, 0)
	if err != nil {
		return Email{}, fmt.Errorf("emailsearch: %s: body: %w", file, err)
	}
	if len(body) > MaxBodyBytes {
		body = body[:MaxBodyBytes]
	}
	e.Body = strings.ToValidUTF8(string(body), "\uFFFD")
	return e, nil
}

// parseAddress parses a From header, falling back to the first thing that
// looks like an address for headers net/mail rejects (common in 2002 spam).
func parseAddress(v string) (*mail.Address, error) {
	if a, err := mail.ParseAddress(v); err == nil {
		return a, nil
	}
	if m := addrRE.FindString(v); m != "" {
		return &mail.Address{Address: m}, nil
	}
	return nil, fmt.Errorf("no address in %.60q", v)
}

var addrRE = regexp.MustCompile(`[A-Za-z0-9._%+\-=]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`)

// cleanText makes s valid UTF-8, on one line, with single spaces.
func cleanText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.Join(strings.Fields(s), " ")
}

// textBody returns the decoded text of a body: a text part as is, the first
// text/plain part (else the first text part) of a multipart body, searched
// to a depth of 3.
func textBody(contentType, encoding string, r io.Reader, depth int) ([]byte, error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mediaType = "text/plain" // missing or malformed: RFC 2045's default
	}
	if strings.HasPrefix(mediaType, "multipart/") && params["boundary"] != "" && depth < 3 {
		mr := multipart.NewReader(r, params["boundary"])
		var fallback []byte
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				break // io.EOF, or a malformed part: keep what we have
			}
			ct := p.Header.Get("Content-Type")
			b, err := textBody(ct, p.Header.Get("Content-Transfer-Encoding"), p, depth+1)
			if err != nil || len(b) == 0 {
				continue
			}
			if ct == "" || strings.HasPrefix(strings.ToLower(ct), "text/plain") {
				return b, nil
			}
			if fallback == nil {
				fallback = b
			}
		}
		return fallback, nil
	}
	if !strings.HasPrefix(mediaType, "text/") {
		return nil, nil // an attachment
	}
	var dec io.Reader = r
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		dec = quotedprintable.NewReader(r)
	case "base64":
		dec = base64.NewDecoder(base64.StdEncoding, &newlineStripper{r: r})
	}
	b, err := io.ReadAll(io.LimitReader(dec, 4*MaxBodyBytes))
	if err != nil && len(b) == 0 {
		// Broken encodings are common in spam: fall back to nothing rather
		// than losing the mail.
		return nil, nil
	}
	return b, nil
}

// newlineStripper drops CR and LF, which base64 bodies wrap lines with.
type newlineStripper struct{ r io.Reader }

func (s *newlineStripper) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' {
			p[j] = c
			j++
		}
	}
	return j, err
}

// corpusFiles lists the mails of the corpus (every *.txt below dir, as
// scripts/fetch-assets.sh installs it), sorted, relative to dir.
func corpusFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".txt") {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("emailsearch: corpus %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("emailsearch: corpus %s has no mails (*.txt); run scripts/fetch-assets.sh spam_assassin", dir)
	}
	slices.Sort(files)
	return files, nil
}

// Fingerprint identifies a corpus directory by its files' names and sizes:
// an index built from it is reused only while the fingerprint matches.
func Fingerprint(dir string) (string, error) {
	files, err := corpusFiles(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("emailsearch: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\n", f, fi.Size())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LoadCorpus parses every mail of the corpus in dir, in file order. Mails
// that cannot be parsed or lack a Message-ID, sender or date are skipped
// and counted, and so are repeats of a Message-ID already seen.
func LoadCorpus(dir string) (emails []Email, skipped int, err error) {
	files, err := corpusFiles(dir)
	if err != nil {
		return nil, 0, err
	}
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, 0, fmt.Errorf("emailsearch: %w", err)
		}
		e, err := ParseEmail(raw, f)
		if err != nil || seen[e.MessageID] {
			skipped++
			continue
		}
		seen[e.MessageID] = true
		emails = append(emails, e)
	}
	return emails, skipped, nil
}
