package importspec

import (
	"fmt"
	"math"
)

// MirrorMode is the public API's name of sync_mode mirror.
const MirrorMode = "mirror_mode"

// Mirror options of an import (sync_mode mirror only).
type MirrorOptions struct {
	// KeyColumns identify a row when the table has no primary key (or
	// another key is wanted). Without either, the whole row is the key:
	// identical rows collapse into one, and an updated row is a delete
	// plus an insert.
	KeyColumns []string `yaml:"key_columns,omitempty" json:"key_columns,omitempty"`
	// DeleteProfiles: a row deleted from a people or groups table deletes
	// the whole profile ($delete) instead of unsetting the properties the
	// import owns.
	DeleteProfiles bool `yaml:"delete_profiles,omitempty" json:"delete_profiles,omitempty"`
	// MaxDeletes, when > 0, fails a run that would delete more rows,
	// before it applies anything.
	MaxDeletes int64 `yaml:"max_deletes,omitempty" json:"max_deletes,omitempty"`
	// MaxChangeRatio, when > 0, fails a run whose inserts, updates and
	// deletes exceed this fraction of the rows (the larger of the table
	// before and after), before it applies anything.
	MaxChangeRatio float64 `yaml:"max_change_ratio,omitempty" json:"max_change_ratio,omitempty"`
}

// IsMirror reports whether the import mirrors its table (sync_mode
// mirror, or mirror_mode as the app API calls it).
func (im *Import) IsMirror() bool { return im.SyncMode == Mirror || im.SyncMode == MirrorMode }

// mirror checks the mirror options.
func (v *validator) mirror() {
	im := v.im
	if !im.IsMirror() {
		for _, kv := range []struct {
			key string
			set bool
		}{{"key_columns", len(im.KeyColumns) > 0}, {"delete_profiles", im.DeleteProfiles},
			{"max_deletes", im.MaxDeletes != 0}, {"max_change_ratio", im.MaxChangeRatio != 0}} {
			if kv.set {
				v.add(kv.key, "", "applies to sync_mode mirror only")
			}
		}
		return
	}
	if im.DeleteProfiles && im.ImportType != People && im.ImportType != Groups {
		v.add("delete_profiles", "", "applies to people and groups imports only")
	}
	if im.MaxDeletes < 0 {
		v.add("max_deletes", "", "must be 0 (no limit) or more")
	}
	if r := im.MaxChangeRatio; r < 0 || r > 1 || math.IsNaN(r) {
		v.add("max_change_ratio", "", fmt.Sprintf("%v: must be between 0 (no limit) and 1", r))
	}
	seen := map[string]bool{}
	for i, c := range im.KeyColumns {
		if c == "" || seen[c] {
			v.add(fmt.Sprintf("key_columns[%d]", i), c, "is empty or repeated")
		}
		seen[c] = true
	}
}
