package profile

import (
	"errors"
	"fmt"
)

// The categories of failure. Every error from this package wraps exactly one
// of them, so callers choose a response with errors.Is instead of matching
// message text.
var (
	// ErrInvalid: the update is malformed (bad JSON, a missing or mistyped
	// field, no operation or more than one).
	ErrInvalid = errors.New("invalid profile update")
	// ErrTooLarge: the update exceeds MaxUpdateBytes, or a property value
	// would exceed MaxValueBytes.
	ErrTooLarge = errors.New("profile update too large")
	// ErrUnsupported: the operation exists but not for this kind of profile
	// ($add and $append on group profiles).
	ErrUnsupported = errors.New("operation not supported for this profile kind")
	// ErrTooManyProperties: applying the update would leave the profile with
	// more than MaxProperties properties.
	ErrTooManyProperties = errors.New("too many profile properties")
	// ErrType: the stored value cannot take the operation ($add on a
	// non-number, $union or $append on a non-list).
	ErrType = errors.New("profile property has the wrong type")
)

// FieldError reports what is wrong and where, in the shape of the import
// API's failed_records items (field + message), so the /engage and /groups
// handlers can answer strict requests per record without re-deriving it.
type FieldError struct {
	// Field is the path of the offending field: "$distinct_id", "$time",
	// "$add.visits", "$unset[1]"; empty when the update as a whole is at fault.
	Field string
	// Message is a sentence for people, in the import API's style.
	Message string
	// Err is the category, one of the Err* variables.
	Err error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(category error, field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...), Err: category}
}

// invalid builds the common "'<field>' is invalid: <why>" message that the
// import API uses, so clients see one style across endpoints.
func invalid(field, why string) error {
	return &FieldError{Field: field, Message: "'" + field + "' is invalid: " + why, Err: ErrInvalid}
}
