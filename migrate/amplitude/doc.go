// Package amplitude migrates an Amplitude project's history into a
// Tributary project through Amplitude's Export API (spec §4.5;
// public-interface-facts §5).
//
// Pieces, in the order data flows:
//
//   - Client (export.go) downloads GET /api/2/export?start=…&end=… (Basic
//     auth) into a temporary file and Archive (archive.go) streams the zip
//     of gzipped NDJSON line by line. Walk fetches a range, splitting it on
//     a 400 (over 4 GB) or after retries of 429/5xx run out; 404 is an
//     empty range.
//   - transformer (transform.go) turns each Amplitude event into a record
//     of POST /import's shape, in one pass over the line (transform_scan.go,
//     scan.go) or, for a line that pass leaves, through fastjson's parse
//     tree, which writes the same bytes; loader (pipeline.go) validates batches with
//     ingest/record's strict decoder, exactly as /import does for a
//     Simplified ID Merge project, and writes them through a store's Write.
//   - profileSpill (profiles.go) keeps each user's latest event, spilled to
//     sorted run files, and the job ends with one $set per user.
//   - Service (service.go, run.go) runs Jobs, persisted in a JobStore and
//     checkpointed after every fetched hour range; Handler (handler.go)
//     serves POST /amplitude and GET /amplitude/{job_id}.
//
// Decisions the spec leaves open:
//
//   - Credentials: with Config.CredentialKey they are sealed (AES-256-GCM,
//     the job id as additional data) into the job file, and an interrupted
//     job resumes by itself after a restart. Without a key they live in
//     memory only; after a restart the job shows needs_credentials and
//     resumes when the same request is posted again. They are never logged:
//     Credentials prints as [redacted] through fmt, slog and encoding/json.
//   - Size: Amplitude has no count API, so a job is refused (413) when a
//     sample of single hours, scaled to the range, reaches 15 million
//     events; the job also fails if its exported events reach the limit.
//     A dry run counts every event, stopping at the limit.
//   - $insert_id: derived from event type, user id, event time, amplitude
//     id and the event's uuid, normalised to 36 bytes by
//     engine/mapping.NormalizeInsertID (see transformer.insertID).
//   - States: exporting covers fetching and writing events hour range by
//     hour range; loading is the final profile pass.
package amplitude
