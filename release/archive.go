package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path"
	"slices"
	"time"
)

// entry is one member of an archive: a folder when Data is nil and Dir is
// set, else a regular file with Data. Mode is the permission bits.
type entry struct {
	Name     string
	Dir      bool
	Mode     int64
	Data     []byte
	UID, GID int
}

// writeTar writes entries as a USTAR archive sorted by name, every member
// dated mtime with numeric owners and no user or group names, so that the
// same entries give the same bytes on any machine (what GNU tar does with
// --sort=name --mtime=@EPOCH --owner=0 --group=0 --numeric-owner).
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b entry) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	tw := tar.NewWriter(w)
	for _, e := range sorted {
		h := &tar.Header{
			Name:    e.Name,
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime.UTC().Truncate(time.Second),
			Format:  tar.FormatUSTAR,
		}
		if e.Dir {
			h.Typeflag = tar.TypeDir
			if h.Name[len(h.Name)-1] != '/' {
				h.Name += "/"
			}
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !e.Dir {
			if _, err := tw.Write(e.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// writeTarGz is writeTar through gzip with no name and no time in the gzip
// header (gzip -n).
func writeTarGz(w io.Writer, entries []entry, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := writeTar(zw, entries, mtime); err != nil {
		return err
	}
	return zw.Close()
}

// withParents adds the folder entries (mode 0755) of every file's parent
// folders that entries does not already hold.
func withParents(entries []entry) []entry {
	have := map[string]bool{}
	for _, e := range entries {
		have[path.Clean(e.Name)] = true
	}
	out := slices.Clone(entries)
	for _, e := range entries {
		for d := path.Dir(path.Clean(e.Name)); d != "." && d != "/"; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				out = append(out, entry{Name: d, Dir: true, Mode: 0o755})
			}
		}
	}
	return out
}

// writeFile writes data to name (mode 0644), replacing it.
func writeFile(name string, data []byte) error {
	return os.WriteFile(name, data, 0o644)
}
