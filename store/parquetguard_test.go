package store

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// goodTrajectoriesFile is a file WriteTrajectories wrote.
func goodTrajectoriesFile(t testing.TB) []byte {
	t.Helper()
	d, err := New(t.TempDir(), "p", "m")
	if err != nil {
		t.Fatal(err)
	}
	rows := []TrajectoryRow{
		{GroupIndex: 0, Reward: 1, Messages: []MessageRow{{Role: "user", Content: strings.Repeat("hi ", 50)}, {Role: "assistant", Content: "3", Trainable: true, Logprobs: []TokenRow{{TokenID: 18, Token: "3", Logprob: -0.5}}}}},
		{GroupIndex: 1, Reward: -0.5, Logs: []string{"a", "b"}},
	}
	if err := d.WriteTrajectories("train", 1, rows); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(d.TrajectoriesPath("train", 1))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// withFooter returns data with its footer decoded, changed by edit and
// encoded again.
func withFooter(t testing.TB, data []byte, edit func(*format.FileMetaData)) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	meta := *f.Metadata()
	edit(&meta)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	end := len(data) - 8 - int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	out := append(bytes.Clone(data[:end]), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// withFirstFrameSize returns data with the zstd frame of its first page
// stating a content size of size bytes (in an 8-byte field), the page's
// header and the footer's offsets moved to match.
func withFirstFrameSize(t testing.TB, data []byte, size uint64) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	md := f.Metadata().RowGroups[0].Columns[0].MetaData
	start := md.DataPageOffset
	if md.DictionaryPageOffset != 0 {
		start = md.DictionaryPageOffset
	}
	n, err := thriftStructLen(data[start:])
	if err != nil {
		t.Fatal(err)
	}
	var h format.PageHeader
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[start:start+int64(n)], &h); err != nil {
		t.Fatal(err)
	}
	frame := data[start+int64(n) : start+int64(n)+int64(h.CompressedPageSize)]
	if binary.LittleEndian.Uint32(frame) != 0xFD2FB528 {
		t.Fatal("the first page is not one zstd frame")
	}
	desc := frame[4]
	head := 5
	if desc&0x20 == 0 {
		head++ // window descriptor
	}
	head += [4]int{0, 1, 2, 4}[desc&3]
	fcsBytes := [4]int{0, 2, 4, 8}[desc>>6]
	if fcsBytes == 0 && desc&0x20 != 0 {
		fcsBytes = 1
	}
	body := append(bytes.Clone(frame[:head]), make([]byte, 8)...)
	body[4] = desc | 0xC0
	binary.LittleEndian.PutUint64(body[head:], size)
	body = append(body, frame[head+fcsBytes:]...)
	h.CompressedPageSize = int32(len(body))
	header, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		t.Fatal(err)
	}
	pageEnd := start + int64(n) + int64(len(frame))
	out := append(bytes.Clone(data[:start]), header...)
	out = append(out, body...)
	out = append(out, data[pageEnd:]...)
	shift := int64(len(out) - len(data))
	return withFooter(t, out, func(m *format.FileMetaData) {
		for _, rg := range m.RowGroups {
			for i := range rg.Columns {
				c := &rg.Columns[i].MetaData
				if c.DataPageOffset > start {
					c.DataPageOffset += shift
				}
				if c.DictionaryPageOffset > start {
					c.DictionaryPageOffset += shift
				}
				if c.DataPageOffset == md.DataPageOffset {
					c.TotalCompressedSize += shift
				}
			}
		}
	})
}

type hostileFile struct {
	name string
	data []byte
	want string // in the error
}

// hostileTrajectoryFiles are files that declare far more than they hold,
// each a way parquet-go alone allocates what the file says.
func hostileTrajectoryFiles(t testing.TB, good []byte) []hostileFile {
	footerLen := bytes.Clone(good)
	binary.LittleEndian.PutUint32(footerLen[len(footerLen)-8:], 0x7ffffff0)

	// A footer whose row_groups list (field 4) claims 2^28 structs.
	listFooter := []byte{0x49, 0xfc, 0x80, 0x80, 0x80, 0x01, 0x00}
	list := append([]byte("PAR1"), listFooter...)
	list = binary.LittleEndian.AppendUint32(list, uint32(len(listFooter)))
	list = append(list, "PAR1"...)

	rowCount := withFooter(t, good, func(m *format.FileMetaData) {
		m.NumRows = 1 << 40
		m.RowGroups[0].NumRows = 1 << 40
	})
	chunkSize := withFooter(t, good, func(m *format.FileMetaData) {
		m.RowGroups[0].Columns[0].MetaData.TotalCompressedSize = 1 << 40
	})
	return []hostileFile{
		{"footer length", footerLen, "footer of"},
		{"thrift list", list, "list of"},
		{"row count", rowCount, "rows"},
		{"column chunk", chunkSize, "column chunk"},
		{"zstd content size", withFirstFrameSize(t, good, 1<<29), "zstd frames"},
		{"no leading mark", append([]byte("PAR0"), good[4:]...), "PAR1"},
	}
}

// TestReadTrajectories_HostileSizes wants each hostile file refused with an
// error and a small allocation. Without the guard, reading them allocates
// 2 GiB (footer length), dies out of memory (row count: the crash CI's
// fuzzer found) or runs on into the data.
func TestReadTrajectories_HostileSizes(t *testing.T) {
	good := goodTrajectoriesFile(t)
	if rows, _, err := decodeTrajectories(good); err != nil || len(rows) != 2 || rows[0].Messages[1].Logprobs[0].TokenID != 18 {
		t.Fatalf("the good file: %d rows, %v", len(rows), err)
	}
	if _, _, err := decodeTrajectories(withFirstFrameSize(t, good, 0)); err == nil {
		t.Fatal("a frame stating 0 bytes read without error: the frame edit is not where the reader looks")
	}
	for _, c := range hostileTrajectoryFiles(t, good) {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.parquet")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rows, err := ReadTrajectoriesFile(path)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("read %d rows, error %v; want an error saying %q", len(rows), err, c.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Fatalf("allocated %d MiB to refuse it", alloc>>20)
			}
		})
	}
}
