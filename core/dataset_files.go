package core

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ffrecord/ffrecord/core/remote"
)

// isDatasetFile is the rule for which entries of a directory, or objects under an s3://
// prefix, make up a dataset: those named *.ffr and not hidden (a shell glob skips dotfiles
// too, and writers stage their temporary files under hidden names).
func isDatasetFile(name string) bool {
	return strings.HasSuffix(name, ".ffr") && !strings.HasPrefix(name, ".")
}

// DatasetURLs lists the objects directly under the s3:// prefix that Open reads as a
// dataset (isDatasetFile), in key order; a prefix without any gives an empty list.
func DatasetURLs(prefix string, opts remote.Options) ([]string, error) {
	client, err := remote.For(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return client.List(prefix, isDatasetFile)
}

// DatasetFiles lists the files of a directory that Open reads as a dataset: the entries
// isDatasetFile keeps that are not directories, in name order. A directory without any
// gives an empty list; Open refuses that.
func DatasetFiles(dir string) ([]string, error) {
	if err := checkPath(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if isDatasetFile(name) && !e.IsDir() {
			names = append(names, filepath.Join(dir, name))
		}
	}
	return names, nil
}

// minPartDigits is the width of part numbers in small datasets: the reference's dump wrote
// PART_00000.ffr, and its names stay the same.
const minPartDigits = 5

// PartName is the name of part k of a dataset written as n parts: PART_00000.ffr, … with
// the number widened past 100,000 parts so that name order (the order DatasetFiles lists)
// stays part order.
func PartName(k, n uint64) string {
	width := max(minPartDigits, len(fmt.Sprint(max(n, 1)-1)))
	return fmt.Sprintf("PART_%0*d.ffr", width, k)
}
