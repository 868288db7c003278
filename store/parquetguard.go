package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// parquet-go allocates what a file declares (the footer's length, a thrift
// list's size, a page's size, a zstd frame's content size, the row count)
// before it checks that the file holds that much, and panics on some damaged
// page indexes. A trajectories file of a few kilobytes, damaged or hostile,
// could then take gigabytes or the process (the fuzzer found both). So before
// parquet-go decodes anything, every size the file declares is walked against
// the bytes present and against caps far above what a training step writes
// (ART's files and ours: one row group, a footer of a few KiB).
const (
	maxTrajectoriesFile = 1 << 30 // bytes read into memory
	maxFooter           = 1 << 20
	maxRows             = 1 << 22
	maxPageValues       = 1 << 22 // one page's values (levels included)
	maxFileValues       = 1 << 26 // all pages' values together
	maxUncompressed     = 1 << 30 // all pages' declared uncompressed bytes together
	maxZstdWindow       = 64 << 20
	maxThriftDepth      = 32
	zstdMaxBlock        = 128 << 10
	readBatch           = 64
)

// decodeTrajectories decodes a trajectories file held in data, refusing with
// an error (never a panic, never an allocation out of proportion to data) a
// file whose declared sizes do not fit it. ids are the call ids its footer
// lists (logIDsKey), if any.
func decodeTrajectories(data []byte) (rows []TrajectoryRow, ids []string, err error) {
	if err := checkFooter(data); err != nil {
		return nil, nil, err
	}
	defer func() {
		// The sizes are bounded; a decoding bug in parquet-go on a damaged
		// file is still possible, and it runs in this goroutine.
		if r := recover(); r != nil {
			rows, ids, err = nil, nil, fmt.Errorf("damaged parquet file: %v", r)
		}
	}()
	file, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, nil, err
	}
	if err := checkPages(data, file.Metadata()); err != nil {
		return nil, nil, err
	}
	if v, ok := file.Lookup(logIDsKey); ok && v != "" {
		ids = strings.Split(v, ",")
	}
	reader := parquet.NewGenericReader[TrajectoryRow](file)
	defer reader.Close()
	for {
		// A fresh batch each time, so that no row kept shares memory
		// with one read later.
		batch := make([]TrajectoryRow, readBatch)
		n, err := reader.Read(batch)
		rows = append(rows, batch[:n]...)
		if err == io.EOF {
			if !hasLogprobs(file.Schema()) {
				// parquet-go fills the absent column of a file whose
				// lists may hold nulls (DuckDB's, pyarrow's: ART's) with
				// one zero token per message.
				for i := range rows {
					for j := range rows[i].Messages {
						rows[i].Messages[j].Logprobs = nil
					}
				}
			}
			return rows, ids, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if int64(len(rows)) > file.NumRows() {
			return nil, nil, fmt.Errorf("damaged parquet file: more rows than the %d it declares", file.NumRows())
		}
	}
}

// hasLogprobs reports whether the file has the messages' logprobs column
// (ours; ART's files do not).
func hasLogprobs(s *parquet.Schema) bool {
	for _, path := range s.Columns() {
		if len(path) > 0 && path[0] == "messages" && slices.Contains(path, "logprobs") {
			return true
		}
	}
	return false
}

// checkFooter checks both magic marks, that the footer's declared length
// fits the file, and that every list, map and string in the footer's thrift
// claims no more than the bytes left.
func checkFooter(data []byte) error {
	if len(data) < 12 || string(data[:4]) != "PAR1" || string(data[len(data)-4:]) != "PAR1" {
		return errors.New("not a parquet file (no PAR1 marks at both ends; encrypted files are not supported)")
	}
	n := int64(binary.LittleEndian.Uint32(data[len(data)-8:]))
	if n > int64(len(data))-12 || n > maxFooter {
		return fmt.Errorf("damaged parquet file: footer of %d bytes in a file of %d", n, len(data))
	}
	footer := data[len(data)-8-int(n) : len(data)-8]
	if _, err := thriftStructLen(footer); err != nil {
		return fmt.Errorf("damaged parquet footer: %w", err)
	}
	return nil
}

// checkPages walks every page header of every column chunk, as parquet-go
// will read them, and checks the sizes and counts they declare.
func checkPages(data []byte, meta *format.FileMetaData) error {
	if meta.NumRows < 0 || meta.NumRows > maxRows {
		return fmt.Errorf("damaged or oversized parquet file: %d rows (at most %d)", meta.NumRows, maxRows)
	}
	dataEnd := int64(len(data)) - 8 - int64(binary.LittleEndian.Uint32(data[len(data)-8:]))
	var rows, values, uncompressed int64
	for _, rg := range meta.RowGroups {
		if rg.NumRows < 0 {
			return fmt.Errorf("damaged parquet file: row group of %d rows", rg.NumRows)
		}
		rows += rg.NumRows
		for _, cc := range rg.Columns {
			if cc.FilePath != "" {
				return fmt.Errorf("parquet column chunk in another file (%q) is not supported", cc.FilePath)
			}
			md := cc.MetaData
			switch md.Codec {
			case format.Uncompressed, format.Snappy, format.Zstd:
			default:
				return fmt.Errorf("parquet compression %s is not supported (ART and ART for Go write ZSTD)", md.Codec)
			}
			start := md.DataPageOffset
			if md.DictionaryPageOffset != 0 {
				start = md.DictionaryPageOffset
			}
			if start < 4 || md.TotalCompressedSize < 0 || md.TotalCompressedSize > dataEnd-start {
				return fmt.Errorf("damaged parquet file: column chunk at %d of %d bytes outside the data (ends at %d)", start, md.TotalCompressedSize, dataEnd)
			}
			chunk := data[start : start+md.TotalCompressedSize]
			for len(chunk) > 0 {
				page, rest, err := nextPage(chunk, md.Codec)
				if err != nil {
					return fmt.Errorf("damaged parquet page at byte %d: %w", start+md.TotalCompressedSize-int64(len(chunk)), err)
				}
				values += page.values
				uncompressed += page.uncompressed
				chunk = rest
			}
			if values > maxFileValues || uncompressed > maxUncompressed {
				return fmt.Errorf("damaged or oversized parquet file: %d values, %d uncompressed bytes (at most %d and %d)", values, uncompressed, maxFileValues, maxUncompressed)
			}
		}
	}
	if rows != meta.NumRows {
		return fmt.Errorf("damaged parquet file: %d rows declared, %d in its row groups", meta.NumRows, rows)
	}
	return nil
}

type pageSize struct{ values, uncompressed int64 }

// nextPage checks the page at the start of chunk and returns what it declares
// and the bytes after it.
func nextPage(chunk []byte, codec format.CompressionCodec) (pageSize, []byte, error) {
	n, err := thriftStructLen(chunk)
	if err != nil {
		return pageSize{}, nil, fmt.Errorf("header: %w", err)
	}
	var h format.PageHeader
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), chunk[:n], &h); err != nil {
		return pageSize{}, nil, fmt.Errorf("header: %w", err)
	}
	if h.CompressedPageSize < 0 || int64(h.CompressedPageSize) > int64(len(chunk)-n) {
		return pageSize{}, nil, fmt.Errorf("%d bytes declared, %d left in the column chunk", h.CompressedPageSize, len(chunk)-n)
	}
	if h.UncompressedPageSize < 0 {
		return pageSize{}, nil, fmt.Errorf("uncompressed size %d", h.UncompressedPageSize)
	}
	body := chunk[n : n+int(h.CompressedPageSize)]
	var values int64
	compressed := codec != format.Uncompressed
	switch {
	case h.DataPageHeader.Valid:
		values = int64(h.DataPageHeader.V.NumValues)
	case h.DictionaryPageHeader.Valid:
		values = int64(h.DictionaryPageHeader.V.NumValues)
	case h.DataPageHeaderV2.Valid:
		v2 := h.DataPageHeaderV2.V
		values = int64(v2.NumValues)
		levels := int64(v2.RepetitionLevelsByteLength) + int64(v2.DefinitionLevelsByteLength)
		if v2.RepetitionLevelsByteLength < 0 || v2.DefinitionLevelsByteLength < 0 || levels > int64(len(body)) {
			return pageSize{}, nil, fmt.Errorf("levels of %d bytes in a page of %d", levels, len(body))
		}
		body = body[levels:]
		compressed = compressed && (!v2.IsCompressed.Valid || v2.IsCompressed.V)
	}
	if values < 0 || values > maxPageValues {
		return pageSize{}, nil, fmt.Errorf("%d values (at most %d a page)", values, maxPageValues)
	}
	if compressed {
		limit := int64(h.UncompressedPageSize)
		if err := checkDecompressedSize(body, codec, limit); err != nil {
			return pageSize{}, nil, err
		}
	}
	return pageSize{values, int64(h.UncompressedPageSize)}, chunk[n+int(h.CompressedPageSize):], nil
}

// checkDecompressedSize checks that body, compressed with codec, declares no
// more than limit bytes once decompressed (plus one zstd block's slack, as a
// compressed block's own size is only bounded by the format).
func checkDecompressedSize(body []byte, codec format.CompressionCodec, limit int64) error {
	switch codec {
	case format.Snappy:
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(limit) {
			return fmt.Errorf("snappy block of %d bytes declared in a page of %d", n, limit)
		}
	case format.Zstd:
		n, err := zstdDecodedBound(body)
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		if n > limit+zstdMaxBlock {
			return fmt.Errorf("zstd frames of up to %d bytes declared in a page of %d", n, limit)
		}
	}
	return nil
}

// zstdDecodedBound walks the zstd frames in b (RFC 8878 §3.1) and returns an
// upper bound of their decoded size: a frame's content size where it states
// one, else the sum of its blocks' largest decoded sizes.
func zstdDecodedBound(b []byte) (int64, error) {
	var total int64
	for len(b) > 0 {
		if len(b) < 4 {
			return 0, io.ErrUnexpectedEOF
		}
		magic := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if magic&0xFFFFFFF0 == 0x184D2A50 { // skippable frame
			if len(b) < 4 || int64(binary.LittleEndian.Uint32(b)) > int64(len(b)-4) {
				return 0, io.ErrUnexpectedEOF
			}
			b = b[4+binary.LittleEndian.Uint32(b):]
			continue
		}
		if magic != 0xFD2FB528 {
			return 0, fmt.Errorf("not a zstd frame (magic %#x)", magic)
		}
		if len(b) < 1 {
			return 0, io.ErrUnexpectedEOF
		}
		desc := b[0]
		b = b[1:]
		singleSegment := desc&0x20 != 0
		if !singleSegment {
			if len(b) < 1 {
				return 0, io.ErrUnexpectedEOF
			}
			exp := int64(b[0]>>3) + 10
			window := int64(1) << exp
			window += window / 8 * int64(b[0]&7)
			if exp > 31 || window > maxZstdWindow {
				return 0, fmt.Errorf("window of 2^%d bytes", exp)
			}
			b = b[1:]
		}
		dictBytes := [4]int{0, 1, 2, 4}[desc&3]
		fcsBytes := [4]int{0, 2, 4, 8}[desc>>6]
		if fcsBytes == 0 && singleSegment {
			fcsBytes = 1
		}
		if len(b) < dictBytes+fcsBytes {
			return 0, io.ErrUnexpectedEOF
		}
		b = b[dictBytes:]
		fcs := int64(-1)
		switch fcsBytes {
		case 1:
			fcs = int64(b[0])
		case 2:
			fcs = int64(binary.LittleEndian.Uint16(b)) + 256
		case 4:
			fcs = int64(binary.LittleEndian.Uint32(b))
		case 8:
			fcs = int64(binary.LittleEndian.Uint64(b))
			if fcs < 0 {
				return 0, fmt.Errorf("content size %d", uint64(fcs))
			}
		}
		b = b[fcsBytes:]
		var blocks int64
		for last := false; !last; {
			if len(b) < 3 {
				return 0, io.ErrUnexpectedEOF
			}
			h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
			b = b[3:]
			last = h&1 != 0
			size := int64(h >> 3)
			switch h >> 1 & 3 {
			case 0: // raw
				blocks += size
			case 1: // RLE: one byte repeated size times
				blocks += size
				size = 1
			case 2:
				blocks += zstdMaxBlock
			default:
				return 0, errors.New("reserved block type")
			}
			if size > int64(len(b)) {
				return 0, io.ErrUnexpectedEOF
			}
			b = b[size:]
		}
		if desc&4 != 0 { // content checksum
			if len(b) < 4 {
				return 0, io.ErrUnexpectedEOF
			}
			b = b[4:]
		}
		if fcs >= 0 {
			blocks = fcs
		}
		if total += blocks; total > maxUncompressed {
			return 0, fmt.Errorf("more than %d bytes declared", int64(maxUncompressed))
		}
	}
	return total, nil
}

// thriftStructLen returns the length of the compact-protocol struct at the
// start of b, refusing a list, set, map or string that claims more elements
// or bytes than remain (each element takes at least one byte) and structs
// nested deeper than maxThriftDepth.
func thriftStructLen(b []byte) (int, error) {
	w := thriftWalker{b: b}
	if err := w.structure(0); err != nil {
		return 0, err
	}
	return w.pos, nil
}

type thriftWalker struct {
	b   []byte
	pos int
}

func (w *thriftWalker) left() uint64 { return uint64(len(w.b) - w.pos) }

func (w *thriftWalker) skip(n uint64) error {
	if n > w.left() {
		return fmt.Errorf("%d bytes claimed, %d left", n, w.left())
	}
	w.pos += int(n)
	return nil
}

func (w *thriftWalker) byte() (byte, error) {
	if w.left() == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	w.pos++
	return w.b[w.pos-1], nil
}

func (w *thriftWalker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.pos:])
	if n <= 0 {
		return 0, errors.New("bad varint")
	}
	w.pos += n
	return v, nil
}

func (w *thriftWalker) structure(depth int) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("structures nested deeper than %d", maxThriftDepth)
	}
	for {
		h, err := w.byte()
		if err != nil {
			return err
		}
		if h == 0 { // stop
			return nil
		}
		if h>>4 == 0 { // the field id follows in full
			if _, err := w.uvarint(); err != nil {
				return err
			}
		}
		if err := w.value(h&0x0f, depth, false); err != nil {
			return err
		}
	}
}

func (w *thriftWalker) value(typ byte, depth int, inList bool) error {
	switch typ {
	case 1, 2: // bool: in the field header, or a byte of its own in a list
		if inList {
			return w.skip(1)
		}
		return nil
	case 3: // i8
		return w.skip(1)
	case 4, 5, 6: // i16, i32, i64
		_, err := w.uvarint()
		return err
	case 7: // double
		return w.skip(8)
	case 8: // binary
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case 9, 10: // list, set
		h, err := w.byte()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = w.uvarint(); err != nil {
				return err
			}
		}
		if n > w.left() {
			return fmt.Errorf("list of %d elements, %d bytes left", n, w.left())
		}
		for range n {
			if err := w.value(h&0x0f, depth+1, true); err != nil {
				return err
			}
		}
		return nil
	case 11: // map
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := w.byte()
		if err != nil {
			return err
		}
		if n > w.left()/2 {
			return fmt.Errorf("map of %d entries, %d bytes left", n, w.left())
		}
		for range n {
			if err := w.value(kv>>4, depth+1, true); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1, true); err != nil {
				return err
			}
		}
		return nil
	case 12: // struct
		return w.structure(depth + 1)
	default:
		return fmt.Errorf("unknown thrift type %d", typ)
	}
}
