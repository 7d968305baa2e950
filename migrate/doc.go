// Package migrate holds the migration service: copying another analytics
// tool's history into a project (spec §4.5, POST {migrate_url}/<tool>).
// Each source tool has its own package (amplitude); they share the rules
// of the service: credentials in the request body, never logged or stored
// in plain text; events validated exactly as POST /import validates them;
// deterministic $insert_ids so that a resumed or repeated migration stores
// one copy of every event; fewer than 15 million events per migration.
package migrate
