package mapping

import (
	"errors"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// ProfileValidator parses mapped people and groups rows with the /engage
// and /groups parser (without $token: the import names the project).
type ProfileValidator struct {
	ps profile.Parser
	p  fastjson.Parser
}

// Profiles appends r's records to batch.Profiles (Ref = row within the
// run) and returns every refused row, the mapper's own included.
func (v *ProfileValidator) Profiles(kind profile.Kind, r *Records, rowOffset int64, batch *store.Batch) []RowError {
	v.ps.NoToken = true
	errs := offsetErrs(r, rowOffset)
	for i := range r.Len() {
		var u profile.Update
		var err error
		if kind == profile.Group {
			u, err = v.ps.ParseGroup(r.Record(i))
		} else {
			u, err = v.ps.ParseUser(r.Record(i))
		}
		row := int64(r.Rows[i]) + rowOffset
		if err != nil {
			errs = append(errs, RowError{Row: row, Key: string(r.Key(i)), Message: err.Error()})
			continue
		}
		batch.Profiles = append(batch.Profiles, store.ProfileUpdate{Update: u, Ref: int(row)})
	}
	return errs
}

// Lookup adds r's lookup-table records to b and returns the refused rows;
// an error (lookup.ErrTooLarge) ends the import.
func (v *ProfileValidator) Lookup(r *Records, rowOffset int64, b *lookup.Builder) ([]RowError, error) {
	errs := offsetErrs(r, rowOffset)
	for i := range r.Len() {
		row := int64(r.Rows[i]) + rowOffset
		val, err := v.p.ParseBytes(r.Record(i))
		if err == nil {
			err = b.Add(string(val.GetStringBytes("key")), val.Get("properties").MarshalTo(nil))
		}
		if errors.Is(err, lookup.ErrTooLarge) {
			return errs, err
		}
		if err != nil {
			errs = append(errs, RowError{Row: row, Key: string(r.Key(i)), Message: err.Error()})
		}
	}
	return errs, nil
}

func offsetErrs(r *Records, rowOffset int64) []RowError {
	errs := make([]RowError, 0, len(r.Errs))
	for _, e := range r.Errs {
		e.Row += rowOffset
		errs = append(errs, e)
	}
	return errs
}
