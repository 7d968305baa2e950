// Package record turns an /import request body into validated store records.
//
// It is the ingestion hot path, so it works in three cheap passes instead of
// decoding into maps:
//
//  1. Split frames the body (JSON array, NDJSON or a single object) into the
//     raw bytes of each record, tracking only strings and nesting.
//  2. A strict scanner validates each record's JSON syntax, UTF-8 and
//     surrogate escapes, because fastjson (used next) is lenient on purpose
//     and would otherwise let NaN, raw control characters or broken escapes
//     through into stored JSON.
//  3. fastjson parses the record (parser reused across records), the rules of
//     the import API are applied, and the properties are re-encoded compactly
//     into a per-Decoder arena by a small JSON appender.
//
// Strict mode (strict=1) reports each invalid record as a Failure and keeps the
// valid ones; lenient mode (legacy SDKs) coerces what has a sane default.
package record
