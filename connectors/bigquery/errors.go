package bigquery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/auth"
	bq "cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributary-dev/tributary/connectors"
)

// Hints appended to permanent errors: what to fix.
const (
	hintAuth       = "check source.credentials_file / source.credentials_json: the service-account key is invalid, revoked or of another project"
	hintPermission = "grant the service account roles/bigquery.dataViewer on the data, roles/bigquery.readSessionUser and roles/bigquery.jobUser on the project (and dataEditor on staging_dataset if set)"
	hintNotFound   = "check source.project, source.dataset and the table name (and source.location)"
)

// classify wraps err from operation op so a sync knows whether retrying
// can help. Authentication, permission, missing objects and invalid
// requests (bad SQL, a watermark of the wrong type) are permanent, with
// a hint of what to fix; 5xx, unavailability, deadlines, rate limits and
// quota exhaustion stay unwrapped (transient). A cancelled ctx wins over
// whatever the server said about the cancellation.
func classify(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) {
			return fmt.Errorf("bigquery source: %s: %w", op, err)
		}
		return fmt.Errorf("bigquery source: %s: %w (%v)", op, ctxErr, err)
	}
	perm := func(hint string) error {
		return connectors.Permanent(fmt.Errorf("bigquery source: %s: %w (%s)", op, err, hint))
	}
	notFound := func() error {
		return connectors.Permanent(fmt.Errorf("bigquery source: %s: %w: %v (%s)", op, connectors.ErrNotFound, err, hintNotFound))
	}
	// A token request the identity service refused: a bad or revoked key.
	var ae *auth.Error
	if errors.As(err, &ae) {
		if ae.Response != nil && ae.Response.StatusCode >= 400 && ae.Response.StatusCode < 500 {
			return perm(hintAuth)
		}
		return fmt.Errorf("bigquery source: %s: %w", op, err)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return classifyHTTP(op, err, ge, perm, notFound)
	}
	var je *bq.Error
	if errors.As(err, &je) {
		return classifyReason(op, err, je.Reason, perm, notFound)
	}
	var me bq.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		var first *bq.Error
		if errors.As(me[0], &first) {
			return classifyReason(op, err, first.Reason, perm, notFound)
		}
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		switch st.Code() {
		case codes.NotFound:
			return notFound()
		case codes.Unauthenticated:
			return perm(hintAuth)
		case codes.PermissionDenied:
			return perm(hintPermission)
		case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
			return perm("the request is invalid for this table; check the column names and the watermark's type")
		}
	}
	return fmt.Errorf("bigquery source: %s: %w", op, err)
}

func classifyHTTP(op string, err error, ge *googleapi.Error, perm func(string) error, notFound func() error) error {
	reason := ""
	if len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	switch {
	case ge.Code == http.StatusNotFound:
		return notFound()
	case ge.Code == http.StatusUnauthorized:
		return perm(hintAuth)
	case ge.Code == http.StatusForbidden || ge.Code == http.StatusBadRequest:
		if reason == "" && ge.Code == http.StatusBadRequest {
			reason = "badRequest"
		}
		return classifyReason(op, err, reason, perm, notFound)
	}
	return fmt.Errorf("bigquery source: %s: %w", op, err)
}

// classifyReason sorts BigQuery's error reasons
// (https://cloud.google.com/bigquery/docs/error-messages).
func classifyReason(op string, err error, reason string, perm func(string) error, notFound func() error) error {
	switch reason {
	case "notFound":
		return notFound()
	case "accessDenied", "billingNotEnabled", "billingTierLimitExceeded":
		return perm(hintPermission)
	case "invalid", "invalidQuery", "badRequest", "invalidUser", "resourceInUse", "responseTooLarge", "notImplemented", "duplicate":
		return perm("the query or request is invalid; fix the SQL, the table or column names, or the configuration")
	case "":
		// A 400/403 without a reason is still the request's fault, except
		// that throttling has its own reasons (handled below).
		if strings.Contains(err.Error(), "rateLimit") || strings.Contains(err.Error(), "quota") {
			break
		}
		return perm(hintPermission)
	}
	// rateLimitExceeded, quotaExceeded, backendError, internalError,
	// jobBackendError, jobInternalError, timeout, stopped: retry later.
	return fmt.Errorf("bigquery source: %s: %w", op, err)
}
