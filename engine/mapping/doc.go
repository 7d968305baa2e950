// Package mapping turns Arrow record batches from a warehouse source into
// ingest records, column by column: a converter per column is chosen once
// per schema, and each batch is encoded straight into one JSON buffer with
// no per-row maps and no encoding/json. The records then go through the
// same validator as POST /import (see Validate), so a warehouse row and an
// API event obey one set of rules.
package mapping
