// Package integration holds Tributary's end-to-end tests: each test builds
// nothing itself but starts the real server binary (built once in TestMain)
// as a child process on 127.0.0.1, talks to it over real HTTP, and checks
// what comes back out of the raw export API. The load driver lives in
// integration/loadgen.
//
// The tests need only Go and a C toolchain (the server links DuckDB), plus
// the shared reference documents beside the repository
// (../shared/reference/openapi/) for the OpenAPI contract tests.
package integration
