package objstore

import (
	"context"
	"sort"
	"strings"
)

// RangeLister is a Store that lists part of a prefix: the keys under
// prefix that sort after startAfter, at most limit of them (limit <= 0: no
// limit), sorted by key, as S3's ListObjectsV2 does with StartAfter and
// MaxKeys. The end of a long listing (a Delta log's newest versions) can
// then be read without reading all of it. Every Store of this package
// implements it.
type RangeLister interface {
	ListAfter(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error)
}

// ListAfter lists like RangeLister, through s's own ListAfter when it has
// one, else by filtering s.List.
func ListAfter(ctx context.Context, s Store, prefix, startAfter string, limit int) ([]Info, error) {
	if rl, ok := s.(RangeLister); ok {
		return rl.ListAfter(ctx, prefix, startAfter, limit)
	}
	all, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return cutAfter(all, startAfter, limit), nil
}

// cutAfter keeps the infos (sorted by key) after startAfter, at most limit.
func cutAfter(infos []Info, startAfter string, limit int) []Info {
	i := sort.Search(len(infos), func(i int) bool { return infos[i].Key > startAfter })
	infos = infos[i:]
	if limit > 0 && len(infos) > limit {
		infos = infos[:limit]
	}
	return infos
}

// skipDir reports whether a ListAfter from startAfter can skip the folder
// dirKey: every key in it starts with dirKey+"/", so they all sort at or
// before startAfter when that prefix does and startAfter does not extend it.
func skipDir(dirKey, startAfter string) bool {
	p := dirKey + "/"
	return p <= startAfter && !strings.HasPrefix(startAfter, p)
}
